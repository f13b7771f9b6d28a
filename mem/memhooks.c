/*
 * memhooks.c - see memory being taken away from an address range, so that
 * the registration cache (mem/rcache.c) never hands out a registration of
 * memory that was released and then reused at the same address.
 *
 * Choice: symbol interposition of the public calls, free() and realloc()
 * included; nothing about malloc changes until a cache registers memory.
 *
 * 1. This file defines munmap, mremap, madvise, mmap/mmap64 (MAP_FIXED),
 *    brk, sbrk, malloc_trim, free and realloc.  Being linked into the
 *    executable (static librdmach.a) or loaded before libc (librdmach.so,
 *    libmpi.so), these definitions win the dynamic symbol lookup, so every
 *    call made through the PLT - by the application, MPI, libibverbs,
 *    jemalloc/tcmalloc, libc's own calls of free/realloc - lands here.
 *    Each hook calls the next definition (dlsym(RTLD_NEXT): libc, or a
 *    sanitizer's interceptor first) and logs the released range in a
 *    lock-free ring (see memhooks.h) BEFORE making the call: the range is
 *    known in advance, and no other thread can be handed new memory at
 *    that address before the event is visible (a call that then fails
 *    leaves a harmless extra invalidation).  A hook never allocates, locks
 *    or blocks, so it is safe in signal handlers and inside the allocator.
 *    Caches drain the ring on their next operation and deregister there.
 * 2. glibc's free() releases memory by calls inside libc (__munmap,
 *    __sbrk, __madvise) that no interposition sees.  The free/realloc
 *    hooks only forward (one predictable branch) until a registration
 *    cache makes its first registration and calls
 *    rdmach_memhooks_track_malloc(); processes without one (shm only, no
 *    device, builds without ib, RDMACH_RCACHE=0) keep glibc's policy
 *    untouched.  From then on, if the next free is glibc's own, the hook
 *    reads the freed chunk's header (malloc/malloc.c: size word before the
 *    pointer, flag bits IS_MMAPPED 0x2, NON_MAIN_ARENA 0x4):
 *    - an mmapped chunk: its mapping [chunk - prev_size, chunk + size) is
 *      logged (free unmaps it; realloc mremaps it);
 *    - a thread-arena chunk in a heap that is not its arena's first
 *      (heap_info->prev != NULL at the 64 MiB-aligned heap start): the
 *      chunk is logged, because glibc deletes such a heap (an internal
 *      munmap) once it is all free, whatever the trim threshold; every
 *      page a deletion releases was free, so the chunks of any registered
 *      buffer on it were logged when freed;
 *    - a main-arena chunk, or one in an arena's first heap: nothing, and
 *      free+malloc of it keeps its pages (a cache hit on it is correct),
 *      because tracking also sets mallopt(M_TRIM_THRESHOLD, max): glibc
 *      then never gives the heap top back (systrim: internal sbrk) nor
 *      shrinks a thread heap (shrink_heap: internal madvise/mmap).
 *    Why the trim threshold rather than comparing the break around each
 *    free(): another thread's malloc can grow the break again, by the same
 *    amount, between glibc's trim and the freeing thread's second reading,
 *    and glibc frees a thread's tcache at thread exit by internal calls no
 *    hook brackets.  Side effect: glibc's dynamic mmap threshold is frozen
 *    where it stands (128 KiB unless frees raised it): larger blocks stay
 *    mmapped and go back to the system at free().
 *    Other allocators: a sanitizer's (ASan, TSan, LSan unmap by raw system
 *    calls) gets its free hook (__sanitizer_install_malloc_and_free_hooks)
 *    and every freed block is logged: conservative, a freed and reused
 *    buffer always misses.  A malloc-replacing valgrind tool redirects
 *    every definition of free, ours included, to its own allocator, which
 *    unmaps by its own system calls: nothing is seen, and the caches keep
 *    no registrations (RDMACH_MEMHOOKS_FREE_UNSEEN).  When glibc's free is
 *    not the next definition or ours is not the one the process calls
 *    (jemalloc/tcmalloc in front, a wrapper, a library loaded with
 *    dlopen), the allocator's own munmap/madvise calls go through the
 *    hooks, and glibc's malloc - in case something still reaches it - is
 *    tuned the way registration caches commonly do it: M_MMAP_MAX=0 and
 *    M_TRIM_THRESHOLD=max (it never unmaps or trims).
 *
 * Why not userfaultfd: UFFD_EVENT_UNMAP/REMOVE need the ranges registered
 * in missing-fault mode (we would have to serve page faults) and a monitor
 * thread, and the unmapping thread waits for it.  Why not binary patching
 * of libc (UCX "bistro"): architecture-specific code rewriting.
 *
 * Limits (documented for users):
 * - raw syscall(SYS_munmap, ...), shmdt(), dlclose() and io_uring
 *   unmaps are not seen (rdmach_memhooks_release() can report them);
 *   malloc_trim() is caught and logged as "everything";
 * - an application that sets M_TRIM_THRESHOLD itself after the first
 *   registration re-enables glibc's unseen heap trimming;
 * - glibc.malloc.hugetlb=2 (GLIBC_TUNABLES) changes the thread-heap size:
 *   every thread-arena free is then logged;
 * - static linking: a shared library's calls reach the executable's
 *   hooks only if the symbols are exported (link with -rdynamic); the
 *   application's own calls are always caught.  In a fully static
 *   program (libc.a) glibc's free wins over the (weak) hook: tracking then
 *   tunes glibc as in the fallback above;
 * - librdmach loaded by dlopen() is behind libc in the lookup order: its
 *   hooks are not called (reported when tracking starts).
 * fork(): the ring is process-private memory, so a child's unmaps never
 * disturb the parent's caches; the child sees rdmach_memhooks_fork_count()
 * change and its caches refuse to touch the parent's registrations.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
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
typedef void (*mh_free_fn)(void *);
typedef void *(*mh_realloc_fn)(void *, size_t);

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
	 * at the first one) but later published slots are reported now. */
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

