/*
 * ib_peer.h - the way rdma_ib loads from memory the peer RDMA-writes
 * (prefix ib_peer_): the ctrl words and the landing area's address here,
 * control packets copied out of the ring.  Such memory is input and can
 * change between two loads, so a word is loaded once per use, into a
 * local or our own state, checked there and used from there; a
 * descriptor is copied whole (ib_peer_snap) and checked in the copy.  The
 * ring's headers and the superpipeline's blocks are read by proto/ring.c
 * and proto/spipe.c (a layer below, which cannot include this), under the
 * same rule; README.md, "A peer's memory is input".
 *
 * Plain or acquire loads, inline: the data path costs what it did.  They
 * are proto/peer.h's, which the ring and superpipeline readers use too,
 * so that the fuzz build (-DRDMACH_FUZZ) counts every such load, these
 * included, per use (test/fuzz/peer_count.c: a word loaded twice in one
 * use fails the harness).  The ib harnesses drive proto/ring.c and
 * proto/spipe.c; rdma_ib's own units need libibverbs and no harness links
 * them.  At the bottom of the unit order: it uses no other unit.
 */
#ifndef RDMACH_IB_PEER_H
#define RDMACH_IB_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "proto/peer.h"

/* ACQUIRE: what the peer wrote before this word is visible after it. */
static inline uint64_t ib_peer_load64(const uint64_t *p)
{
	return proto_peer_load64_acq(p);
}

/* A word whose value is used only once all its bytes are there: the
 * writer sets IB_PEER_WHOLE, in the top byte, which an RDMA write places
 * last (a word polled for != 0 can be read while its bytes land: an
 * address or a bound read so is wrong).  Counters that only grow need
 * none: half-placed, they say less, never more. */
#define IB_PEER_WHOLE (1ull << 63)

/* w, loaded once: 1 and *v its value if it is whole, else 0. */
static inline int ib_peer_whole(uint64_t w, uint64_t *v)
{
	if (!(w & IB_PEER_WHOLE))
		return 0;
	*v = w & ~IB_PEER_WHOLE;
	return 1;
}

/* A descriptor into private memory, to be checked and used there. */
static inline void ib_peer_snap(void *dst, const void *src, size_t n)
{
	proto_peer_snap(dst, src, n);
}

#endif /* RDMACH_IB_PEER_H */
