/*
 * rcache.c - registration cache: a treap of entries keyed by page-aligned
 * start (augmented with the largest end in each subtree, so that a covering
 * lookup and an overlap search are O(log n)), reference counts, an LRU
 * list of unused entries, limits on entries and bytes, and invalidation
 * from the memory-release event log (mem/memhooks.h).
 *
 * Entry states:
 *   cached, in use      in the treap, refcnt > 0
 *   cached, unused      in the treap and on the LRU list, refcnt == 0
 *   detached, in use    not in the treap (invalidated, or registered over
 *                       the limits, or the cache is disabled): deregistered
 *                       when its last user puts it
 * Every alive entry is also on the `all` list, for destroy.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/knob.h"
#include "core/log.h"
#include "memhooks.h"
#include "rcache.h"

enum { RC_KNOB_ENABLE, RC_KNOB_MAX_ENTRIES, RC_KNOB_MAX_BYTES,
       RC_KNOB_NUM };

static const struct rdmach_knob rcache_knobs[RC_KNOB_NUM] = {
	[RC_KNOB_ENABLE] = { "RDMACH_RCACHE", RDMACH_KNOB_BOOL, "1", 0, 1,
		"keep memory registrations for reuse (0: register and "
		"deregister around every zero-copy transfer)" },
	[RC_KNOB_MAX_ENTRIES] = { "RDMACH_RCACHE_MAX_ENTRIES", RDMACH_KNOB_UINT,
		"4096", 1, 1u << 24,
		"registrations each cache keeps (rdma_ib: one for sources, one "
		"for destinations); the least recently used unused one is "
		"deregistered beyond this" },
	[RC_KNOB_MAX_BYTES] = { "RDMACH_RCACHE_MAX_BYTES", RDMACH_KNOB_SIZE,
		"1G", 4096, 1ull << 50,
		"bytes each cache's registrations may keep pinned; the least "
		"recently used unused ones are deregistered beyond this" },
};
RDMACH_KNOB_TABLE(rcache, rcache_knobs);

struct rc_entry {
	struct rdmach_rcache_region pub;	/* first: container_of */
	struct rc_entry *left, *right;		/* treap */
	uintptr_t max_end;			/* largest end in the subtree */
	uint64_t prio;
	struct rc_entry *lru_prev, *lru_next;	/* unused cached entries */
	struct rc_entry *all_prev, *all_next;	/* every alive entry */
	struct rc_entry *inv_next;		/* overlap search result */
	uint64_t refcnt;
	int in_tree;
	int on_lru;
};

struct rdmach_rcache {
	pthread_mutex_t lock;
	const struct rdmach_rcache_ops *ops;
	void *arg;
	struct rdmach_rcache_config cfg;
	char name[64];
	uintptr_t page_size;
	struct rc_entry *root;
	struct rc_entry lru;		/* sentinel: next = newest */
	struct rc_entry all;		/* sentinel */
	struct rdmach_memhooks_cursor cursor;
	unsigned long fork_count;
	int tracking;			/* rdmach_memhooks_track_malloc() done */
	uint64_t rng;
	struct rdmach_rcache_info st;
	struct rdmach_rcache_info mirrored;	/* st at the last rc_mirror */
};

static struct rc_entry *rc_entry_of(struct rdmach_rcache_region *r)
{
	return (struct rc_entry *)r;
}

/* ---- treap ------------------------------------------------------------- */

static int rc_less(const struct rc_entry *a, const struct rc_entry *b)
{
	if (a->pub.start != b->pub.start)
		return a->pub.start < b->pub.start;
	return (uintptr_t)a < (uintptr_t)b;
}

static void rc_update(struct rc_entry *e)
{
	uintptr_t m = e->pub.end;

	if (e->left && e->left->max_end > m)
		m = e->left->max_end;
	if (e->right && e->right->max_end > m)
		m = e->right->max_end;
	e->max_end = m;
}

/* Every key of a is below every key of b. */
static struct rc_entry *rc_merge(struct rc_entry *a, struct rc_entry *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio > b->prio) {
		a->right = rc_merge(a->right, b);
		rc_update(a);
		return a;
	}
	b->left = rc_merge(a, b->left);
	rc_update(b);
	return b;
}

