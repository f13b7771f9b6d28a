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

/* Defined by the ASan/TSan/LSan runtimes only. */
extern size_t __sanitizer_get_allocated_size(const volatile void *p)
	__attribute__((weak));

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

/* 40 MB: above glibc's largest dynamic mmap threshold (32 MB): glibc always
 * serves it by mmap and frees it by an internal munmap. */
#define BIG_BLOCK (40u << 20)
/* 64 KB: below glibc's smallest mmap threshold (128 KB) and above its
 * tcache sizes: a main-heap chunk that free+malloc hands back in place. */
#define HEAP_BLOCK (64u << 10)

/* Start free() tracking the way the transport does: a first get. */
static int track(struct tst *t, struct rdmach_rcache *rc, int *status)
{
	char *p = map(1);
	int hit;

	TST_CHECK(t, p, "map");
	TST_CHECK0(t, touch(rc, p, pg, &hit, NULL));
	munmap(p, pg);
	*status = rdmach_memhooks_status();
	TST_CHECK(t, *status & RDMACH_MEMHOOKS_TRACKING,
		  "a cache's first get did not start free() tracking");
	return 0;
}

/* With tracking on: free+malloc of a heap block keeps its pages and its
 * registration (no event, a hit proved fresh by the pagemap); free of an
 * mmapped block is logged before glibc unmaps it (a miss afterwards).
 * Under a sanitizer's allocator every free is logged. */
static int t_free_malloc(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	uint64_t k1, k2, e0, inv;
	char *p, *q;
	int hit, st, every;

	TST_CHECK(t, rc, "setup");
	TST_CHECK0(t, track(t, rc, &st));
	if (!(st & (RDMACH_MEMHOOKS_GLIBC_FREE | RDMACH_MEMHOOKS_FREE_HOOK))) {
		rdmach_rcache_destroy(rc);
		return tst_skip(t, "free() not tracked block by block "
				"(status %#x)", st);
	}
	every = !!(st & RDMACH_MEMHOOKS_FREE_HOOK);
	p = malloc(HEAP_BLOCK);
	TST_CHECK(t, p, "malloc");
	memset(p, 'A', HEAP_BLOCK);
	TST_CHECK0(t, touch(rc, p, HEAP_BLOCK, &hit, &k1));
	TST_CHECK0(t, touch(rc, p, HEAP_BLOCK, &hit, &k2));
	TST_CHECK(t, hit && k1 == k2, "hit before free");
	e0 = rdmach_memhooks_events();
	free(p);
	TST_CHECK(t, (rdmach_memhooks_events() != e0) == every,
		  every ? "free() not logged under the free hook" :
		  "free() of a heap block was logged");
	q = malloc(HEAP_BLOCK);
	TST_CHECK(t, q, "malloc");
	memset(q, 'B', HEAP_BLOCK);
	/* a hit is fresh */
	TST_CHECK0(t, touch(rc, q, HEAP_BLOCK, &hit, &k2));
	if (every)
		TST_CHECK(t, !hit, "freed block hit under the free hook");
	else if (q == p)
		TST_CHECK(t, hit && k2 == k1,
			  "heap block reused in place: must hit");
	printf("    heap block: free+malloc %s address, %s\n",
	       q == p ? "same" : "new", hit ? "hit" : "miss");
	free(q);

	p = malloc(BIG_BLOCK);
	TST_CHECK(t, p, "malloc");
	TST_CHECK0(t, touch(rc, p, BIG_BLOCK, &hit, &k1));
	TST_CHECK0(t, touch(rc, p, BIG_BLOCK, &hit, &k2));
	TST_CHECK(t, hit, "hit before free");
	e0 = rdmach_memhooks_events();
	inv = info(rc).invalidations;
	free(p);
	TST_CHECK(t, rdmach_memhooks_events() > e0,
		  "free() of an mmapped block was not logged");
	q = malloc(BIG_BLOCK);
	TST_CHECK(t, q, "malloc");
	memset(q, 'C', BIG_BLOCK);
	TST_CHECK0(t, touch(rc, q, BIG_BLOCK, &hit, &k2));
	TST_CHECK(t, !hit && k2 != k1 && info(rc).invalidations > inv,
		  "stale registration of a freed mmapped block");
	printf("    mmapped block: free+malloc %s address, miss\n",
	       q == p ? "same" : "new");
	free(q);
	TST_CHECK0(t, finish(t, rc));
	return 0;
}