/* ---- free() and realloc() ---------------------------------------------- */

/* glibc's chunk header (malloc/malloc.c, the same since glibc 2.0): the
 * word before the pointer holds the chunk size and flag bits, the word
 * before that, for an mmapped chunk, the gap from the mapping's start. */
#define MH_SZ sizeof(size_t)
#define MH_IS_MMAPPED ((size_t)0x2)
#define MH_NON_MAIN_ARENA ((size_t)0x4)
#define MH_SIZE_BITS ((size_t)0x7)

/* At the start of each thread-arena heap (malloc/arena.c heap_info). */
struct mh_heap_info {
	void *ar_ptr;
	struct mh_heap_info *prev;	/* NULL in an arena's first heap */
};

static _Atomic int mh_track_glibc;	/* free()/realloc() read headers */
/* Alignment (= maximum size) of glibc's thread-arena heaps; 0: unknown. */
static uintptr_t mh_heap_max;

static void mh_free_bootstrap(void *p);
static void *mh_realloc_bootstrap(void *p, size_t len);
static _Atomic(mh_free_fn) mh_next_free = mh_free_bootstrap;
static _Atomic(mh_realloc_fn) mh_next_realloc = mh_realloc_bootstrap;
static _Atomic int mh_resolving;

/* dlsym(RTLD_NEXT, name), or NULL when called from inside that dlsym
 * (its error path frees) or while another thread resolves. */
MH_NOSAN static void *mh_dlsym_next(const char *name)
{
	void *f;

	if (atomic_exchange(&mh_resolving, 1))
		return NULL;
	f = dlsym(RTLD_NEXT, name);
	atomic_store(&mh_resolving, 0);
	return f;
}

/* A free before the next definition is known: resolve it; a call from
 * inside the resolution leaks its block (always safe, unlike guessing
 * which allocator owns it). */
