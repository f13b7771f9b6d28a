/*
 * rcache_ghost.h - a history of buffers sent without registering them
 * ("ghosts"), beside the registration cache (rcache.h), so that a large-
 * message protocol can tell a buffer it sees for the first time from one
 * the application sends again (Denis' future work: choose between zero-
 * copy and a copy pipeline from the observed reuse).
 *
 * A ghost is a page-aligned range, no registration, no pinned memory.
 * The set is bounded (RDMACH_RCACHE_GHOSTS entries; the least recently
 * noted or seen one goes first) and reads the same memory-release event
 * log as the cache (memhooks.h) with its own cursor: memory released by
 * munmap, madvise, mremap, brk, free() of a block glibc unmaps... drops
 * the ghosts it overlaps, so a freed-and-reallocated buffer is new again
 * exactly when a registration of it would have been invalidated.  The
 * first ghost starts free() tracking, as a cache's first registration
 * does (rdmach_memhooks_track_malloc).
 *
 * rdmach_rcache_probe() combines both: HIT (a cached registration covers
 * the range: zero-copy costs nothing more), SEEN (no registration, but the
 * range was noted and not released since: the application reuses it),
 * NEW.  Probing has no side effect; the caller notes a ghost when it
 * actually sends the buffer.
 *
 * Threads: every call takes the set's mutex.
 */
#ifndef RDMACH_MEM_RCACHE_GHOST_H
#define RDMACH_MEM_RCACHE_GHOST_H

#include <stddef.h>
#include <stdint.h>

#include "rcache.h"

struct rdmach_rcache_ghosts;

enum rdmach_rcache_probe_result {
	RDMACH_RCACHE_NEW,	/* never sent, or released since */
	RDMACH_RCACHE_SEEN,	/* sent before and unchanged, not registered */
	RDMACH_RCACHE_HIT,	/* a cached registration covers it */
};

/* max entries (0: the RDMACH_RCACHE_GHOSTS knob).  0 or -ENOMEM/-EINVAL. */
int rdmach_rcache_ghosts_create(unsigned int max,
				struct rdmach_rcache_ghosts **gp);
void rdmach_rcache_ghosts_destroy(struct rdmach_rcache_ghosts *g);

/* Remember [addr, addr+len) as sent (or refresh it). */
void rdmach_rcache_ghost_note(struct rdmach_rcache_ghosts *g, const void *addr,
			      size_t len);
/* Is [addr, addr+len) covered by a ghost (released memory applied first)? */
int rdmach_rcache_ghost_seen(struct rdmach_rcache_ghosts *g, const void *addr,
			     size_t len);
/* How many times the ghost covering [addr, addr+len) was noted since its
 * memory was last released (0: none covers it). */
unsigned int rdmach_rcache_ghost_sends(struct rdmach_rcache_ghosts *g,
				       const void *addr, size_t len);
/* Ghosts alive (for tests). */
unsigned int rdmach_rcache_ghost_count(struct rdmach_rcache_ghosts *g);

/* HIT, SEEN or NEW for one range; rc or g may be NULL (never HIT / never
 * SEEN). */
enum rdmach_rcache_probe_result
rdmach_rcache_probe(struct rdmach_rcache *rc, struct rdmach_rcache_ghosts *g,
		    const void *addr, size_t len);

#endif /* RDMACH_MEM_RCACHE_GHOST_H */
