/*
 * memhooks.h - memory-release events for the registration cache.
 *
 * Every call that can take memory away from an address range (munmap,
 * mremap, madvise(DONTNEED/FREE/REMOVE), mmap(MAP_FIXED) over a mapping,
 * brk/sbrk shrinking the heap, malloc_trim; once a cache tracks malloc,
 * free()/realloc() of a block glibc will unmap, or of any block under a
 * sanitizer's allocator) appends the range to one
 * process-wide event log.  Each registration cache reads the log with its
 * own cursor on its next operation and invalidates what overlaps.  See the
 * comment at the top of memhooks.c for what is caught and what is not.
 *
 * Memory ordering: writers (any thread, or a signal handler) claim a slot
 * with an atomic add on the head, write the range, then publish the slot
 * with a release store of its stamp.  A hook publishes BEFORE making the
 * call that releases the range (its extent is known in advance; a call
 * that then fails leaves a harmless extra invalidation), so a thread that
 * is handed new memory at that address afterwards - by the kernel or by
 * malloc - finds the event.  Readers load the stamp with acquire, read the
 * range, and re-check the stamp (seqlock) to detect a slot overwritten by
 * a writer one lap ahead; anything lost is reported as "everything".
 * The hooks never allocate, lock or block.
 */
#ifndef RDMACH_CORE_MEMHOOKS_H
#define RDMACH_CORE_MEMHOOKS_H

#include <stddef.h>
#include <stdint.h>

/* A reader's position in the event log. */
struct rdmach_memhooks_cursor {
	uint64_t seq;		/* next event to read */
	uint64_t lost;		/* writers' lost-event count already seen */
};

/* Status bits of rdmach_memhooks_status(); 0 until a cache tracks malloc. */
enum {
	RDMACH_MEMHOOKS_TRACKING = 1 << 0,	/* rdmach_memhooks_track_malloc() ran */
	RDMACH_MEMHOOKS_GLIBC_FREE = 1 << 1,	/* glibc's free() hooked: mmapped
						 * and thread-heap blocks logged,
						 * M_TRIM_THRESHOLD=max */
	RDMACH_MEMHOOKS_FREE_HOOK = 1 << 2,	/* sanitizer allocator: every
						 * free() logged */
	RDMACH_MEMHOOKS_MALLOC_TUNED = 1 << 3,	/* free() not hooked: glibc set to
						 * M_MMAP_MAX=0, trim max */
	RDMACH_MEMHOOKS_FREE_UNSEEN = 1 << 4,	/* valgrind replaced free(): its
						 * releases are not seen */
};

/* Called for each released range [start, end); end may be UINTPTR_MAX with
 * start 0 ("everything": events were lost or malloc_trim ran). */
typedef void (*rdmach_memhooks_fn)(void *arg, uintptr_t start,
				   uintptr_t end);

/* Idempotent set-up (also run by a constructor at load time): resolve the
 * next definitions of the hooked calls, register the fork handler.  Changes
 * nothing about malloc.  Returns rdmach_memhooks_status(). */
int rdmach_memhooks_init(void);
int rdmach_memhooks_status(void);

/* Start tracking what free()/realloc() release (idempotent; the first call
 * chooses how, and for glibc's malloc sets M_TRIM_THRESHOLD=max for the
 * rest of the process).  A registration cache calls it before its first
 * registration, a ghost set (rcache_ghost.h) before its first ghost.
 * Returns rdmach_memhooks_status(). */
int rdmach_memhooks_track_malloc(void);

/* Start reading at the current end of the log. */
void rdmach_memhooks_cursor_init(struct rdmach_memhooks_cursor *cur);

/* Report every event since *cur to fn, advance *cur; returns the number
 * of calls made.  Events may be reported twice; never skipped. */
unsigned rdmach_memhooks_poll(struct rdmach_memhooks_cursor *cur,
			      rdmach_memhooks_fn fn, void *arg);

/* Log a release by hand (for memory released by means the hooks cannot
 * see, e.g. a raw system call, and for tests).  Signal-safe. */
void rdmach_memhooks_release(const void *addr, size_t len);

/* Number of fork() calls this process has seen as a child (0 in the
 * original process; each child starts with its parent's count + 1). */
unsigned long rdmach_memhooks_fork_count(void);

/* Total events logged since load (for tests and statistics). */
uint64_t rdmach_memhooks_events(void);

#endif /* RDMACH_CORE_MEMHOOKS_H */