/* *l gets the keys below key, *r the others. */
static void rc_split(struct rc_entry *t, const struct rc_entry *key,
		     struct rc_entry **l, struct rc_entry **r)
{
	if (!t) {
		*l = *r = NULL;
		return;
	}
	if (rc_less(t, key)) {
		rc_split(t->right, key, &t->right, r);
		*l = t;
	} else {
		rc_split(t->left, key, l, &t->left);
		*r = t;
	}
	rc_update(t);
}

static struct rc_entry *rc_remove_from(struct rc_entry *t, struct rc_entry *e)
{
	if (t == e)
		return rc_merge(e->left, e->right);
	if (rc_less(e, t))
		t->left = rc_remove_from(t->left, e);
	else
		t->right = rc_remove_from(t->right, e);
	rc_update(t);
	return t;
}

static uint64_t rc_random(struct rdmach_rcache *rc)
{
	uint64_t x = rc->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rc->rng = x;
	return x;
}

static void rc_tree_insert(struct rdmach_rcache *rc, struct rc_entry *e)
{
	struct rc_entry *l, *r;

	e->left = e->right = NULL;
	e->prio = rc_random(rc);
	rc_update(e);
	rc_split(rc->root, e, &l, &r);
	rc->root = rc_merge(rc_merge(l, e), r);
	e->in_tree = 1;
	rc->st.cached++;
}

static void rc_tree_remove(struct rdmach_rcache *rc, struct rc_entry *e)
{
	rc->root = rc_remove_from(rc->root, e);
	e->left = e->right = NULL;
	e->in_tree = 0;
	rc->st.cached--;
}

/* Any entry of subtree t (t->max_end >= end) whose end is >= end. */
static struct rc_entry *rc_find_end(struct rc_entry *t, uintptr_t end)
{
	while (t) {
		if (t->pub.end >= end)
			return t;
		if (t->left && t->left->max_end >= end)
			t = t->left;
		else
			t = t->right;
	}
	return NULL;
}

/* An entry with start <= start and end >= end. */
static struct rc_entry *rc_find_cover(struct rc_entry *t, uintptr_t start,
				      uintptr_t end)
{
	while (t && t->max_end >= end) {
		if (t->pub.start > start) {
			t = t->left;
			continue;
		}
		/* t and its whole left subtree start at or below start. */
		if (t->pub.end >= end)
			return t;
		if (t->left && t->left->max_end >= end)
			return rc_find_end(t->left, end);
		t = t->right;
	}
	return NULL;
}

/* Link every entry overlapping [start, end) on *list. */
static void rc_find_overlap(struct rc_entry *t, uintptr_t start,
			    uintptr_t end, struct rc_entry **list)
{
	if (!t || t->max_end <= start)
		return;
	rc_find_overlap(t->left, start, end, list);
	if (t->pub.start >= end)
		return;
	if (t->pub.end > start) {
		t->inv_next = *list;
		*list = t;
	}
	rc_find_overlap(t->right, start, end, list);
}

/* ---- lists ------------------------------------------------------------- */

static void rc_lru_remove(struct rdmach_rcache *rc, struct rc_entry *e)
{
	e->lru_prev->lru_next = e->lru_next;
	e->lru_next->lru_prev = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
	e->on_lru = 0;
	rc->st.lru--;
}

static void rc_lru_push(struct rdmach_rcache *rc, struct rc_entry *e)
{
	e->lru_next = rc->lru.lru_next;
	e->lru_prev = &rc->lru;
	rc->lru.lru_next->lru_prev = e;
	rc->lru.lru_next = e;
	e->on_lru = 1;
	rc->st.lru++;
}

static void rc_all_add(struct rdmach_rcache *rc, struct rc_entry *e)
{
	e->all_next = rc->all.all_next;
	e->all_prev = &rc->all;
	rc->all.all_next->all_prev = e;
	rc->all.all_next = e;
}

static void rc_all_remove(struct rc_entry *e)
{
	e->all_prev->all_next = e->all_next;
	e->all_next->all_prev = e->all_prev;
}

/* ---- registration ------------------------------------------------------ */

static size_t rc_len(const struct rc_entry *e)
{
	return e->pub.end - e->pub.start;
}