MH_NOSAN static void mh_free_bootstrap(void *p)
{
	mh_free_fn f = (mh_free_fn)mh_dlsym_next("free");

	if (!f)
		return;
	atomic_store_explicit(&mh_next_free, f, memory_order_relaxed);
	f(p);
}

extern void *__libc_realloc(void *p, size_t len) __attribute__((weak));

MH_NOSAN static void *mh_realloc_bootstrap(void *p, size_t len)
{
	mh_realloc_fn f = (mh_realloc_fn)mh_dlsym_next("realloc");

	if (f) {
		atomic_store_explicit(&mh_next_realloc, f,
				      memory_order_relaxed);
		return f(p, len);
	}
	if (__libc_realloc)
		return __libc_realloc(p, len);
	errno = ENOMEM;
	return NULL;
}

/* Log what glibc's free()/realloc() of p may release; p is not NULL. */
MH_NOSAN static void mh_log_chunk(const void *p)
{
	const size_t *hdr = p;
	uintptr_t chunk = (uintptr_t)p - 2 * MH_SZ;
	const struct mh_heap_info *heap;
	size_t head, size;

	head = hdr[-1];
	size = head & ~MH_SIZE_BITS;
	if (head & MH_IS_MMAPPED) {
		mh_log_range(chunk - hdr[-2], chunk + size);
	} else if (head & MH_NON_MAIN_ARENA) {
		heap = (const struct mh_heap_info *)(chunk & ~(mh_heap_max - 1));
		if (!mh_heap_max || heap->prev)
			mh_log_range(chunk, chunk + size);
	}
}

MH_NOSAN static void mh_free(void *p)
{
	if (__builtin_expect(atomic_load_explicit(&mh_track_glibc,
						  memory_order_relaxed), 0) && p)
		mh_log_chunk(p);
	atomic_load_explicit(&mh_next_free, memory_order_relaxed)(p);
}

MH_NOSAN static void *mh_realloc(void *p, size_t len)
{
	if (__builtin_expect(atomic_load_explicit(&mh_track_glibc,
						  memory_order_relaxed), 0) && p)
		mh_log_chunk(p);
	return atomic_load_explicit(&mh_next_realloc,
				    memory_order_relaxed)(p, len);
}

/* Exported names of the two above; their addresses are compared with what
 * the process resolves "free" to (reallocarray calls realloc via the PLT).
 * Weak: a fully static program links glibc's malloc.o, whose definitions
 * then win (and tracking falls back to tuning glibc); the dynamic linker
 * does not tell weak from strong, so ours still come first. */
MH_HOOK void free(void *p) __attribute__((weak, alias("mh_free")));
MH_HOOK void *realloc(void *p, size_t len)
	__attribute__((weak, alias("mh_realloc")));

/* ---- set-up ------------------------------------------------------------ */

static void mh_atfork_child(void)
{
	atomic_fetch_add_explicit(&mh_forks, 1, memory_order_relaxed);
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

/* A malloc-replacing valgrind tool (memcheck, helgrind, drd, massif, ...)
 * preloads vgpreload_<tool> and redirects every definition of free and
 * realloc, ours included, to its own; vgpreload_core replaces nothing. */
static int mh_valgrind_object(struct dl_phdr_info *info, size_t size,
			      void *arg)
{
	const char *s = info->dlpi_name ? strstr(info->dlpi_name,
						  "/vgpreload_") : NULL;

	return s && strncmp(s, "/vgpreload_core", 15) != 0;
}

/* glibc's HEAP_MAX_SIZE (malloc/arena.c); with glibc.malloc.hugetlb=2 or
 * a page size its heaps are 4 huge pages: unknown here. */
static uintptr_t mh_glibc_heap_max(void)
{
	const char *t = getenv("GLIBC_TUNABLES");
	const char *h = t ? strstr(t, "glibc.malloc.hugetlb=") : NULL;

	if (h) {
		h += strlen("glibc.malloc.hugetlb=");
		if (!((h[0] == '0' || h[0] == '1') &&
		      (h[1] == 0 || h[1] == ':')))
			return 0;
	}
	return (uintptr_t)2 * 4 * 1024 * 1024 * sizeof(long);
}

/* The address of libc's own definition of name, or NULL. */
static void *mh_libc_sym(const char *name)
{
	void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	void *f = libc ? dlsym(libc, name) : NULL;

	if (libc)
		dlclose(libc);
	return f;
}

static int mh_legacy_tuning(void)
{
	/* glibc returns 1 on success; other allocators' mallopt 0. */
	if (mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, -1) == 1)
		return RDMACH_MEMHOOKS_MALLOC_TUNED;
	return 0;
}

