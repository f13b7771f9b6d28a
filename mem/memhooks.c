/*
 * memhooks.c - see memory being taken away from an address range, so that
 * the registration cache (proto/rcache.c) never hands out a registration
 * of memory that was released and then reused at the same address.
 *
 * Choice: symbol interposition of the public calls + glibc malloc tuning.
 *
 * 1. This file defines munmap, mremap, madvise, mmap/mmap64 (MAP_FIXED),
 *    brk, sbrk and malloc_trim.  Being linked into the executable (static
 *    librdmach.a) or loaded before libc (librdmach.so, libmpi.so), these
 *    definitions win the dynamic symbol lookup, so every call made through
 *    the PLT - by the application, MPI, libibverbs, jemalloc/tcmalloc -
 *    lands here.  Each hook calls the next definition (dlsym(RTLD_NEXT):
 *    libc, or a sanitizer's interceptor first) and, once the call
 *    succeeded, logs the range in a lock-free ring (see memhooks.h); it
 *    never allocates, locks or blocks, so it is safe in signal handlers and
 *    inside the allocator.  Caches drain the ring on their next operation
 *    and deregister there.
 * 2. glibc's own free()/realloc() call __munmap/__sbrk/__madvise inside
 *    libc, not through the PLT, so no interposition sees them.  At load
 *    time we therefore set mallopt(M_MMAP_MAX, 0) (no mmap'd chunks: large
 *    blocks come from the heap and are never unmapped by free) and
 *    mallopt(M_TRIM_THRESHOLD, max) (the heap top is never given back by
 *    sbrk(-n) or madvise): memory free() releases stays mapped with its
 *    pages, so a registration of it stays valid when malloc reuses it -
 *    a cache hit on it is correct.  This is what MVAPICH2 and Open MPI's
 *    ptmalloc hooks did.  Cost: freed heap memory is kept by the process.
 *    RDMACH_RCACHE_MALLOPT=0 (or RDMACH_RCACHE=0) leaves malloc alone.
 *
 * Why not userfaultfd: UFFD_EVENT_UNMAP/REMOVE need the ranges registered
 * in missing-fault mode (we would have to serve page faults) and a monitor
 * thread, and the unmapping thread waits for it.  Why not binary patching
 * of libc (UCX "bistro"): architecture-specific code rewriting.
 *
 * Limits (documented for users):
 * - allocations made by a constructor that ran before ours, with glibc
 *   mmap'd chunks, are unmapped by free() unseen;
 * - threads' malloc arenas (not the main heap) free a whole 64 MB
 *   sub-heap by an internal munmap when it becomes empty; malloc_trim()
 *   called by the application is caught (logged as "everything");
 * - raw syscall(SYS_munmap, ...), shmdt(), dlclose() and io_uring
 *   unmaps are not seen (rdmach_memhooks_release() can report them);
 * - an allocator that issues raw system calls itself is not seen by the
 *   hooks: the sanitizers' allocators (ASan unmaps large blocks with a raw
 *   munmap).  When one is present (ASan, TSan, LSan) we install its free
 *   hook (__sanitizer_install_malloc_and_free_hooks) instead of mallopt
 *   and log every freed block:
 *   conservative (a freed and reused buffer always misses) but correct.
 *   Any other allocator is tracked only through the calls it makes via
 *   the C library (jemalloc and tcmalloc do); rdmach_memhooks_status().
 * - static linking: a shared library's calls reach the executable's
 *   hooks only if the symbols are exported (link with -rdynamic); the
 *   application's own calls are always caught.
 * fork(): the ring is process-private memory, so a child's unmaps never
 * disturb the parent's caches; the child sees rdmach_memhooks_fork_count()
 * change and its caches refuse to touch the parent's registrations.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/knob.h"
#include "core/log.h"
#include "memhooks.h"

/* The hooks may run inside a sanitizer's own start-up (its symboliser
 * calls mmap through the PLT) before that sanitizer is ready. */
#if defined(__SANITIZE_THREAD__)
#define MH_NOSAN __attribute__((no_sanitize("thread")))
#else
#define MH_NOSAN
#endif
/* The interposers are exported (the library is built -fvisibility=hidden). */
#define MH_HOOK MH_NOSAN __attribute__((visibility("default")))

