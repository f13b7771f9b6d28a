/*
 * shm_ring.h - the single-producer/single-consumer byte rings of rdma_shm.
 *
 * Three rings per direction per pair of processes, living in the
 * RECEIVER's segment (as an RDMA ring lives in the receiver's registered
 * memory), each a power-of-two array of 64-byte lines.  A packet starts on
 * a line boundary with an 8-byte header word followed by its payload;
 * packets never wrap (a PAD packet fills the end of the ring when a
 * control packet does not fit):
 *  - the main ring (RDMACH_SHM_RING_SIZE): every packet the other two do
 *    not take;
 *  - the line ring (RDMACH_SHM_LINE_RING, a few lines): packets of one
 *    line (payload <= 56 bytes: an 8-byte MPI message with its CH3
 *    header), and from a writer kept out of its bulk ring and copy area
 *    (shm_mem.h) packets of up to a quarter of it (up to 256 bytes, half
 *    of a small one).  A ping-pong then
 *    keeps reusing the same few lines, which stay in both caches; walking
 *    a 1024-line ring costs every message a line neither cache holds
 *    (3-11% of a one-way trip, rdma_shm/README.md);
 *  - the bulk ring (RDMACH_SHM_BULK_RING, larger): the data packets of
 *    at least RDMACH_SHM_BULK_MIN bytes of deferred puts (MPI send
 *    requests, which come in windows), so that a window of messages of a
 *    few KiB has many in flight while small messages, and a ping-pong's,
 *    keep to the small main ring.
 * One sequence of packet numbers spans the three rings: the reader takes
 * packet rx_seq from whichever ring's head holds it, so the byte stream
 * keeps its order whichever ring the writer picked.
 *
 * Large puts go through a third structure, the copy area (RDMACH_SHM_PIPE_*):
 * `nslots` slots of `slot` bytes, each with a flag word on a line of its
 * own.  A PIPE packet in a ring (payload: struct shm_pipe_pkt) says "the
 * next `total` bytes of the stream are in the copy area"; the writer then
 * copies chunks into the slots in turn (slot k mod nslots for its k-th
 * chunk ever, chunks growing from RDMACH_SHM_PIPE_FIRST to the slot size,
 * so that the reader starts copying out early), and the reader copies them
 * out as they come: two copies, overlapped on two cores, through memory
 * that stays in cache.
 *
 * Memory-ordering contract
 * ------------------------
 *  - The writer fills the payload with plain stores, then publishes the
 *    header word with a RELEASE store.  The reader polls the header word
 *    at its expected position with an ACQUIRE load; a header whose
 *    sequence number is the next one expected means the whole packet is
 *    visible.  There is no head index: the header IS the head.
 *  - Lap guard: headers carry a 32-bit packet sequence number, never 0
 *    (the count skips it when it wraps), and the reader zeroes the first
 *    word of every line of a packet it consumed before returning that
 *    space, so neither an old header nor old payload bytes at a line start
 *    can ever be taken for a new arrival.
 *  - The reader returns space by a RELEASE store of each ring's tail
 *    (bytes consumed, monotonic) on its own cache line; the writer reads
 *    it (ACQUIRE) only when its cached copy says the ring is full.
 *    Zeroing happens before that store, so the writer never races with
 *    it.  Both are deferred to the reader's next empty poll (or to when a
 *    quarter of the ring is held back): off the path from an arrival to
 *    the reader's own next put, whose header store would otherwise wait
 *    behind them (x86 stores become visible in order).
 *  - Flags written once (reader_closed, cma_ok by the reader; writer_closed
 *    by the writer) sit apart from the tails, on the line pair of the
 *    rarely written words, and are RELEASE/ACQUIRE.
 *    writer_closed is stored after the writer's last header, so a reader
 *    that sees it and then finds no packet knows the stream has ended.
 *  - acked_id (reader) is the last rendezvous fully read: RELEASE after the
 *    cross-memory read, ACQUIRE by the writer before it reports the bytes.
 *  - crossing (writer) is a hint, RELAXED both ways: the writer sees its
 *    large messages cross the reader's (shm_rndv.c, shm_rx_large_start), so
 *    that both sides choose CMA for them alike.  No data depends on it.
 *  - Copy area: a slot's flag holds the byte count of the chunk in it, or 0
 *    when the slot is free.  The writer waits (ACQUIRE load) for 0, fills
 *    the slot with plain stores, then stores the count with RELEASE; the
 *    reader loads the flag with ACQUIRE, copies the chunk out and stores 0
 *    with RELEASE only after its last load from the slot, so the writer
 *    never overwrites bytes still being read.  Each flag has exactly one
 *    writer at a time (writer: 0 -> n, reader: n -> 0), so no sequence
 *    number is needed; the PIPE packet is published (header RELEASE) before
 *    the first chunk of its message, and the reader touches the slots only
 *    while such a packet is at its head.  A chunk never holds bytes of two
 *    messages.
 *  - First contact with a ring (hello, writer): a reader polls no ring a
 *    writer has not written to; it polls that ring's hello word in the
 *    control block (hello, line_hello, bulk_hello: words on a page of
 *    every writer's control blocks) as if it were the ring's head.
 *    Before its first packet into a ring, the writer stores there a HELLO
 *    header with that packet's number (RELEASE), not counted as a
 *    packet; the reader, finding it as the packet it expects, polls that
 *    ring from then on.  So a ring's pages are first touched by the first
 *    packet written to it (reading a page of a memfd takes one too), and
 *    a pair that uses only its line ring never takes a page of the
 *    others.  A HELLO the reader finds once it polls the ring itself is
 *    corrupt.
 *  - Giving back an idle pair's bulk ring and copy area (shm_mem.h): the
 *    reader (their owner) asks release n (release_req, RELEASE); the
 *    writer, once everything it wrote there has been consumed and freed
 *    (bulk_tail == its head, every slot flag 0, no copy-area message
 *    under way), stops using them and says so (release_ack = n,
 *    RELEASE); the reader then frees their pages (MADV_REMOVE: they
 *    read as zeros again, i.e. no packet, free slots, as at creation)
 *    and says release_done = n (RELEASE); only then does the writer use
 *    them again.  Neither side touches a page between ack and done.
 *    Under the cap on warm writers the reader may withhold done (the
 *    pair is cold) and may ask release 1 before the writer connects
 *    (release_req written before the segment is published, read by the
 *    writer at its connect); the writer acks it at once (it has written
 *    nothing).
 *  - The doorbell (struct shm_bell) has its contract in shm_live.h.
 *  - What the other side writes is input (shm_peer.h): the reader loads a
 *    header it found, a rendezvous or copy-area payload and a full slot's
 *    flag once, checks the copy and uses only it.  Packets are published
 *    in sequence order, so once an ACQUIRE load has seen a later packet's
 *    header, packet rx_seq is visible at some ring's head, or was never
 *    sent: a reader that finds it nowhere then fails the connection, as
 *    it does a copy-area message whose writer has posted another packet.
 */