/* glibc with tracking on: the heap top stays (M_TRIM_THRESHOLD=max, its
 * trimming is an internal sbrk no hook sees); mmapped blocks still go
 * back to the system at free().  Sanitizer allocator: free() is logged;
 * valgrind (free() replaced, unseen): the cache keeps nothing. */
static int t_malloc_tracked(struct tst *t)
{
	enum { NBLK = 256, BLK = 8 << 10 };
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	char *blk[NBLK], *top0, *top1, *p;
	uint64_t e0, pm[1];
	uintptr_t mid;
	int i, st;

	TST_CHECK(t, rc, "setup");
	TST_CHECK0(t, track(t, rc, &st));
	TST_CHECK0(t, finish(t, rc));
	if (st & RDMACH_MEMHOOKS_FREE_HOOK) {
		p = malloc(BIG_BLOCK);
		TST_CHECK(t, p, "malloc");
		e0 = rdmach_memhooks_events();
		free(p);
		TST_CHECK(t, rdmach_memhooks_events() > e0,
			  "free() under the sanitizer allocator was not "
			  "logged");
		return 0;
	}
	if (st & RDMACH_MEMHOOKS_FREE_UNSEEN) {
		/* valgrind's free is not seen: the cache keeps nothing. */
		int hit;

		rc = mk(1, 100, 1 << 30);
		p = map(1);
		TST_CHECK(t, rc && p, "setup");
		TST_CHECK0(t, touch(rc, p, pg, &hit, NULL));
		TST_CHECK0(t, touch(rc, p, pg, &hit, NULL));
		TST_CHECK(t, !hit && info(rc).entries == 0,
			  "a registration was kept although free() is not "
			  "seen");
		TST_CHECK0(t, finish(t, rc));
		munmap(p, pg);
		return 0;
	}
	if (!(st & RDMACH_MEMHOOKS_GLIBC_FREE))
		return tst_skip(t, "malloc is not glibc's (status %#x)", st);
	top0 = sbrk(0);
	for (i = 0; i < NBLK; i++) {
		blk[i] = malloc(BLK);
		TST_CHECK(t, blk[i], "malloc");
		memset(blk[i], 1, BLK);
	}
	top1 = sbrk(0);
	for (i = NBLK - 1; i >= 0; i--)
		free(blk[i]);
	TST_CHECK(t, top1 > top0, "2 MB of small blocks did not grow the heap");
	TST_CHECK(t, (char *)sbrk(0) == top1, "glibc trimmed the heap top "
		  "(%p -> %p) with tracking on", (void *)top1, sbrk(0));
	p = malloc(BIG_BLOCK);
	TST_CHECK(t, p, "malloc");
	memset(p, 1, BIG_BLOCK);
	mid = ((uintptr_t)p + BIG_BLOCK / 2) & ~(pg - 1);
	free(p);
	TST_CHECK0(t, read_pagemap(mid, 1, pm));
	TST_CHECK(t, !(pm[0] >> 63), "free() kept a large block's pages");
	return 0;
}

/* A thread's arena: a block in the arena's first heap is never given back
 * while tracking is on (no event at free); a block in a later heap may go
 * with its whole heap (glibc deletes an empty one by an internal munmap):
 * its free is logged, and the registration misses afterwards. */
struct arena_blocks {
	char *blk[1600];
	int n, first_later;	/* first_later: index of the first block in
				 * a later heap, or -1 */
};

/* glibc's thread heaps are 64 MB-aligned (2 * DEFAULT_MMAP_THRESHOLD_MAX) */
#define ARENA_HEAP (2ul * 4 * 1024 * 1024 * sizeof(long))