#define MH_RING_SIZE 4096u	/* events a reader may fall behind */
#define MH_RING_MASK (MH_RING_SIZE - 1)

/* Stamp 2*seq+1: being written; 2*seq+2: published. 0: never used. */
struct mh_slot {
	_Atomic uint64_t stamp;
	_Atomic uintptr_t start;
	_Atomic uintptr_t end;
};

static struct mh_slot mh_ring[MH_RING_SIZE];
static _Atomic uint64_t mh_head;
static _Atomic uint64_t mh_lost;
static _Atomic unsigned long mh_forks;
static _Atomic int mh_status;
static _Atomic int mh_initialized;

typedef void *(*mh_mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*mh_munmap_fn)(void *, size_t);
typedef void *(*mh_mremap_fn)(void *, size_t, size_t, int, ...);
typedef int (*mh_madvise_fn)(void *, size_t, int);
typedef int (*mh_brk_fn)(void *);
typedef void *(*mh_sbrk_fn)(intptr_t);
typedef int (*mh_malloc_trim_fn)(size_t);

/* Next definitions; NULL until resolved (then raw system calls are used
 * where possible, e.g. a hook called by an earlier constructor). */
static mh_mmap_fn mh_next_mmap;
static mh_munmap_fn mh_next_munmap;
static mh_mremap_fn mh_next_mremap;
static mh_madvise_fn mh_next_madvise;
static mh_brk_fn mh_next_brk;
static mh_sbrk_fn mh_next_sbrk;
static mh_malloc_trim_fn mh_next_malloc_trim;

/* ---- the event ring ---------------------------------------------------- */

MH_NOSAN static void mh_log_range(uintptr_t start, uintptr_t end)
{
	uint64_t seq = atomic_fetch_add_explicit(&mh_head, 1,
						 memory_order_relaxed);
	struct mh_slot *s = &mh_ring[seq & MH_RING_MASK];
	uint64_t busy = 2 * seq + 1, old;

	old = atomic_load_explicit(&s->stamp, memory_order_relaxed);
	do {
		if (old >= busy)	/* a writer one lap ahead owns it */
			goto lost;
	} while (!atomic_compare_exchange_weak_explicit(&s->stamp, &old, busy,
							memory_order_acquire,
							memory_order_relaxed));
	atomic_store_explicit(&s->start, start, memory_order_relaxed);
	atomic_store_explicit(&s->end, end, memory_order_relaxed);
	if (atomic_compare_exchange_strong_explicit(&s->stamp, &busy, busy + 1,
						    memory_order_release,
						    memory_order_relaxed))
		return;
lost:
	atomic_fetch_add_explicit(&mh_lost, 1, memory_order_release);
}

MH_NOSAN void rdmach_memhooks_release(const void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr;
	uintptr_t end = start + len;

	if (!len)
		return;
	if (end < start)
		end = UINTPTR_MAX;
	mh_log_range(start, end);
}

void rdmach_memhooks_cursor_init(struct rdmach_memhooks_cursor *cur)
{
	cur->lost = atomic_load_explicit(&mh_lost, memory_order_acquire);
	cur->seq = atomic_load_explicit(&mh_head, memory_order_acquire);
}

/* Read slot seq: 1 published (range set), 0 not yet, -1 overwritten. */
static int mh_read_slot(uint64_t seq, uintptr_t *start, uintptr_t *end)
{
	const struct mh_slot *s = &mh_ring[seq & MH_RING_MASK];
	uint64_t want = 2 * seq + 2, st;

	st = atomic_load_explicit(&s->stamp, memory_order_acquire);
	if (st < want)
		return 0;
	if (st > want)
		return -1;
	*start = atomic_load_explicit(&s->start, memory_order_relaxed);
	*end = atomic_load_explicit(&s->end, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&s->stamp, memory_order_relaxed) != want)
		return -1;
	return 1;
}

