/*
 * test_rcache_ghost.c - the ghost history beside the registration cache
 * (mem/rcache_ghost.h) and rdmach_rcache_probe(), natively with a fake
 * transport: HIT / SEEN / NEW, probes that change no counter, invalidation
 * of ghosts by the memory-release events (munmap, madvise, mremap), the
 * LRU bound, a disabled cache.
 * Output: "ok <case>" / "FAIL <case>: why", then "N passed, M failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem/rcache.h"
#include "mem/rcache_ghost.h"

static char why[512];
static size_t pg;
static unsigned long regs;

#define CHECK(cond, ...)                                                \
	do {                                                            \
		if (!(cond)) {                                          \
			snprintf(why, sizeof(why), __VA_ARGS__);        \
			return -1;                                      \
		}                                                       \
	} while (0)

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

static int t_probe(void)
{
	struct rdmach_rcache *rc = mk(1);
	struct rdmach_rcache_ghosts *g;
	struct rdmach_rcache_region *r;
	struct rdmach_rcache_info in;
	char *p = map(16);

	CHECK(rc && p && !rdmach_rcache_ghosts_create(8, &g), "setup");
	CHECK(rdmach_rcache_probe(rc, g, p, 4 * pg) == RDMACH_RCACHE_NEW,
	      "fresh buffer not NEW");
	rdmach_rcache_ghost_note(g, p + 100, 4 * pg - 200);
	CHECK(rdmach_rcache_probe(rc, g, p + 8, 10) == RDMACH_RCACHE_SEEN,
	      "a range inside a noted one not SEEN");
	CHECK(rdmach_rcache_probe(rc, g, p, 8 * pg) == RDMACH_RCACHE_NEW,
	      "a range beyond the noted one not NEW");
	CHECK(!rdmach_rcache_get(rc, p, 4 * pg, &r), "get");
	rdmach_rcache_put(rc, r);
	CHECK(rdmach_rcache_probe(rc, g, p + pg, pg) == RDMACH_RCACHE_HIT,
	      "registered range not HIT");
	rdmach_rcache_info(rc, &in);
	CHECK(in.hits == 0 && in.misses == 1, "probes moved the counters "
	      "(%llu hits, %llu misses)", (unsigned long long)in.hits,
	      (unsigned long long)in.misses);
	CHECK(rdmach_rcache_probe(rc, g, NULL, 8) == RDMACH_RCACHE_NEW &&
	      rdmach_rcache_probe(NULL, NULL, p, 8) == RDMACH_RCACHE_NEW,
	      "NULL arguments");
	rdmach_rcache_ghosts_destroy(g);
	rdmach_rcache_destroy(rc);
	munmap(p, 16 * pg);
	return 0;
}

/* Released memory is new again, for ghosts as for registrations. */
static int t_release(void)
{
	struct rdmach_rcache *rc = mk(1);
	struct rdmach_rcache_ghosts *g;
	struct rdmach_rcache_region *r;
	char *p = map(16), *q, *m;

	CHECK(rc && p && !rdmach_rcache_ghosts_create(8, &g), "setup");
	rdmach_rcache_ghost_note(g, p, 4 * pg);
	rdmach_rcache_ghost_note(g, p + 8 * pg, 4 * pg);
	CHECK(rdmach_rcache_ghost_count(g) == 2, "two ghosts");
	/* munmap + mmap at the same address */
	CHECK(!munmap(p, 4 * pg), "munmap");
	q = mmap(p, 4 * pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(q == p, "remap");
	CHECK(rdmach_rcache_probe(rc, g, p, 4 * pg) == RDMACH_RCACHE_NEW,
	      "a ghost survived munmap");
	CHECK(rdmach_rcache_probe(rc, g, p + 8 * pg, 4 * pg) ==
	      RDMACH_RCACHE_SEEN, "an unrelated ghost was dropped");
	/* madvise(DONTNEED) over part of it */
	CHECK(!madvise(p + 9 * pg, pg, MADV_DONTNEED), "madvise");
	CHECK(rdmach_rcache_probe(rc, g, p + 8 * pg, 4 * pg) ==
	      RDMACH_RCACHE_NEW, "a ghost survived madvise(DONTNEED)");
	CHECK(rdmach_rcache_ghost_count(g) == 0, "ghosts left: %u",
	      rdmach_rcache_ghost_count(g));
	/* mremap moves a registered buffer: neither HIT nor SEEN */
	rdmach_rcache_ghost_note(g, p, 2 * pg);
	CHECK(!rdmach_rcache_get(rc, p, 2 * pg, &r), "get");
	rdmach_rcache_put(rc, r);
	m = mremap(p, 2 * pg, 6 * pg, MREMAP_MAYMOVE);
	CHECK(m != MAP_FAILED, "mremap");
	CHECK(rdmach_rcache_probe(rc, g, p, 2 * pg) == RDMACH_RCACHE_NEW,
	      "ghost or registration survived mremap");
	rdmach_rcache_ghosts_destroy(g);
	rdmach_rcache_destroy(rc);
	if (m != p)
		munmap(m, 6 * pg);
	munmap(p, 16 * pg);
	return 0;
}

/* At most max ghosts; the least recently used goes. */
static int t_lru(void)
{
	struct rdmach_rcache_ghosts *g;
	char *p = map(64);
	int i;

	CHECK(p && !rdmach_rcache_ghosts_create(4, &g), "setup");
	for (i = 0; i < 4; i++)
		rdmach_rcache_ghost_note(g, p + (size_t)i * 2 * pg, pg);
	/* touch ghost 0: ghost 1 is now the oldest */
	CHECK(rdmach_rcache_ghost_seen(g, p, pg), "ghost 0");
	rdmach_rcache_ghost_note(g, p + 40 * pg, pg);
	CHECK(rdmach_rcache_ghost_count(g) == 4, "count %u",
	      rdmach_rcache_ghost_count(g));
	CHECK(rdmach_rcache_ghost_seen(g, p, pg) &&
	      !rdmach_rcache_ghost_seen(g, p + 2 * pg, pg) &&
	      rdmach_rcache_ghost_seen(g, p + 4 * pg, pg) &&
	      rdmach_rcache_ghost_seen(g, p + 40 * pg, pg),
	      "not the least recently used ghost went");
	/* noting a range again refreshes and counts, no new entry */
	rdmach_rcache_ghost_note(g, p + 40 * pg, pg);
	CHECK(rdmach_rcache_ghost_count(g) == 4, "a refresh added a ghost");
	CHECK(rdmach_rcache_ghost_sends(g, p + 40 * pg, pg) == 2 &&
	      rdmach_rcache_ghost_sends(g, p, pg) == 1 &&
	      rdmach_rcache_ghost_sends(g, p + 2 * pg, pg) == 0,
	      "sends counted wrong");
	rdmach_rcache_ghosts_destroy(g);
	/* 0 ghosts: nothing is ever SEEN */
	CHECK(!rdmach_rcache_ghosts_create(1, &g), "setup");
	rdmach_rcache_ghosts_destroy(g);
	munmap(p, 64 * pg);
	return 0;
}

/* A disabled cache never reports HIT; ghosts still work. */
static int t_disabled(void)
{
	struct rdmach_rcache *rc = mk(0);
	struct rdmach_rcache_ghosts *g;
	struct rdmach_rcache_region *r;
	char *p = map(4);

	CHECK(rc && p && !rdmach_rcache_ghosts_create(8, &g), "setup");
	CHECK(!rdmach_rcache_enabled(rc), "enabled");
	CHECK(!rdmach_rcache_get(rc, p, pg, &r), "get");
	CHECK(rdmach_rcache_probe(rc, g, p, pg) == RDMACH_RCACHE_NEW,
	      "HIT with the registration in use in a disabled cache");
	rdmach_rcache_put(rc, r);
	rdmach_rcache_ghost_note(g, p, pg);
	CHECK(rdmach_rcache_probe(rc, g, p, pg) == RDMACH_RCACHE_SEEN,
	      "SEEN");
	rdmach_rcache_ghosts_destroy(g);
	rdmach_rcache_destroy(rc);
	munmap(p, 4 * pg);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} cases[] = {
	{ "ghost_probe", t_probe },
	{ "ghost_release", t_release },
	{ "ghost_lru", t_lru },
	{ "ghost_disabled_cache", t_disabled },
};

int main(int argc, char **argv)
{
	int passed = 0, failed = 0;
	size_t i;

	pg = (size_t)sysconf(_SC_PAGESIZE);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (argc > 1 && !strstr(cases[i].name, argv[1]))
			continue;
		why[0] = 0;
		if (cases[i].fn()) {
			printf("FAIL %s: %s\n", cases[i].name, why);
			failed++;
		} else {
			printf("ok %s\n", cases[i].name);
			passed++;
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