static void *arena_fill(void *arg)
{
	struct arena_blocks *a = arg;
	uintptr_t heap0 = 0;

	a->first_later = -1;
	for (a->n = 0; a->n < 1600; a->n++) {
		char *b = malloc(HEAP_BLOCK);

		if (!b)
			break;
		a->blk[a->n] = b;
		if (!heap0)
			heap0 = (uintptr_t)b & ~(ARENA_HEAP - 1);
		if (a->first_later < 0 &&
		    ((uintptr_t)b & ~(ARENA_HEAP - 1)) != heap0)
			a->first_later = a->n;
		if (a->first_later >= 0 && a->n > a->first_later + 8) {
			a->n++;
			break;
		}
	}
	return NULL;
}

static int t_thread_arena(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	struct arena_blocks *a = calloc(1, sizeof(*a));
	char *first, *later, *tail, *q;	/* freed below: addresses only */
	char *other = map(1);
	uint64_t e0, kf, kl, kt, k, pm[1];
	pthread_t th;
	int i, st, hit;

	TST_CHECK(t, rc && a && other, "setup");
	TST_CHECK0(t, track(t, rc, &st));
	if (!(st & RDMACH_MEMHOOKS_GLIBC_FREE)) {
		rdmach_rcache_destroy(rc);
		free(a);
		munmap(other, pg);
		return tst_skip(t, "malloc is not glibc's (status %#x)", st);
	}
	TST_CHECK0(t, pthread_create(&th, NULL, arena_fill, a));
	TST_CHECK0(t, pthread_join(th, NULL));
	TST_CHECK(t, a->first_later > 4, "%d blocks of 64 KB in a thread "
		  "arena stayed in one 64 MB heap", a->n);
	first = a->blk[1];
	later = a->blk[a->first_later + 2];
	TST_CHECK0(t, touch(rc, first, HEAP_BLOCK, &hit, &kf));
	TST_CHECK0(t, touch(rc, later, HEAP_BLOCK, &hit, &kl));
	e0 = rdmach_memhooks_events();
	free(a->blk[1]);
	a->blk[1] = NULL;
	TST_CHECK(t, rdmach_memhooks_events() == e0,
		  "free() in an arena's first heap was logged");
	q = malloc(HEAP_BLOCK);	/* the main arena: not where first was */
	TST_CHECK0(t, touch(rc, first, HEAP_BLOCK, &hit, &k));
	TST_CHECK(t, hit && k == kf, "first-heap block's registration dropped");
	free(q);
	e0 = rdmach_memhooks_events();
	free(a->blk[a->first_later + 2]);
	a->blk[a->first_later + 2] = NULL;
	TST_CHECK(t, rdmach_memhooks_events() > e0,
		  "free() in an arena's later heap was not logged");
	/* The first heap's tail free, then everything in the later heap:
	 * glibc deletes that heap (it keeps M_TOP_PAD, 128 KB, of room at the
	 * end of the previous one) and joins the first heap's free tail to
	 * its top, which it would then shrink, but for M_TRIM_THRESHOLD. */
	tail = a->blk[a->first_later - 1];
	TST_CHECK0(t, touch(rc, tail, HEAP_BLOCK, &hit, &kt));
	e0 = rdmach_memhooks_events();
	for (i = a->first_later - 1; i >= a->first_later - 3; i--) {
		free(a->blk[i]);
		a->blk[i] = NULL;
	}
	TST_CHECK(t, rdmach_memhooks_events() == e0,
		  "free() in an arena's first heap was logged");
	for (i = a->n - 1; i >= a->first_later; i--) {
		free(a->blk[i]);
		a->blk[i] = NULL;
	}
	TST_CHECK0(t, read_pagemap((uintptr_t)later & ~(pg - 1), 1, pm));
	printf("    %d blocks, later heap from block %d; after freeing it: "
	       "%s\n", a->n, a->first_later,
	       pm[0] >> 63 ? "still mapped" : "given back");
	/* drains the events */
	TST_CHECK0(t, touch(rc, other, pg, &hit, NULL));
	TST_CHECK(t, !mr_by_key(kl)->live,
		  "registration in a freed later heap kept");
	TST_CHECK(t, mr_by_key(kf)->live, "first-heap registration dropped");
	/* a hit is fresh */
	TST_CHECK0(t, touch(rc, tail, HEAP_BLOCK, &hit, &k));
	TST_CHECK(t, hit && k == kt,
		  "first heap's free tail: registration dropped");
	TST_CHECK0(t, finish(t, rc));
	for (i = 0; i < a->n; i++)
		free(a->blk[i]);
	free(a);
	munmap(other, pg);
	return 0;
}