#ifndef RDMACH_SHM_RING_H
#define RDMACH_SHM_RING_H

#include <stdatomic.h>
#include <stdint.h>

#include "proto/pkt.h"

#define SHM_LINE 64u

struct shm_bell {
	_Alignas(SHM_LINE) _Atomic uint32_t seq;	/* +1 per wake-up */
	_Atomic uint32_t sleepers;	/* owner threads armed to sleep */
	uint32_t on;			/* owner wants to be rung */
};
#define SHM_HDR 8u		/* header word at the start of a packet */

/* Header word: seq (32) | type (4: enum rdmach_pkt_type, proto/pkt.h) |
 * len (28).  type != 0, so a zeroed word never matches. */
#define SHM_LEN_BITS 28
#define SHM_LEN_MAX ((1u << SHM_LEN_BITS) - 1)

static inline uint64_t shm_hdr_make(uint32_t seq, unsigned type, uint32_t len)
{
	return (uint64_t)seq << 32 | (uint64_t)type << SHM_LEN_BITS | len;
}

static inline uint32_t shm_hdr_seq(uint64_t h) { return (uint32_t)(h >> 32); }
static inline unsigned shm_hdr_type(uint64_t h)
{
	return (unsigned)(h >> SHM_LEN_BITS) & 0xf;
}
static inline uint32_t shm_hdr_len(uint64_t h) { return (uint32_t)h & SHM_LEN_MAX; }

/* Packet numbers start this close to the 32-bit wrap, so that every
 * connection that moves a few hundred packets checks the wrap (which skips
 * 0) instead of only those that move four billion. */
#define SHM_SEQ_FIRST (UINT32_MAX - 255u)

/* The packet number after seq (0 is never one: a zeroed word must not
 * match). */
static inline uint32_t shm_seq_next(uint32_t seq)
{
	return seq + 1 ? seq + 1 : 1;
}

/* Ring bytes a packet with len payload bytes occupies. */
static inline uint64_t shm_pkt_span(uint64_t len)
{
	return (SHM_HDR + len + SHM_LINE - 1) & ~(uint64_t)(SHM_LINE - 1);
}

/* Control block of one writer's rings in the reader's segment: the words
 * the reader writes often on a line of their own, 128 bytes from the
 * others so that the adjacent-line prefetcher does not couple them; the
 * rest, written by either side at start-up, at close, when a large put
 * starts or its side changes, and when the pair's memory is given back or
 * taken again, share the next 128 bytes (the reader polls a hello word
 * until the writer stores it, once).  256 bytes per writer: the control
 * blocks are the per-pair memory every pair has at start-up. */
struct shm_ring_ctrl {
	/* written by the reader, often */
	_Atomic uint64_t tail;		/* main ring bytes consumed */
	_Atomic uint64_t line_tail;	/* line ring bytes consumed */
	_Atomic uint64_t bulk_tail;	/* bulk ring bytes consumed */
	_Atomic uint64_t acked_id;	/* last rendezvous fully read */
	uint8_t pad0[128 - 32];
	/* written by the reader, once (release_*: when the pair is idle) */
	_Atomic uint32_t reader_closed;
	_Atomic uint32_t cma_ok;	/* reader can read the writer's memory */
	int32_t writer_rank;		/* immutable after creation */
	_Atomic uint32_t release_req;	/* release number n asked for */
	_Atomic uint32_t release_done;	/* ... and the pages of n freed */
	/* written by the writer: once, and when its choice changes */
	_Atomic uint32_t writer_closed;
	_Atomic uint32_t crossing;
	_Atomic uint32_t release_ack;	/* release n: I keep out */
	_Atomic uint64_t hello;		/* HELLO headers: the main, line and */
	_Atomic uint64_t line_hello;	/* ... bulk ring in use from that */
	_Atomic uint64_t bulk_hello;	/* ... packet on */
	uint8_t pad1[128 - 56];
};

_Static_assert(sizeof(struct shm_ring_ctrl) == 256, "ring ctrl layout");

/* Payload of a RDMACH_PKT_PIPE packet: one line with its header. */
struct shm_pipe_pkt {
	uint64_t total;		/* bytes of the stream in the copy area */
};

/* Flag of one copy-area slot, 128 bytes apart (adjacent-line prefetch). */
struct shm_pipe_flag {
	_Atomic uint64_t len;	/* bytes of the chunk in the slot, 0: free */
	uint8_t pad[120];
};

#define SHM_PIPE_MAX_SLOTS 64u

#endif /* RDMACH_SHM_RING_H */
