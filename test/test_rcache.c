/*
 * test_rcache.c - registration cache and memory hooks, natively (no
 * device): a fake transport records every register/deregister, gives each
 * registration a new key, and snapshots the physical pages it "pinned"
 * (/proc/self/pagemap) so that every cache hit is checked against the
 * pages now mapped at that address: a stale registration fails the test.
 * Each case runs in a process of its own (TST_UNIT, test/lib/tst.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "lib/tst.h"
#include "mem/memhooks.h"
#include "mem/rcache.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static size_t pg;
static int pagemap_fd = -1;
static pid_t pagemap_pid;	/* the process pagemap_fd describes */

/* ---- fake transport ---------------------------------------------------- */

struct fake_mr {
	uintptr_t start;
	size_t len;
	uint64_t key;
	uint64_t *pfn;		/* pagemap entries at registration */
	int live;
	struct fake_mr *next;
};

static struct {
	struct fake_mr *mrs;
	uint64_t regs, deregs, keys;
	int fail_enomem;	/* make the next reg calls fail */
	int bad_dereg;		/* dereg of a dead or unknown handle */
	volatile uint64_t *shared_deregs; /* visible across fork */
} F;

/* /proc/self/pagemap shows the pages of the process that opened it, not
 * of a child forked later (each case runs in one): open it per process. */
static int pagemap_open(void)
{
	if (pagemap_fd >= 0 && pagemap_pid == getpid())
		return pagemap_fd;
	if (pagemap_fd >= 0)
		close(pagemap_fd);
	pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	pagemap_pid = getpid();
	return pagemap_fd;
}

/* Present bit + PFN (PFN is 0 without CAP_SYS_ADMIN). */
static int read_pagemap(uintptr_t start, size_t npages, uint64_t *out)
{
	size_t want = npages * sizeof(uint64_t);
	int fd = pagemap_open();
	ssize_t n;
	size_t i;

	if (fd < 0)
		return -1;
	n = pread(fd, out, want, (off_t)(start / pg * 8));
	if (n != (ssize_t)want)
		return -1;
	for (i = 0; i < npages; i++)
		out[i] &= (1ull << 63) | ((1ull << 55) - 1);
	return 0;
}

static void populate(void *addr, size_t len)
{
	volatile char *p = addr;
	size_t off;

	/* Like ibv_reg_mr: fault the pages in writable, keep contents. */
	if (!madvise(addr, len, MADV_POPULATE_WRITE))
		return;
	for (off = 0; off < len; off += pg)
		p[off] = p[off];
}

