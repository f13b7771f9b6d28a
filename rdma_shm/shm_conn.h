/*
 * shm_conn.h - the state every unit of rdma_shm shares (prefix shm_): the
 * transport (struct shm_tl, from the knobs) and a connection (struct
 * shm_conn: the rings each way, the copy areas, the rendezvous in flight,
 * liveness), and the ring operations the data path inlines.  shm_conn.c
 * holds the few that are not inlined.  The ring format and the memory-
 * ordering contract these operations keep are in shm_ring.h.
 *
 * Units, each calling and including only those after it (README.md):
 *   shm_iface -> shm_ep -> shm_rndv, shm_pipe -> shm_live -> shm_conn
 */
#ifndef RDMACH_SHM_CONN_H
#define RDMACH_SHM_CONN_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/iov.h"
#include "core/tl.h"
#include "proto/pkt.h"
#include "shm_peer.h"
#include "shm_ring.h"
#include "shm_seg.h"

#define SHM_RECENT_MAX 16u

enum shm_cma_use { SHM_CMA_AUTO, SHM_CMA_COLD, SHM_CMA_ALWAYS, SHM_CMA_NEVER };

/* Rendezvous this process posted and the peer has not acknowledged. */
struct shm_rndv_tx {
	int iovcnt;			/* pieces of the caller's iovec covered */
	uint64_t id;
	size_t bytes;
	struct iovec iov[RDMACH_RNDV_MAX_SEGS];
};

/* A ring as its writer sees it. */
struct shm_tx_ring {
	uint8_t *base;
	_Atomic uint64_t *tail;		/* the reader's count of bytes consumed */
	uint64_t size, mask;		/* size 0: no such ring */
	uint64_t head;			/* bytes written */
	uint64_t tail_seen;		/* last value read from *tail */
};

/* A ring as its reader sees it. */
struct shm_rx_ring {
	uint8_t *base;
	_Atomic uint64_t *tail;
	uint64_t mask;
	uint64_t head;			/* bytes consumed */
	uint64_t released;		/* ... and given back (<= head) */
};

enum { SHM_MAIN, SHM_LINES, SHM_BULK, SHM_NRINGS }; /* rings of a direction */

/* A copy area (shm_ring.h) as its writer or its reader sees it. */
struct shm_pipe {
	struct shm_pipe_flag *flags;
	uint8_t *area;
	uint64_t slot;			/* bytes of a slot; 0: no copy area */
	uint64_t slot_mask;		/* slots - 1 (a power of two) */
	uint64_t next;			/* chunks written (tx) / taken (rx) */
	uint64_t left;			/* tx: bytes of the message to copy in */
	uint64_t chunk;			/* tx: size of its next chunk */
	int first;			/* tx: its first chunk is next */
	uint64_t off;			/* rx: bytes of the current chunk taken */
	uint64_t cur;			/* rx: bytes of the current chunk (its
					 * flag as loaded once; 0: none yet) */
	uint64_t stall_ns;		/* rx: since when no chunk came */
	uint64_t stall_tails;		/* rx: the peer's reads then */
};

/* Giving back a pair's bulk ring and copy area (shm_mem.h), as their
 * reader (owner) and as the writer.  COLD: released and not given back
 * (release_done withheld) until the writer earns them again, under the
 * cap on warm writers (RDMACH_SHM_WARM_MAX). */
enum shm_mem_state { SHM_MEM_UNUSED, SHM_MEM_USED, SHM_MEM_ASKED,
		     SHM_MEM_RELEASED, SHM_MEM_COLD };

struct shm_mem_rx {
	enum shm_mem_state state;
	uint32_t n;			/* last release asked for */
	uint64_t bulk_seen, pipe_seen;	/* rx bulk head, copy-area chunks */
	uint64_t active_ns;		/* when they last moved */
	uint64_t cold_main;		/* COLD: main + line ring bytes read
					 * when it went */
};

