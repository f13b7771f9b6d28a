/*
 * shm_peer.h - the only way rdma_shm loads from memory another process
 * can write (prefix shm_peer_): a peer's segment, and the parts of this
 * process's own segment its writers share (rings, control blocks, copy
 * areas, the header).  Such memory is input, and it can change between
 * two loads, so:
 *  - every field is loaded once, through one of these accessors, into
 *    private memory (a local, struct shm_conn, struct shm_seg), checked
 *    there and used only from there; a descriptor (a segment header, a
 *    rendezvous or copy-area packet) is copied whole with shm_peer_snap
 *    and checked in the copy;
 *  - a poll (a header or a flag awaited) may load the same word again
 *    while it finds nothing (shm_peer_miss); once it finds something,
 *    that value is kept and the word is not loaded again for the same
 *    packet;
 *  - a probe (shm_peer_probe*: a close flag, a count compared for a
 *    change) is a word every value of which is harmless, tested and
 *    dropped: it may be loaded again.
 * The ring payload itself (bytes of the stream) is copied, not loaded as
 * fields: a peer that changes it changes only its own message.
 *
 * In the normal build each accessor is a plain or acquire load, inline:
 * the data path costs what it did.  In the fuzz build (-DRDMACH_FUZZ,
 * test/fuzz/) each load calls the harness, which returns fresh fuzzer
 * bytes and fails when one packet loads a field twice (shm_peer_epoch
 * marks the packet boundaries, shm_peer_miss an empty poll).
 */
#ifndef RDMACH_SHM_PEER_H
#define RDMACH_SHM_PEER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef RDMACH_FUZZ
/* test/fuzz/shm_fuzz.c: fill out with n bytes "loaded" from p. */
void shm_peer_fuzz_load(const volatile void *p, void *out, size_t n);
/* the load of p found nothing (an empty poll): it may come again */
void shm_peer_fuzz_miss(const volatile void *p);
/* a packet was consumed: its fields may be loaded afresh */
void shm_peer_fuzz_epoch(void);

static inline uint64_t shm_peer_load64(const volatile void *p)
{
	uint64_t v;

	shm_peer_fuzz_load(p, &v, sizeof(v));
	return v;
}

static inline uint32_t shm_peer_load32(const volatile void *p)
{
	uint32_t v;

	shm_peer_fuzz_load(p, &v, sizeof(v));
	return v;
}

#define shm_peer_load64_acq shm_peer_load64
#define shm_peer_load32_acq shm_peer_load32

static inline void shm_peer_snap(void *dst, const volatile void *src,
				 size_t n)
{
	shm_peer_fuzz_load(src, dst, n);
}

static inline void shm_peer_miss(const volatile void *p)
{
	shm_peer_fuzz_miss(p);
}

static inline void shm_peer_epoch(void)
{
	shm_peer_fuzz_epoch();
}
#else
static inline uint64_t shm_peer_load64(const volatile void *p)
{
	return atomic_load_explicit((const _Atomic uint64_t *)(uintptr_t)p,
				    memory_order_relaxed);
}

static inline uint32_t shm_peer_load32(const volatile void *p)
{
	return atomic_load_explicit((const _Atomic uint32_t *)(uintptr_t)p,
				    memory_order_relaxed);
}

/* ACQUIRE: what the peer wrote before it stored this word is visible. */
static inline uint64_t shm_peer_load64_acq(const volatile void *p)
{
	return atomic_load_explicit((const _Atomic uint64_t *)(uintptr_t)p,
				    memory_order_acquire);
}

static inline uint32_t shm_peer_load32_acq(const volatile void *p)
{
	return atomic_load_explicit((const _Atomic uint32_t *)(uintptr_t)p,
				    memory_order_acquire);
}

/* A descriptor into private memory, to be checked and used there (after
 * an acquire load of the word that published it). */
static inline void shm_peer_snap(void *dst, const volatile void *src,
				 size_t n)
{
	memcpy(dst, (const void *)(uintptr_t)src, n);
}

static inline void shm_peer_miss(const volatile void *p)
{
	(void)p;
}

static inline void shm_peer_epoch(void)
{
}
#endif

/* Probes (ACQUIRE): see above. */
static inline uint64_t shm_peer_probe64(const volatile void *p)
{
	uint64_t v = shm_peer_load64_acq(p);

	shm_peer_miss(p);
	return v;
}

static inline uint32_t shm_peer_probe32(const volatile void *p)
{
	uint32_t v = shm_peer_load32_acq(p);

	shm_peer_miss(p);
	return v;
}

#endif /* RDMACH_SHM_PEER_H */
