/* peer_count.c - the load counter of the ib harnesses: see peer_count.h. */
#include <stdint.h>
#include <stdlib.h>

#include "proto/peer.h"
#include "test/fuzz/peer_count.h"

#define PEER_COUNT_MAX 1024

static struct { uintptr_t start, end; } peer_loads[PEER_COUNT_MAX];
static size_t peer_nloads;

void peer_count_begin(void)
{
	peer_nloads = 0;
}

void proto_peer_fuzz_epoch(void)
{
	peer_nloads = 0;
}

size_t peer_count_loads(void)
{
	return peer_nloads;
}

void proto_peer_fuzz_load(const void *p, size_t n)
{
	uintptr_t s = (uintptr_t)p, e = s + n;
	size_t i;

	for (i = 0; i < peer_nloads && i < PEER_COUNT_MAX; i++)
		if (s < peer_loads[i].end && peer_loads[i].start < e)
			abort();	/* loaded twice in one use */
	if (peer_nloads < PEER_COUNT_MAX) {
		peer_loads[peer_nloads].start = s;
		peer_loads[peer_nloads].end = e;
	}
	peer_nloads++;
}