struct shm_mem_tx {
	int kept_out;			/* acked, waiting for release_done */
	uint32_t acked;			/* last release acked */
	uint64_t bulk_head, pipe_next;	/* at the last ack: used since? */
	uint64_t bulk_min, chunk_deferred, pipe_slot; /* while kept out */
	uint64_t one_pkt_max, large_min;
};

/* The control packet at the head of the receive rings, as loaded once
 * from the ring and checked (shm_peer.h): a rendezvous, or a copy-area
 * message's total. */
#define SHM_RNDV_BYTES (sizeof(struct rdmach_rndv_hdr) + \
			RDMACH_RNDV_MAX_SEGS * sizeof(struct rdmach_rndv_seg))

/* Room for a rendezvous descriptor of up to RDMACH_RNDV_MAX_SEGS. */
union shm_rndv_buf {
	struct rdmach_rndv_hdr h;
	uint8_t bytes[SHM_RNDV_BYTES];
};

/* The memory of a rendezvous descriptor, either side's: from a free
 * list per process (shm_rndv.c) while the rendezvous is in flight, so
 * that a process holds descriptors for the rendezvous under way, not
 * 2.6 KiB for every local peer. */
union shm_rndv_mem {
	union shm_rndv_mem *next;	/* on the free list */
	struct shm_rndv_tx tx;
	union shm_rndv_buf rx;
};

struct shm_rx_ctl {
	int taken;			/* the fields below hold it */
	uint64_t total;			/* bytes it carries */
	union shm_rndv_buf *d;		/* RNDV: the descriptor (NULL for
					 * a copy-area message) */
};

struct shm_conn {
	struct rdmach_conn *conn;
	struct shm_tl *tl;
	pid_t pid;
	int self;			/* a pipe to myself */
	int pidfd;			/* -1 for self or without pidfd */
	uint64_t cma_addr, cma_magic;	/* the peer's published probe word */
	int cma_ok;			/* ... read: its large puts may be CMA */
	void *peer_base;		/* the peer's segment as mapped (NULL */
	size_t peer_size;		/* for self): its layout is read once,
					 * when the rings are set up */

	/* send side: my rings in the peer's segment */
	struct shm_tx_ring tx[SHM_NRINGS];
	struct shm_ring_ctrl *tx_ctrl;
	uint64_t one_pkt_max;		/* largest put of one packet, no CMA */
	uint64_t large_min;		/* smallest put that may not be ring
					 * packets (tl's, or RDMACH_SHM_COLD_CMA
					 * while kept out) */
	uint64_t chunk, chunk_deferred;	/* largest packet payload of a put,
					 * of a deferred put (the rings'
					 * sizes cap the knobs') */
	uint64_t bulk_min;		/* data packets from this size go to
					 * tx[SHM_BULK] (UINT64_MAX: none) */
	uint64_t cold_line_max;		/* kept out (shm_mem.h): packets up to
					 * this span go to the line ring too
					 * (0: one line only) */
	uint32_t tx_seq;		/* next packet's sequence number */
	uint64_t next_rndv_id;
	struct shm_rndv_tx *rndv;	/* the put waiting for its reader
					 * (NULL: none) */
	struct shm_pipe tx_pipe;	/* my copy area in the peer's segment */

	/* receive side: the peer's rings in my segment */
	struct shm_rx_ring rx[SHM_NRINGS];
	struct shm_ring_ctrl *rx_ctrl;
	uint32_t rx_seq;		/* sequence number expected next */
	uint64_t rx_hdr;		/* its header as loaded once (0: not
					 * arrived yet) ... */
	struct shm_rx_ring *rx_cur;	/* ... from this ring */
	uint64_t rx_off;		/* bytes of the current packet consumed */
	uint64_t rx_held;		/* ... of all rings, not given back yet */
	struct shm_pipe rx_pipe;	/* the peer's copy area in my segment */

	unsigned duplex;		/* shm_rx_large_start */
	struct shm_bell *peer_bell;	/* the peer's doorbell, if it is on */

