/*
 * ring.h - the transport-independent ring protocol of rdma_ib: packet
 * format, bottom-fill arrival detection with a sequence guard, credit
 * (tail) accounting and the chunk schedule.  No verbs here: the sender
 * builds packets in a local staging area that mirrors the receiver's ring
 * byte for byte (offset X in staging is written to offset X of the ring),
 * the transport copies them over (RDMA write), the receiver polls memory.
 *
 * Packet (every packet starts on a RING_ALIGN boundary of the ring):
 *   +0   flag    u64  seq << 32 | near << 31 | type << 24 | payload length
 *   +8   credit  u64  sender's consumed count of the reverse ring
 *   +16  payload
 *   +X   trailer u64  == flag; X = 16 + length rounded up to 8 when the
 *                     flag's near bit is set, else T-8, T = ring_pkt_bytes
 * A packet occupies T ring bytes but only its bytes up to the trailer go on
 * the wire (an 8-byte message writes 32 bytes, not 64).  Packets never
 * straddle the ring's end: a put that meets the end writes a shorter
 * packet and continues at offset 0 (no padding packet).
 *
 * Memory-ordering contract
 * ------------------------
 * - The writer of one packet (the adapter) places its bytes in increasing
 *   address order and each aligned u64 atomically (bottom fill: RDMA write
 *   of one message over one RC QP).  So flag and trailer both carrying the
 *   expected sequence number mean the whole packet is there.
 * - The receiver loads flag, then trailer, with acquire semantics, and
 *   reads the payload only after both matched.
 * - Stale bytes can never pass for an arrival: every u64 at a flag or
 *   far trailer position (multiples of RING_ALIGN, and those minus 8)
 *   inside a consumed packet is zeroed by ring_rx_consume() before the
 *   consumed count is published to the sender (the transport's post of the
 *   credit is the release point).  Free ring space therefore holds, at such
 *   positions, only 0 or flags of older sequence numbers, and seq 0 is
 *   never used.  A near trailer may lie on old payload instead: every byte
 *   of the ring is, unless zeroed there, what the sender last built at the
 *   same offset of its staging mirror (each packet's write covers all it
 *   built), so ring_tx_commit() looks at staging and sets the near bit only
 *   when the old u64 there differs from the new flag.
 * - Credits (the receiver's consumed count) are monotonic; the sender
 *   keeps the largest it has seen and ignores older ones.
 * The structures themselves are single-threaded (one side each).
 */
#ifndef RDMACH_PROTO_RING_H
#define RDMACH_PROTO_RING_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "peer.h"
#include "pkt.h"

#define RING_ALIGN	64u
#define RING_HDR	16u
#define RING_TRL	8u
#define RING_OVERHEAD	(RING_HDR + RING_TRL)
#define RING_MAX_PAYLOAD ((1u << 24) - 1)
#define RING_MIN_SIZE	4096u
#define RING_FLAG_NEAR	(1u << 31)	/* trailer right after the payload */

enum ring_mode {
	RING_MODE_BASIC,	/* data write + separate head write; eager tail */
	RING_MODE_PIGGYBACK,	/* bottom fill, credits piggybacked / delayed */
	RING_MODE_PIPELINE,	/* piggyback + chunked, overlapped copy */
};

static inline uint64_t ring_flag(uint32_t seq, unsigned int type, uint32_t len)
{
	return (uint64_t)seq << 32 | (uint64_t)(type & 0x7f) << 24 |
	       (len & RING_MAX_PAYLOAD);
}

static inline uint32_t ring_flag_seq(uint64_t flag)
{
	return (uint32_t)(flag >> 32);
}

static inline unsigned int ring_flag_type(uint64_t flag)
{
	return (unsigned int)(flag >> 24) & 0x7f;
}

static inline uint32_t ring_flag_len(uint64_t flag)
{
	return (uint32_t)flag & RING_MAX_PAYLOAD;
}

/* Sequence numbers run 1, 2, ... 2^32-1, 1, ...: 0 marks cleared memory. */
static inline uint32_t ring_seq_next(uint32_t seq)
{
	return seq + 1 ? seq + 1 : 1;
}

/* Ring bytes a packet of len payload bytes occupies. */
static inline uint64_t ring_pkt_bytes(uint64_t len)
{
	return (len + RING_OVERHEAD + RING_ALIGN - 1) & ~(uint64_t)(RING_ALIGN - 1);
}

