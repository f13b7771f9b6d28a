/*
 * ib_ep.h - rdma_ib endpoints (rdma_ib private, prefix ib_): one per peer,
 * in the sense of UCX's uct_ep: an RC QP, the receive ring the peer
 * writes into and the staging mirror of the peer's ring we write from
 * (proto/ring.h), the control words, selective signalling, credits,
 * keepalive, the put/get data path, and the completions of the CQ all
 * endpoints share (struct ib_tl, ib_tl.h).  ib_ep.c owns it; the
 * interface (ib_iface.c) creates, wires and tears endpoints down.  Below
 * the interface, above the protocols it runs (ib_zcopy.h, ib_spipe.h,
 * ib_large.h), which reach back only through what it gives them at
 * set-up (a CQ poll, posting calls, pointers to its words).
 *
 * Per endpoint one buffer: [ ring | ctrl, to a page | staging ], in two
 * registrations: ring and ctrl (remote write: the peer's rkey), staging
 * (local only: the source of our writes; the peer cannot reach it).
 * ring    the peer writes its packets here (we poll flags or the head);
 * ctrl    words the peer writes: its head (basic mode), its consumed count
 *         of our packets (explicit credit), fin, keepalive target, the
 *         last zero-copy put it read, the last superpipeline chunk it
 *         copied out and its landing area (ib_spipe.h);
 * staging our packets, at the offsets they take in the peer's ring.
 */
#ifndef RDMACH_IB_EP_H
#define RDMACH_IB_EP_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "core/tl.h"
#include "ib_dev.h"
#include "ib_spipe.h"
#include "ib_srq.h"
#include "ib_tl.h"
#include "ib_zcopy.h"
#include "proto/ring.h"

#define IB_SQ_RESERVE 3		/* slots kept for credit, keepalive, fin */
/* staging after ring (r bytes) and the ctrl words, on a page of its own */
#define IB_STAGE_OFF(r)	((r) + 4096u)

struct ib_ctrl {
	uint64_t head;		/* basic mode: the peer's head in our ring */
	uint64_t tail;		/* the peer's consumed count of our packets */
	uint64_t fin;		/* the peer finalized: its final head + 1,
				 * | IB_PEER_WHOLE (!= 0: it is finalizing) */
	uint64_t ka;		/* keepalive target, never read */
	uint64_t zc_ack;	/* last zero-copy put the peer has read */
	struct ib_sp_ctrl sp;	/* its superpipeline's ack, landing area */
	uint64_t out[2];	/* ours: source of our 16-byte ctrl writes */
	/* the shared receive path (ib_srq.h); peers without IB_CAP_SRQ
	 * never write these */
	uint64_t srq_grant;	/* credits the peer granted us, in total */
	uint64_t srq_fin;	/* shared-path messages it sent: before fin */
	uint64_t ring_addr;	/* the ring it offers us (promotion) ... */
	uint64_t ring_key;	/* ... its rkey | IB_RING_OFFER, written last */
	uint64_t srq_ask;	/* the peer used up grant g and asks: g + 1 */
};

#define IB_RING_OFFER (1ull << 32)

struct ib_sig {			/* a signalled WR in flight */
	uint64_t head;		/* ring bytes written when it completes */
	uint32_t nwr;		/* send queue slots it retires */
	uint32_t kind;		/* enum ib_wr_kind (ib_ep.c) */
	uint64_t chunk;		/* superpipeline chunk it writes, or 0 */
};

struct ib_conn {
	struct rdmach_conn *conn;
	struct ib_tl *tl;
	int live_at;		/* index in tl->live, or -1 */
	struct ibv_qp *qp;
	struct ibv_qp *loop_qp;	/* connection to self: the responder QP */
	uint8_t *buf;
	size_t buf_len;
	int ctrl_slot;		/* buf is a ctrl slot of tl->srq's pages */
	struct ibv_mr *mr;	/* ring and ctrl: the peer writes */
	struct ibv_mr *stage_mr;	/* staging: local only */
	/* a connection that started cold (ib_srq.h): buf is the ctrl page
	 * alone; the ring and the staging mirror come apart, when promoted */
	uint8_t *ring_buf, *stage_buf;
	struct ibv_mr *ring_mr;
	uint32_t ring_rkey;	/* the peer's ring (rkey: its ctrl words) */
	int tx_cold;		/* we send on the peer's shared path */
	int rx_cold;		/* the peer sends on ours */
	int ring_offered;	/* 1: we offered a ring (ring_buf), no switch
				 * yet; -1: asked once (offered or refused) */
	int ring_held;		/* counted in srq_st.rings */
	struct ib_srq_rx srx;
	struct ib_srq_tx stx;
	uint32_t cold_max;	/* bytes of a shared-path message to the peer,
				 * header included: the smaller pool's */
	uint64_t sig_bytes;	/* signal a write after this many bytes */
	struct ib_ctrl *ctrl;
	struct ring_tx tx;
	struct ring_rx rx;
	struct ring_scan scan;
	uint32_t psn;
	uint64_t r_ring, r_ctrl;
	uint32_t rkey;
	uint32_t peer_caps;	/* IB_CAP_* the peer handles */
	uint64_t tail_seen;	/* last explicit credit read from ctrl */
	/* send queue */
	unsigned int sq_free;
	unsigned int unsig_wrs;
	uint64_t unsig_bytes;
	struct ib_sig *sig;
	unsigned int sig_mask;
	uint64_t sig_head, sig_tail;
	/* writes and sends: the next one's sequence number (in its wr_id),
	 * the first not known complete (ib_ep_wr_out: in tl->wr_out too),
	 * and whether the QP's first error completion came (the others
	 * follow, one completion each) */
	uint32_t wr_seq, wr_done;
	int wr_flushing;
	/* while a post waits for room (ib_wr_sweep): since when sig_tail
	 * has stood at stuck_tail with signalled writes in flight */
	uint64_t stuck_since, stuck_tail;
	/* liveness */
	int broken;		/* an error completion was seen */
	int ka_pending;
	uint64_t ka_sent;
	unsigned int idle;
	unsigned int idle_gets;	/* empty gets, see IB_IDLE_GETS */
	uint64_t idle_since;
	uint64_t small_max;	/* largest put of ib_put_one (0: none) */
	uint64_t ring_left;	/* a large put going through the ring: its
				 * bytes not taken yet (decided once) */
	struct ib_zc_conn zc;	/* zero-copy (ib_zcopy.c) */
	struct ib_sp_conn sp;	/* superpipeline (ib_spipe.c) */
	int sp_offered;		/* the peer may send us superpipeline
				 * messages: counted in large.land_offered */
	/* the connection manager's look at its use (ib_cm.c): the bytes
	 * put and got then, and since when they stand */
	uint64_t cm_used, cm_used_at;
};