	/* memory per pair (cold: off the data path) */
	unsigned tx_hello;		/* 1 << ring: hello stored, in use */
	uint8_t *rx_base[SHM_NRINGS];	/* the rings; rx[i].base polls ring i
					 * once the writer said hello to it,
					 * its hello word until then */
	int rx_quiet;			/* no ring said hello yet */
	struct shm_mem_rx mem_rx;
	struct shm_mem_tx mem_tx;

	/* liveness */
	uint32_t idle_polls;		/* sends that found the ring full */
	uint32_t rx_idle_polls;		/* gets that found nothing */
	uint64_t next_check_ns;

	struct shm_rx_ctl rx_ctl;	/* the control packet at the head */
};

struct shm_tl {
	struct rdmach_tl base;
	struct shm_seg seg;		/* my receive segment */
	struct shm_conn **conns;	/* [npeers] */
	int npeers;
	uint64_t ring_size, line_ring_size, cma_threshold, liveness_ns;
	uint64_t bulk_ring_size, bulk_min;
	uint64_t chunk, chunk_deferred;	/* RDMACH_SHM_CHUNK, _DEFERRED_CHUNK */
	uint64_t calib_ns;		/* RDMACH_SHM_CALIB_MS */
	int cma;
	volatile uint64_t cma_magic;	/* peers read it to probe CMA */
	/* copy area */
	uint64_t pipe_size, pipe_slot, pipe_first, pipe_threshold;
	int pipe_size_auto;		/* RDMACH_SHM_PIPE_AREA=auto */
	uint32_t pipe_spin;
	uint64_t cache_limit;		/* 0 until known (auto: after connect) */
	enum shm_cma_use cma_use;
	int cma_hot, cma_cold;		/* CMA for a hot / cold large put */
	uint64_t cma_duplex;		/* RDMACH_SHM_CMA_DUPLEX, 0: off */
	uint64_t cma_duplex_reused;	/* RDMACH_SHM_CMA_DUPLEX_REUSED */
	uint64_t cma_duplex_reused_max;	/* ..._MAX, UINT64_MAX: no limit */
	uint64_t rndv_min;		/* smallest rendezvous: the CMA
					 * threshold, or cma_duplex_reused
					 * if lower and cma_duplex is on */
	uint64_t large_min;		/* smallest put that is not ring packets */
	/* buffers of the last large puts (a ring of `recent` entries) */
	unsigned recent, recent_pos;
	uintptr_t recent_buf[SHM_RECENT_MAX];
	int wake;			/* RDMACH_SHM_WAKE: -1 auto, 0, 1 */
	/* memory (RDMACH_STATS): receive rings that a writer said hello to;
	 * bulk rings and copy areas given back idle, and used again */
	uint64_t rings_used, releases, repopulations;
	uint64_t idle_release_ns;	/* RDMACH_SHM_IDLE_RELEASE_MS, 0: off */
	/* warm writers: those that may use their bulk ring and copy area in
	 * my segment (shm_mem.h) */
	uint64_t warm_max;		/* RDMACH_SHM_WARM_MAX */
	uint64_t cold_cma;		/* RDMACH_SHM_COLD_CMA, 0: off */
	uint64_t warm_after;		/* RDMACH_SHM_WARM_AFTER */
	int warm_cap;			/* more local writers than warm_max */
	uint64_t warm_now, warm_peak, promotions, demotions;
	int bell_on;			/* my doorbell is on */
	/* rendezvous descriptors not in use; how many were ever allocated
	 * (the most in flight at once) */
	union shm_rndv_mem *rndv_free;
	uint64_t rndv_mems;
	pid_t ptracer;			/* PR_SET_PTRACER'd process, 0: none */
};

#define SHM_MIN_PARTIAL 2048u	/* smallest data packet cut by a full ring */
#define SHM_IDLE_POLLS 64u	/* idle polls between clock reads */