static int fake_reg(void *arg, void *addr, size_t len, void **handle)
{
	struct fake_mr *mr;

	if (F.fail_enomem > 0) {
		F.fail_enomem--;
		return -ENOMEM;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	populate(addr, len);
	mr->start = (uintptr_t)addr;
	mr->len = len;
	mr->key = ++F.keys;
	mr->pfn = calloc(len / pg, sizeof(uint64_t));
	if (mr->pfn && read_pagemap(mr->start, len / pg, mr->pfn)) {
		free(mr->pfn);
		mr->pfn = NULL;
	}
	mr->live = 1;
	mr->next = F.mrs;
	F.mrs = mr;
	F.regs++;
	*handle = mr;
	return 0;
}

static int fake_dereg(void *arg, void *handle)
{
	struct fake_mr *mr;

	for (mr = F.mrs; mr && mr != handle; mr = mr->next)
		;
	if (!mr || !mr->live) {
		F.bad_dereg++;
		return -EINVAL;
	}
	mr->live = 0;
	free(mr->pfn);
	mr->pfn = NULL;
	F.deregs++;
	if (F.shared_deregs)
		(*F.shared_deregs)++;
	return 0;
}

static const struct rdmach_rcache_ops fake_ops = { fake_reg, fake_dereg };

static void fake_reset(void)
{
	struct fake_mr *mr, *next;

	for (mr = F.mrs; mr; mr = next) {
		next = mr->next;
		free(mr->pfn);
		free(mr);
	}
	memset(&F, 0, sizeof(F));
}

static struct fake_mr *mr_by_key(uint64_t key)
{
	struct fake_mr *mr;

	for (mr = F.mrs; mr && mr->key != key; mr = mr->next)
		;
	return mr;
}

static struct fake_mr *mr_of(const struct rdmach_rcache_region *r)
{
	return r->handle;
}

/* The registration must still describe the pages mapped now. */
static int mr_fresh(const struct fake_mr *mr)
{
	uint64_t now[64];
	size_t i, n = mr->len / pg, done = 0;

	if (!mr->live)
		return 0;
	if (!mr->pfn)
		return 1;	/* no pagemap: nothing to compare */
	while (done < n) {
		size_t k = n - done < 64 ? n - done : 64;

		if (read_pagemap(mr->start + done * pg, k, now))
			return 0;	/* unmapped */
		for (i = 0; i < k; i++)
			if (!(now[i] >> 63) || now[i] != mr->pfn[done + i])
				return 0;
		done += k;
	}
	return 1;
}

/* ---- helpers ----------------------------------------------------------- */

static struct rdmach_rcache *mk(int enabled, uint64_t entries, uint64_t bytes)
{
	struct rdmach_rcache_config cfg = {
		.enabled = enabled, .max_entries = entries,
		.max_bytes = bytes, .name = "test",
	};
	struct rdmach_rcache *rc = NULL;

	fake_reset();
	if (rdmach_rcache_create(&fake_ops, NULL, &cfg, &rc))
		return NULL;
	return rc;
}

/* get, and on a hit check that the registration is not stale. */
static int get(struct rdmach_rcache *rc, const void *addr, size_t len,
	       struct rdmach_rcache_region **r, int *hit)
{
	uint64_t regs = F.regs;
	int ret = rdmach_rcache_get(rc, addr, len, r);

	if (ret)
		return ret;
	*hit = F.regs == regs;
	if ((*r)->start > (uintptr_t)addr ||
	    (*r)->end < (uintptr_t)addr + len)
		return -ERANGE;
	if (*hit && !mr_fresh(mr_of(*r)))
		return -ESTALE;
	return 0;
}

/* get + put; *hit tells whether it was a hit; returns the key. */
static int touch(struct rdmach_rcache *rc, const void *addr, size_t len,
		 int *hit, uint64_t *key)
{
	struct rdmach_rcache_region *r;
	int ret = get(rc, addr, len, &r, hit);

	if (ret)
		return ret;
	if (key)
		*key = mr_of(r)->key;
	rdmach_rcache_put(rc, r);
	return 0;
}

static int finish(struct tst *t, struct rdmach_rcache *rc)
{
	TST_CHECK0(t, rdmach_rcache_check(rc));
	rdmach_rcache_destroy(rc);
	TST_CHECK(t, F.regs == F.deregs,
		  "registrations leaked: %llu reg, %llu dereg",
		  (unsigned long long)F.regs, (unsigned long long)F.deregs);
	TST_CHECK(t, !F.bad_dereg, "%d bad deregistrations", F.bad_dereg);
	return 0;
}

static void *map(size_t npages)
{
	void *p = mmap(NULL, npages * pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static struct rdmach_rcache_info info(struct rdmach_rcache *rc)
{
	struct rdmach_rcache_info i;

	rdmach_rcache_info(rc, &i);
	return i;
}

/* ---- cases ------------------------------------------------------------- */

static int t_hit_miss(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	struct rdmach_rcache_region *r1, *r2;
	char *p = map(8);
	rdmach_stats_t st;
	uint64_t k1, k2;
	int hit;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, touch(rc, p, 100, &hit, &k1));
	TST_CHECK(t, !hit, "first use must miss");
	TST_CHECK0(t, touch(rc, p, 100, &hit, &k2));
	TST_CHECK(t, hit && k1 == k2,
		  "second use must hit the same registration");
	TST_CHECK0(t, touch(rc, p + 50, 10, &hit, &k2));
	TST_CHECK(t, hit && k2 == k1, "sub-range of the same page must hit");
	/* Two users of one entry. */
	TST_CHECK0(t, get(rc, p, 4000, &r1, &hit));
	TST_CHECK0(t, get(rc, p + 8, 8, &r2, &hit));
	TST_CHECK(t, r1 == r2 && hit, "shared entry");
	TST_CHECK(t, info(rc).in_use == 1 && info(rc).lru == 0,
		  "one entry in use");
	rdmach_rcache_put(rc, r1);
	TST_CHECK(t, info(rc).in_use == 1, "still in use after one put");
	rdmach_rcache_put(rc, r2);
	TST_CHECK(t, info(rc).in_use == 0 && info(rc).lru == 1,
		  "unused after two");
	TST_CHECK(t, rdmach_rcache_get(rc, p, 0, &r1) == -EINVAL,
		  "len 0: -EINVAL");
	TST_CHECK(t, rdmach_rcache_get(rc, NULL, 8, &r1) == -EINVAL,
		  "NULL: -EINVAL");
	TST_CHECK(t, rdmach_rcache_get(rc, (void *)(UINTPTR_MAX - 10), 100,
				       &r1) == -EINVAL, "wrap-around: -EINVAL");
	memset(&st, 0, sizeof(st));
	rdmach_rcache_stats(rc, &st);
	TST_CHECK(t, st.rcache_hits == 4 && st.rcache_misses == 1 &&
		  st.rcache_evictions == 0 && st.rcache_invalidations == 0,
		  "stats %llu/%llu/%llu/%llu",
		  (unsigned long long)st.rcache_hits,
		  (unsigned long long)st.rcache_misses,
		  (unsigned long long)st.rcache_evictions,
		  (unsigned long long)st.rcache_invalidations);
	TST_CHECK(t, F.regs == 1, "one registration, got %llu",
		  (unsigned long long)F.regs);
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 8 * pg);
	return 0;
}

static int t_covering(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	struct rdmach_rcache_region *r;
	char *p = map(8);
	uint64_t k1, k;
	int hit;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, get(rc, p + 10, 3 * pg - 20, &r, &hit));
	TST_CHECK(t, !hit && r->start == (uintptr_t)p &&
		  r->end == (uintptr_t)p + 3 * pg, "entry is page-aligned");
	k1 = mr_of(r)->key;
	rdmach_rcache_put(rc, r);
	TST_CHECK0(t, touch(rc, p + 100, 2 * pg, &hit, &k));
	TST_CHECK(t, hit && k == k1, "inside: hit");
	TST_CHECK0(t, touch(rc, p, 3 * pg, &hit, &k));
	TST_CHECK(t, hit && k == k1, "exactly: hit");
	TST_CHECK0(t, touch(rc, p + 2 * pg + 10, pg, &hit, &k));
	TST_CHECK(t, !hit, "crossing the end: miss");
	TST_CHECK0(t, touch(rc, p + pg, 3 * pg, &hit, &k));
	TST_CHECK(t, !hit, "covered by no single entry: miss");
	TST_CHECK0(t, touch(rc, p + 3 * pg + 5, 100, &hit, &k));
	TST_CHECK(t, hit, "inside the second entry: hit");
	TST_CHECK0(t, touch(rc, p + 4 * pg, pg, &hit, &k));
	TST_CHECK(t, !hit, "past every entry: miss");
	TST_CHECK0(t, touch(rc, p + 4 * pg - 1, 2, &hit, &k));
	TST_CHECK(t, !hit, "straddling two entries: miss");
	TST_CHECK0(t, touch(rc, p + 4 * pg + 1, 2, &hit, &k));
	TST_CHECK(t, hit, "inside the last entry: hit");
	TST_CHECK0(t, rdmach_rcache_check(rc));
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 8 * pg);
	return 0;
}