/* Offset of the trailer of the packet with this flag. */
static inline uint64_t ring_flag_trailer(uint64_t flag)
{
	uint64_t len = ring_flag_len(flag);

	if (flag & RING_FLAG_NEAR)
		return RING_HDR + ((len + RING_TRL - 1) & ~(uint64_t)(RING_TRL - 1));
	return ring_pkt_bytes(len) - RING_TRL;
}

/* 0 if size is a valid ring size (power of two, >= RING_MIN_SIZE). */
int ring_size_check(uint64_t size);

/* ---- sender ----------------------------------------------------------- */

struct ring_tx {
	uint8_t *stage;		/* local mirror of the remote ring */
	uint64_t size;
	uint64_t head;		/* ring bytes written (monotonic) */
	uint64_t tail;		/* receiver's consumed count (largest credit) */
	uint64_t acked;		/* ring bytes whose local write completed */
	uint32_t seq;		/* sequence number of the next packet */
	int near;		/* near trailers allowed (1 after init; 0 for
				 * a receiver that does not read them) */
};

/* A packet being built: ring offset, payload pointer and capacity. */
struct ring_slot {
	uint64_t off;		/* in the ring (and in the staging mirror) */
	uint8_t *payload;	/* in staging */
	uint32_t len;		/* payload bytes */
	uint64_t bytes;		/* ring bytes of the packet */
	uint64_t wire;		/* bytes to write, set by ring_tx_commit */
	unsigned int type;	/* enum rdmach_pkt_type (proto/pkt.h); reserve
				 * sets RDMACH_PKT_DATA */
};

void ring_tx_init(struct ring_tx *tx, uint8_t *stage, uint64_t size);

/* Free ring bytes as the sender sees them: the receiver must have consumed
 * a byte and, for staging reuse, its local write must have completed. */
static inline uint64_t ring_tx_free(const struct ring_tx *tx)
{
	uint64_t done = tx->tail < tx->acked ? tx->tail : tx->acked;

	return tx->size - (tx->head - done);
}

/* Reserve the next packet for up to want (> 0) payload bytes, at most
 * max_payload.  0 and *slot set, or -EAGAIN when not one byte fits. */
int ring_tx_reserve(const struct ring_tx *tx, uint64_t want,
		    uint64_t max_payload, struct ring_slot *slot);

/*
 * Reserve one packet of exactly len payload bytes (a control packet that
 * must not be cut).  If the ring end is too close, *pad is a RDMACH_PKT_PAD
 * packet filling it, to be committed first (pad->bytes == 0: no pad).
 * 0, or -EAGAIN when pad and packet do not both fit now.
 */
int ring_tx_reserve_whole(const struct ring_tx *tx, uint32_t len,
			  struct ring_slot *pad, struct ring_slot *slot);

/* The same for two packets back to back, lead (lead_len payload bytes, a
 * data packet; lead->bytes == 0 when lead_len is 0) then slot, so that
 * one write can carry both: a small message head ahead of the control
 * packet for the rest. */
int ring_tx_reserve_pair(const struct ring_tx *tx, uint32_t lead_len,
			 uint32_t len, struct ring_slot *pad,
			 struct ring_slot *lead, struct ring_slot *slot);

/* Write flag, credit and trailer around the payload already copied into
 * slot->payload, set slot->wire (the packet's bytes from slot->off that
 * must reach the peer: up to its trailer), and advance head and seq.  A
 * run of packets goes in one write of the earlier ones' bytes and the
 * last one's wire. */
void ring_tx_commit(struct ring_tx *tx, struct ring_slot *slot,
		    uint64_t credit);

/* A credit arrived (piggybacked or explicit).  0, or -EPROTO when it
 * claims more than was ever written. */
int ring_tx_credit(struct ring_tx *tx, uint64_t consumed);

/* Local writes up to ring byte `upto` completed. */
static inline void ring_tx_acked(struct ring_tx *tx, uint64_t upto)
{
	if (upto > tx->acked)
		tx->acked = upto;
}

/* Payload bytes of the next packet under the chunk schedule: pipeline mode
 * cuts at chunk bytes so that copy and transfer overlap; the other modes
 * send as much as fits in one packet. */
