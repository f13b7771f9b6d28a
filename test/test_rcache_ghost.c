/*
 * test_rcache_ghost.c - the ghost history beside the registration cache
 * (mem/rcache_ghost.h) and rdmach_rcache_probe(), natively with a fake
 * transport: HIT / SEEN / NEW, probes that change no counter, invalidation
 * of ghosts by the memory-release events (munmap, madvise, mremap, free()
 * of an mmapped block), the LRU bound, a disabled cache.
 * Cases run under the test kit (TST_UNIT, test/lib/tst.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/tst.h"
#include "mem/memhooks.h"
#include "mem/rcache.h"
#include "mem/rcache_ghost.h"

static size_t pg;
static unsigned long regs;

static int fake_reg(void *arg, void *addr, size_t len, void **handle)
{
	*handle = (void *)(uintptr_t)++regs;
	return 0;
}

static int fake_dereg(void *arg, void *handle)
{
	return 0;
}

static const struct rdmach_rcache_ops fake_ops = { fake_reg, fake_dereg };

static struct rdmach_rcache *mk(int enabled)
{
	struct rdmach_rcache_config cfg = { enabled, 100, 1 << 30, "test",
					    NULL };
	struct rdmach_rcache *rc;

	return rdmach_rcache_create(&fake_ops, NULL, &cfg, &rc) ? NULL : rc;
}

static char *map(size_t pages)
{
	char *p = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int t_probe(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1);
	struct rdmach_rcache_ghosts *g;
	struct rdmach_rcache_region *r;
	struct rdmach_rcache_info in;
	char *p = map(16);

	TST_CHECK(t, rc && p && !rdmach_rcache_ghosts_create(8, &g), "setup");
	TST_CHECK(t, rdmach_rcache_probe(rc, g, p, 4 * pg) == RDMACH_RCACHE_NEW,
		  "fresh buffer not NEW");
	rdmach_rcache_ghost_note(g, p + 100, 4 * pg - 200);
	TST_CHECK(t,
		  rdmach_rcache_probe(rc, g, p + 8, 10) == RDMACH_RCACHE_SEEN,
		  "a range inside a noted one not SEEN");
	TST_CHECK(t, rdmach_rcache_probe(rc, g, p, 8 * pg) == RDMACH_RCACHE_NEW,
		  "a range beyond the noted one not NEW");
	TST_CHECK(t, !rdmach_rcache_get(rc, p, 4 * pg, &r), "get");
	rdmach_rcache_put(rc, r);
	TST_CHECK(t,
		  rdmach_rcache_probe(rc, g, p + pg, pg) == RDMACH_RCACHE_HIT,
		  "registered range not HIT");
	rdmach_rcache_info(rc, &in);
	TST_CHECK(t, in.hits == 0 && in.misses == 1, "probes moved the "
		  "counters (%llu hits, %llu misses)", (unsigned long long)in.hits,
		  (unsigned long long)in.misses);
	TST_CHECK(t, rdmach_rcache_probe(rc, g, NULL, 8) == RDMACH_RCACHE_NEW &&
		  rdmach_rcache_probe(NULL, NULL, p, 8) == RDMACH_RCACHE_NEW,
		  "NULL arguments");
	rdmach_rcache_ghosts_destroy(g);
	rdmach_rcache_destroy(rc);
	munmap(p, 16 * pg);
	return 0;
}

/* Released memory is new again, for ghosts as for registrations. */
static int t_release(struct tst *t)
{
	struct rdmach_rcache *rc = mk(1);
	struct rdmach_rcache_ghosts *g;
	struct rdmach_rcache_region *r;
	char *p = map(16), *q, *m;

	TST_CHECK(t, rc && p && !rdmach_rcache_ghosts_create(8, &g), "setup");
	rdmach_rcache_ghost_note(g, p, 4 * pg);
	rdmach_rcache_ghost_note(g, p + 8 * pg, 4 * pg);
	TST_CHECK(t, rdmach_rcache_ghost_count(g) == 2, "two ghosts");
	/* munmap + mmap at the same address */
	TST_CHECK(t, !munmap(p, 4 * pg), "munmap");
	q = mmap(p, 4 * pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	TST_CHECK(t, q == p, "remap");
	TST_CHECK(t, rdmach_rcache_probe(rc, g, p, 4 * pg) == RDMACH_RCACHE_NEW,
		  "a ghost survived munmap");
	TST_CHECK(t, rdmach_rcache_probe(rc, g, p + 8 * pg, 4 * pg) ==
		  RDMACH_RCACHE_SEEN, "an unrelated ghost was dropped");
	/* madvise(DONTNEED) over part of it */
	TST_CHECK(t, !madvise(p + 9 * pg, pg, MADV_DONTNEED), "madvise");
	TST_CHECK(t, rdmach_rcache_probe(rc, g, p + 8 * pg, 4 * pg) ==
		  RDMACH_RCACHE_NEW, "a ghost survived madvise(DONTNEED)");
	TST_CHECK(t, rdmach_rcache_ghost_count(g) == 0, "ghosts left: %u",
		  rdmach_rcache_ghost_count(g));
	/* mremap moves a registered buffer: neither HIT nor SEEN */
	rdmach_rcache_ghost_note(g, p, 2 * pg);
	TST_CHECK(t, !rdmach_rcache_get(rc, p, 2 * pg, &r), "get");
	rdmach_rcache_put(rc, r);
	m = mremap(p, 2 * pg, 6 * pg, MREMAP_MAYMOVE);
	TST_CHECK(t, m != MAP_FAILED, "mremap");
	TST_CHECK(t, rdmach_rcache_probe(rc, g, p, 2 * pg) == RDMACH_RCACHE_NEW,
		  "ghost or registration survived mremap");
	rdmach_rcache_ghosts_destroy(g);
	rdmach_rcache_destroy(rc);
	if (m != p)
		munmap(m, 6 * pg);
	munmap(p, 16 * pg);
	return 0;
}

/* At most max ghosts; the least recently used goes. */
static int t_lru(struct tst *t)
{
	struct rdmach_rcache_ghosts *g;
	char *p = map(64);
	int i;

	TST_CHECK(t, p && !rdmach_rcache_ghosts_create(4, &g), "setup");
	for (i = 0; i < 4; i++)
		rdmach_rcache_ghost_note(g, p + (size_t)i * 2 * pg, pg);
	/* touch ghost 0: ghost 1 is now the oldest */
	TST_CHECK(t, rdmach_rcache_ghost_seen(g, p, pg), "ghost 0");
	rdmach_rcache_ghost_note(g, p + 40 * pg, pg);
	TST_CHECK(t, rdmach_rcache_ghost_count(g) == 4, "count %u",
		  rdmach_rcache_ghost_count(g));
	TST_CHECK(t, rdmach_rcache_ghost_seen(g, p, pg) &&
		  !rdmach_rcache_ghost_seen(g, p + 2 * pg, pg) &&
		  rdmach_rcache_ghost_seen(g, p + 4 * pg, pg) &&
		  rdmach_rcache_ghost_seen(g, p + 40 * pg, pg),
		  "not the least recently used ghost went");
	/* noting a range again refreshes and counts, no new entry */
	rdmach_rcache_ghost_note(g, p + 40 * pg, pg);
	TST_CHECK(t, rdmach_rcache_ghost_count(g) == 4,
		  "a refresh added a ghost");
	TST_CHECK(t, rdmach_rcache_ghost_sends(g, p + 40 * pg, pg) == 2 &&
		  rdmach_rcache_ghost_sends(g, p, pg) == 1 &&
		  rdmach_rcache_ghost_sends(g, p + 2 * pg, pg) == 0,
		  "sends counted wrong");
	rdmach_rcache_ghosts_destroy(g);
	/* 0 ghosts: nothing is ever SEEN */
	TST_CHECK(t, !rdmach_rcache_ghosts_create(1, &g), "setup");
	rdmach_rcache_ghosts_destroy(g);
	munmap(p, 64 * pg);
	return 0;
}

/* The first ghost starts free() tracking (no registration needed): free()
 * of a block glibc unmaps drops its ghost, so the same address handed out
 * again is NEW.  64 MiB: above glibc's largest dynamic mmap threshold. */
static int t_free(struct tst *t)
{
	const size_t big = 64u << 20;
	struct rdmach_rcache_ghosts *g;
	volatile uintptr_t at;	/* the address only, after free() */
	char *p;
	int st;

	TST_CHECK0(t, rdmach_rcache_ghosts_create(8, &g));
	p = malloc(big);
	TST_CHECK(t, p, "malloc");
	p[0] = 1;
	rdmach_rcache_ghost_note(g, p, big);
	st = rdmach_memhooks_status();
	TST_CHECK(t, st & RDMACH_MEMHOOKS_TRACKING,
		  "the first ghost did not start free() tracking");
	TST_CHECK(t, rdmach_rcache_ghost_seen(g, p, big), "noted, not seen");
	if (!(st & (RDMACH_MEMHOOKS_GLIBC_FREE | RDMACH_MEMHOOKS_FREE_HOOK))) {
		free(p);
		rdmach_rcache_ghosts_destroy(g);
		return tst_skip(t, "free() not tracked block by block "
				"(status %#x)", st);
	}
	at = (uintptr_t)p;
	free(p);
	TST_CHECK(t, !rdmach_rcache_ghost_seen(g, (void *)at, big),
		  "the ghost of a freed mmapped block is still SEEN");
	TST_CHECK(t, rdmach_rcache_ghost_count(g) == 0, "%u ghosts left",
		  rdmach_rcache_ghost_count(g));
	rdmach_rcache_ghosts_destroy(g);
	return 0;
}

/* A disabled cache never reports HIT; ghosts still work. */
static int t_disabled(struct tst *t)
{
	struct rdmach_rcache *rc = mk(0);
	struct rdmach_rcache_ghosts *g;
	struct rdmach_rcache_region *r;
	char *p = map(4);

	TST_CHECK(t, rc && p && !rdmach_rcache_ghosts_create(8, &g), "setup");
	TST_CHECK(t, !rdmach_rcache_enabled(rc), "enabled");
	TST_CHECK(t, !rdmach_rcache_get(rc, p, pg, &r), "get");
	TST_CHECK(t, rdmach_rcache_probe(rc, g, p, pg) == RDMACH_RCACHE_NEW,
		  "HIT with the registration in use in a disabled cache");
	rdmach_rcache_put(rc, r);
	rdmach_rcache_ghost_note(g, p, pg);
	TST_CHECK(t, rdmach_rcache_probe(rc, g, p, pg) == RDMACH_RCACHE_SEEN,
		  "SEEN");
	rdmach_rcache_ghosts_destroy(g);
	rdmach_rcache_destroy(rc);
	munmap(p, 4 * pg);
	return 0;
}

static const struct tst_case cases[] = {
	{ "ghost_probe", 1, t_probe, TST_UNIT, NULL, { 0 } },
	{ "ghost_release", 1, t_release, TST_UNIT, NULL, { 0 } },
	{ "ghost_lru", 1, t_lru, TST_UNIT, NULL, { 0 } },
	{ "ghost_free", 1, t_free, TST_UNIT, NULL, { 0 } },
	{ "ghost_disabled_cache", 1, t_disabled, TST_UNIT, NULL, { 0 } },
};

int main(int argc, char **argv)
{
	pg = (size_t)sysconf(_SC_PAGESIZE);
	return tst_main(argc, argv, cases,
			(int)(sizeof(cases) / sizeof(cases[0])));
}