static int t_lru_entries(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 3, 1 << 30);
	char *p = map(8);
	uint64_t ka, kb, kc, k;
	int hit;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, touch(rc, p, pg, &hit, &ka));
	TST_CHECK0(t, touch(rc, p + pg, pg, &hit, &kb));
	TST_CHECK0(t, touch(rc, p + 2 * pg, pg, &hit, &kc));
	TST_CHECK0(t, touch(rc, p, pg, &hit, &k));	/* A most recent */
	TST_CHECK(t, hit && k == ka, "A hit");
	/* D evicts B */
	TST_CHECK0(t, touch(rc, p + 3 * pg, pg, &hit, &k));
	TST_CHECK(t, !hit && info(rc).entries == 3, "3 entries");
	TST_CHECK(t, info(rc).evictions == 1, "one eviction");
	TST_CHECK0(t, touch(rc, p, pg, &hit, &k));
	TST_CHECK(t, hit && k == ka, "A kept");
	TST_CHECK0(t, touch(rc, p + 2 * pg, pg, &hit, &k));
	TST_CHECK(t, hit && k == kc, "C kept");
	TST_CHECK0(t, touch(rc, p + pg, pg, &hit, &k));
	TST_CHECK(t, !hit && k != kb, "B was evicted (least recently used)");
	TST_CHECK(t, F.deregs == 2, "D evicted by B: %llu deregs",
		  (unsigned long long)F.deregs);
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 8 * pg);
	return 0;
}

static int t_lru_bytes(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 1000, 4 * pg);
	char *p = map(16);
	uint64_t ka, kb, k;
	int hit;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, touch(rc, p, 2 * pg, &hit, &ka));
	TST_CHECK0(t, touch(rc, p + 4 * pg, 2 * pg, &hit, &kb));
	TST_CHECK(t, info(rc).bytes == 4 * pg, "4 pages cached");
	TST_CHECK0(t, touch(rc, p + 8 * pg, pg, &hit, &k));
	TST_CHECK(t, info(rc).bytes == 3 * pg && info(rc).evictions == 1,
		  "A evicted for C: %llu bytes",
		  (unsigned long long)info(rc).bytes);
	TST_CHECK0(t, touch(rc, p + 4 * pg, 2 * pg, &hit, &k));
	TST_CHECK(t, hit && k == kb, "B kept");
	TST_CHECK0(t, touch(rc, p, 2 * pg, &hit, &k));
	TST_CHECK(t, !hit, "A evicted");
	TST_CHECK(t, info(rc).bytes <= 4 * pg, "limit kept");
	/* Larger than the whole limit: served, not kept. */
	TST_CHECK0(t, touch(rc, p, 8 * pg, &hit, &k));
	TST_CHECK(t, !hit && info(rc).bytes <= 4 * pg, "oversized not kept");
	TST_CHECK0(t, touch(rc, p, 8 * pg, &hit, &k));
	TST_CHECK(t, !hit, "oversized misses again");
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 16 * pg);
	return 0;
}