static inline uint64_t ring_max_payload(enum ring_mode mode, uint64_t chunk,
					uint64_t ring_size)
{
	uint64_t max = ring_size / 2 - RING_OVERHEAD;

	if (mode == RING_MODE_PIPELINE && chunk < max)
		max = chunk;
	return max < RING_MAX_PAYLOAD ? max : RING_MAX_PAYLOAD;
}

/* ---- receiver ---------------------------------------------------------- */

struct ring_pkt {
	const uint8_t *payload;
	uint32_t len;
	unsigned int type;
	uint64_t credit;
	uint64_t bytes;		/* ring bytes, for ring_rx_consume() */
};

struct ring_rx {
	uint8_t *ring;
	uint64_t size;
	uint64_t pos;		/* ring bytes consumed (the master tail) */
	uint32_t seq;		/* expected sequence number at pos */
	uint32_t off;		/* payload bytes of the packet at pos delivered */
	uint64_t seen;		/* end of the furthest packet known to be there */
	uint64_t credit_sent;	/* consumed count last told to the sender */
	/* the packet at pos while it is read in parts (off != 0), as its
	 * header was found: the peer may rewrite the header meanwhile, so
	 * it is not loaded again (ring_rx_advance) */
	struct ring_pkt cur;
};

void ring_rx_init(struct ring_rx *rx, uint8_t *ring, uint64_t size);

/*
 * Is the packet at the consumer position there?  bottom_fill: check flag
 * and trailer (piggyback/pipeline modes); otherwise the caller knows from
 * the head replica that it is complete and only the flag is checked.
 * 1 and *pkt set, 0 if not (yet), -EPROTO on a corrupt header.  A packet
 * read in part (ring_rx_advance) is the private copy taken then.
 */
int ring_rx_peek(struct ring_rx *rx, int bottom_fill, struct ring_pkt *pkt);

/*
 * Look ahead without consuming: walk the complete packets after the
 * consumer position (cursor sc, reset when behind it) up to ring byte
 * limit, so that credits piggybacked on not yet read packets are seen.
 * Returns the largest credit found (0 if none) or -EPROTO.
 */
struct ring_scan {
	uint64_t pos;
	uint32_t seq;
};

int64_t ring_rx_scan(struct ring_rx *rx, struct ring_scan *sc, int bottom_fill,
		     uint64_t limit);

/* A first, cheap test for a polling loop: does the flag word at the
 * consumer position carry the expected sequence number?  (Nothing has
 * arrived if not; ring_rx_peek checks the rest.) */
static inline int ring_rx_head_arrived(const struct ring_rx *rx)
{
	const uint64_t *flag = (const uint64_t *)(const void *)
			       (rx->ring + (rx->pos & (rx->size - 1)));

	return ring_flag_seq(proto_peer_probe64_acq(flag)) == rx->seq;
}

/* Done with the packet at pos: clear its flag positions, advance. */
void ring_rx_consume(struct ring_rx *rx, const struct ring_pkt *pkt);

/* n more payload bytes of pkt (from ring_rx_peek) were read: 1 when that
 * was the rest of it (consumed), else 0 and the header kept as read. */
static inline int ring_rx_advance(struct ring_rx *rx,
				  const struct ring_pkt *pkt, uint32_t n)
{
	rx->off += n;
	if (rx->off == pkt->len) {
		ring_rx_consume(rx, pkt);
		return 1;
	}
	rx->cur = *pkt;
	return 0;
}

/*
 * Should an explicit tail update go to the sender now?  Eager (basic mode)
 * whenever something was consumed and not yet told; delayed otherwise:
 * only when the sender's view of free space, size - (seen - credit_sent),
 * fell under threshold bytes.
 */
static inline int ring_rx_credit_due(const struct ring_rx *rx, int eager,
				     uint64_t threshold)
{
	if (rx->pos == rx->credit_sent)
		return 0;
	if (eager)
		return 1;
	return rx->size - (rx->seen - rx->credit_sent) < threshold;
}

/* The consumed count went to the sender (piggybacked or explicit). */
static inline void ring_rx_credit_told(struct ring_rx *rx, uint64_t credit)
{
	if (credit > rx->credit_sent)
		rx->credit_sent = credit;
}

#endif /* RDMACH_PROTO_RING_H */