/* memcpy without the call for what fits in one ring line with its header
 * (most messages of an MPI program): two overlapping moves of a
 * power-of-two size.  Longer copies go to memcpy: a 64-byte payload
 * copied inline (16-byte moves, one of them split across the packet's
 * two lines) made MPI_Alltoall of 32 B per pair 0.74 us against 0.62 us
 * with memcpy (2 ranks). */
static inline void shm_copy(void *dst, const void *src, size_t len)
{
	char *d = dst;
	const char *s = src;

	if (len > SHM_LINE - SHM_HDR) {
		memcpy(d, s, len);
	} else if (len >= 32) {
		memcpy(d, s, 32);
		memcpy(d + len - 32, s + len - 32, 32);
	} else if (len >= 16) {
		memcpy(d, s, 16);
		memcpy(d + len - 16, s + len - 16, 16);
	} else if (len >= 8) {
		memcpy(d, s, 8);
		memcpy(d + len - 8, s + len - 8, 8);
	} else if (len >= 4) {
		memcpy(d, s, 4);
		memcpy(d + len - 4, s + len - 4, 4);
	} else {
		while (len--)
			*d++ = *s++;
	}
}

/* Cursor copies with the common case (the current piece holds it all)
 * inline; same cursor semantics as core/iov.c. */
static inline size_t shm_gather(struct rdmach_iovc *c, void *dst, size_t len)
{
	if (c->idx < c->cnt && c->iov[c->idx].iov_len - c->off >= len) {
		shm_copy(dst, (const char *)c->iov[c->idx].iov_base + c->off, len);
		c->off += len;
		return len;
	}
	return rdmach_iovc_gather(c, dst, len);
}

static inline size_t shm_scatter(struct rdmach_iovc *c, const void *src,
				 size_t len)
{
	if (c->idx < c->cnt && c->iov[c->idx].iov_len - c->off >= len) {
		shm_copy((char *)c->iov[c->idx].iov_base + c->off, src, len);
		c->off += len;
		return len;
	}
	return rdmach_iovc_scatter(c, src, len);
}

/* The header of packet rx_seq if it is at the head of ring r, else 0: an
 * ACQUIRE load, so that its payload is visible once its header is
 * (shm_ring.h).  A header found is kept in sc->rx_hdr, never loaded
 * again: shm_rx_next. */
static inline uint64_t shm_rx_poll(const struct shm_conn *sc,
				   const struct shm_rx_ring *r)
{
	const uint8_t *p = r->base + (r->head & r->mask);
	uint64_t h = shm_peer_load64_acq(p);

	if (shm_hdr_seq(h) == sc->rx_seq)
		return h;
	shm_peer_miss(p);
	return 0;
}

/* A packet of ring r was read: move on.  Its space goes back to the
 * writer later, in shm_rx_release. */
static inline void shm_rx_consume(struct shm_conn *sc, struct shm_rx_ring *r,
				  uint64_t span)
{
	r->head += span;
	sc->rx_held += span;
	sc->rx_seq = shm_seq_next(sc->rx_seq);
	sc->rx_off = 0;
	sc->rx_hdr = 0;
	shm_peer_epoch();
}

/* The hello word of ring i in a control block (shm_ring.h). */
static inline _Atomic uint64_t *shm_ring_hello(struct shm_ring_ctrl *c, int i)
{
	return i == SHM_MAIN ? &c->hello :
	       i == SHM_LINES ? &c->line_hello : &c->bulk_hello;
}

/* Free bytes of ring r after a fresh read of the reader's tail (out of
 * line: the cached tail mostly suffices).  Every ring's cached tail
 * starts a whole ring behind, so that the first packet into a ring asks
 * here, and says hello to it (shm_ring.h) before it is written. */
uint64_t shm_tx_space_refresh(struct shm_conn *sc, struct shm_tx_ring *r);

/* Free bytes of ring r, refreshing the cached tail when that says
 * < need (inline: every put asks). */
