/* shm_calib.c - how large a working set copies at in-cache speed, and
 * how fast memcpy and cross-memory attach move hot and cold bytes. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/log.h"
#include "shm_calib.h"

#define CALIB_FIRST (512u << 10)	/* the in-cache reference */
#define CALIB_PIECE (256u << 10)	/* copied like messages of this size */
#define CALIB_BYTES (4u << 20)		/* at least this much per timed trial */
#define CALIB_TRIALS 3			/* the best trial counts (preemption) */
#define CALIB_DROP 0.6			/* below this x in-cache: out of cache */

/* Move len bytes src -> dst: memcpy, or (cma) process_vm_readv from this
 * very process.  0, or -1 when the system call fails. */
static int calib_move(uint8_t *dst, const uint8_t *src, uint64_t len, int cma)
{
	struct iovec l = { dst, len }, r = { (void *)src, len };

	if (!cma) {
		memcpy(dst, src, len);
		return 0;
	}
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)len ?
	       0 : -1;
}

/* Past the deadline: the result would not be complete. */
static int calib_late(uint64_t deadline)
{
	return rdmach_now_ns() > deadline;
}

/* Bytes per ns of moving ws bytes src -> dst in pieces, again and again:
 * the best of CALIB_TRIALS timed trials (a trial that was preempted only
 * looks slower; one trial only once past the deadline), after one untimed
 * pass that also touches the pages.  0 when the move fails. */
static double calib_rate(uint8_t *dst, const uint8_t *src, uint64_t ws,
			 int cma, uint64_t deadline)
{
	uint64_t piece = ws < CALIB_PIECE ? ws : CALIB_PIECE, off, n, t0;
	int pass, passes = (int)((CALIB_BYTES + ws - 1) / ws), trial;
	double best = 0;

	for (off = 0; off < ws; off += piece)
		if (calib_move(dst + off, src + off, piece, cma))
			return 0;
	for (trial = 0; trial < CALIB_TRIALS; trial++) {
		double r;

		if (trial && calib_late(deadline))
			break;
		n = 0;
		t0 = rdmach_now_ns();
		for (pass = 0; pass < passes; pass++)
			for (off = 0; off < ws; off += piece, n += piece)
				calib_move(dst + off, src + off, piece, cma);
		r = (double)n / (double)(rdmach_now_ns() - t0 + 1);
		if (r > best)
			best = r;
	}
	/* keep the copies: dst is read back through a volatile */
	(void)*(volatile uint8_t *)dst;
	return best;
}

int shm_calib_measure(uint64_t max, uint64_t budget_ns, struct shm_calib *out)
{
	uint64_t ws, cold, deadline = rdmach_now_ns() + budget_ns;
	struct shm_calib m;
	uint8_t *src, *dst;
	double ref;
	int err = -ETIME;

	if (max < 2 * CALIB_FIRST)
		max = 2 * CALIB_FIRST;
	src = mmap(NULL, 2 * max, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (src == MAP_FAILED)
		return -ENOMEM;
	dst = src + max;
	memset(src, 0x5a, CALIB_FIRST);
	ref = calib_rate(dst, src, CALIB_FIRST, 0, deadline);
	m.cache_limit = CALIB_FIRST;
	cold = max;
	for (ws = 2 * CALIB_FIRST; ws <= max; ws *= 2) {
		double r;

		if (calib_late(deadline))
			goto out_unmap;
		memset(src + ws / 2, 0x5a, ws / 2);
		r = calib_rate(dst, src, ws, 0, deadline);
		rdmach_debug("shm: memcpy of a %llu KiB working set: %.1f GB/s "
			     "(in cache: %.1f)", (unsigned long long)(ws >> 10),
			     r, ref);
		if (r < CALIB_DROP * ref) {
			cold = ws;
			break;
		}
		m.cache_limit = ws;
		if (r > ref)	/* the in-cache rate: the best seen */
			ref = r;
	}
	m.copy_hot = ref;
	if (calib_late(deadline))
		goto out_unmap;
	m.copy_cold = calib_rate(dst, src, cold, 0, deadline);
	m.cma_hot = calib_rate(dst, src, CALIB_FIRST, 1, deadline);
	if (calib_late(deadline))
		goto out_unmap;
	m.cma_cold = calib_rate(dst, src, cold, 1, deadline);
	*out = m;
	err = 0;
out_unmap:
	munmap(src, 2 * max);
	return err;
}