static void rc_dereg(struct rdmach_rcache *rc, struct rc_entry *e)
{
	int ret = rc->ops->dereg(rc->arg, e->pub.handle);

	if (ret)
		rdmach_err("rcache %s: deregistering [%#lx, %#lx) failed: %s",
			   rc->name, (unsigned long)e->pub.start,
			   (unsigned long)e->pub.end, strerror(-ret));
	rc->st.entries--;
	rc->st.bytes -= rc_len(e);
	rc_all_remove(e);
	free(e);
}

/* Deregister an unused cached entry. */
static void rc_drop(struct rdmach_rcache *rc, struct rc_entry *e)
{
	rc_lru_remove(rc, e);
	rc_tree_remove(rc, e);
	rc_dereg(rc, e);
}

static int rc_over(const struct rdmach_rcache *rc, size_t more_entries,
		   size_t more_bytes)
{
	return rc->st.entries + more_entries > rc->cfg.max_entries ||
	       rc->st.bytes + more_bytes > rc->cfg.max_bytes;
}

/* Evict least recently used entries until `len` more bytes fit. */
static void rc_make_room(struct rdmach_rcache *rc, size_t entries, size_t len)
{
	while (rc->st.lru && rc_over(rc, entries, len)) {
		rc_drop(rc, rc->lru.lru_prev);
		rc->st.evictions++;
	}
}

static void rc_drop_unused(struct rdmach_rcache *rc)
{
	while (rc->st.lru)
		rc_drop(rc, rc->lru.lru_prev);
}

/* ---- invalidation ------------------------------------------------------ */

static void rc_invalidate(void *arg, uintptr_t start, uintptr_t end)
{
	struct rdmach_rcache *rc = arg;
	struct rc_entry *list = NULL, *e;

	rc_find_overlap(rc->root, start, end, &list);
	while ((e = list)) {
		list = e->inv_next;
		rc_tree_remove(rc, e);
		rc->st.invalidations++;
		if (e->on_lru) {
			rc_lru_remove(rc, e);
			rc_dereg(rc, e);
		}
		/* else: in use; deregistered by the last put. */
	}
}

static void rc_drain(struct rdmach_rcache *rc)
{
	rdmach_memhooks_poll(&rc->cursor, rc_invalidate, rc);
}

/* Add what the counters moved by to the mirror, which several caches may
 * share (it then holds their sum). */
static void rc_mirror(struct rdmach_rcache *rc)
{
	rdmach_stats_t *m = rc->cfg.stats_mirror;

	if (!m)
		return;
	m->rcache_hits += rc->st.hits - rc->mirrored.hits;
	m->rcache_misses += rc->st.misses - rc->mirrored.misses;
	m->rcache_evictions += rc->st.evictions - rc->mirrored.evictions;
	m->rcache_invalidations += rc->st.invalidations -
				   rc->mirrored.invalidations;
	rc->mirrored = rc->st;
}

static int rc_forked(const struct rdmach_rcache *rc)
{
	return rdmach_memhooks_fork_count() != rc->fork_count;
}

/* ---- API --------------------------------------------------------------- */

int rdmach_rcache_config_from_env(struct rdmach_rcache_config *cfg)
{
	uint64_t on, n, bytes;

	if (rdmach_knob_u64(&rcache_knobs[RC_KNOB_ENABLE], &on) ||
	    rdmach_knob_u64(&rcache_knobs[RC_KNOB_MAX_ENTRIES], &n) ||
	    rdmach_knob_u64(&rcache_knobs[RC_KNOB_MAX_BYTES], &bytes))
		return -EINVAL;
	memset(cfg, 0, sizeof(*cfg));
	cfg->enabled = (int)on;
	cfg->max_entries = n;
	cfg->max_bytes = bytes;
	return 0;
}

/* Before the first registration: have free() tracked (once per process;
 * processes that never register keep malloc's policy untouched).  Where
 * free() cannot be seen at all (valgrind replaces it), keep nothing. */