static int t_refcount_blocks_eviction(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 2, 1 << 30);
	struct rdmach_rcache_region *ra, *rb, *rcr;
	char *p = map(8);
	struct fake_mr *ma, *mb, *mc;
	uint64_t k;
	int hit;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, get(rc, p, pg, &ra, &hit));
	TST_CHECK0(t, get(rc, p + pg, pg, &rb, &hit));
	ma = mr_of(ra);
	mb = mr_of(rb);
	TST_CHECK0(t, get(rc, p + 2 * pg, pg, &rcr, &hit));
	mc = mr_of(rcr);
	TST_CHECK(t, ma->live && mb->live && mc->live,
		  "entries in use are kept");
	TST_CHECK(t, info(rc).entries == 3 && info(rc).cached == 2,
		  "the third is served detached");
	rdmach_rcache_put(rc, rcr);
	TST_CHECK(t, !mc->live && ma->live && mb->live,
		  "the detached entry goes at put, not the used ones");
	rdmach_rcache_put(rc, ra);	/* A now evictable */
	TST_CHECK0(t, get(rc, p + 2 * pg, pg, &rcr, &hit));
	TST_CHECK(t, !hit && !ma->live && mb->live,
		  "A evicted, B (in use) kept");
	rdmach_rcache_put(rc, rcr);
	rdmach_rcache_put(rc, rb);
	TST_CHECK0(t, touch(rc, p + pg, pg, &hit, &k));
	TST_CHECK(t, hit && k == mb->key, "B still cached");
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 8 * pg);
	return 0;
}

static int t_invalidate_in_use(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	struct rdmach_rcache_region *ra;
	char *p = map(4), *q = map(4);
	struct fake_mr *ma;
	int hit;

	TST_CHECK(t, rc && p && q, "setup");
	TST_CHECK0(t, get(rc, p, 4 * pg, &ra, &hit));
	ma = mr_of(ra);
	TST_CHECK0(t, munmap(p, 4 * pg));
	/* drains the event */
	TST_CHECK0(t, touch(rc, q, pg, &hit, NULL));
	TST_CHECK(t, info(rc).invalidations == 1, "invalidated");
	TST_CHECK(t, ma->live, "but not deregistered while in use");
	rdmach_rcache_put(rc, ra);
	TST_CHECK(t, !ma->live, "deregistered at put");
	/* The put itself applies the pending invalidation. */
	TST_CHECK0(t, get(rc, q, 4 * pg, &ra, &hit));
	ma = mr_of(ra);
	TST_CHECK0(t, munmap(q, 4 * pg));
	rdmach_rcache_put(rc, ra);
	TST_CHECK(t, !ma->live && info(rc).entries == 0,
		  "invalidated while in use: deregistered by the put");
	TST_CHECK0(t, finish(t, rc));
	return 0;
}