/* ---- memory given back after free() ------------------------------------ */

/* Resident bytes of this process (/proc/self/statm, opened at each call:
 * the process asking), or 0. */
static uint64_t rss_bytes(void)
{
	unsigned long size, resident;
	FILE *f = fopen("/proc/self/statm", "r");
	int n;

	if (!f)
		return 0;
	n = fscanf(f, "%lu %lu", &size, &resident);
	fclose(f);
	return n == 2 ? (uint64_t)resident * pg : 0;
}

#define GIB (1ull << 30)

/* malloc(1 GiB), touch it, free it: RSS must fall by about that much. */
static int rss_after_free(struct tst *t, const char *label)
{
	uint64_t before, touched, after;
	char *p;

	before = rss_bytes();
	p = malloc(GIB);
	TST_CHECK(t, p, "malloc(1 GiB)");
	/* MADV_POPULATE_WRITE wants whole pages: the block's inner ones. */
	populate((char *)(((uintptr_t)p + pg - 1) & ~(pg - 1)), GIB - pg);
	touched = rss_bytes();
	free(p);
	after = rss_bytes();
	printf("    %s: RSS %.1f MiB, %.1f MiB with 1 GiB touched, %.1f MiB "
	       "after free\n", label, before / 1048576.0,
	       touched / 1048576.0, after / 1048576.0);
	TST_CHECK(t, touched >= before + GIB - GIB / 16, "1 GiB not resident");
	TST_CHECK(t, after + GIB - GIB / 16 <= touched,
		  "%s: free() of 1 GiB kept it resident", label);
	return 0;
}

/* The process without a registration cache: no tracking, glibc's own
 * policy (the heap top is trimmed at free), 1 GiB given back at free.
 * Runs in a fresh process (exec of this binary, see no_cache_child_main)
 * so that nothing inherited has created a cache or started tracking. */
static int no_cache_child(struct tst *t)
{
	enum { NBLK = 256, BLK = 8 << 10 };
	char *blk[NBLK], *top1;
	int i;

	rdmach_memhooks_init();
	TST_CHECK(t, rdmach_memhooks_status() == 0, "status %#x without a "
		  "cache", rdmach_memhooks_status());
	if (!__sanitizer_get_allocated_size) {	/* glibc's malloc */
		for (i = 0; i < NBLK; i++) {
			blk[i] = malloc(BLK);
			TST_CHECK(t, blk[i], "malloc");
			memset(blk[i], 1, BLK);
		}
		top1 = sbrk(0);
		for (i = NBLK - 1; i >= 0; i--)
			free(blk[i]);
		TST_CHECK(t, (char *)sbrk(0) < top1, "without a cache glibc "
			  "did not trim the heap top after 2 MB of frees: "
			  "malloc tuned?");
	}
	return rss_after_free(t, "no cache");
}

/* The exec'd child of rss_no_cache: runs no_cache_child() before main()
 * and writes the failure, if any, on the pipe named by
 * TEST_RCACHE_CHILD_FD. */
__attribute__((constructor)) static void no_cache_child_main(void)
{
	static const struct tst_case c = {
		"rss_no_cache (child)", 1, NULL, TST_UNIT, NULL, { 0 }
	};
	struct tst t = { .c = &c };
	const char *mode = getenv("TEST_RCACHE_CHILD");
	const char *fd = getenv("TEST_RCACHE_CHILD_FD");

	if (!mode || strcmp(mode, "no_cache"))
		return;
	setvbuf(stdout, NULL, _IOLBF, 0);
	pg = (size_t)sysconf(_SC_PAGESIZE);
	if (!no_cache_child(&t) && !t.failed)
		_exit(0);
	if (fd && write(atoi(fd), t.why, strlen(t.why)) < 0)
		_exit(2);
	_exit(1);
}

