/*
 * spipe.h - the superpipeline of rdma_ib (A. Denis, Euro-Par 2011) without
 * verbs: the chunk schedule, the block format, folding over N buffers and
 * the state of each side.  rdma_ib (ib_spipe.c) allocates and registers
 * the buffers and posts the RDMA writes; what goes where is decided here
 * and unit-tested over plain memory by test/test_spipe.c.
 *
 * Geometry (struct spipe_params; the control packet RDMACH_PKT_SPIPE of
 * proto/pkt.h carries it): N buffers of buf_size bytes on each side, the
 * sender's staging buffers and the receiver's landing buffers, each a run
 * of blocks of `block` bytes.  Chunk g (a connection-wide number, 1, 2,
 * ...) is built in staging buffer g mod N and copied by ONE RDMA write to
 * landing buffer g mod N, at the same offsets.  A chunk is whole blocks
 * from offset 0 of its buffer:
 *
 *   +0         payload  len bytes, 1 <= len <= block - 16, then filler
 *   +block-16  info     u64  len, | SPIPE_LAST on the chunk's last block
 *   +block-8   flag     u64  g
 *
 * A chunk's last block is written whole (filler after its payload), so the
 * words at block - 16 and block - 8 of every block only ever hold info and
 * flag words, never payload.
 *
 * Schedule: chunk i of a message carries C0 * q^i payload bytes rounded up
 * to whole blocks, at most a buffer, at most what is left of the message,
 * and at most what the caller's put offers (a put may offer less than the
 * message: its chunk is then shorter, which is why every block carries its
 * own length).  A message of L bytes thus has O(log L) chunks until the
 * growth meets the buffer size.  Chunks never span messages.
 *
 * Folding: chunk g overwrites buffer g mod N, last used by chunk g - N, so
 * it may be built only when (1) the receiver has acknowledged chunk g - N
 * (copied it out of its landing buffer) and (2) the local write of chunk
 * g - N has completed (staging reuse).  N = 3 (triple buffering): chunk g
 * is built while g - 1 is on the wire and g - 2 is being copied out.
 *
 * Memory-ordering contract
 * ------------------------
 * - The writer of a chunk (the adapter) places its bytes in increasing
 *   address order, each aligned u64 atomically (bottom fill: one RDMA write
 *   over one RC QP).  So a flag word equal to g means its block -- payload
 *   and info -- is there.  The receiver loads the flag with acquire
 *   semantics and reads info and payload only after it matched.
 * - Stale flags never match: flag positions hold 0 (the landing area is
 *   zeroed once, when allocated) or the number of an earlier chunk that
 *   used the same buffer, and chunk numbers only grow (64 bits: no wrap).
 *   Nothing is zeroed after use.
 * - Acknowledgements are cumulative and monotonic: the receiver sends the
 *   highest chunk it has copied out, after copying (the transport's post of
 *   the ack is the release point); the sender keeps the largest it saw.
 * The structures themselves are single-threaded (one side each).
 */
#ifndef RDMACH_PROTO_SPIPE_H
#define RDMACH_PROTO_SPIPE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "core/iov.h"
#include "pkt.h"

#define SPIPE_WORDS	16u		/* info + flag closing every block */
#define SPIPE_LAST	(1ull << 63)	/* info: the chunk ends with this block */
#define SPIPE_LEN_MASK	((1ull << 32) - 1)
#define SPIPE_BLOCK_MIN	64u
#define SPIPE_BLOCK_MAX	(1u << 20)
#define SPIPE_BUFS_MIN	2u
#define SPIPE_BUFS_MAX	4u
#define SPIPE_BUF_MAX	(1ull << 30)
#define SPIPE_Q_ONE	256u		/* q is carried x 256 */
#define SPIPE_Q_MAX	(16u * SPIPE_Q_ONE)

struct spipe_params {
	uint32_t block;		/* bytes per block, multiple of 64 */
	uint32_t nbufs;		/* N, SPIPE_BUFS_MIN..SPIPE_BUFS_MAX */
	uint64_t buf_size;	/* bytes per buffer, whole blocks */
	uint64_t c0;		/* first chunk's payload bytes (target) */
	uint32_t q256;		/* growth x 256, SPIPE_Q_ONE..SPIPE_Q_MAX */
};

/* 0 if p is a valid geometry and schedule, else -EINVAL. */
int spipe_params_check(const struct spipe_params *p);

static inline uint64_t spipe_block_payload(const struct spipe_params *p)
{
	return p->block - SPIPE_WORDS;
}

/* Payload bytes a whole buffer holds. */
static inline uint64_t spipe_buf_payload(const struct spipe_params *p)
{
	return p->buf_size / p->block * spipe_block_payload(p);
}

/* Bytes of the buffers on one side: N x buf_size. */
static inline uint64_t spipe_area_bytes(const struct spipe_params *p)
{
	return (uint64_t)p->nbufs * p->buf_size;
}

/* Offset of chunk g's buffer in the area. */
static inline uint64_t spipe_buf_off(const struct spipe_params *p, uint64_t g)
{
	return (g % p->nbufs) * p->buf_size;
}

/* Chunks of a message of len bytes under the schedule, every put offering
 * the whole rest (the model's n, proto/tune.h). */
