/*
 * fuzz_num - the strict bounded number parser (core/num.c) against a
 * plain reference: the first input byte picks the base and a bound (from
 * the next eight bytes), the rest, NUL-terminated in a buffer of its
 * exact size, is parsed with and without an end pointer; result, value
 * and end must be the reference's, and nothing is written on failure.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/num.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int ref_digit(char c, unsigned int base)
{
	const char *digits = "0123456789abcdef";
	const char *p;

	if (c >= 'A' && c <= 'F')
		c = (char)(c - 'A' + 'a');
	p = c ? strchr(digits, c) : NULL;
	return p && (unsigned int)(p - digits) < base ? (int)(p - digits) : -1;
}

/* The reference: 128-bit arithmetic, so no overflow below 2^64 * 16. */
static int ref_num(const char *s, unsigned int base, uint64_t max,
		   uint64_t *out, size_t *len)
{
	unsigned __int128 v = 0;
	size_t n = 0;
	int d, over = 0;

	for (; (d = ref_digit(s[n], base)) >= 0; n++) {
		v = v * base + (unsigned)d;
		if (v > max) {
			over = 1;
			v = (unsigned __int128)max + 1;
		}
	}
	if (!n)
		return -EINVAL;
	if (over)
		return -ERANGE;
	*out = (uint64_t)v;
	*len = n;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned int base;
	uint64_t max = 0, v = 7, want = 0;
	const char *end = NULL;
	size_t n = 0;
	char *s;
	int i, ret, ref;

	if (size < 9)
		return 0;
	base = data[0] & 1 ? 16 : 10;
	for (i = 1; i < 9; i++)
		max = max << 8 | data[i];
	if (data[0] & 2)	/* small bounds too */
		max >>= data[0] >> 2;
	s = malloc(size - 8);
	if (!s)
		abort();
	memcpy(s, data + 9, size - 9);
	s[size - 9] = '\0';
	ref = ref_num(s, base, max, &want, &n);
	ret = rdmach_num(s, base, max, &v, &end);
	if (ret != ref || (ret && (v != 7 || end)) ||
	    (!ret && (v != want || end != s + n)))
		abort();
	v = 7;
	ret = rdmach_num(s, base, max, &v, NULL);
	if (!ref && s[n])
		ref = -EINVAL;
	if (ret != ref || (ret ? v != 7 : v != want))
		abort();
	free(s);
	return 0;
}