unsigned rdmach_memhooks_poll(struct rdmach_memhooks_cursor *cur,
			      rdmach_memhooks_fn fn, void *arg)
{
	uint64_t lost = atomic_load_explicit(&mh_lost, memory_order_acquire);
	uint64_t head = atomic_load_explicit(&mh_head, memory_order_acquire);
	uint64_t seq, next_unread;
	uintptr_t start, end;
	unsigned calls = 0;
	int everything = 0;

	if (lost != cur->lost)
		everything = 1;
	seq = cur->seq;
	if (head - seq > MH_RING_SIZE) {
		everything = 1;
		seq = head - MH_RING_SIZE;
	}
	/* Slots claimed but not yet published stay unread (the cursor stops
	 * at the first one) but later published slots are reported now:
	 * their system calls have returned. */
	next_unread = head;
	for (; seq < head; seq++) {
		int r = mh_read_slot(seq, &start, &end);

		if (r > 0 && !everything) {
			fn(arg, start, end);
			calls++;
		} else if (r == 0 && next_unread == head) {
			next_unread = seq;
		} else if (r < 0) {
			everything = 1;
		}
	}
	if (everything) {
		fn(arg, 0, UINTPTR_MAX);
		calls++;
	}
	cur->lost = lost;
	cur->seq = next_unread;
	return calls;
}

uint64_t rdmach_memhooks_events(void)
{
	return atomic_load_explicit(&mh_head, memory_order_relaxed);
}

unsigned long rdmach_memhooks_fork_count(void)
{
	return atomic_load_explicit(&mh_forks, memory_order_relaxed);
}

int rdmach_memhooks_status(void)
{
	return atomic_load_explicit(&mh_status, memory_order_relaxed);
}

/* ---- set-up ------------------------------------------------------------ */

static void mh_atfork_child(void)
{
	atomic_fetch_add_explicit(&mh_forks, 1, memory_order_relaxed);
}

static int mh_knob_on(const char *name)
{
	const struct rdmach_knob *k = rdmach_knob_find(name);
	uint64_t v = 1;

	if (k && rdmach_knob_u64(k, &v))
		v = 1;	/* bad value: reported, keep the safe default */
	return v != 0;
}

/* Sanitizer allocators (ASan, LSan, ...) release memory by raw system
 * calls; their free hook lets us log every freed block instead. */
extern int __sanitizer_install_malloc_and_free_hooks(
	void (*malloc_hook)(const volatile void *, size_t),
	void (*free_hook)(const volatile void *)) __attribute__((weak));
extern size_t __sanitizer_get_allocated_size(const volatile void *p)
	__attribute__((weak));

static void mh_san_malloc_hook(const volatile void *p, size_t len)
{
}

static void mh_san_free_hook(const volatile void *p)
{
	/* Called before the block is released: its size is still known. */
	if (p)
		rdmach_memhooks_release((const void *)p,
					__sanitizer_get_allocated_size(p));
}

static int mh_tune_malloc(void)
{
	if (!mh_knob_on("RDMACH_RCACHE") || !mh_knob_on("RDMACH_RCACHE_MALLOPT"))
		return RDMACH_MEMHOOKS_MALLOPT_OFF;
	/* A sanitizer allocator (ASan, TSan, LSan: they define
	 * __sanitizer_get_allocated_size; UBSan alone does not) replaces
	 * malloc, and TSan even lets glibc's mallopt succeed uselessly. */
	if (__sanitizer_install_malloc_and_free_hooks &&
	    __sanitizer_get_allocated_size &&
	    __sanitizer_install_malloc_and_free_hooks(mh_san_malloc_hook,
						      mh_san_free_hook)) {
		rdmach_debug("memhooks: sanitizer allocator: every free() "
			     "invalidates the registrations it overlaps");
		return RDMACH_MEMHOOKS_FREE_HOOK;
	}
	/* glibc returns 1 on success; other allocators return 0. */
	if (mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, -1) == 1)
		return RDMACH_MEMHOOKS_MALLOC_TUNED;
	rdmach_debug("memhooks: mallopt refused (malloc is not glibc's): "
		     "memory the allocator releases by raw system calls is "
		     "not tracked");
	return 0;
}

static void mh_resolve(void)
{
	mh_next_mmap = (mh_mmap_fn)dlsym(RTLD_NEXT, "mmap");
	mh_next_munmap = (mh_munmap_fn)dlsym(RTLD_NEXT, "munmap");
	mh_next_mremap = (mh_mremap_fn)dlsym(RTLD_NEXT, "mremap");
	mh_next_madvise = (mh_madvise_fn)dlsym(RTLD_NEXT, "madvise");
	mh_next_brk = (mh_brk_fn)dlsym(RTLD_NEXT, "brk");
	mh_next_sbrk = (mh_sbrk_fn)dlsym(RTLD_NEXT, "sbrk");
	mh_next_malloc_trim =
		(mh_malloc_trim_fn)dlsym(RTLD_NEXT, "malloc_trim");
}