static void rc_track_malloc(struct rdmach_rcache *rc)
{
	static _Atomic int told;
	int status;

	if (rc->tracking)
		return;
	rc->tracking = 1;
	status = rdmach_memhooks_track_malloc();
	if (status & RDMACH_MEMHOOKS_FREE_UNSEEN)
		rc->cfg.enabled = 0;
	if (atomic_exchange(&told, 1))
		return;
	if (status & RDMACH_MEMHOOKS_FREE_UNSEEN)
		rdmach_warn("rcache %s: valgrind replaces free(), and memory "
			    "it releases is not seen: registrations are not "
			    "kept (as with RDMACH_RCACHE=0)", rc->name);
	else if (status & RDMACH_MEMHOOKS_FREE_HOOK)
		rdmach_info("rcache %s: sanitizer allocator: every free() "
			    "invalidates what it overlaps", rc->name);
	else if (status & RDMACH_MEMHOOKS_MALLOC_TUNED)
		rdmach_info("rcache %s: free() is not intercepted: glibc "
			    "malloc set to never unmap nor trim (M_MMAP_MAX=0)",
			    rc->name);
	else if (!(status & RDMACH_MEMHOOKS_GLIBC_FREE))
		rdmach_info("rcache %s: malloc is not glibc's; its releases "
			    "are tracked only if made through the C library",
			    rc->name);
}

int rdmach_rcache_create(const struct rdmach_rcache_ops *ops, void *arg,
			 const struct rdmach_rcache_config *cfg,
			 struct rdmach_rcache **rcp)
{
	struct rdmach_rcache_config env;
	struct rdmach_rcache *rc;
	long page = sysconf(_SC_PAGESIZE);
	int ret;

	if (!ops || !ops->reg || !ops->dereg || !rcp)
		return -EINVAL;
	if (!cfg) {
		ret = rdmach_rcache_config_from_env(&env);
		if (ret)
			return ret;
		cfg = &env;
	}
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return -ENOMEM;
	ret = pthread_mutex_init(&rc->lock, NULL);
	if (ret) {
		free(rc);
		return -ret;
	}
	rc->ops = ops;
	rc->arg = arg;
	rc->cfg = *cfg;
	if (!rc->cfg.max_entries)
		rc->cfg.max_entries = 1;
	snprintf(rc->name, sizeof(rc->name), "%s", cfg->name ? cfg->name : "");
	rc->cfg.name = rc->name;
	rc->page_size = page > 0 ? (uintptr_t)page : 4096;
	rc->lru.lru_next = rc->lru.lru_prev = &rc->lru;
	rc->all.all_next = rc->all.all_prev = &rc->all;
	rc->rng = 0x9e3779b97f4a7c15ull ^ (uintptr_t)rc;
	rc->fork_count = rdmach_memhooks_fork_count();
	rdmach_memhooks_cursor_init(&rc->cursor);
	rdmach_debug("rcache %s: %s, max %llu entries, %llu bytes", rc->name,
		     rc->cfg.enabled ? "on" : "off",
		     (unsigned long long)rc->cfg.max_entries,
		     (unsigned long long)rc->cfg.max_bytes);
	*rcp = rc;
	return 0;
}

void rdmach_rcache_destroy(struct rdmach_rcache *rc)
{
	struct rc_entry *e;
	int child;

	if (!rc)
		return;
	child = rc_forked(rc);
	if (rc->st.in_use && !child)
		rdmach_warn("rcache %s: %llu registrations still in use at "
			    "destroy; deregistering them", rc->name,
			    (unsigned long long)rc->st.in_use);
	while ((e = rc->all.all_next) != &rc->all) {
		if (child) {	/* the parent's: never deregister */
			rc_all_remove(e);
			free(e);
		} else {
			rc_dereg(rc, e);
		}
	}
	pthread_mutex_destroy(&rc->lock);
	free(rc);
}