/* Its writes and sends posted and not known complete. */
static inline unsigned int ib_ep_wr_out(const struct ib_conn *ic)
{
	return ic->wr_seq - ic->wr_done;
}

/* An endpoint to `peer` with its registered buffer and QP (in INIT), or
 * NULL (logged). */
struct ib_conn *ib_ep_create(struct ib_tl *tl, int peer);
void ib_ep_destroy(struct ib_conn *ic);

/* What the peer needs to reach qp (ic->qp, or the loopback responder) and
 * write into our ring. */
void ib_ep_local_addr(const struct ib_conn *ic, const struct ibv_qp *qp,
		      struct ib_addr *a);

/* Connect to the peer's address r (a connection to self connects its two
 * QPs).  0 or a negative errno (logged). */
int ib_ep_connect(struct ib_conn *ic, const struct ib_addr *r);

/* Reap every completion of the shared CQ and hand each to its endpoint.
 * 0, or -EIO when the CQ itself failed. */
int ib_ep_poll(struct ib_tl *tl);

/* The data path (struct rdmach_tl_ops put/get). */
ssize_t ib_ep_put(struct rdmach_conn *conn, const struct iovec *iov,
		  int iovcnt, size_t total);
ssize_t ib_ep_get(struct rdmach_conn *conn, const struct iovec *iov,
		  int iovcnt, size_t total);
/* put_deferred / put_done (deferred zero-copy puts, ib_zcopy.h). */
ssize_t ib_ep_put_deferred(struct rdmach_conn *conn, const struct iovec *iov,
			   int iovcnt, size_t total, uint64_t *ticket);
int ib_ep_put_done(struct rdmach_conn *conn, uint64_t *done);
/* peek / consume (reading in place, include/rdmach.h). */
ssize_t ib_ep_peek(struct rdmach_conn *conn, const void **buf);
int ib_ep_consume(struct rdmach_conn *conn, size_t n);

/* Credits both ways and liveness, without moving data. */
void ib_ep_progress(struct ib_conn *ic);
/* The connection fails with err and what (logged), unless it has. */
void ib_ep_fail(struct ib_conn *ic, int err, const char *what);
/* Every IB_EP_ASYNC_CALLS calls (progress, and a connection's waits):
 * the device's async events.  After a CQ overrun or a failed device
 * every connection fails, and tl->dead says why. */
void ib_ep_async_tick(struct ib_tl *tl);

/* The connection is up: it joins tl->live (once).  drop: it leaves
 * (failed, or destroyed), the last entry taking its place. */
void ib_ep_live_add(struct ib_conn *ic);
void ib_ep_live_drop(struct ib_conn *ic);

/* Can the connection be closed for being idle (ib_cm.h)?  1 when
 * nothing of ours is in flight, the peer reads none of our memory and
 * neither end is failed or finalizing; the bytes each end put and got
 * are the connection manager's to compare.  An unsignalled run of writes
 * is closed with a keepalive (signalled), so that a later call says 1. */
int ib_ep_quiesce(struct ib_conn *ic);

/* Is the peer's adapter there (a connection no call uses: one being
 * closed)?  A signalled keepalive goes out unless one is in flight; 0,
 * or a negative errno once one has gone unanswered for
 * RDMACH_PEER_TIMEOUT_MS or the connection failed. */
int ib_ep_probe(struct ib_conn *ic);

/* Has the peer begun to finalize (its fin word)? */
int ib_ep_peer_finalizing(const struct ib_conn *ic);

/* The ticket of our next zero-copy put (every one before it is done
 * once ib_ep_quiesce said so), and a new endpoint of the same pair going
 * on from it: tickets of a connection increase across its closes. */
uint64_t ib_ep_tickets_next(const struct ib_conn *ic);
void ib_ep_tickets_go_on(struct ib_conn *ic, uint64_t next);

/* Finalize: tell the peer our final head; is everything we posted done
 * (or moot: the peer left or the connection failed)? */
void ib_ep_send_fin(struct ib_conn *ic, uint64_t deadline_ns);
int ib_ep_drained(const struct ib_conn *ic);

#endif /* RDMACH_IB_EP_H */