static int t_munmap_remap(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	char *p = map(16), *q;
	uint64_t k1, k2;
	int hit;

	TST_CHECK(t, rc && p, "setup");
	memset(p, 'A', 16 * pg);
	TST_CHECK0(t, touch(rc, p, 16 * pg, &hit, &k1));
	TST_CHECK0(t, touch(rc, p, 16 * pg, &hit, &k2));
	TST_CHECK(t, hit, "hit before munmap");
	TST_CHECK0(t, munmap(p, 16 * pg));
	q = mmap(p, 16 * pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	TST_CHECK(t, q == p, "could not map again at %p", (void *)p);
	memset(q, 'B', 16 * pg);
	TST_CHECK0(t, touch(rc, q, 16 * pg, &hit, &k2));
	TST_CHECK(t, !hit && k2 != k1,
		  "stale registration returned after munmap");
	TST_CHECK(t, info(rc).invalidations == 1, "one invalidation");
	TST_CHECK(t, !mr_by_key(k1)->live,
		  "an unused invalidated entry is deregistered at the next "
		  "call");
	TST_CHECK0(t, finish(t, rc));
	munmap(q, 16 * pg);
	return 0;
}

static int t_mmap_fixed(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	char *p = map(4), *q;
	int hit;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	q = mmap(p + pg, pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	TST_CHECK(t, q == p + pg, "mmap fixed");
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	TST_CHECK(t, !hit,
		  "mmap(MAP_FIXED) over a cached range must invalidate");
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 4 * pg);
	return 0;
}

/* 40 MB: above glibc's largest dynamic mmap threshold (32 MB), so that an
 * untuned glibc would serve it by mmap and free it by an internal munmap. */
#define BIG_BLOCK (40u << 20)

static int t_free_malloc(struct tst *t)
{
	struct rdmach_rcache *rc;
	size_t len = BIG_BLOCK;
	char *p, *q;
	uint64_t k1, k2;
	int hit, same, st = rdmach_memhooks_status();

	if (st & RDMACH_MEMHOOKS_MALLOPT_OFF)
		return tst_skip(t, "RDMACH_RCACHE_MALLOPT=0: free() "
				"unmaps unseen (documented limit)");
	rc = mk(1, 100, 1 << 30);
	p = malloc(len);
	TST_CHECK(t, rc && p, "setup");
	memset(p, 'A', len);
	TST_CHECK0(t, touch(rc, p, len, &hit, &k1));
	TST_CHECK0(t, touch(rc, p, len, &hit, &k2));
	TST_CHECK(t, hit, "hit before free");
	free(p);
	q = malloc(len);
	TST_CHECK(t, q, "malloc");
	memset(q, 'B', len);
	same = q == p;
	/* Either a miss, or a hit that get() proved fresh (same pages:
	 * glibc tuned by memhooks keeps freed memory mapped). */
	TST_CHECK0(t, touch(rc, q, len, &hit, &k2));
	printf("    free+malloc: %s address, %s (malloc %s)\n",
	       same ? "same" : "new", hit ? "hit on the same pages" : "miss",
	       st & RDMACH_MEMHOOKS_MALLOC_TUNED ?
	       "tuned" : st & RDMACH_MEMHOOKS_FREE_HOOK ? "free hook" :
	       "not glibc's");
	free(q);
	TST_CHECK0(t, finish(t, rc));
	return 0;
}

/* Without the mallopt tuning glibc gives a large block back with munmap
 * inside free(), unseen by any hook: check that the tuning is in force. */
static int t_malloc_tuned(struct tst *t)
{
	int st = rdmach_memhooks_status();
	size_t len = BIG_BLOCK;
	uint64_t before[4], after[4];
	char *p;

	if (st & RDMACH_MEMHOOKS_FREE_HOOK) {
		/* Sanitizer allocator: each free() must be logged. */
		uint64_t e0;

		p = malloc(len);
		TST_CHECK(t, p, "malloc");
		e0 = rdmach_memhooks_events();
		free(p);
		TST_CHECK(t, rdmach_memhooks_events() > e0,
			  "free() under the sanitizer allocator was not "
			  "logged");
		return 0;
	}
	if (!(st & RDMACH_MEMHOOKS_MALLOC_TUNED))
		return tst_skip(t, "malloc is not glibc's (%s)",
				st & RDMACH_MEMHOOKS_MALLOPT_OFF ?
				"mallopt off" : "unknown allocator");
	p = malloc(len);
	TST_CHECK(t, p, "malloc");
	memset(p, 1, len);
	TST_CHECK0(t, read_pagemap(((uintptr_t)p + len / 2) & ~(pg - 1), 4,
				   before));
	free(p);
	TST_CHECK0(t, read_pagemap(((uintptr_t)p + len / 2) & ~(pg - 1), 4,
				   after));
	TST_CHECK(t, before[0] >> 63 && after[0] >> 63 &&
		  !memcmp(before, after, sizeof(before)),
		  "free() released a large block's pages");
	return 0;
}

static int t_madvise(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	char *p = map(8);
	int hit;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	TST_CHECK0(t, touch(rc, p + 4 * pg, 4 * pg, &hit, NULL));
	TST_CHECK0(t, madvise(p + pg, pg, MADV_DONTNEED));
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	TST_CHECK(t, !hit, "MADV_DONTNEED must invalidate");
	TST_CHECK0(t, touch(rc, p + 4 * pg, 4 * pg, &hit, NULL));
	TST_CHECK(t, hit, "the other entry is untouched");
	TST_CHECK0(t, madvise(p + 6 * pg, pg, MADV_FREE));
	TST_CHECK0(t, touch(rc, p + 4 * pg, 4 * pg, &hit, NULL));
	TST_CHECK(t, !hit, "MADV_FREE must invalidate");
	TST_CHECK0(t, madvise(p, 8 * pg, MADV_WILLNEED));
	TST_CHECK0(t, touch(rc, p + 4 * pg, 4 * pg, &hit, NULL));
	TST_CHECK(t, hit, "MADV_WILLNEED must not invalidate");
	TST_CHECK(t, info(rc).invalidations == 2, "two invalidations, got %llu",
		  (unsigned long long)info(rc).invalidations);
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 8 * pg);
	return 0;
}