uint64_t spipe_chunks_for(const struct spipe_params *p, uint64_t len);

/* ---- sender ------------------------------------------------------------ */

struct spipe_tx {
	struct spipe_params p;
	uint64_t g;		/* next chunk to build, from 1 */
	uint64_t posted;	/* chunks 1..posted are posted (written) */
	uint64_t acked;		/* highest chunk the receiver copied out */
	uint64_t done;		/* highest chunk whose local write completed */
	uint64_t next_id;	/* id of the next message, from 1 */
	/* the open message: left > 0 */
	uint64_t id, total, left;
	uint64_t next_len;	/* schedule: payload target of its next chunk */
};

/* A chunk built in staging, to be written to the same offset. */
struct spipe_chunk {
	uint64_t g;
	uint64_t off;		/* of its buffer, in the area */
	uint64_t bytes;		/* whole blocks: what the write copies */
	uint64_t len;		/* payload bytes */
};

void spipe_tx_init(struct spipe_tx *tx, const struct spipe_params *p);

/* Open a message of total (> 0) bytes and fill its control packet.
 * -EBUSY if one is open. */
int spipe_tx_open(struct spipe_tx *tx, uint64_t total,
		  struct rdmach_spipe_hdr *hdr);

/* May chunk tx->g be built now (its buffer free on both sides)? */
static inline int spipe_tx_writable(const struct spipe_tx *tx)
{
	uint64_t free_upto = tx->acked < tx->done ? tx->acked : tx->done;

	return tx->g <= free_upto + tx->p.nbufs;
}

/* Payload bytes of the next chunk when the put offers avail bytes. */
uint64_t spipe_tx_next_len(const struct spipe_tx *tx, uint64_t avail);

/*
 * Build the next chunk in area (the staging buffers): up to `avail` bytes
 * gathered from src (spipe_tx_next_len decides how many), blocks with
 * info and flag words.  The message must be open, the chunk writable and
 * avail > 0.  Advances g, the message's left and the schedule.
 */
void spipe_tx_build(struct spipe_tx *tx, uint8_t *area,
		    struct rdmach_iovc *src, uint64_t avail,
		    struct spipe_chunk *out);

/* Chunks up to g were posted (written). */
static inline void spipe_tx_posted(struct spipe_tx *tx, uint64_t g)
{
	if (g > tx->posted)
		tx->posted = g;
}

/* Chunks built but not posted yet (the landing area is not known). */
static inline uint64_t spipe_tx_unposted(const struct spipe_tx *tx)
{
	return tx->g - 1 - tx->posted;
}

/* The receiver's acknowledgement: 0, or -EPROTO when it claims a chunk
 * never posted. */
int spipe_tx_ack(struct spipe_tx *tx, uint64_t acked);

/* Local writes of chunks up to g completed. */
static inline void spipe_tx_completed(struct spipe_tx *tx, uint64_t g)
{
	if (g > tx->done)
		tx->done = g;
}

/* ---- receiver ---------------------------------------------------------- */

struct spipe_rx {
	struct spipe_params p;	/* the landing area's geometry */
	int have_params;	/* p is fixed (first packet seen) */
	uint64_t g;		/* chunk at the consumer, from 1 */
	uint32_t blk;		/* its block at the consumer */
	uint32_t off;		/* payload bytes of that block delivered */
	/* the message at the ring head (id 0: none yet) */
	uint64_t id, total, delivered;
	uint64_t acked;		/* highest chunk copied out */
};

/* An arrived block, as spipe_rx_peek sees it. */
struct spipe_block {
	const uint8_t *payload;
	uint32_t len;
	int last;		/* the chunk ends with it */
};

void spipe_rx_init(struct spipe_rx *rx);

/*
 * The control packet hdr (len bytes) is at the ring head.  The first one
 * fixes the geometry (*fresh set: allocate the landing area); later ones
 * must keep it.  Starting a new message sets id, total, delivered; seeing
 * the same one again (a later get) changes nothing.  0 or -EPROTO.
 */
int spipe_rx_begin(struct spipe_rx *rx, const void *hdr, uint32_t len,
		   int *fresh);

/* Has the block at the consumer arrived in area (the landing buffers)?
 * 1 and *b set, 0 if not yet, -EPROTO on a bad info word. */
int spipe_rx_peek(const struct spipe_rx *rx, const uint8_t *area,
		  struct spipe_block *b);

/*
 * Copy arrived bytes of the message out of area into dst, at most room,
 * block by block, stopping at the first block not there yet or at the
 * message's end.  Returns bytes copied or -EPROTO (a block beyond the
 * message, an info word out of range; bytes copied before the bad block
 * are returned first, the error by the next call).  *ack is set to the highest chunk
 * completed by this call (to acknowledge), else 0.
 */
int64_t spipe_rx_take(struct spipe_rx *rx, const uint8_t *area,
		      struct rdmach_iovc *dst, uint64_t room, uint64_t *ack);

/* Is every byte of the message at the ring head delivered? */
static inline int spipe_rx_msg_done(const struct spipe_rx *rx)
{
	return rx->id && rx->delivered == rx->total;
}

#endif /* RDMACH_PROTO_SPIPE_H */
