/*
 * rcache.h - registration cache, transport-independent.
 *
 * Keeps memory registrations after use and hands them out again when a
 * later request falls inside one.  The transport supplies the register /
 * deregister calls (ibv_reg_mr / ibv_dereg_mr); the cache knows nothing of
 * verbs.  Entries cover whole pages; a request [addr, addr+len) hits an
 * entry that covers all of it.  Entries in use (between get and put) are
 * never evicted nor deregistered; unused ones sit on an LRU list and are
 * deregistered, oldest first, when the cache would exceed
 * RDMACH_RCACHE_MAX_ENTRIES or RDMACH_RCACHE_MAX_BYTES.  Memory released
 * by the application (munmap, mremap, madvise, heap shrink, free() of a
 * block malloc unmaps: mem/memhooks.h) invalidates overlapping entries at
 * the cache's next operation: unused ones are deregistered then, used ones
 * when put.  RDMACH_RCACHE=0 makes every get a fresh registration and
 * every put a deregistration.
 * malloc: creating a cache changes nothing.  The first get of an enabled
 * cache starts free() tracking for the process
 * (rdmach_memhooks_track_malloc): with glibc's malloc that sets
 * M_TRIM_THRESHOLD=max, so the heap top is no longer given back, while
 * blocks glibc mmaps (128 KiB and larger by default) still return to the
 * system at free() and invalidate their registrations; a heap block freed
 * and malloc'ed again keeps its pages and its registration (a hit).
 *
 * Threads: every call takes the cache's mutex; callbacks run under it and
 * must not call back into the same cache.
 * fork(): in a child the cache refuses get (-ECHILD) and destroy frees its
 * memory without calling dereg (the registrations belong to the parent).
 *
 * Usage by a transport (e.g. the RDMA-read zero-copy path):
 *	static int my_reg(void *arg, void *addr, size_t len, void **handle)
 *	{ struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);
 *	  if (!mr) return -errno; *handle = mr; return 0; }
 *	static int my_dereg(void *arg, void *handle)
 *	{ return -ibv_dereg_mr(handle); }
 *	rdmach_rcache_create(&ops, pd, NULL, &rc);     NULL: knobs
 *	rdmach_rcache_get(rc, buf, len, &r);  mr = r->handle; ...
 *	rdmach_rcache_put(rc, r);             when the RDMA op completed
 *	rdmach_rcache_stats(rc, &ctx->ctx_stats);   or cfg.stats_mirror
 */
#ifndef RDMACH_PROTO_RCACHE_H
#define RDMACH_PROTO_RCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "rdmach.h"

struct rdmach_rcache;

struct rdmach_rcache_ops {
	/* Register [addr, addr+len) (page-aligned); 0 and *handle set, or a
	 * negative errno.  -ENOMEM/-EAGAIN make the cache release every
	 * unused entry and try once more. */
	int (*reg)(void *arg, void *addr, size_t len, void **handle);
	/* Deregister what reg returned; 0 or a negative errno (logged). */
	int (*dereg)(void *arg, void *handle);
};

struct rdmach_rcache_config {
	int enabled;			/* 0: register per use */
	uint64_t max_entries;		/* cached registrations kept */
	uint64_t max_bytes;		/* bytes those keep pinned */
	const char *name;		/* for messages: "ib mlx5_0" */
	/* If set, its rcache_* counters are advanced after each call by what
	 * this cache's moved (caches that share one add up there). */
	rdmach_stats_t *stats_mirror;
};

/* What get hands out; read-only for the caller. */
struct rdmach_rcache_region {
	uintptr_t start;		/* page-aligned, <= requested addr */
	uintptr_t end;			/* page-aligned, >= addr + len */
	void *handle;			/* from ops->reg */
};

/* Cache state, for tests and diagnostics. */
struct rdmach_rcache_info {
	uint64_t entries;		/* registrations alive (all kinds) */
	uint64_t cached;		/* in the lookup structure */
	uint64_t in_use;		/* handed out, not yet put */
	uint64_t lru;			/* unused, evictable */
	uint64_t bytes;			/* bytes of all alive registrations */
	uint64_t hits, misses, evictions, invalidations;
};

/* Fill cfg from the RDMACH_RCACHE* knobs; 0 or -EINVAL (logged). */
int rdmach_rcache_config_from_env(struct rdmach_rcache_config *cfg);

/* cfg NULL: from the knobs.  ops and arg must outlive the cache. */
int rdmach_rcache_create(const struct rdmach_rcache_ops *ops, void *arg,
			 const struct rdmach_rcache_config *cfg,
			 struct rdmach_rcache **rcp);
/* Deregister everything (entries still in use are reported and
 * deregistered too) and free the cache. */
void rdmach_rcache_destroy(struct rdmach_rcache *rc);

/* A registration covering [addr, addr+len), len > 0, in use until put.
 * 0 and *regionp set, -EINVAL, -ECHILD (forked child), or the error of
 * ops->reg. */
int rdmach_rcache_get(struct rdmach_rcache *rc, const void *addr,
		      size_t len, struct rdmach_rcache_region **regionp);
void rdmach_rcache_put(struct rdmach_rcache *rc,
		       struct rdmach_rcache_region *region);

/* Apply pending invalidations and deregister every unused entry. */
void rdmach_rcache_flush(struct rdmach_rcache *rc);

/* Set st's rcache_hits/misses/evictions/invalidations from this cache. */
void rdmach_rcache_stats(struct rdmach_rcache *rc, rdmach_stats_t *st);
void rdmach_rcache_info(struct rdmach_rcache *rc,
			struct rdmach_rcache_info *info);

/* Check the internal invariants (tree order, heap, lengths, counts, LRU);
 * 0 or -EFAULT with the broken rule logged.  For tests. */
int rdmach_rcache_check(struct rdmach_rcache *rc);

/* Is [addr, addr+len) covered by a cached registration now?  Pending
 * invalidations are applied first; no reference is taken and the hit and
 * miss counters do not move (a probe, not a use).  1, 0, or 0 when the
 * cache is disabled or in a forked child. */
int rdmach_rcache_covered(struct rdmach_rcache *rc, const void *addr,
			  size_t len);

/* Whether the cache keeps registrations (RDMACH_RCACHE). */
int rdmach_rcache_enabled(const struct rdmach_rcache *rc);

#endif /* RDMACH_PROTO_RCACHE_H */