static int t_heap_shrink(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	size_t len = 4 * pg, pad;
	char *brk0, *p, *q;
	void *warm;
	uint64_t k1, k2;
	int hit;

	TST_CHECK(t, rc, "setup");
	/* Let malloc grow its heap first: the cache's own allocations
	 * must not move the break while we own its top. */
	warm = malloc(1 << 20);
	free(warm);
	/* allocates an entry */
	TST_CHECK0(t, touch(rc, &rc, 1, &hit, NULL));
	brk0 = sbrk(0);
	pad = (pg - ((uintptr_t)brk0 & (pg - 1))) & (pg - 1);
	TST_CHECK(t, sbrk((intptr_t)(pad + len)) == brk0, "sbrk grow");
	p = brk0 + pad;
	memset(p, 'A', len);
	TST_CHECK0(t, touch(rc, p, len, &hit, &k1));
	TST_CHECK0(t, touch(rc, p, len, &hit, &k2));
	TST_CHECK(t, hit, "hit before shrink");
	TST_CHECK(t, (char *)sbrk(0) == p + len,
		  "the heap moved under the test");
	TST_CHECK(t, sbrk(-(intptr_t)len) != (void *)-1, "sbrk shrink");
	q = sbrk((intptr_t)len);
	TST_CHECK(t, q == p, "sbrk grow again at the same address");
	memset(q, 'B', len);
	TST_CHECK0(t, touch(rc, q, len, &hit, &k2));
	TST_CHECK(t, !hit && k2 != k1, "stale registration after sbrk shrink");
	/* brk() the same way. */
	TST_CHECK0(t, brk(p));
	TST_CHECK0(t, brk(p + len));
	TST_CHECK0(t, touch(rc, p, len, &hit, &k1));
	TST_CHECK(t, !hit && k1 != k2, "stale registration after brk shrink");
	TST_CHECK0(t, brk(brk0));
	TST_CHECK0(t, finish(t, rc));
	return 0;
}

static int t_mremap(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	char *p = map(4), *r = map(4), *p2 = map(4), *q;
	uint64_t kr, k;
	int hit;

	TST_CHECK(t, rc && p && r && p2, "setup");
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	q = mremap(p, 4 * pg, 64 * pg, MREMAP_MAYMOVE);
	TST_CHECK(t, q != MAP_FAILED, "mremap grow");
	TST_CHECK0(t, touch(rc, q, 4 * pg, &hit, NULL));
	TST_CHECK(t, !hit, "after mremap: miss");
	/* Move another mapping over a cached one. */
	TST_CHECK0(t, touch(rc, r, 4 * pg, &hit, &kr));
	memset(p2, 'C', 4 * pg);
	TST_CHECK(t, mremap(p2, 4 * pg, 4 * pg, MREMAP_MAYMOVE | MREMAP_FIXED,
			    r) == r, "mremap fixed");
	TST_CHECK(t, r[0] == 'C', "moved");
	TST_CHECK0(t, touch(rc, r, 4 * pg, &hit, &k));
	TST_CHECK(t, !hit && k != kr,
		  "mremap onto a cached range must invalidate");
	TST_CHECK0(t, finish(t, rc));
	munmap(q, 64 * pg);
	munmap(r, 4 * pg);
	return 0;
}

static int t_malloc_trim(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	char *hole, *hold;
	char *p = map(4);
	uint64_t inv;
	int hit, ret;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	hole = malloc(1 << 20);
	hold = malloc(64);
	TST_CHECK(t, hole && hold, "malloc");
	memset(hole, 1, 1 << 20);
	free(hole);
	ret = malloc_trim(0);
	inv = info(rc).invalidations;
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	if (ret)
		TST_CHECK(t, !hit && info(rc).invalidations > inv,
			  "malloc_trim released memory: must invalidate");
	else
		TST_CHECK(t, hit, "nothing trimmed: nothing invalidated");
	free(hold);
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 4 * pg);
	return 0;
}

static int t_overflow(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	char *p = map(4), *s;
	int hit, i;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	for (i = 0; i < 5000; i++) {	/* more than the event ring holds */
		s = map(1);
		TST_CHECK(t, s, "map");
		munmap(s, pg);
	}
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	TST_CHECK(t, !hit && info(rc).invalidations == 1,
		  "lost events must invalidate everything");
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	TST_CHECK(t, hit, "then cache again");
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 4 * pg);
	return 0;
}

static int t_disabled(struct tst *t)
{
	struct rdmach_rcache *rc = mk(0, 100, 1 << 30);
	struct rdmach_rcache_region *r;
	char *p = map(4);
	int hit;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, touch(rc, p, pg, &hit, NULL));
	TST_CHECK0(t, get(rc, p, pg, &r, &hit));
	TST_CHECK(t, !hit && F.regs == 2 && F.deregs == 1,
		  "disabled: no reuse");
	rdmach_rcache_put(rc, r);
	TST_CHECK(t, F.deregs == 2 && info(rc).entries == 0, "dereg at put");
	TST_CHECK(t, info(rc).misses == 2 && info(rc).hits == 0,
		  "counted as misses");
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 4 * pg);
	return 0;
}

