/*
 * pkt.h - the packet vocabulary shared by every transport's ring: packet
 * types and the layout of the control packets.  How a packet's header is
 * laid out in a ring (flag words, sequence numbers, length bits) stays
 * with each ring (proto/ring.h for rdma_ib, rdma_shm/shm_ring.h); what a
 * type means, and what a control payload holds, is here.
 */
#ifndef RDMACH_PROTO_PKT_H
#define RDMACH_PROTO_PKT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Packet types (every ring header has at least 4 bits for them; 0 is
 * never used, so a zeroed header never matches). */
enum rdmach_pkt_type {
	RDMACH_PKT_DATA = 1,	/* payload: bytes of the pipe */
	RDMACH_PKT_RNDV = 2,	/* payload: struct rdmach_rndv_hdr */
	RDMACH_PKT_PAD = 3,	/* fills the ring's end; no payload */
	/* rdma_ib only (proto/ring.c accepts it, rdma_shm's rings refuse
	 * it): the next bytes of the stream come through the superpipeline's
	 * landing buffers; payload: struct rdmach_spipe_hdr (below). */
	RDMACH_PKT_SPIPE = 4,
	/* the last type proto/ring.c (rdma_ib's rings) accepts */
	RDMACH_PKT_TYPE_MAX = RDMACH_PKT_SPIPE,
	/* rdma_shm only (its rings accept it, rdma_ib's refuse it): the next
	 * bytes of the stream come through the copy area (shm_ring.h). */
	RDMACH_PKT_PIPE = 5,
	/* rdma_shm only, never in a ring: the writer's first word to a
	 * reader (shm_ring.h, `hello`); no payload. */
	RDMACH_PKT_HELLO = 6,
};

/*
 * Rendezvous control packet, shared by every zero-copy path (rdma_shm:
 * cross-memory read; rdma_ib: RDMA read).
 *
 * The sender of a large put describes its source buffers in one control
 * packet that travels through the ring in FIFO order with the data
 * packets.  The receiver pulls the bytes straight into the caller's iovec
 * (possibly over several gets) and, once it has read all `total` bytes,
 * acknowledges `id`; only then does the sender's put report the bytes as
 * taken.  The packet is transport-neutral: `key` is the remote key of the
 * segment for RDMA (rkey) and 0 for shared memory.
 *
 * At most this many source pieces per control packet; a put with more
 * pieces covers only the first ones and the caller retries the rest.
 */
#define RDMACH_RNDV_MAX_SEGS 64

struct rdmach_rndv_seg {
	uint64_t addr;		/* sender's virtual address */
	uint64_t len;		/* bytes, > 0 */
	uint64_t key;		/* rkey (IB) or 0 (shm) */
};

struct rdmach_rndv_hdr {
	uint64_t id;		/* per-connection, increasing from 1 */
	uint64_t total;		/* sum of seg[].len */
	uint32_t nsegs;		/* 1..RDMACH_RNDV_MAX_SEGS */
	uint32_t flags;		/* reserved, 0 */
	struct rdmach_rndv_seg seg[];
};

/* Bytes of a control packet describing nsegs pieces. */
static inline size_t rdmach_rndv_size(uint32_t nsegs)
{
	return sizeof(struct rdmach_rndv_hdr) +
	       (size_t)nsegs * sizeof(struct rdmach_rndv_seg);
}

/* Bytes a control packet of len payload bytes announces; 0 if short. */
static inline uint64_t rdmach_rndv_total(const void *payload, uint32_t len)
{
	const struct rdmach_rndv_hdr *r = payload;

	return len >= sizeof(*r) ? r->total : 0;
}

/*
 * A header before a rendezvous (every transport): a first piece of at most
 * RDMACH_RNDV_HEAD_MAX bytes ahead of others (a CH3 header before its
 * payload) goes through the ring as a data packet just before the control
 * packet for the rest, and a get that has delivered something stops at a
 * control packet it cannot take whole (rdmach_rndv_total above the room
 * left): the reader's get into the header's small buffer returns the
 * header alone and the payload's get reads the payload in one pass,
 * instead of the header-sized get reading into the payload on its own.
 */
#define RDMACH_RNDV_HEAD_MAX 256

/* Bytes of iov's first piece that go ahead as data (0: none). */
static inline size_t rdmach_rndv_head_len(const struct iovec *iov,
					  int iovcnt)
{
	return iovcnt > 1 && iov[0].iov_len <= RDMACH_RNDV_HEAD_MAX ?
	       iov[0].iov_len : 0;
}

/* Pieces after a head (rdmach_rndv_head_len) that a control packet
 * covers: at most RDMACH_RNDV_MAX_SEGS with the head (empty ones
 * included), so that a waiting put's record of them holds them all. */
static inline int rdmach_rndv_pieces(int iovcnt, size_t head)
{
	int max = RDMACH_RNDV_MAX_SEGS - !!head;

	iovcnt -= !!head;
	return iovcnt < max ? iovcnt : max;
}

/*
 * Superpipeline control packet (rdma_ib, proto/spipe.h).  It travels in
 * the ring in FIFO order with the data packets and says: the next `total`
 * bytes of the stream come through the landing buffers, in chunks
 * first_chunk, first_chunk + 1, ... laid out as the fields below say.
 * The receiver follows the sender's geometry, so peers with different
 * knobs interoperate; the landing area, once allocated for a connection,
 * keeps its geometry (a packet that changes it is a protocol error).
 * c0 and q256 describe the sender's schedule (diagnostics: every block
 * carries its own length).
 */
struct rdmach_spipe_hdr {
	uint64_t id;		/* per connection, increasing from 1 */
	uint64_t total;		/* bytes of the stream carried, > 0 */
	uint64_t first_chunk;	/* connection-wide number of its first chunk */
	uint64_t buf_size;	/* bytes per landing buffer */
	uint64_t c0;		/* payload bytes of the first chunk (target) */
	uint32_t block;		/* bytes per block, payload + 16 */
	uint32_t nbufs;		/* landing buffers */
	uint32_t q256;		/* chunk growth factor x 256 */
	uint32_t flags;		/* reserved, 0 */
};

#endif /* RDMACH_PROTO_PKT_H */