static int rc_register(struct rdmach_rcache *rc, uintptr_t start,
		       uintptr_t end, struct rc_entry **ep)
{
	size_t len = end - start;
	struct rc_entry *e;
	int ret;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->pub.start = start;
	e->pub.end = end;
	/* Evict only for what may be kept: an oversized one is not. */
	if (rc->cfg.enabled && len <= rc->cfg.max_bytes)
		rc_make_room(rc, 1, len);
	ret = rc->ops->reg(rc->arg, (void *)start, len, &e->pub.handle);
	if ((ret == -ENOMEM || ret == -EAGAIN) && rc->st.lru) {
		rdmach_debug("rcache %s: registration of %zu bytes failed (%s);"
			     " releasing %llu unused entries and retrying",
			     rc->name, len, strerror(-ret),
			     (unsigned long long)rc->st.lru);
		rc->st.evictions += rc->st.lru;
		rc_drop_unused(rc);
		ret = rc->ops->reg(rc->arg, (void *)start, len,
				   &e->pub.handle);
	}
	if (ret) {
		free(e);
		return ret;
	}
	rc_all_add(rc, e);
	rc->st.entries++;
	rc->st.bytes += len;
	/* Over the limits with every entry in use: hand it out detached. */
	if (rc->cfg.enabled && !rc_over(rc, 0, 0))
		rc_tree_insert(rc, e);
	*ep = e;
	return 0;
}

int rdmach_rcache_get(struct rdmach_rcache *rc, const void *addr,
		      size_t len, struct rdmach_rcache_region **regionp)
{
	uintptr_t a = (uintptr_t)addr, start, end;
	struct rc_entry *e = NULL;
	int ret = 0;

	if (!rc || !regionp || !addr || !len || a + len < a ||
	    a + len > UINTPTR_MAX - rc->page_size)
		return -EINVAL;
	if (rc_forked(rc)) {
		rdmach_err("rcache %s: used in a forked child (pid %d): the "
			   "registrations belong to the parent", rc->name,
			   (int)getpid());
		return -ECHILD;
	}
	start = a & ~(rc->page_size - 1);
	end = (a + len + rc->page_size - 1) & ~(rc->page_size - 1);

	pthread_mutex_lock(&rc->lock);
	if (rc->cfg.enabled)
		rc_track_malloc(rc);
	rc_drain(rc);
	if (rc->cfg.enabled)
		e = rc_find_cover(rc->root, start, end);
	if (e) {
		rc->st.hits++;
		if (e->on_lru)
			rc_lru_remove(rc, e);
	} else {
		rc->st.misses++;
		ret = rc_register(rc, start, end, &e);
	}
	if (!ret) {
		if (e->refcnt++ == 0)
			rc->st.in_use++;
		*regionp = &e->pub;
	}
	rc_mirror(rc);
	pthread_mutex_unlock(&rc->lock);
	return ret;
}

void rdmach_rcache_put(struct rdmach_rcache *rc,
		       struct rdmach_rcache_region *region)
{
	struct rc_entry *e;

	if (!rc || !region)
		return;
	e = rc_entry_of(region);
	pthread_mutex_lock(&rc->lock);
	if (rc_forked(rc) || !e->refcnt) {
		if (!rc_forked(rc))
			rdmach_err("rcache %s: put of [%#lx, %#lx), which is "
				   "not in use", rc->name,
				   (unsigned long)e->pub.start,
				   (unsigned long)e->pub.end);
		pthread_mutex_unlock(&rc->lock);
		return;
	}
	rc_drain(rc);
	if (--e->refcnt == 0) {
		rc->st.in_use--;
		if (e->in_tree) {
			rc_lru_push(rc, e);
			rc_make_room(rc, 0, 0);
		} else {
			rc_dereg(rc, e);
		}
	}
	rc_mirror(rc);
	pthread_mutex_unlock(&rc->lock);
}

void rdmach_rcache_flush(struct rdmach_rcache *rc)
{
	if (!rc || rc_forked(rc))
		return;
	pthread_mutex_lock(&rc->lock);
	rc_drain(rc);
	rc_drop_unused(rc);
	rc_mirror(rc);
	pthread_mutex_unlock(&rc->lock);
}

void rdmach_rcache_stats(struct rdmach_rcache *rc, rdmach_stats_t *st)
{
	if (!rc || !st)
		return;
	st->rcache_hits = rc->st.hits;
	st->rcache_misses = rc->st.misses;
	st->rcache_evictions = rc->st.evictions;
	st->rcache_invalidations = rc->st.invalidations;
}