static int t_enomem_retry(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	char *p = map(8);
	int hit;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, touch(rc, p, pg, &hit, NULL));
	TST_CHECK0(t, touch(rc, p + pg, pg, &hit, NULL));
	F.fail_enomem = 1;
	TST_CHECK0(t, touch(rc, p + 2 * pg, pg, &hit, NULL));
	TST_CHECK(t, F.deregs == 2 && info(rc).evictions == 2,
		  "unused entries released for the retry");
	F.fail_enomem = 2;
	TST_CHECK(t, touch(rc, p + 4 * pg, pg, &hit, NULL) == -ENOMEM,
		  "persistent failure is returned");
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 8 * pg);
	return 0;
}

static int t_fork(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	struct rdmach_rcache_region *held, *r;
	char *p = map(8);
	volatile uint64_t *shared = mmap(NULL, pg, PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t k1, k, before;
	int hit, status;
	pid_t pid;

	TST_CHECK(t, rc && p && shared != MAP_FAILED, "setup");
	F.shared_deregs = shared;
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, &k1));
	TST_CHECK0(t, get(rc, p + 4 * pg, 4 * pg, &held, &hit));
	before = *shared;
	pid = fork();
	TST_CHECK(t, pid >= 0, "fork");
	if (pid == 0) {
		int bad = 0;

		/* The child frees and unmaps what the parent caches and
		 * tries to use the cache: refused, nothing deregistered. */
		munmap(p, 8 * pg);
		rdmach_log_level = -1;	/* the expected error, unprinted */
		if (rdmach_rcache_get(rc, p, pg, &r) != -ECHILD)
			bad |= 1;
		rdmach_rcache_put(rc, held);
		rdmach_rcache_flush(rc);
		rdmach_rcache_destroy(rc);
		if (*shared != before)
			bad |= 2;
		_exit(bad);
	}
	TST_CHECK(t, waitpid(pid, &status, 0) == pid, "waitpid");
	TST_CHECK(t, tst_status_is(status, 0),
		  "child failed: status %#x", status);
	TST_CHECK(t, *shared == before,
		  "the child deregistered parent entries");
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, &k));
	TST_CHECK(t, hit && k == k1,
		  "parent cache unaffected by the child's munmap");
	TST_CHECK0(t, rdmach_rcache_check(rc));
	rdmach_rcache_put(rc, held);
	TST_CHECK0(t, touch(rc, p + 4 * pg, 4 * pg, &hit, NULL));
	TST_CHECK(t, hit, "held entry back on the LRU");
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 8 * pg);
	munmap((void *)shared, pg);
	return 0;
}

static int t_many_buffers(struct tst *t)
{
	const size_t nbuf = 10000, max_n = 64, max_pages = 48;
	struct rdmach_rcache *rc = mk(1, max_n, max_pages * pg);
	size_t npages = nbuf * 3 + 4, i;
	char *base = map(npages);
	uint64_t seed = 42;
	int hit;

	TST_CHECK(t, rc && base, "setup");
	for (i = 0; i < nbuf; i++) {
		/* distinct buffers of 1..3 pages at varying offsets */
		size_t len = (1 + tst_rand(&seed) % 2) * pg -
			     tst_rand(&seed) % 64;
		char *b = base + i * 3 * pg + tst_rand(&seed) % 64;

		TST_CHECK0(t, touch(rc, b, len, &hit, NULL));
		TST_CHECK(t, !hit, "distinct buffer %zu: hit", i);
		TST_CHECK(t, info(rc).entries <= max_n &&
			  info(rc).bytes <= max_pages * pg,
			  "limits exceeded at %zu: %llu entries, %llu bytes", i,
			  (unsigned long long)info(rc).entries,
			  (unsigned long long)info(rc).bytes);
		if (i % 1000 == 0)
			TST_CHECK0(t, rdmach_rcache_check(rc));
	}
	TST_CHECK(t, F.regs - F.deregs == info(rc).entries,
		  "reg/dereg balance");
	TST_CHECK(t, info(rc).evictions == info(rc).misses - info(rc).entries,
		  "evictions %llu misses %llu entries %llu",
		  (unsigned long long)info(rc).evictions,
		  (unsigned long long)info(rc).misses,
		  (unsigned long long)info(rc).entries);
	TST_CHECK0(t, finish(t, rc));
	munmap(base, npages * pg);
	return 0;
}

