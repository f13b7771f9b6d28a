/* shm_calib.c - how large a working set copies at in-cache speed. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "core/log.h"
#include "shm_calib.h"

#define CALIB_FIRST (512u << 10)	/* the in-cache reference */
#define CALIB_PIECE (256u << 10)	/* copied like messages of this size */
#define CALIB_BYTES (4u << 20)		/* at least this much per timed trial */
#define CALIB_TRIALS 3			/* the best trial counts (preemption) */
#define CALIB_DROP 0.6			/* below this x the reference: out of cache */

/* Bytes per ns of copying ws bytes src -> dst in pieces, again and again:
 * the best of CALIB_TRIALS timed trials (a trial that was preempted only
 * looks slower), after one untimed pass that also touches the pages. */
static double calib_copy_rate(uint8_t *dst, const uint8_t *src, uint64_t ws)
{
	uint64_t piece = ws < CALIB_PIECE ? ws : CALIB_PIECE, off, n, t0;
	int pass, passes = (int)((CALIB_BYTES + ws - 1) / ws), trial;
	double best = 0;

	for (off = 0; off < ws; off += piece)
		memcpy(dst + off, src + off, piece);
	for (trial = 0; trial < CALIB_TRIALS; trial++) {
		double r;

		n = 0;
		t0 = rdmach_now_ns();
		for (pass = 0; pass < passes; pass++)
			for (off = 0; off < ws; off += piece, n += piece)
				memcpy(dst + off, src + off, piece);
		r = (double)n / (double)(rdmach_now_ns() - t0 + 1);
		if (r > best)
			best = r;
	}
	/* keep the copies: dst is read back through a volatile */
	(void)*(volatile uint8_t *)dst;
	return best;
}

uint64_t shm_calib_cache_limit(uint64_t max)
{
	uint8_t *src, *dst;
	uint64_t ws, limit = CALIB_FIRST;
	double ref;

	if (max < CALIB_FIRST)
		return max;
	src = mmap(NULL, 2 * max, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (src == MAP_FAILED)
		return 0;
	dst = src + max;
	memset(src, 0x5a, CALIB_FIRST);
	ref = calib_copy_rate(dst, src, CALIB_FIRST);
	for (ws = 2 * CALIB_FIRST; ws <= max; ws *= 2) {
		double r;

		memset(src + ws / 2, 0x5a, ws / 2);
		r = calib_copy_rate(dst, src, ws);
		rdmach_debug("shm: memcpy of a %llu KiB working set: %.1f GB/s "
			   "(%.1f at %u KiB)", (unsigned long long)(ws >> 10),
			   r, ref, CALIB_FIRST >> 10);
		if (r < CALIB_DROP * ref)
			break;
		limit = ws;
		if (r > ref)	/* the in-cache speed: the best seen */
			ref = r;
	}
	munmap(src, 2 * max);
	return limit;
}