void rdmach_rcache_info(struct rdmach_rcache *rc,
			struct rdmach_rcache_info *info)
{
	if (!rc || !info)
		return;
	pthread_mutex_lock(&rc->lock);
	*info = rc->st;
	pthread_mutex_unlock(&rc->lock);
}

/* ---- self-check -------------------------------------------------------- */

__attribute__((format(printf, 1, 2)))
static int rc_fail(const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rdmach_err("%s", msg);
	return 1;
}

struct rc_walk {
	const struct rc_entry *prev;
	uint64_t nodes;
	int bad;
};

static void rc_check_tree(const struct rdmach_rcache *rc,
			  const struct rc_entry *t, struct rc_walk *w)
{
	uintptr_t m;

	if (!t || w->bad)
		return;
	rc_check_tree(rc, t->left, w);
	m = t->pub.end;
	if (t->left)
		m = t->left->max_end > m ? t->left->max_end : m;
	if (t->right)
		m = t->right->max_end > m ? t->right->max_end : m;
	if (w->prev && !rc_less(w->prev, t))
		w->bad = rc_fail("rcache check: order broken");
	else if ((t->left && t->left->prio > t->prio) ||
		 (t->right && t->right->prio > t->prio))
		w->bad = rc_fail("rcache check: heap order broken");
	else if (t->max_end != m)
		w->bad = rc_fail("rcache check: max_end wrong");
	else if (!t->in_tree || (t->refcnt == 0) != t->on_lru)
		w->bad = rc_fail("rcache check: entry state wrong");
	else if (t->pub.start >= t->pub.end ||
		 (t->pub.start | t->pub.end) & (rc->page_size - 1))
		w->bad = rc_fail("rcache check: range not page-aligned");
	w->prev = t;
	w->nodes++;
	rc_check_tree(rc, t->right, w);
}

int rdmach_rcache_check(struct rdmach_rcache *rc)
{
	struct rc_walk w = { NULL, 0, 0 };
	const struct rc_entry *e;
	uint64_t n = 0, alive = 0, bytes = 0;

	pthread_mutex_lock(&rc->lock);
	rc_check_tree(rc, rc->root, &w);
	if (!w.bad && w.nodes != rc->st.cached)
		w.bad = rc_fail("rcache check: %llu nodes, %llu counted",
				   (unsigned long long)w.nodes,
				   (unsigned long long)rc->st.cached);
	for (e = rc->lru.lru_next; !w.bad && e != &rc->lru; e = e->lru_next) {
		if (!e->in_tree || e->refcnt || e->lru_next->lru_prev != e)
			w.bad = rc_fail("rcache check: bad LRU entry");
		n++;
	}
	if (!w.bad && n != rc->st.lru)
		w.bad = rc_fail("rcache check: LRU length wrong");
	for (e = rc->all.all_next; !w.bad && e != &rc->all; e = e->all_next) {
		alive++;
		bytes += rc_len(e);
	}
	if (!w.bad && (alive != rc->st.entries || bytes != rc->st.bytes))
		w.bad = rc_fail("rcache check: entry/byte counts wrong");
	if (!w.bad && rc->cfg.enabled && rc->st.lru &&
	    rc_over(rc, 0, 0))
		w.bad = rc_fail("rcache check: over the limits with "
				   "evictable entries");
	pthread_mutex_unlock(&rc->lock);
	return w.bad ? -EFAULT : 0;
}

/* ---- probe (no use, no counters) ----------------------------------------- */

int rdmach_rcache_covered(struct rdmach_rcache *rc, const void *addr,
			  size_t len)
{
	uintptr_t a = (uintptr_t)addr, start, end;
	int hit;

	if (!rc || !addr || !len || a + len < a ||
	    a + len > UINTPTR_MAX - rc->page_size || !rc->cfg.enabled ||
	    rc_forked(rc))
		return 0;
	start = a & ~(rc->page_size - 1);
	end = (a + len + rc->page_size - 1) & ~(rc->page_size - 1);
	pthread_mutex_lock(&rc->lock);
	rc_drain(rc);
	hit = rc_find_cover(rc->root, start, end) != NULL;
	pthread_mutex_unlock(&rc->lock);
	return hit;
}

int rdmach_rcache_enabled(const struct rdmach_rcache *rc)
{
	return rc && rc->cfg.enabled;
}
