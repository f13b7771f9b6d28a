/*
 * peer.h - loads from memory a peer writes, for the protocol code that
 * reads it (ring.c: ring headers; spipe.c: superpipeline blocks) and for
 * the transport above it (rdma_ib/ib_peer.h builds on these; prefix
 * proto_peer_).  Such memory is input and can change between two loads:
 * within one use (a peek at a packet, one take of blocks) each word is
 * loaded once, checked, and used from the value loaded; a later use loads
 * it afresh and checks it again.  A probe (a sequence number tested for
 * "anything there?" and dropped) may load a word any number of times.
 *
 * Plain or acquire loads, inline: the data path costs what it did.  In
 * the fuzz build (-DRDMACH_FUZZ) each load, not the probes, is reported
 * to the harness (test/fuzz/peer_count.c), which fails when one use loads
 * a word twice (a use: what the harness calls, cut where the reader says
 * a unit is done, proto_peer_epoch).
 */
#ifndef RDMACH_PROTO_PEER_H
#define RDMACH_PROTO_PEER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef RDMACH_FUZZ
/* n bytes at p were loaded: counted by the harness */
void proto_peer_fuzz_load(const void *p, size_t n);
/* see proto_peer_epoch */
void proto_peer_fuzz_epoch(void);
#else
static inline void proto_peer_fuzz_load(const void *p, size_t n)
{
	(void)p;
	(void)n;
}

static inline void proto_peer_fuzz_epoch(void)
{
}
#endif

/* What was loaded so far belongs to a unit now done (a superpipeline
 * chunk consumed): the next may lie at the same addresses (a buffer
 * folded over), and its words are loaded afresh. */
static inline void proto_peer_epoch(void)
{
	proto_peer_fuzz_epoch();
}

/* ACQUIRE: what the peer wrote before this word is visible after it. */
static inline uint64_t proto_peer_load64_acq(const void *p)
{
	proto_peer_fuzz_load(p, sizeof(uint64_t));
	return __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
}

/* A word ordered by an acquire load before it. */
static inline uint64_t proto_peer_load64(const void *p)
{
	uint64_t v;

	proto_peer_fuzz_load(p, sizeof(v));
	memcpy(&v, p, sizeof(v));
	return v;
}

/* A descriptor into private memory, to be checked and used there. */
static inline void proto_peer_snap(void *dst, const void *src, size_t n)
{
	proto_peer_fuzz_load(src, n);
	memcpy(dst, src, n);
}

/* A probe (ACQUIRE), not counted: its value is tested and dropped. */
static inline uint64_t proto_peer_probe64_acq(const void *p)
{
	return __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
}

#endif /* RDMACH_PROTO_PEER_H */