/* Random accesses checked one by one against a reference LRU. */
static int t_lru_model(struct tst *t)
{
	enum { NBUF = 200, CAP = 64, NACC = 20000 };
	struct rdmach_rcache *rc = mk(1, CAP, 1ull << 40);
	char *base = map(NBUF);
	int model[CAP], n = 0, i, j, hit, b;
	uint64_t seed = 7;

	TST_CHECK(t, rc && base, "setup");
	for (i = 0; i < NACC; i++) {
		int want = 0;

		/* skewed: half the accesses to 40 hot buffers */
		b = tst_rand(&seed) % 2 ? (int)(tst_rand(&seed) % 40) :
					  (int)(tst_rand(&seed) % NBUF);
		for (j = 0; j < n && model[j] != b; j++)
			;
		if (j < n) {
			want = 1;
			memmove(&model[1], &model[0], j * sizeof(int));
		} else {
			if (n < CAP)
				n++;
			memmove(&model[1], &model[0], (n - 1) * sizeof(int));
		}
		model[0] = b;
		TST_CHECK0(t, touch(rc, base + b * pg + 8, 64, &hit, NULL));
		TST_CHECK(t, hit == want,
			  "access %d to buffer %d: %s, model says %s",
			  i, b, hit ? "hit" : "miss", want ? "hit" : "miss");
	}
	printf("    %llu hits, %llu misses, %llu evictions\n",
	       (unsigned long long)info(rc).hits,
	       (unsigned long long)info(rc).misses,
	       (unsigned long long)info(rc).evictions);
	TST_CHECK0(t, finish(t, rc));
	munmap(base, NBUF * pg);
	return 0;
}

/* Another thread unmaps its own memory while this one uses the cache. */
static _Atomic int stop_churn;

static void *churn(void *arg)
{
	while (!stop_churn) {
		char *s = mmap(NULL, pg, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (s != MAP_FAILED) {
			s[0] = 1;
			madvise(s, pg, MADV_DONTNEED);
			munmap(s, pg);
		}
	}
	return NULL;
}

static int t_concurrent_unmaps(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 16, 1 << 30);
	char *p = map(32);
	pthread_t th;
	int i, hit, hits = 0;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, pthread_create(&th, NULL, churn, NULL));
	for (i = 0; i < 20000; i++) {
		char *b = p + (i % 8) * 4 * pg;

		if (touch(rc, b, 4 * pg, &hit, NULL)) {
			stop_churn = 1;
			pthread_join(th, NULL);
			return tst_fail(t, "get failed or stale at %d", i);
		}
		hits += hit;
	}
	stop_churn = 1;
	pthread_join(th, NULL);
	printf("    %d hits of 20000 under %llu events\n", hits,
	       (unsigned long long)rdmach_memhooks_events());
	TST_CHECK0(t, finish(t, rc));
	munmap(p, 32 * pg);
	return 0;
}

/* ---- runner ------------------------------------------------------------ */

static const struct tst_case cases[] = {
	{ "hit_miss", 1, t_hit_miss, TST_UNIT, NULL, { 0 } },
	{ "covering", 1, t_covering, TST_UNIT, NULL, { 0 } },
	{ "lru_entries", 1, t_lru_entries, TST_UNIT, NULL, { 0 } },
	{ "lru_bytes", 1, t_lru_bytes, TST_UNIT, NULL, { 0 } },
	{ "refcount_blocks_eviction", 1, t_refcount_blocks_eviction, TST_UNIT,
	  NULL, { 0 } },
	{ "invalidate_in_use", 1, t_invalidate_in_use, TST_UNIT, NULL, { 0 } },
	{ "munmap_remap", 1, t_munmap_remap, TST_UNIT, NULL, { 0 } },
	{ "mmap_fixed", 1, t_mmap_fixed, TST_UNIT, NULL, { 0 } },
	{ "free_malloc", 1, t_free_malloc, TST_UNIT, NULL, { 0 } },
	{ "malloc_tuned", 1, t_malloc_tuned, TST_UNIT, NULL, { 0 } },
	{ "madvise", 1, t_madvise, TST_UNIT, NULL, { 0 } },
	{ "heap_shrink", 1, t_heap_shrink, TST_UNIT, NULL, { 0 } },
	{ "mremap", 1, t_mremap, TST_UNIT, NULL, { 0 } },
	{ "malloc_trim", 1, t_malloc_trim, TST_UNIT, NULL, { 0 } },
	{ "event_overflow", 1, t_overflow, TST_UNIT, NULL, { 0 } },
	{ "disabled", 1, t_disabled, TST_UNIT, NULL, { 0 } },
	{ "enomem_retry", 1, t_enomem_retry, TST_UNIT, NULL, { 0 } },
	{ "fork", 1, t_fork, TST_UNIT, NULL, { 0 } },
	{ "many_buffers", 1, t_many_buffers, TST_UNIT, NULL, { 0 } },
	{ "lru_model", 1, t_lru_model, TST_UNIT, NULL, { 0 } },
	{ "concurrent_unmaps", 1, t_concurrent_unmaps, TST_UNIT, NULL, { 0 } },
};

int main(int argc, char **argv)
{
	pg = (size_t)sysconf(_SC_PAGESIZE);
	/* THP would let khugepaged move pages under the staleness check. */
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	if (pagemap_open() < 0)
		printf("# no /proc/self/pagemap: stale pages not checked\n");
	return tst_main(argc, argv, cases,
			(int)(sizeof(cases) / sizeof(cases[0])));
}
