/*
 * rdmach_rss_free - what free() gives back, and what the free() hook costs,
 * in one process per malloc policy:
 *
 *   rdmach_rss_free linked|cache|tuned    (built by make, linked with rdmach)
 *   rss_free_plain plain                (bench/host/run-rss.sh builds it from
 *                                        this file without rdmach)
 *
 *   plain   Debian's glibc malloc, no rdmach in the process
 *   linked  rdmach linked, no registration cache (shm-only, no device)
 *   cache   a registration cache in use (fake register/deregister calls,
 *           one get): free() tracking on, as in a process with an ib
 *           connection that has sent zero-copy
 *   tuned   rdmach linked, and glibc tuned at load the way registration
 *           caches commonly do: mallopt(M_MMAP_MAX, 0), M_TRIM_THRESHOLD max
 *
 * Prints one line per measurement:
 *   <mode> big    <RSS before> <RSS touched> <RSS after free>   (MiB)
 *       malloc(1 GiB), every page written, free
 *   <mode> blocks <RSS before> <RSS touched> <RSS after free>   (MiB)
 *       16384 x malloc(64 KiB) (below glibc's mmap threshold: heap
 *       blocks), every page written, all freed (last first)
 *   <mode> free_ns <ns per malloc(64)+free pair, best of 7 runs of 10^7,
 *                   in thread CPU time>
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef RSS_NO_RDMACH
#include "mem/memhooks.h"
#include "mem/rcache.h"
#endif

#define MIB (1024.0 * 1024.0)
#define BIG (1ul << 30)
#define NBLK 16384
#define BLK (64ul << 10)

static long page;

static double rss_mib(void)
{
	unsigned long size, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (double)page / MIB;
}

/* Write every page, as a real buffer would be (MADV_POPULATE_WRITE where
 * the kernel has it, for speed; else one store per page). */
static void touch_pages(char *p, size_t len)
{
	uintptr_t a = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
	size_t off;

	if (a < (uintptr_t)p + len &&
	    !madvise((void *)a, ((uintptr_t)p + len - a) & ~(uintptr_t)(page - 1),
		     23 /* MADV_POPULATE_WRITE */))
		return;
	for (off = 0; off < len; off += (size_t)page)
		p[off] = 1;
}

static int big(const char *mode)
{
	double before = rss_mib(), touched, after;
	char *p = malloc(BIG);

	if (!p)
		return -1;
	touch_pages(p, BIG);
	touched = rss_mib();
	free(p);
	after = rss_mib();
	printf("%-6s big    %8.1f %8.1f %8.1f\n", mode, before, touched,
	       after);
	return 0;
}

static int blocks(const char *mode)
{
	static char *blk[NBLK];
	double before = rss_mib(), touched, after;
	int i;

	for (i = 0; i < NBLK; i++) {
		blk[i] = malloc(BLK);
		if (!blk[i])
			return -1;
		touch_pages(blk[i], BLK);
	}
	touched = rss_mib();
	for (i = NBLK - 1; i >= 0; i--)
		free(blk[i]);
	after = rss_mib();
	printf("%-6s blocks %8.1f %8.1f %8.1f\n", mode, before, touched,
	       after);
	return 0;
}

/* CPU time of this thread: time spent preempted on a busy host is not
 * counted (cache and SMT-sibling effects still are). */
static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void free_cost(const char *mode)
{
	enum { N = 10000000, RUNS = 7 };
	double best = 1e30, t;
	int r, i;

	for (r = 0; r < RUNS; r++) {
		t = now_ns();
		for (i = 0; i < N; i++) {
			void *volatile p = malloc(64);

			free(p);
		}
		t = (now_ns() - t) / N;
		if (t < best)
			best = t;
	}
	printf("%-6s free_ns %.2f\n", mode, best);
}

#ifndef RSS_NO_RDMACH
static int fake_reg(void *arg, void *addr, size_t len, void **handle)
{
	*handle = addr;
	return 0;
}

static int fake_dereg(void *arg, void *handle)
{
	return 0;
}

static const struct rdmach_rcache_ops fake_ops = { fake_reg, fake_dereg };

/* A cache with one registration made: free() tracking starts there. */
static struct rdmach_rcache *cache_in_use(void)
{
	static char buf[4096];
	struct rdmach_rcache_config cfg = {
		.enabled = 1, .max_entries = 16, .max_bytes = 1 << 20,
		.name = "bench",
	};
	struct rdmach_rcache_region *r;
	struct rdmach_rcache *rc;

	if (rdmach_rcache_create(&fake_ops, NULL, &cfg, &rc) ||
	    rdmach_rcache_get(rc, buf, sizeof(buf), &r))
		return NULL;
	rdmach_rcache_put(rc, r);
	return rc;
}
#endif

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
#ifndef RSS_NO_RDMACH
	struct rdmach_rcache *rc = NULL;
#endif

	setvbuf(stdout, NULL, _IOLBF, 0);
	page = sysconf(_SC_PAGESIZE);
#ifdef RSS_NO_RDMACH
	if (strcmp(mode, "plain")) {
		fprintf(stderr, "usage: %s plain\n", argv[0]);
		return 2;
	}
#else
	if (!strcmp(mode, "cache")) {
		rc = cache_in_use();
		if (!rc) {
			fprintf(stderr, "%s: cache setup failed\n", argv[0]);
			return 1;
		}
	} else if (!strcmp(mode, "tuned")) {
		mallopt(M_MMAP_MAX, 0);
		mallopt(M_TRIM_THRESHOLD, -1);
	} else if (strcmp(mode, "linked")) {
		fprintf(stderr, "usage: %s linked|cache|tuned\n", argv[0]);
		return 2;
	}
	if (!strcmp(mode, "cache") !=
	    !!(rdmach_memhooks_status() & RDMACH_MEMHOOKS_TRACKING)) {
		fprintf(stderr, "%s: free() tracking is %s in mode %s\n",
			argv[0], rdmach_memhooks_status() ? "on" : "off",
			mode);
		return 1;
	}
#endif
	if (big(mode) || blocks(mode)) {
		fprintf(stderr, "%s: malloc failed\n", argv[0]);
		return 1;
	}
	free_cost(mode);
#ifndef RSS_NO_RDMACH
	rdmach_rcache_destroy(rc);
#endif
	return 0;
}