static inline uint64_t shm_tx_space(struct shm_conn *sc, struct shm_tx_ring *r,
				    uint64_t need)
{
	uint64_t space = r->size - (r->head - r->tail_seen);

	return space >= need ? space : shm_tx_space_refresh(sc, r);
}

/* Publish the packet at p, its payload written; it takes span bytes of
 * ring r. */
static inline void shm_tx_post(struct shm_conn *sc, struct shm_tx_ring *r,
			       uint8_t *p, unsigned type, uint32_t len,
			       uint64_t span)
{
	atomic_store_explicit((_Atomic uint64_t *)(void *)p,
			      shm_hdr_make(sc->tx_seq, type, len),
			      memory_order_release);
	sc->tx_seq = shm_seq_next(sc->tx_seq);
	r->head += span;
}

/* The ring for a data packet of len bytes (the line ring aside): the
 * bulk ring takes those of a deferred put (messages in a window) from
 * bulk_min; a ping-pong's messages stay in the main ring, whose lines
 * come round again sooner. */
static inline struct shm_tx_ring *shm_tx_data_ring(struct shm_conn *sc,
						   uint64_t len, int deferred)
{
	return &sc->tx[deferred && len >= sc->bulk_min ? SHM_BULK : SHM_MAIN];
}

/* Room for need bytes in one piece at ring r's head, a PAD packet
 * filling the ring's end first if they do not fit before it: 1, or 0
 * (nothing written) without that room. */
int shm_tx_reserve(struct shm_conn *sc, struct shm_tx_ring *r, uint64_t need);

/* A packet of need bytes (up to cold_line_max) into the line ring of a
 * writer kept out of its bulk ring and copy area: padded to the ring's
 * end first if it does not fit before it; NULL without room.  A pair
 * that exchanges only such packets (and puts by CMA) never touches a
 * page of its main ring. */
struct shm_tx_ring *shm_tx_line_cold(struct shm_conn *sc, uint64_t need);

/* The ring a put of one packet of len bytes (need with its header, in
 * whole lines) goes to now: the line ring if it is one line (or, kept
 * out, up to cold_line_max: then only there) and there is room there,
 * else the main or the bulk ring (shm_tx_data_ring) if the packet fits
 * before its end and in the space the cached tail shows; NULL sends the
 * put the general way. */
static inline struct shm_tx_ring *shm_tx_ring_for(struct shm_conn *sc,
						  uint64_t len, uint64_t need,
						  int deferred)
{
	struct shm_tx_ring *r = &sc->tx[SHM_LINES];

	if (need == SHM_LINE && r->size && shm_tx_space(sc, r, need) >= need)
		return r;
	if (need <= sc->cold_line_max)	/* (a look at the main ring's
					 * space would say hello to it) */
		return shm_tx_line_cold(sc, need);
	r = shm_tx_data_ring(sc, len, deferred);
	if (need > r->size - (r->head & r->mask) ||
	    shm_tx_space(sc, r, need) < need)
		return NULL;
	return r;
}

/* The packet at ring r's head (header h) cannot be: fail the connection
 * with -EPROTO, saying why (the field and its value). */
int shm_rx_corrupt(struct shm_conn *sc, const struct shm_rx_ring *r,
		   uint64_t h, const char *why);
/* ... because field `field` of its `what` holds val. */
int shm_rx_corrupt_field(struct shm_conn *sc, const struct shm_rx_ring *r,
			 uint64_t h, const char *what, const char *field,
			 uint64_t val);

/* The buffers of the last large puts (RDMACH_SHM_RECENT): the choice
 * between CMA and the copy area asks whether a put reuses one. */
uintptr_t shm_main_buf(const struct iovec *iov, int iovcnt);
int shm_recent_buf(const struct shm_tl *tl, uintptr_t buf);
void shm_recent_note(struct shm_tl *tl, const struct iovec *iov, int iovcnt);

#endif /* RDMACH_SHM_CONN_H */
