/* rcache_ghost.c - history of sent, unregistered buffers: see
 * rcache_ghost.h.  A small array scanned linearly: a probe comes with a
 * large put (tens of KiB copied or read), so a few hundred comparisons do
 * not show, and invalidation stays as simple as an overlap test. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/knob.h"
#include "memhooks.h"
#include "rcache_ghost.h"

enum { GH_KNOB_MAX, GH_KNOB_NUM };

static const struct rdmach_knob ghost_knobs[GH_KNOB_NUM] = {
	[GH_KNOB_MAX] = { "RDMACH_RCACHE_GHOSTS", RDMACH_KNOB_UINT, "256", 0,
		65536, "buffers sent without registration that are remembered "
		"(no pinned memory), so that a buffer sent again is told from "
		"a new one (RDMACH_LARGE=auto); 0: none" },
};
RDMACH_KNOB_TABLE(rcache_ghost, ghost_knobs);

struct gh_entry {
	uintptr_t start, end;	/* page-aligned; end == 0: free slot */
	uint64_t stamp;		/* last noted or seen */
	unsigned int sends;	/* times noted */
};

struct rdmach_rcache_ghosts {
	pthread_mutex_t lock;
	struct gh_entry *e;
	unsigned int max, n;
	uint64_t clock;
	uintptr_t page;
	int tracking;		/* rdmach_memhooks_track_malloc() done */
	struct rdmach_memhooks_cursor cursor;
};

int rdmach_rcache_ghosts_create(unsigned int max,
				struct rdmach_rcache_ghosts **gp)
{
	struct rdmach_rcache_ghosts *g;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t v;

	if (!max) {
		if (rdmach_knob_u64(&ghost_knobs[GH_KNOB_MAX], &v))
			return -EINVAL;
		max = (unsigned int)v;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->max = max;
	g->e = max ? calloc(max, sizeof(*g->e)) : NULL;
	if (max && !g->e) {
		free(g);
		return -ENOMEM;
	}
	pthread_mutex_init(&g->lock, NULL);
	g->page = page > 0 ? (uintptr_t)page : 4096;
	rdmach_memhooks_init();
	rdmach_memhooks_cursor_init(&g->cursor);
	*gp = g;
	return 0;
}

void rdmach_rcache_ghosts_destroy(struct rdmach_rcache_ghosts *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->lock);
	free(g->e);
	free(g);
}

static void gh_drop(void *arg, uintptr_t start, uintptr_t end)
{
	struct rdmach_rcache_ghosts *g = arg;
	unsigned int i;

	for (i = 0; i < g->max; i++) {
		struct gh_entry *e = &g->e[i];

		if (e->end && e->start < end && e->end > start) {
			e->end = 0;
			g->n--;
		}
	}
}

/* Page-aligned [*s, *e) of the request; 0, or -EINVAL. */
static int gh_range(const struct rdmach_rcache_ghosts *g, const void *addr,
		    size_t len, uintptr_t *s, uintptr_t *e)
{
	uintptr_t a = (uintptr_t)addr;

	if (!addr || !len || a + len < a || a + len > UINTPTR_MAX - g->page)
		return -EINVAL;
	*s = a & ~(g->page - 1);
	*e = (a + len + g->page - 1) & ~(g->page - 1);
	return 0;
}

/* The entry covering [s, e), or NULL. */
static struct gh_entry *gh_find(struct rdmach_rcache_ghosts *g, uintptr_t s,
				uintptr_t e)
{
	unsigned int i;

	for (i = 0; i < g->max; i++)
		if (g->e[i].end && g->e[i].start <= s && g->e[i].end >= e)
			return &g->e[i];
	return NULL;
}

void rdmach_rcache_ghost_note(struct rdmach_rcache_ghosts *g, const void *addr,
			      size_t len)
{
	struct gh_entry *e, *victim = NULL;
	uintptr_t s, end;
	unsigned int i;

	if (!g || !g->max || gh_range(g, addr, len, &s, &end))
		return;
	pthread_mutex_lock(&g->lock);
	/* A ghost stands for the registration the send did not make: free()
	 * must be tracked from now on as a cache's first registration would
	 * have it (memhooks.h), or a freed block's ghost would outlive it. */
	if (!g->tracking) {
		rdmach_memhooks_track_malloc();
		g->tracking = 1;
	}
	rdmach_memhooks_poll(&g->cursor, gh_drop, g);
	e = gh_find(g, s, end);
	if (!e) {
		/* a free slot, or the least recently used one */
		for (i = 0; i < g->max; i++) {
			if (!g->e[i].end) {
				victim = &g->e[i];
				break;
			}
			if (!victim || g->e[i].stamp < victim->stamp)
				victim = &g->e[i];
		}
		if (!victim->end)
			g->n++;
		e = victim;
		e->start = s;
		e->end = end;
		e->sends = 0;
	}
	e->sends++;
	e->stamp = ++g->clock;
	pthread_mutex_unlock(&g->lock);
}

int rdmach_rcache_ghost_seen(struct rdmach_rcache_ghosts *g, const void *addr,
			     size_t len)
{
	struct gh_entry *e;
	uintptr_t s, end;

	if (!g || !g->max || gh_range(g, addr, len, &s, &end))
		return 0;
	pthread_mutex_lock(&g->lock);
	rdmach_memhooks_poll(&g->cursor, gh_drop, g);
	e = gh_find(g, s, end);
	if (e)
		e->stamp = ++g->clock;
	pthread_mutex_unlock(&g->lock);
	return e != NULL;
}

unsigned int rdmach_rcache_ghost_sends(struct rdmach_rcache_ghosts *g,
				       const void *addr, size_t len)
{
	struct gh_entry *e;
	uintptr_t s, end;
	unsigned int n = 0;

	if (!g || !g->max || gh_range(g, addr, len, &s, &end))
		return 0;
	pthread_mutex_lock(&g->lock);
	rdmach_memhooks_poll(&g->cursor, gh_drop, g);
	e = gh_find(g, s, end);
	if (e)
		n = e->sends;
	pthread_mutex_unlock(&g->lock);
	return n;
}

unsigned int rdmach_rcache_ghost_count(struct rdmach_rcache_ghosts *g)
{
	unsigned int n;

	if (!g)
		return 0;
	pthread_mutex_lock(&g->lock);
	rdmach_memhooks_poll(&g->cursor, gh_drop, g);
	n = g->n;
	pthread_mutex_unlock(&g->lock);
	return n;
}

enum rdmach_rcache_probe_result
rdmach_rcache_probe(struct rdmach_rcache *rc, struct rdmach_rcache_ghosts *g,
		    const void *addr, size_t len)
{
	if (rc && rdmach_rcache_covered(rc, addr, len))
		return RDMACH_RCACHE_HIT;
	if (g && rdmach_rcache_ghost_seen(g, addr, len))
		return RDMACH_RCACHE_SEEN;
	return RDMACH_RCACHE_NEW;
}