/* Choose how free() is tracked; returns the status bits. */
static int mh_start_tracking(void)
{
	void *libc_free = mh_libc_sym("free");
	void *libc_munmap = mh_libc_sym("munmap");
	mh_free_fn next;

	/* A sanitizer allocator (ASan, TSan, LSan: they define
	 * __sanitizer_get_allocated_size; UBSan alone does not). */
	if (__sanitizer_install_malloc_and_free_hooks &&
	    __sanitizer_get_allocated_size &&
	    __sanitizer_install_malloc_and_free_hooks(mh_san_malloc_hook,
						      mh_san_free_hook))
		return RDMACH_MEMHOOKS_FREE_HOOK;
	if (dl_iterate_phdr(mh_valgrind_object, NULL))
		return RDMACH_MEMHOOKS_FREE_UNSEEN;
	if (libc_munmap && dlsym(RTLD_DEFAULT, "munmap") == libc_munmap)
		rdmach_warn("memhooks: munmap() resolves to libc's, not to "
			    "rdmach's hook (librdmach loaded by dlopen?): "
			    "memory unmapped by the application is not seen, "
			    "and a registration of it may go stale");
	next = atomic_load(&mh_next_free);
	if (next == mh_free_bootstrap)
		next = (mh_free_fn)dlsym(RTLD_NEXT, "free");
	if (libc_free && (void *)next == libc_free &&
	    dlsym(RTLD_DEFAULT, "free") == (void *)mh_free &&
	    mallopt(M_TRIM_THRESHOLD, -1) == 1) {
		atomic_store(&mh_track_glibc, 1);
		return RDMACH_MEMHOOKS_GLIBC_FREE;
	}
	return mh_legacy_tuning();
}

int rdmach_memhooks_track_malloc(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static _Atomic int started;
	int st;

	if (atomic_load_explicit(&started, memory_order_acquire))
		return rdmach_memhooks_status();
	rdmach_memhooks_init();
	pthread_mutex_lock(&lock);
	if (!atomic_load(&started)) {
		st = RDMACH_MEMHOOKS_TRACKING | mh_start_tracking();
		atomic_store(&mh_status, st);
		atomic_store_explicit(&started, 1, memory_order_release);
		rdmach_debug("memhooks: free() tracking on: %s",
			     st & RDMACH_MEMHOOKS_GLIBC_FREE ?
			     "glibc malloc, heap trimming off" :
			     st & RDMACH_MEMHOOKS_FREE_HOOK ?
			     "every free() logged" :
			     st & RDMACH_MEMHOOKS_FREE_UNSEEN ?
			     "free() replaced by valgrind, not seen" :
			     st & RDMACH_MEMHOOKS_MALLOC_TUNED ?
			     "glibc malloc tuned (M_MMAP_MAX=0)" :
			     "another allocator");
	}
	pthread_mutex_unlock(&lock);
	return rdmach_memhooks_status();
}