static int t_rss_no_cache(struct tst *t)
{
	char why[sizeof(t->why)] = "";
	int fds[2], status;
	ssize_t n;
	pid_t pid;

	TST_CHECK0(t, pipe2(fds, O_CLOEXEC));
	fflush(NULL);
	pid = fork();
	TST_CHECK(t, pid >= 0, "fork");
	if (pid == 0) {
		char *argv[] = { "test_rcache", NULL };
		char fd[16];

		snprintf(fd, sizeof(fd), "%d", fds[1]);
		setenv("TEST_RCACHE_CHILD", "no_cache", 1);
		setenv("TEST_RCACHE_CHILD_FD", fd, 1);
		fcntl(fds[1], F_SETFD, 0);	/* kept across the exec */
		prctl(PR_SET_PDEATHSIG, SIGKILL);	/* a timed-out case */
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(fds[1]);
	n = read(fds[0], why, sizeof(why) - 1);
	close(fds[0]);
	TST_CHECK(t, waitpid(pid, &status, 0) == pid, "waitpid");
	TST_CHECK(t, tst_status_is(status, 0),
		  "child (no cache) failed: status %#x%s%s", status,
		  n > 0 ? ": " : "", n > 0 ? why : "");
	return 0;
}

static int t_rss_cache(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	int st;

	TST_CHECK(t, rc, "setup");
	TST_CHECK0(t, track(t, rc, &st));
	TST_CHECK0(t, rss_after_free(t, "cache in use"));
	TST_CHECK0(t, finish(t, rc));
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
	char *brk0, *p, *q, *warm[16];
	uint64_t k1, k2;
	int hit, i;

	TST_CHECK(t, rc, "setup");
	/* starts free() tracking */
	TST_CHECK0(t, touch(rc, &rc, 1, &hit, NULL));
	/* Let malloc grow its heap first (small blocks come from the heap,
	 * kept at free while tracking is on): the cache's own allocations
	 * must not move the break while we own its top. */
	for (i = 0; i < 16; i++)
		warm[i] = malloc(HEAP_BLOCK);
	for (i = 0; i < 16; i++)
		free(warm[i]);
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

/* malloc_trim() gives back free pages anywhere in glibc's arenas, and
 * unlocks them before returning: it invalidates everything, first. */
static int t_malloc_trim(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1, 100, 1 << 30);
	char *hole[16], *hold;
	char *p = map(4);
	uint64_t inv;
	int hit, ret, i;

	TST_CHECK(t, rc && p, "setup");
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	for (i = 0; i < 16; i++) {
		hole[i] = malloc(HEAP_BLOCK);
		TST_CHECK(t, hole[i], "malloc");
		memset(hole[i], 1, HEAP_BLOCK);
	}
	hold = malloc(64);
	TST_CHECK(t, hold, "malloc");
	for (i = 0; i < 16; i++)
		free(hole[i]);
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	TST_CHECK(t, hit,
		  "frees of heap blocks invalidated an unrelated entry");
	inv = info(rc).invalidations;
	ret = malloc_trim(0);
	TST_CHECK0(t, touch(rc, p, 4 * pg, &hit, NULL));
	TST_CHECK(t, !hit && info(rc).invalidations > inv,
		  "malloc_trim (returned %d) must invalidate everything", ret);
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
	{ "malloc_tracked", 1, t_malloc_tracked, TST_UNIT, NULL, { 0 } },
	{ "thread_arena", 1, t_thread_arena, TST_UNIT, NULL, { 0 } },
	{ "rss_no_cache", 1, t_rss_no_cache, TST_UNIT, NULL, { 0 } },
	{ "rss_cache", 1, t_rss_cache, TST_UNIT, NULL, { 0 } },
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
