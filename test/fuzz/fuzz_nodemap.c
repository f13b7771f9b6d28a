/*
 * fuzz_nodemap - the PMI_process_mapping parser (core/nodemap.c): the
 * input, NUL-terminated in a buffer of its exact size, is parsed for a
 * group size taken from its first two bytes; what parses must give every
 * rank a node id in bounds, and the array must not be written on failure.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/nodemap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, why[160];
	int *node_of, n, i, ret;

	if (size < 2)
		return 0;
	n = 1 + ((data[0] << 8 | data[1]) & 0xfff);
	s = malloc(size - 1);
	node_of = malloc((size_t)n * sizeof(*node_of));
	if (!s || !node_of)
		abort();
	memcpy(s, data + 2, size - 2);
	s[size - 2] = '\0';
	for (i = 0; i < n; i++)
		node_of[i] = -7;
	ret = rdmach_nodemap_parse(s, n, node_of, why, sizeof(why));
	for (i = 0; i < n; i++) {
		if (ret && node_of[i] != -7)
			abort();
		if (!ret && (node_of[i] < 0 || node_of[i] >= 1 << 24))
			abort();
	}
	if (ret && !memchr(why, '\0', sizeof(why)))
		abort();
	free(node_of);
	free(s);
	return 0;
}