static void mh_resolve(void)
{
	mh_free_fn f;
	mh_realloc_fn r;

	mh_next_mmap = (mh_mmap_fn)dlsym(RTLD_NEXT, "mmap");
	mh_next_munmap = (mh_munmap_fn)dlsym(RTLD_NEXT, "munmap");
	mh_next_mremap = (mh_mremap_fn)dlsym(RTLD_NEXT, "mremap");
	mh_next_madvise = (mh_madvise_fn)dlsym(RTLD_NEXT, "madvise");
	mh_next_brk = (mh_brk_fn)dlsym(RTLD_NEXT, "brk");
	mh_next_sbrk = (mh_sbrk_fn)dlsym(RTLD_NEXT, "sbrk");
	mh_next_malloc_trim =
		(mh_malloc_trim_fn)dlsym(RTLD_NEXT, "malloc_trim");
	f = (mh_free_fn)dlsym(RTLD_NEXT, "free");
	r = (mh_realloc_fn)dlsym(RTLD_NEXT, "realloc");
	if (f)
		atomic_store(&mh_next_free, f);
	if (r)
		atomic_store(&mh_next_realloc, r);
}

int rdmach_memhooks_init(void)
{
	int expected = 0;

	if (atomic_compare_exchange_strong(&mh_initialized, &expected, 1)) {
		mh_resolve();
		mh_heap_max = mh_glibc_heap_max();
		pthread_atfork(NULL, NULL, mh_atfork_child);
	}
	return rdmach_memhooks_status();
}

__attribute__((constructor)) static void mh_constructor(void)
{
	rdmach_memhooks_init();
}

/* ---- the other hooks --------------------------------------------------- */

MH_HOOK void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	/* MAP_FIXED replaces whatever was mapped there. */
	if (flags & MAP_FIXED)
		rdmach_memhooks_release(addr, len);
	if (mh_next_mmap)
		return mh_next_mmap(addr, len, prot, flags, fd, off);
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

MH_HOOK void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
		     off_t off) __attribute__((alias("mmap")));

MH_HOOK int munmap(void *addr, size_t len)
{
	rdmach_memhooks_release(addr, len);
	if (mh_next_munmap)
		return mh_next_munmap(addr, len);
	return (int)syscall(SYS_munmap, addr, len);
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
	/* The old pages move (or the tail goes away); a fixed target
	 * replaces what was mapped there. */
	rdmach_memhooks_release(old, old_len);
	if (flags & MREMAP_FIXED)
		rdmach_memhooks_release(new_addr, new_len);
	if (mh_next_mremap)
		p = mh_next_mremap(old, old_len, new_len, flags, new_addr);
	else
		p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags,
				    new_addr);
	if (p != MAP_FAILED && !(flags & MREMAP_FIXED))
		rdmach_memhooks_release(p, new_len);
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
	if (mh_advice_releases(advice))
		rdmach_memhooks_release(addr, len);
	if (mh_next_madvise)
		return mh_next_madvise(addr, len, advice);
	return (int)syscall(SYS_madvise, addr, len, advice);
}

MH_NOSAN static void mh_resolve_lazily(void)
{
	if (!mh_next_sbrk || !mh_next_brk || !mh_next_malloc_trim)
		mh_resolve();
}

MH_HOOK int brk(void *addr)
{
	uintptr_t old;

	mh_resolve_lazily();
	if (!mh_next_sbrk || !mh_next_brk) {
		errno = ENOSYS;
		return -1;
	}
	old = (uintptr_t)mh_next_sbrk(0);
	if ((uintptr_t)addr < old)
		rdmach_memhooks_release(addr, old - (uintptr_t)addr);
	return mh_next_brk(addr);
}

MH_HOOK void *sbrk(intptr_t incr)
{
	char *old;

	mh_resolve_lazily();
	if (!mh_next_sbrk) {
		errno = ENOSYS;
		return (void *)-1;
	}
	if (incr < 0) {
		old = mh_next_sbrk(0);
		if (old != (void *)-1)
			rdmach_memhooks_release(old + incr, (size_t)-incr);
	}
	return mh_next_sbrk(incr);
}

MH_HOOK int malloc_trim(size_t pad)
{
	mh_resolve_lazily();
	/* glibc madvises free pages anywhere in its arenas and unlocks each
	 * arena before we could log: another thread may malloc there. */
	mh_log_range(0, UINTPTR_MAX);
	return mh_next_malloc_trim ? mh_next_malloc_trim(pad) : 0;
}