int rdmach_memhooks_init(void)
{
	int expected = 0;

	if (atomic_compare_exchange_strong(&mh_initialized, &expected, 1)) {
		mh_resolve();
		atomic_store(&mh_status, mh_tune_malloc());
		pthread_atfork(NULL, NULL, mh_atfork_child);
	}
	return rdmach_memhooks_status();
}

__attribute__((constructor)) static void mh_constructor(void)
{
	rdmach_memhooks_init();
}

/* ---- the hooks --------------------------------------------------------- */

MH_HOOK void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p;

	if (mh_next_mmap)
		p = mh_next_mmap(addr, len, prot, flags, fd, off);
	else
		p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	/* MAP_FIXED replaces whatever was mapped there. */
	if (p != MAP_FAILED && (flags & MAP_FIXED))
		rdmach_memhooks_release(p, len);
	return p;
}

MH_HOOK void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
		     off_t off) __attribute__((alias("mmap")));

MH_HOOK int munmap(void *addr, size_t len)
{
	int ret;

	if (mh_next_munmap)
		ret = mh_next_munmap(addr, len);
	else
		ret = (int)syscall(SYS_munmap, addr, len);
	if (!ret)
		rdmach_memhooks_release(addr, len);
	return ret;
}

MH_HOOK void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;
	void *p;
	va_list ap;

	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) {
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	if (mh_next_mremap)
		p = mh_next_mremap(old, old_len, new_len, flags, new_addr);
	else
		p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags,
				    new_addr);
	if (p != MAP_FAILED) {
		/* The old pages moved (or the tail went away); a fixed
		 * target replaced what was mapped there. */
		rdmach_memhooks_release(old, old_len);
		rdmach_memhooks_release(p, new_len);
	}
	return p;
}

/* Advice after which the range reads back different pages. */
MH_NOSAN static int mh_advice_releases(int advice)
{
	switch (advice) {
	case MADV_DONTNEED:
	case MADV_FREE:
	case MADV_REMOVE:
#ifdef MADV_DONTNEED_LOCKED
	case MADV_DONTNEED_LOCKED:
#else
	case 24:
#endif
		return 1;
	default:
		return 0;
	}
}

MH_HOOK int madvise(void *addr, size_t len, int advice)
{
	int ret;

	if (mh_next_madvise)
		ret = mh_next_madvise(addr, len, advice);
	else
		ret = (int)syscall(SYS_madvise, addr, len, advice);
	if (!ret && mh_advice_releases(advice))
		rdmach_memhooks_release(addr, len);
	return ret;
}

MH_NOSAN static void mh_resolve_lazily(void)
{
	if (!mh_next_sbrk || !mh_next_brk || !mh_next_malloc_trim)
		mh_resolve();
}

MH_HOOK int brk(void *addr)
{
	uintptr_t old;
	int ret;

	mh_resolve_lazily();
	if (!mh_next_sbrk || !mh_next_brk) {
		errno = ENOSYS;
		return -1;
	}
	old = (uintptr_t)mh_next_sbrk(0);
	ret = mh_next_brk(addr);
	if (!ret && (uintptr_t)addr < old)
		rdmach_memhooks_release(addr, old - (uintptr_t)addr);
	return ret;
}

MH_HOOK void *sbrk(intptr_t incr)
{
	void *old;

	mh_resolve_lazily();
	if (!mh_next_sbrk) {
		errno = ENOSYS;
		return (void *)-1;
	}
	old = mh_next_sbrk(incr);
	if (old != (void *)-1 && incr < 0)
		rdmach_memhooks_release((char *)old + incr, (size_t)-incr);
	return old;
}

MH_HOOK int malloc_trim(size_t pad)
{
	int ret;

	mh_resolve_lazily();
	ret = mh_next_malloc_trim ? mh_next_malloc_trim(pad) : 0;
	/* glibc madvises free pages anywhere in its arenas. */
	if (ret)
		mh_log_range(0, UINTPTR_MAX);
	return ret;
}
