/*
 * ib_ep.c - rdma_ib endpoints: the receiver-side ring (proto/ring) written
 * by the peer with RDMA writes from a staging mirror, replicated
 * head/tail, selective signalling, delayed credits, keepalive, and the
 * put/get data path (one packet, pipelined copy, zero-copy by RDMA read
 * through ib_zcopy, the superpipeline through ib_spipe; ib_large chooses
 * among the last three).  See ib_ep.h for the buffer layout.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/iov.h"
#include "core/log.h"
#include "ib_ep.h"
#include "ib_large.h"
#include "ib_peer.h"
#include "ib_spipe.h"
#include "ib_srq.h"
#include "ib_zcopy.h"
#include "proto/ring.h"

#define IB_BATCH 8		/* packets built before posting, no pipeline */
#define IB_IDLE_POLLS 16	/* ib_idle calls between clock reads (an
				 * empty get calls it every IB_IDLE_GETS) */
#define IB_IDLE_GETS 16		/* empty gets between looks at credits,
				 * finalize and liveness */
#define IB_CQ_IDLE_POLLS 64	/* gets between CQ polls when nothing
				 * signalled is in flight (an error
				 * completion of an unsignalled write) */

enum ib_wr_kind { IB_WR_DATA, IB_WR_KA, IB_WR_FIN, IB_WR_SPIPE, IB_WR_SEND };

/* A cold connection's receive ring: one flag word that always reads as an
 * arrival, so that the empty poll of ib_ep_get (unchanged for rings) leads
 * a cold connection's get into ib_get_ring, which hands it to the shared
 * path.  Nothing writes it after set-up. */
static uint64_t ib_cold_ring[8] __attribute__((aligned(64)));

/* The peer writes our ctrl words at these offsets: wire format. */
_Static_assert(offsetof(struct ib_ctrl, zc_ack) == 32 &&
	       offsetof(struct ib_ctrl, sp) == 40 &&
	       offsetof(struct ib_sp_ctrl, addr) == 16 &&
	       offsetof(struct ib_ctrl, srq_grant) == 80 &&
	       offsetof(struct ib_ctrl, ring_key) == 104 &&
	       sizeof(struct ib_ctrl) == 120, "struct ib_ctrl is wire format");

static int ib_fail(struct ib_conn *ic, int err, const char *what)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	/* the adapter stops and flushes what is posted: the writes leave
	 * tl->wr_out and the send buffers of SENDs come back with the
	 * flushes (ib_wc_error), which rxe, retrying a dead peer for ever,
	 * would otherwise never give */
	if (ic->qp && !ic->conn->err)
		ibv_modify_qp(ic->qp, &a, IBV_QP_STATE);
	return rdmach_conn_fail(ic->conn, err, "%s (device %s port %u)", what,
				ic->tl->dev.name, ic->tl->dev.port);
}

#define IB_EP_ASYNC_CALLS 256	/* between looks at the device's async
				 * events (a system call) */

/* A CQ overrun or a failed device: no connection of the device can be
 * trusted any more (a completion may be lost), so each fails, saying so,
 * and so does each one asked for later (ib_cm.c). */
void ib_ep_async_tick(struct ib_tl *tl)
{
	char why[sizeof(tl->dead)];
	int i;

	if (++tl->async_tick % IB_EP_ASYNC_CALLS ||
	    !ib_dev_async(&tl->dev, tl->cq, why, sizeof(why)))
		return;
	memcpy(tl->dead, why, sizeof(why));
	for (i = 0; i < tl->base.ctx->size; i++)
		if (tl->conns[i])
			ib_ep_fail(tl->conns[i], -EIO, why);
	if (!tl->failed)
		tl->failed = -EIO;
}

void ib_ep_fail(struct ib_conn *ic, int err, const char *what)
{
	if (ic->broken || ic->conn->err)
		return;
	ic->broken = 1;
	ib_fail(ic, err, what);
}

/* ---- send queue: posting with selective signalling -------------------- */

/*
 * While a post waits for room: a connection whose signalled writes have
 * not moved for 1.5 x RDMACH_PEER_TIMEOUT_MS (ib_dev_probe_wait_ns) has a
 * dead peer, whose adapter may retry for ever (rxe); it fails, its QP
 * flushes and its writes leave tl->wr_out, so that dead peers cannot hold
 * the whole CQ and fail a healthy connection's post.  The progress that
 * would find them (keepalives) does not run while a post waits.
 */
static void ib_wr_sweep(struct ib_tl *tl, uint64_t now)
{
	uint64_t wait = ib_dev_probe_wait_ns(tl->base.ctx->peer_timeout_ns);
	char msg[128];
	unsigned int i;

	for (i = 0; i < tl->nlive; i++) {
		struct ib_conn *ic = tl->live[i];

		if (ic->broken || ic->sig_head == ic->sig_tail) {
			ic->stuck_since = 0;
		} else if (!ic->stuck_since || ic->stuck_tail != ic->sig_tail) {
			ic->stuck_tail = ic->sig_tail;
			ic->stuck_since = now;
		} else if (now - ic->stuck_since > wait) {
			snprintf(msg, sizeof(msg), "no completion from the "
				 "peer's adapter within %.1f s while the "
				 "completion queue was full (peer dead?)",
				 (double)wait / 1e9);
			ib_ep_fail(ic, -ECONNRESET, msg);
		}
	}
}

/*
 * Every write and send counts against the CQ until it is known complete
 * (tl->wr_out): a QP in error completes each one, signalled or not, so
 * the CQ (ib_iface.c sizes it by tl->wr_max) holds the flushes of any
 * number of QPs failing at once.  Past tl->wr_signal_at a post is
 * signalled, so at most that many unsignalled ones are in flight and a
 * post past tl->wr_max always has a signalled one to wait for, up to 2.5
 * x RDMACH_PEER_TIMEOUT_MS: time for ib_wr_sweep to fail the connections
 * of dead peers that hold the room first.  0 or a negative errno.
 */
static __attribute__((noinline)) int ib_wr_room(struct ib_conn *ic)
{
	struct ib_tl *tl = ic->tl;
	uint64_t timeout = ic->conn->ctx->peer_timeout_ns;
	uint64_t now = rdmach_now_ns(), next = now;
	uint64_t deadline = now + ib_dev_probe_wait_ns(timeout) + timeout;

	while (tl->wr_out >= tl->wr_max && !ic->broken) {
		if (ib_ep_poll(tl) || (now = rdmach_now_ns()) > deadline) {
			ic->broken = 1;
			return ib_fail(ic, -ECONNRESET, "completion queue "
				       "full: no completion within the peer "
				       "timeout (RDMACH_IB_CQ_WRS)");
		}
		if (now >= next) {	/* a millisecond apart */
			ib_wr_sweep(tl, now);
			next = now + 1000000;
		}
	}
	return ic->broken ? (ic->conn->err ? ic->conn->err : -ECONNRESET) : 0;
}

/* Before a post: whether it must be signalled (*signal), and room. */
static inline int ib_wr_budget(struct ib_conn *ic, int *signal)
{
	struct ib_tl *tl = ic->tl;

	if (__builtin_expect(tl->wr_out < tl->wr_signal_at, 1))
		return 0;
	*signal = 1;
	return tl->wr_out >= tl->wr_max ? ib_wr_room(ic) : 0;
}

static inline uint64_t ib_wr_id(const struct ib_conn *ic)
{
	return (uint64_t)(uint32_t)ic->conn->peer |
	       (uint64_t)(ic->wr_seq & IB_WR_SEQ_MASK) << IB_WR_SEQ_SHIFT;
}

static inline void ib_wr_retire(struct ib_conn *ic, unsigned int n)
{
	ic->wr_done += n;
	ic->tl->wr_out -= n;
}

/* Book-keeping of a posted WR: slots, and the signalled ones' entries. */
static inline void ib_posted(struct ib_conn *ic, uint32_t len, int signal,
			     enum ib_wr_kind kind, uint64_t head_after,
			     uint64_t chunk)
{
	ic->sq_free--;
	ic->wr_seq++;
	ic->tl->wr_out++;
	ic->unsig_wrs++;
	ic->unsig_bytes += len;
	if (signal) {
		struct ib_sig *s = &ic->sig[ic->sig_head++ & ic->sig_mask];

		s->head = head_after;
		s->nwr = ic->unsig_wrs;
		s->kind = kind;
		s->chunk = chunk;
		ic->tl->sig_inflight++;
		ic->unsig_wrs = 0;
		ic->unsig_bytes = 0;
	}
}

static int ib_post_wr(struct ib_conn *ic, void *src, uint32_t len,
		      uint32_t lkey, uint64_t raddr, uint32_t rkey,
		      enum ib_wr_kind kind, int signal, uint64_t head_after,
		      uint64_t chunk)
{
	struct ib_tl *tl = ic->tl;
	struct ibv_sge sge = { (uintptr_t)src, len, lkey };
	struct ibv_send_wr wr, *bad;
	int ret;

	memset(&wr, 0, sizeof(wr));
	signal |= ic->unsig_wrs + 1 >= tl->sq_depth / 4 ||
		  ic->unsig_bytes + len >= ic->sig_bytes;
	ret = ib_wr_budget(ic, &signal);
	if (ret)
		return ret;
	wr.wr_id = ib_wr_id(ic);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = (signal ? IBV_SEND_SIGNALED : 0) |
			(len <= tl->inline_max ? IBV_SEND_INLINE : 0);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	ret = ibv_post_send(ic->qp, &wr, &bad);
	if (ret) {
		char msg[96];

		snprintf(msg, sizeof(msg), "ibv_post_send: %s", strerror(ret));
		ic->broken = 1;
		return ib_fail(ic, -ECONNRESET, msg);
	}
	ib_posted(ic, len, signal, kind, head_after, chunk);
	return 0;
}

static int ib_post(struct ib_conn *ic, void *src, uint32_t len,
		   uint64_t raddr, uint32_t rkey, enum ib_wr_kind kind,
		   int signal, uint64_t head_after)
{
	const uint8_t *p = src;
	/* staging has a registration of its own (the peer cannot reach it) */
	uint32_t lkey = p >= ic->tx.stage && p < ic->tx.stage + ic->tx.size ?
			ic->stage_mr->lkey : ic->mr->lkey;

	return ib_post_wr(ic, src, len, lkey, raddr, rkey, kind, signal,
			  head_after, 0);
}

/* An 8-byte control word into the peer's ctrl area (inline). */
static int ib_post_ctrl(struct ib_conn *ic, size_t field, uint64_t value,
			enum ib_wr_kind kind, int signal)
{
	return ib_post(ic, &value, sizeof(value), ic->r_ctrl + field, ic->rkey,
		       kind, signal, ic->tx.head);
}

static int ib_post_packet(struct ib_conn *ic, uint64_t off, uint64_t bytes,
			  uint64_t head_after)
{
	int ret = ib_post(ic, ic->tx.stage + off, (uint32_t)bytes,
			  ic->r_ring + off, ic->ring_rkey, IB_WR_DATA, 0,
			  head_after);

	if (ret || ic->tl->mode != RING_MODE_BASIC)
		return ret;
	/* basic: the head travels in its own write, after the data */
	return ib_post_ctrl(ic, offsetof(struct ib_ctrl, head), head_after,
			    IB_WR_DATA, 0);
}

/* n (1 or 2) words into the peer's ctrl area at field, one write.  Waits
 * for a send queue slot up to RDMACH_PEER_TIMEOUT_MS.  0 or a negative
 * errno. */
static int ib_post_ctrl_words(struct ib_conn *ic, size_t field,
			      const uint64_t *words, unsigned int n)
{
	uint64_t deadline = rdmach_now_ns() + ic->conn->ctx->peer_timeout_ns;
	uint64_t one = words[0];

	while (ic->sq_free < 1 && !ic->broken) {
		if (ib_ep_poll(ic->tl) || rdmach_now_ns() > deadline)
			return ib_fail(ic, -ECONNRESET, "send queue full: "
				       "cannot write a control word");
	}
	if (ic->broken)
		return ic->conn->err ? ic->conn->err : -ECONNRESET;
	/* one word travels inline (from the stack); two from ctrl->out,
	 * registered, should the device not inline 16 bytes */
	if (n == 2) {
		ic->ctrl->out[0] = words[0];
		ic->ctrl->out[1] = words[1];
	}
	return ib_post(ic, n == 1 ? &one : (void *)ic->ctrl->out,
		       (uint32_t)(n * sizeof(uint64_t)), ic->r_ctrl + field,
		       ic->rkey, IB_WR_DATA, 0, ic->tx.head);
}

/* ---- completions ------------------------------------------------------- */

static void ib_activity(struct ib_conn *ic)
{
	ic->idle = 0;
	ic->idle_since = 0;
}

/* The signalled WRs of a QP in error (or going) that have not completed:
 * they complete only as errors.  They leave the count of signalled WRs
 * in flight now (their CQ entries leave tl->wr_out one by one, as they
 * come: ib_wr_flushed); so do the send buffers of their SENDs, which the
 * QP reads no more and the other connections may need (the pool may not
 * grow). */
static void ib_sig_drop(struct ib_conn *ic)
{
	for (; ic->sig_tail != ic->sig_head; ic->sig_tail++) {
		struct ib_sig *g = &ic->sig[ic->sig_tail & ic->sig_mask];

		if (g->kind == IB_WR_SEND && g->chunk != UINT64_MAX)
			ib_srq_tx_put(ic->tl->srq, (int32_t)g->chunk);
		ic->tl->sig_inflight--;
	}
}

static void ib_wc_error(struct ib_conn *ic, const struct ibv_wc *wc)
{
	char msg[160];

	/* the QP is in error (failed, or ib_fail moved it there) */
	ib_sig_drop(ic);
	if (ic->broken)
		return;
	ic->broken = 1;
	if (ib_peer_load64(&ic->ctrl->fin)) {
		/* the peer finalized and tore its QP down: not a failure */
		rdmach_debug("ib: rank %d gone after finalize: %s",
			     ic->conn->peer, ibv_wc_status_str(wc->status));
		return;
	}
	snprintf(msg, sizeof(msg), "%s (status %d, vendor error 0x%x) on "
		 "qp %u", ibv_wc_status_str(wc->status), wc->status,
		 wc->vendor_err, wc->qp_num);
	ib_fail(ic, -ECONNRESET, msg);
}

/* An error completion of the QP: from its first one on, every write and
 * send not complete yet comes as one; those posted before the first
 * completed without one (unsignalled), which its wr_id tells: a write's
 * carries its own number, a read's the next write's. */
static void ib_wr_flushed(struct ib_conn *ic, uint64_t wr_id)
{
	if (!ic->wr_flushing) {
		uint32_t first = (uint32_t)(wr_id >> IB_WR_SEQ_SHIFT) &
				 IB_WR_SEQ_MASK;
		unsigned int later = (ic->wr_seq - first) & IB_WR_SEQ_MASK;

		ic->wr_flushing = 1;
		if (later < ib_ep_wr_out(ic))
			ib_wr_retire(ic, ib_ep_wr_out(ic) - later);
	}
	if (!(wr_id & IB_ZC_WRID) && ib_ep_wr_out(ic)) {
		ib_wr_retire(ic, 1);
		ic->tl->wr_flushed++;
	}
}

/* Did the completion come from a QP of ic?  One of a QP destroyed
 * since (the connection closed while idle and made again: the rank's
 * slot is the same; a flush, or a keepalive a close left in flight) is
 * not the new connection's. */
static int ib_wc_ours(const struct ib_conn *ic, const struct ibv_wc *wc)
{
	return wc->qp_num == ic->qp->qp_num ||
	       (ic->loop_qp && wc->qp_num == ic->loop_qp->qp_num);
}

static void ib_completion(struct ib_conn *ic, const struct ibv_wc *wc)
{
	struct ib_sig *s;

	if (wc->status != IBV_WC_SUCCESS) {
		ib_wr_flushed(ic, wc->wr_id);
		ib_wc_error(ic, wc);
		return;
	}
	if (ic->sig_tail == ic->sig_head)
		return;		/* cannot happen */
	s = &ic->sig[ic->sig_tail++ & ic->sig_mask];
	ic->tl->sig_inflight--;
	ic->sq_free += s->nwr;
	ib_wr_retire(ic, s->nwr);
	ring_tx_acked(&ic->tx, s->head);
	if (s->kind == IB_WR_SPIPE)
		ib_sp_completed(&ic->sp, s->chunk);
	if (s->kind == IB_WR_SEND && s->chunk != UINT64_MAX)
		ib_srq_tx_put(ic->tl->srq, (int32_t)s->chunk);
	if (s->kind == IB_WR_KA) {
		ic->ka_pending = 0;
		ic->idle_since = rdmach_now_ns();
	}
}

static void ib_cold_recv(struct ib_tl *tl, const struct ibv_wc *wc);

/* Out of line: the gets that call it when due stay small. */
__attribute__((noinline)) int ib_ep_poll(struct ib_tl *tl)
{
	struct ibv_wc wc[16];
	int n, i;

	while ((n = ibv_poll_cq(tl->cq, 16, wc)) > 0) {
		for (i = 0; i < n; i++) {
			uint64_t wr_id = wc[i].wr_id;
			struct ib_conn *ic;

			if (__builtin_expect(wr_id & (IB_CM_WRID |
						      IB_SRQ_WRID), 0)) {
				if (wr_id & IB_CM_WRID)
					tl->cm_wc(tl, &wc[i]);
				else
					ib_cold_recv(tl, &wc[i]);
				continue;
			}
			ic = tl->conns[(uint32_t)wr_id];
			if (!ic || !ib_wc_ours(ic, &wc[i]))
				continue;
			if (wr_id & IB_ZC_WRID) {
				ib_zc_completion(&ic->zc, &wc[i]);
				if (wc[i].status == IBV_WC_SUCCESS)
					continue;
			}
			ib_completion(ic, &wc[i]);
		}
		if (n < 16)
			break;
	}
	if (n < 0) {
		rdmach_err("ib: ibv_poll_cq on %s failed", tl->dev.name);
		return -EIO;
	}
	return 0;
}

/* ---- credits and liveness ---------------------------------------------- */

static int ib_poll_cb(void *tl)
{
	return ib_ep_poll(tl);
}

static int ib_credit_in(struct ib_conn *ic, uint64_t consumed)
{
	if (ring_tx_credit(&ic->tx, consumed)) {
		ic->broken = 1;
		return ib_fail(ic, -EPROTO, "protocol error: credit beyond "
			       "what was written");
	}
	return 0;
}

/* Explicit tail update from the peer, and credits piggybacked on packets
 * that arrived but were not read yet. */
static int ib_take_credit(struct ib_conn *ic, int scan)
{
	uint64_t t = ib_peer_load64(&ic->ctrl->tail);
	int64_t c;

	if (t != ic->tail_seen) {
		ic->tail_seen = t;
		ic->conn->stats.credit_updates_received++;
		ib_activity(ic);
		if (ib_credit_in(ic, t))
			return -EPROTO;
	}
	if (!scan || ic->tl->mode == RING_MODE_BASIC || ic->rx_cold)
		return 0;
	c = ring_rx_scan(&ic->rx, &ic->scan, 1, UINT64_MAX);
	if (c < 0) {
		ic->broken = 1;
		return ib_fail(ic, -EPROTO, "protocol error: corrupt packet "
			       "header in the ring");
	}
	return c ? ib_credit_in(ic, (uint64_t)c) : 0;
}

static void ib_cold_grant_out(struct ib_conn *ic);

static void ib_credit_out(struct ib_conn *ic)
{
	struct ib_tl *tl = ic->tl;
	uint64_t pos = ic->rx.pos;

	if (__builtin_expect(ic->rx_cold, 0)) {
		ib_cold_grant_out(ic);
		return;
	}
	if (ic->broken || ic->sq_free < 1 ||
	    !ring_rx_credit_due(&ic->rx, tl->mode == RING_MODE_BASIC,
				tl->credit_thr))
		return;
	if (ib_post_ctrl(ic, offsetof(struct ib_ctrl, tail), pos,
			 IB_WR_DATA, 0))
		return;
	ring_rx_credit_told(&ic->rx, pos);
	ic->conn->stats.credit_updates_sent++;
}

/*
 * Nothing came from the peer for half of RDMACH_PEER_TIMEOUT_MS: post a
 * signalled write that its adapter must ack.  A dead peer then gives a
 * retry error, or, where the transport does not report one in time (rxe),
 * no ack at all within RDMACH_PEER_TIMEOUT_MS: both fail the connection.
 * With the send queue full there is no slot for the probe; the writes that
 * fill it must then be acked within the same 1.5 x the timeout.
 */
/* A signalled keepalive write (its completion clears ka_pending). */
static void ib_ka_send(struct ib_conn *ic, uint64_t now)
{
	if (!ib_post_ctrl(ic, offsetof(struct ib_ctrl, ka), now, IB_WR_KA,
			  1)) {
		ic->ka_pending = 1;
		ic->ka_sent = now;
	}
}

/* The same, only if it goes without waiting for room: the connection
 * manager calls here, where no poll may run (it may close endpoints). */
static void ib_ka_try(struct ib_conn *ic, uint64_t now)
{
	if (ic->sq_free > 0 && ic->tl->wr_out < ic->tl->wr_max)
		ib_ka_send(ic, now);
}

static void ib_idle(struct ib_conn *ic)
{
	uint64_t now, limit = ic->conn->ctx->peer_timeout_ns;
	char msg[128];

	if (++ic->idle % IB_IDLE_POLLS || ic->broken ||
	    ib_peer_load64(&ic->ctrl->fin))
		return;
	now = rdmach_now_ns();
	if (ic->unsig_wrs && !ic->ka_pending && ic->sq_free > 0 &&
	    ic->tl->wr_out >= ic->tl->wr_signal_at) {
		/* its last writes are unsignalled and count against the CQ
		 * until a signalled one follows: the keepalive, now */
		ib_ka_send(ic, now);
		return;
	}
	if (ic->ka_pending) {
		if (now - ic->ka_sent < limit)
			return;
		snprintf(msg, sizeof(msg), "no answer from the peer's adapter "
			 "to a keepalive within %.1f s (peer dead?)",
			 (double)limit / 1e9);
		ic->broken = 1;
		ib_fail(ic, -ECONNRESET, msg);
		return;
	}
	if (!ic->idle_since) {
		ic->idle_since = now;
		return;
	}
	if (now - ic->idle_since < limit / 2)
		return;
	if (ic->sq_free < 1) {
		/* no slot for a probe: every one holds a write the peer's
		 * adapter has not acknowledged, and those are the probe (rxe
		 * retries them for ever: no error would ever come) */
		if (now - ic->idle_since < ib_dev_probe_wait_ns(limit))
			return;
		snprintf(msg, sizeof(msg), "no answer from the peer's adapter "
			 "within %.1f s, send queue full (peer dead?)",
			 (double)ib_dev_probe_wait_ns(limit) / 1e9);
		ic->broken = 1;
		ib_fail(ic, -ECONNRESET, msg);
		return;
	}
	rdmach_debug("ib: rank %d silent for %.1f s: keepalive write",
		     ic->conn->peer, (double)(now - ic->idle_since) / 1e9);
	ib_ka_send(ic, now);
}

/* Why no more bytes can go to this peer. */
static int ib_put_error(struct ib_conn *ic)
{
	if (ib_peer_load64(&ic->ctrl->fin))
		return -EPIPE;
	if (ic->conn->err)
		return ic->conn->err;
	return ib_fail(ic, -ECONNRESET, "queue pair in error");
}

/* ---- put / get ------------------------------------------------------------ */

struct ib_batch {
	uint64_t off[IB_BATCH], bytes[IB_BATCH], end[IB_BATCH];
	int n;
};

static int ib_batch_flush(struct ib_conn *ic, struct ib_batch *b)
{
	int i, ret = 0;

	for (i = 0; i < b->n && !ret; i++)
		ret = ib_post_packet(ic, b->off[i], b->bytes[i], b->end[i]);
	b->n = 0;
	return ret;
}

/* Room for the next packet: ring space and send queue slots. */
static int ib_reserve(struct ib_conn *ic, uint64_t want, struct ring_slot *s)
{
	struct ib_tl *tl = ic->tl;
	unsigned int need = (tl->mode == RING_MODE_BASIC ? 2 : 1) +
			    IB_SQ_RESERVE;
	uint64_t max = ring_max_payload(tl->mode, tl->chunk, ic->tx.size);
	int tries;

	for (tries = 0; tries < 2; tries++) {
		if (ic->sq_free >= need &&
		    !ring_tx_reserve(&ic->tx, want, max, s))
			return 0;
		if (tries)
			break;
		if (ib_ep_poll(tl) || ib_take_credit(ic, 1))
			return -EIO;
	}
	return -EAGAIN;
}

/* Waiting for the peer: credits both ways and liveness. */
static void ib_put_wait(struct ib_conn *ic)
{
	ib_take_credit(ic, 1);
	ib_credit_out(ic);
	ib_idle(ic);
}

/* ---- the shared path, sending (ib_srq.h) ------------------------------- */

/* Messages of up to this many bytes (header included) go inline. */
#define IB_COLD_INLINE 256

/* Room for n messages now: credits, send queue slots, send buffers. */
static int ib_cold_room(const struct ib_conn *ic, unsigned int n)
{
	return ic->stx.grant - ic->stx.sent >= n &&
	       ic->sq_free >= n + IB_SQ_RESERVE &&
	       ib_srq_tx_room(ic->tl->srq, n);
}

/* The peer's latest grant (its ctrl word); a grant beyond any pool is a
 * protocol error. */
static int ib_cold_take_grant(struct ib_conn *ic)
{
	uint64_t g = ib_peer_load64(&ic->ctrl->srq_grant);

	if (g <= ic->stx.grant)
		return 0;
	if (g - ic->stx.sent > IB_SRQ_GRANT_MAX) {
		ic->broken = 1;
		return ib_fail(ic, -EPROTO, "protocol error: shared-path "
			       "credits beyond any pool");
	}
	ic->stx.grant = g;
	return 0;
}

/* Out of credits: when the peer's pool goes by asking (ib_cold_hungry),
 * ask once per grant used up (an 8-byte write into its ctrl words). */
static void ib_cold_stalled(struct ib_conn *ic)
{
	ic->conn->stats.ring_full_stalls++;
	ic->tl->srq_st.no_credit++;
	if (ic->stx.sent < ic->stx.grant || ic->stx.asked == ic->stx.grant + 1 ||
	    ic->sq_free < 1 || ic->broken)
		return;
	if (!ib_post_ctrl(ic, offsetof(struct ib_ctrl, srq_ask),
			  ic->stx.grant + 1, IB_WR_DATA, 0))
		ic->stx.asked = ic->stx.grant + 1;
}

/*
 * One message onto the peer's shared path: header, a (alen bytes), then
 * clen bytes gathered from c.  A short one goes inline, others from a send
 * buffer, signalled so that its completion frees the buffer.  0, -EAGAIN
 * (no credit, slot or buffer now), or a negative errno (failed).
 */
static int ib_cold_send(struct ib_conn *ic, unsigned int type, const void *a,
			uint32_t alen, struct rdmach_iovc *c, uint32_t clen)
{
	struct ib_tl *tl = ic->tl;
	struct ib_srq *s = tl->srq;
	uint32_t len = (uint32_t)sizeof(struct ib_srq_hdr) + alen + clen;
	uint64_t small[IB_COLD_INLINE / 8];
	struct ib_srq_hdr h = { .src = (uint32_t)tl->base.ctx->rank,
				.type = (uint16_t)type };
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int32_t txb = -1;
	uint8_t *p = (uint8_t *)small;
	int signal, ret;

	if (!ib_cold_room(ic, 1))
		return -EAGAIN;
	if (len > IB_COLD_INLINE || len > tl->inline_max) {
		txb = ib_srq_tx_get(s);
		p = ib_srq_tx_buf(s, txb);
	}
	/* the grant of our own pool rides along while the peer is on it */
	if (ic->rx_cold) {
		h.grant = ic->srx.granted;
		ic->srx.told = ic->srx.granted;
	}
	memcpy(p, &h, sizeof(h));
	if (alen)
		memcpy(p + sizeof(h), a, alen);
	if (clen)
		rdmach_iovc_gather(c, p + sizeof(h) + alen, clen);
	signal = txb >= 0 || ic->unsig_wrs + 1 >= tl->sq_depth / 4;
	ret = ib_wr_budget(ic, &signal);
	if (ret) {
		ib_srq_tx_put(s, txb);
		return ret;
	}
	sge.addr = (uintptr_t)p;
	sge.length = len;
	sge.lkey = txb >= 0 ? ib_srq_tx_lkey(s, txb) : 0;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = ib_wr_id(ic);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = (signal ? IBV_SEND_SIGNALED : 0) |
			(txb < 0 ? IBV_SEND_INLINE : 0);
	ret = ibv_post_send(ic->qp, &wr, &bad);
	if (ret) {
		char msg[96];

		ib_srq_tx_put(s, txb);
		snprintf(msg, sizeof(msg), "ibv_post_send (shared path): %s",
			 strerror(ret));
		ic->broken = 1;
		return ib_fail(ic, -ECONNRESET, msg);
	}
	ib_posted(ic, len, signal, IB_WR_SEND, ic->tx.head,
		  txb < 0 ? UINT64_MAX : (uint64_t)txb);
	ic->stx.sent++;
	ic->conn->stats.packets_sent++;
	tl->srq_st.msgs_out++;
	tl->srq_st.bytes_out += clen;
	return 0;
}

/*
 * The peer offered a ring (ib_cold_offer on its side): make our staging
 * mirror of it, then tell the peer where our shared-path messages end (a
 * switch message carrying their count; it reads the ring only after it
 * has read them all) and write through the ring from then on.  1 switched,
 * 0 not now (no offer, or no credit for the switch yet), or a negative
 * errno.
 */
static int ib_cold_switch_out(struct ib_conn *ic)
{
	struct ib_tl *tl = ic->tl;
	uint64_t key = ib_peer_load64(&ic->ctrl->ring_key), before;
	int ret;

	if (!(key & IB_RING_OFFER))
		return 0;
	if (!ic->stage_buf) {
		uint64_t addr = ib_peer_load64(&ic->ctrl->ring_addr);
		uint64_t r = tl->ring_size;

		if (!addr || (addr & IB_ADDR_COLD)) {
			ic->broken = 1;
			return ib_fail(ic, -EPROTO, "protocol error: a ring "
				       "offered at a bad address");
		}
		if (posix_memalign((void **)&ic->stage_buf, 4096, r))
			return 0;	/* stays on the shared path for now */
		memset(ic->stage_buf, 0, r);
		ic->stage_mr = ibv_reg_mr(tl->dev.pd, ic->stage_buf, r, 0);
		if (!ic->stage_mr) {
			free(ic->stage_buf);
			ic->stage_buf = NULL;
			return 0;
		}
		ring_tx_init(&ic->tx, ic->stage_buf, r);
		ic->tx.near = !!(ic->peer_caps & IB_CAP_NEAR);
		ic->r_ring = addr;
		ic->ring_rkey = (uint32_t)key;
	}
	before = ic->stx.sent;
	ret = ib_cold_send(ic, IB_SRQ_SWITCH, &before, sizeof(before), NULL, 0);
	if (ret)
		return ret == -EAGAIN ? 0 : ret;
	ic->tx_cold = 0;
	ic->sig_bytes = ic->tx.size / 4;
	ic->small_max = tl->mode == RING_MODE_BASIC ? 0 :
			ring_max_payload(tl->mode, tl->chunk, tl->ring_size);
	rdmach_debug("ib: rank %d: on its ring after %" PRIu64 " shared-path "
		     "messages", ic->conn->peer, before);
	return 1;
}

/* A new zero-copy put on the shared path: the small first piece and the
 * rendezvous as two messages (ib_put_zcopy's contract). */
static ssize_t ib_put_zcopy_cold(struct ib_conn *ic, const struct iovec *iov,
				 int iovcnt, uint64_t *ticket, size_t head,
				 uint32_t len)
{
	unsigned int nmsg = head ? 2 : 1;
	struct rdmach_iovc c;
	struct ib_zc_ctl ctl;
	int64_t id;
	int ret;

	if (sizeof(struct ib_srq_hdr) + len > ic->cold_max ||
	    sizeof(struct ib_srq_hdr) + head > ic->cold_max)
		return -EAGAIN;		/* the copy path takes it */
	if (ic->tl->sig_inflight)
		ib_ep_poll(ic->tl);
	if (!ib_cold_room(ic, nmsg)) {
		ib_cold_stalled(ic);
		ib_put_wait(ic);
		return ic->broken ? ib_put_error(ic) : 0;
	}
	id = ib_zc_put_start(&ic->zc, iov, iovcnt, head, &ctl, !ticket);
	if (id < 0)
		return -EAGAIN;
	rdmach_iovc_init(&c, iov, iovcnt);
	ret = head ? ib_cold_send(ic, RDMACH_PKT_DATA, NULL, 0, &c,
				  (uint32_t)head) : 0;
	if (!ret)
		ret = ib_cold_send(ic, RDMACH_PKT_RNDV, &ctl, len, NULL, 0);
	if (ret) {
		ic->broken = 1;
		return ret == -EAGAIN ? ib_fail(ic, -ECONNRESET, "shared path: "
						"no room for a rendezvous") : ret;
	}
	if (!ticket)
		return 0;
	*ticket = (uint64_t)id;
	return (ssize_t)(head + ctl.h.total);
}

/*
 * Zero-copy put (ib_zcopy.h): a waiting one is polled for its ack; a new
 * one registers the buffers and sends one RDMACH_PKT_RNDV packet, whole (the
 * ring end is padded if needed), a small first piece as a data packet just
 * before it, both in one write (RDMACH_RNDV_HEAD_MAX).  With ticket
 * (rdmach_put_deferred) a new one returns its bytes at once, *ticket its
 * id.  -EAGAIN: take the copy path.
 */
static ssize_t ib_put_zcopy(struct ib_conn *ic, const struct iovec *iov,
			    int iovcnt, uint64_t *ticket)
{
	struct ib_tl *tl = ic->tl;
	struct ib_zc_ctl ctl;
	struct ring_slot pad, head_pkt, s;
	uint64_t credit = tl->mode == RING_MODE_BASIC ? 0 : ic->rx.pos;
	unsigned int need = 2 * (tl->mode == RING_MODE_BASIC ? 2 : 1) +
			    IB_SQ_RESERVE;
	size_t head = rdmach_rndv_head_len(iov, iovcnt), bytes;
	uint32_t len;
	int64_t id;
	ssize_t n;
	int ret;

	if (ib_zc_tx_waiting(&ic->zc)) {
		int gone;

		ib_ep_poll(tl);
		/* fin before ack: the peer writes them in the other order */
		gone = ic->broken || ib_peer_load64(&ic->ctrl->fin);
		n = ib_zc_put_poll(&ic->zc, iov, iovcnt,
				   ib_peer_load64(&ic->ctrl->zc_ack));
		if (n)
			return n;
		if (gone)
			return ib_put_error(ic);
		ib_put_wait(ic);
		return 0;
	}
	if (ic->broken || ib_peer_load64(&ic->ctrl->fin))
		return ib_put_error(ic);
	len = ib_zc_ctl_len(&ic->zc, iov, iovcnt, head, &bytes);
	if (!bytes)
		return -EAGAIN;
	ib_zc_tx_reap(&ic->zc, ib_peer_load64(&ic->ctrl->zc_ack));
	if (!ib_zc_tx_room(&ic->zc)) {	/* deferred ones in flight */
		ib_ep_poll(tl);
		ib_zc_tx_reap(&ic->zc, ib_peer_load64(&ic->ctrl->zc_ack));
		if (!ib_zc_tx_room(&ic->zc)) {
			ib_put_wait(ic);
			return ic->broken ? ib_put_error(ic) : 0;
		}
	}
	if (ic->tx_cold)
		return ib_put_zcopy_cold(ic, iov, iovcnt, ticket, head, len);
	if (ic->sq_free < need)
		ib_ep_poll(tl);
	ret = ring_tx_reserve_pair(&ic->tx, (uint32_t)head, len, &pad,
				   &head_pkt, &s);
	if (ret == -EAGAIN && !ib_ep_poll(tl) && !ib_take_credit(ic, 1))
		ret = ring_tx_reserve_pair(&ic->tx, (uint32_t)head, len, &pad,
					   &head_pkt, &s);
	if (ret || ic->sq_free < need) {
		ic->conn->stats.ring_full_stalls++;
		ib_idle(ic);
		return ic->broken ? ib_put_error(ic) : 0;
	}
	id = ib_zc_put_start(&ic->zc, iov, iovcnt, head, &ctl, !ticket);
	if (id < 0)
		return -EAGAIN;
	if (pad.bytes) {
		ring_tx_commit(&ic->tx, &pad, credit);
		ret = ib_post_packet(ic, pad.off, pad.wire, ic->tx.head);
		if (ret)
			return ret;
	}
	if (head) {
		memcpy(head_pkt.payload, iov[0].iov_base, head);
		ring_tx_commit(&ic->tx, &head_pkt, credit);
	}
	memcpy(s.payload, &ctl, len);
	s.type = RDMACH_PKT_RNDV;
	ring_tx_commit(&ic->tx, &s, credit);
	if (credit)
		ring_rx_credit_told(&ic->rx, credit);
	ret = ib_post_packet(ic, head_pkt.off, head_pkt.bytes + s.wire,
			     ic->tx.head);
	if (ret)
		return ret;
	ic->conn->stats.packets_sent += 1 + !!pad.bytes + !!head;
	if (!ticket)
		return 0;
	*ticket = (uint64_t)id;
	return (ssize_t)(head + ctl.h.total);
}

/*
 * Most messages: one packet, piggyback or pipeline mode, no zero-copy put
 * pending or wanted, the whole of it reserved at once (room before the ring
 * end and in the ring) and a send queue slot.  1 and *n set when it went
 * (or failed), 0 to go the general way.
 */
static inline int ib_put_one(struct ib_conn *ic, const struct iovec *iov,
			     int iovcnt, size_t total, ssize_t *n)
{
	uint64_t credit = ic->rx.pos;
	struct rdmach_iovc c;
	struct ring_slot s;
	int ret;

	if (total > ic->small_max || total >= ic->tl->large.min ||
	    ic->zc.wait_id || ic->sp.tx.left || ic->ring_left ||
	    ic->sq_free < 1 + IB_SQ_RESERVE || ic->broken ||
	    ib_peer_load64(&ic->ctrl->fin) ||
	    ring_tx_reserve(&ic->tx, total, ic->small_max, &s) || s.len != total)
		return 0;
	rdmach_iovc_init(&c, iov, iovcnt);
	rdmach_iovc_gather(&c, s.payload, total);
	ring_tx_commit(&ic->tx, &s, credit);
	ring_rx_credit_told(&ic->rx, credit);
	ret = ib_post_packet(ic, s.off, s.wire, ic->tx.head);
	ic->conn->stats.packets_sent++;
	*n = ret ? ret : (ssize_t)total;
	return 1;
}

/* ib_put_spipe_open on the shared path: the control packet as one
 * message. */
static int ib_put_spipe_open_cold(struct ib_conn *ic, size_t total)
{
	struct rdmach_spipe_hdr hdr;
	int ret;

	if (sizeof(struct ib_srq_hdr) + sizeof(hdr) > ic->cold_max)
		return -EAGAIN;
	if (ic->tl->sig_inflight)
		ib_ep_poll(ic->tl);
	if (!ib_cold_room(ic, 1)) {
		ib_cold_stalled(ic);
		return 0;
	}
	spipe_tx_open(&ic->sp.tx, total, &hdr);
	ret = ib_cold_send(ic, RDMACH_PKT_SPIPE, &hdr, sizeof(hdr), NULL, 0);
	if (ret) {
		ic->broken = 1;
		return ret == -EAGAIN ? ib_fail(ic, -ECONNRESET, "shared path: "
						"no room for a message") : ret;
	}
	ic->conn->stats.spipe_msgs++;
	return 1;
}

/* Open a superpipeline message: staging (the first time), the control
 * packet in the ring.  1 opened, 0 no ring space or send queue slots now
 * (retry), -EAGAIN no memory (another protocol), or a negative errno. */
static int ib_put_spipe_open(struct ib_conn *ic, size_t total)
{
	struct ib_tl *tl = ic->tl;
	struct rdmach_spipe_hdr hdr;
	struct ring_slot pad, s;
	uint64_t credit = tl->mode == RING_MODE_BASIC ? 0 : ic->rx.pos;
	unsigned int need = 2 * (tl->mode == RING_MODE_BASIC ? 2 : 1) +
			    IB_SQ_RESERVE;
	int ret;

	if (ib_sp_stage(&ic->sp))
		return -EAGAIN;
	if (ic->tx_cold)
		return ib_put_spipe_open_cold(ic, total);
	if (ic->sq_free < need)
		ib_ep_poll(tl);
	ret = ring_tx_reserve_whole(&ic->tx, sizeof(hdr), &pad, &s);
	if (ret == -EAGAIN && !ib_ep_poll(tl) && !ib_take_credit(ic, 1))
		ret = ring_tx_reserve_whole(&ic->tx, sizeof(hdr), &pad, &s);
	if (ret || ic->sq_free < need) {
		ic->conn->stats.ring_full_stalls++;
		return 0;
	}
	spipe_tx_open(&ic->sp.tx, total, &hdr);
	if (pad.bytes) {
		ring_tx_commit(&ic->tx, &pad, credit);
		ret = ib_post_packet(ic, pad.off, pad.wire, ic->tx.head);
		if (ret)
			return ret;
	}
	memcpy(s.payload, &hdr, sizeof(hdr));
	s.type = RDMACH_PKT_SPIPE;
	ring_tx_commit(&ic->tx, &s, credit);
	if (credit)
		ring_rx_credit_told(&ic->rx, credit);
	ret = ib_post_packet(ic, s.off, s.wire, ic->tx.head);
	if (ret)
		return ret;
	ic->conn->stats.packets_sent += pad.bytes ? 2 : 1;
	ic->conn->stats.spipe_msgs++;
	return 1;
}

/* Into the superpipeline: open the message (start), then copy and post
 * chunks.  As ib_sp_put, and -EAGAIN: could not open (no memory or
 * registration: take another protocol).  *started: this call opened it. */
static ssize_t ib_put_spipe_chunks(struct ib_conn *ic, const struct iovec *iov,
				   int iovcnt, size_t total, int start,
				   int *started)
{
	int ret;

	/* chunk completions free staging; keepalive completions prove the
	 * peer alive: a writer that only puts must reap them too */
	if (ic->tl->sig_inflight)
		ib_ep_poll(ic->tl);
	if (start) {
		ret = ib_put_spipe_open(ic, total);
		if (ret <= 0)
			return ret;
		if (started)
			*started = 1;
	}
	return ib_sp_put(&ic->sp, iov, iovcnt, total);
}

/* Superpipeline: start a message (start) or feed the open one. */
static ssize_t ib_put_spipe(struct ib_conn *ic, const struct iovec *iov,
			    int iovcnt, size_t total, int start, int *started)
{
	uint64_t acked = ic->sp.tx.acked;
	ssize_t n;

	if (started)
		*started = 0;
	if (ic->broken || ib_peer_load64(&ic->ctrl->fin))
		return ib_put_error(ic);
	n = ib_put_spipe_chunks(ic, iov, iovcnt, total, start, started);
	if (ic->sp.tx.acked != acked)
		ib_activity(ic);
	if (n)
		return n < 0 && ic->broken ? ib_put_error(ic) : n;
	/* waiting for acks or ring space: credits and liveness */
	ib_put_wait(ic);
	return ic->broken ? ib_put_error(ic) : 0;
}

/*
 * A put of at least the large threshold, no protocol pending: choose one
 * (ib_large.h) and start it.  -EAGAIN: the ring's copy takes it (chosen,
 * or the chosen protocol could not run); the choice is not made again for
 * the rest of it (ring_left).  ticket: as ib_put_zcopy's.
 */
static ssize_t ib_put_large(struct ib_conn *ic, const struct iovec *iov,
			    int iovcnt, size_t total, uint64_t *ticket)
{
	struct ib_tl *tl = ic->tl;
	struct ib_large_choice ch;
	int started = 0;
	ssize_t n = -EAGAIN;

	if (ic->broken || ib_peer_load64(&ic->ctrl->fin))
		return ib_put_error(ic);
	/* a peer from before the superpipeline cannot take one */
	ib_large_choose(&tl->large, tl->zc->rc,
			(ic->peer_caps & IB_CAP_SPIPE) && ib_sp_room(&ic->sp),
			iov, iovcnt, total, &ch);
	if (ch.proto == IB_PROTO_ZCOPY) {
		n = ib_put_zcopy(ic, iov, iovcnt, ticket);
		started = n > 0 || ib_zc_tx_waiting(&ic->zc);
	} else if (ch.proto == IB_PROTO_SPIPE) {
		n = ib_put_spipe(ic, iov, iovcnt, total, 1, &started);
	} else {
		started = 1;
	}
	if (started)
		ib_large_started(&tl->large, &ch, iov, iovcnt, total,
				 &ic->conn->stats);
	if (n == -EAGAIN) {
		if (!started)
			ib_large_fallback(total, &ic->conn->stats);
		ic->ring_left = total;
	}
	return n;
}

/*
 * A put on a cold connection: the large protocols as on the ring (their
 * control packets as shared-path messages), data as messages of up to
 * cold_max bytes, each on a credit.  -EXDEV: the peer's ring is ours now
 * (ib_cold_switch_out), the caller goes on through it.
 */
static __attribute__((noinline)) ssize_t
ib_put_cold(struct ib_conn *ic, const struct iovec *iov, int iovcnt,
	    size_t total, uint64_t *ticket)
{
	struct ib_tl *tl = ic->tl;
	uint32_t max = ic->cold_max - (uint32_t)sizeof(struct ib_srq_hdr);
	struct rdmach_iovc c;
	size_t done = 0;
	ssize_t n;
	int ret;

	if (ic->sp.tx.left)
		return ib_put_spipe(ic, iov, iovcnt, total, 0, NULL);
	if (ib_zc_tx_waiting(&ic->zc))
		return ib_put_zcopy(ic, iov, iovcnt, NULL);
	if (ic->broken || ib_peer_load64(&ic->ctrl->fin))
		return ib_put_error(ic);
	/* send buffers come back by completions */
	if (tl->sig_inflight)
		ib_ep_poll(tl);
	if (ib_cold_take_grant(ic))
		return -EPROTO;
	ret = ib_cold_switch_out(ic);
	if (ret)
		return ret > 0 ? -EXDEV : ret;
	if (!ic->ring_left && total >= tl->large.min) {
		n = ib_put_large(ic, iov, iovcnt, total, ticket);
		if (n != -EAGAIN)
			return n;
	}
	rdmach_iovc_init(&c, iov, iovcnt);
	while (done < total) {
		uint32_t len = total - done < max ? (uint32_t)(total - done) :
			       max;

		ret = ib_cold_send(ic, RDMACH_PKT_DATA, NULL, 0, &c, len);
		if (ret == -EAGAIN) {
			ib_cold_stalled(ic);
			break;
		}
		if (ret)
			return ret;
		done += len;
	}
	ic->ring_left -= done < ic->ring_left ? done : ic->ring_left;
	if (!done) {
		ib_put_wait(ic);
		if (ic->broken)
			return ib_put_error(ic);
	}
	return (ssize_t)done;
}

/* The endpoint of a put, get or peek.  Connection messages that arrived
 * are handled first (ib_tl.cm_queued): here no endpoint is in use, and
 * one may close.  NULL when this one did (the call does nothing). */
static inline struct ib_conn *ib_ep_enter(struct rdmach_conn *conn)
{
	struct ib_conn *ic = conn->priv;

	if (__builtin_expect(ic->tl->cm_queued != 0, 0)) {
		ic->tl->cm_drain(ic->tl);
		ic = conn->tl ? conn->priv : NULL;
	}
	return ic;
}

/* rdmach_put (ticket NULL) or rdmach_put_deferred. */
static inline ssize_t ib_put(struct rdmach_conn *conn, const struct iovec *iov,
			     int iovcnt, size_t total, uint64_t *ticket)
{
	struct ib_conn *ic = ib_ep_enter(conn);
	struct ib_tl *tl;
	struct rdmach_iovc c;
	struct ib_batch batch;
	struct ring_slot s;
	size_t done = 0;
	uint64_t npkt = 0;
	ssize_t n;
	int ret;

	if (!ic)
		return 0;
	tl = ic->tl;
	if (ib_put_one(ic, iov, iovcnt, total, &n))
		return n;
	if (__builtin_expect(ic->tx_cold, 0)) {
		n = ib_put_cold(ic, iov, iovcnt, total, ticket);
		if (n != -EXDEV)
			return n;
	}
	/* an open superpipeline message takes the next bytes of the stream,
	 * whatever put brings them */
	if (ic->sp.tx.left)
		return ib_put_spipe(ic, iov, iovcnt, total, 0, NULL);
	if (ib_zc_tx_waiting(&ic->zc))
		return ib_put_zcopy(ic, iov, iovcnt, NULL);
	if (!ic->ring_left && total >= tl->large.min) {
		n = ib_put_large(ic, iov, iovcnt, total, ticket);
		if (n != -EAGAIN)
			return n;
	}
	if (ic->broken || ib_peer_load64(&ic->ctrl->fin))
		return ib_put_error(ic);
	ret = ib_take_credit(ic, 0);
	if (ret)
		return ret;
	rdmach_iovc_init(&c, iov, iovcnt);
	batch.n = 0;
	while (done < total) {
		uint64_t credit = tl->mode == RING_MODE_BASIC ? 0 : ic->rx.pos;

		ret = ib_reserve(ic, total - done, &s);
		if (ret == -EAGAIN) {
			conn->stats.ring_full_stalls++;
			break;
		}
		if (ret || ic->broken)
			return ib_put_error(ic);
		rdmach_iovc_gather(&c, s.payload, s.len);
		ring_tx_commit(&ic->tx, &s, credit);
		if (credit)
			ring_rx_credit_told(&ic->rx, credit);
		if (tl->mode == RING_MODE_PIGGYBACK) {
			batch.off[batch.n] = s.off;
			batch.bytes[batch.n] = s.wire;
			batch.end[batch.n++] = ic->tx.head;
			if (batch.n == IB_BATCH)
				ret = ib_batch_flush(ic, &batch);
		} else {
			/* pipeline: chunk i is on the wire while i+1 is
			 * copied */
			ret = ib_post_packet(ic, s.off, s.wire, ic->tx.head);
		}
		if (ret)
			return ret;
		done += s.len;
		npkt++;
	}
	if (batch.n && (ret = ib_batch_flush(ic, &batch)))
		return ret;
	ic->ring_left -= done < ic->ring_left ? done : ic->ring_left;
	conn->stats.packets_sent += npkt;
	if (npkt > 1 && tl->mode == RING_MODE_PIPELINE)
		conn->stats.pipelined_msgs++;
	if (!done)
		ib_idle(ic);
	return (ssize_t)done;
}

ssize_t ib_ep_put(struct rdmach_conn *conn, const struct iovec *iov,
		  int iovcnt, size_t total)
{
	return ib_put(conn, iov, iovcnt, total, NULL);
}

ssize_t ib_ep_put_deferred(struct rdmach_conn *conn, const struct iovec *iov,
			   int iovcnt, size_t total, uint64_t *ticket)
{
	return ib_put(conn, iov, iovcnt, total, ticket);
}

int ib_ep_put_done(struct rdmach_conn *conn, uint64_t *done)
{
	struct ib_conn *ic = ib_ep_enter(conn);
	uint64_t acked;
	int gone;

	if (!ic) {		/* closed idle now: every ticket was done */
		*done = conn->tickets_done;
		return 0;
	}
	if (ib_zc_tx_unacked(&ic->zc))
		ib_ep_poll(ic->tl);
	/* fin before ack: the peer writes them in the other order */
	gone = ic->broken || ib_peer_load64(&ic->ctrl->fin);
	acked = ib_peer_load64(&ic->ctrl->zc_ack);
	ib_zc_tx_reap(&ic->zc, acked);
	/* every ticket before the first unacked one is done (those of the
	 * pair's earlier connections too: ib_ep_tickets_go_on) */
	*done = ic->zc.tx_first - 1;
	if (!ib_zc_tx_unacked(&ic->zc))
		return 0;
	if (gone)
		return ib_put_error(ic);
	ib_put_wait(ic);
	return ic->broken ? ib_put_error(ic) : 1;
}

/* The peer read all of zero-copy put `id`: tell it (an 8-byte write into
 * its ctrl area; the send queue keeps slots for such words). */
static int ib_zc_ack(struct ib_conn *ic, uint64_t id)
{
	if (ic->broken)
		return ib_put_error(ic);
	return ib_post_ctrl_words(ic, offsetof(struct ib_ctrl, zc_ack), &id, 1);
}

/* A packet other than data at the ring head, got bytes delivered by this
 * get before it: bytes delivered (>= 0) or a negative errno; *consumed set
 * when the packet is done. */
static ssize_t ib_get_ctl(struct ib_conn *ic, const struct ring_pkt *pkt,
			  struct rdmach_iovc *c, size_t room, size_t got,
			  int *consumed)
{
	uint64_t ack = 0;
	ssize_t n = 0;

	if (pkt->type == RDMACH_PKT_SPIPE) {
		if (!ic->sp_offered) {	/* a landing area we did not offer */
			ic->broken = 1;
			return ib_fail(ic, -EPROTO, "protocol error: a "
				       "superpipeline message, not offered "
				       "(RDMACH_SPIPE_PEERS)");
		}
		/* arrived blocks are delivered even on a failed connection */
		return ib_sp_get(&ic->sp, pkt->payload, pkt->len, c, room,
				 consumed);
	}
	if (pkt->type == RDMACH_PKT_RNDV && ic->broken)
		return ic->conn->err ? ic->conn->err :
		       ib_fail(ic, -ECONNRESET, "the peer left before its "
			       "zero-copy put was read");
	if (pkt->type == RDMACH_PKT_RNDV) {
		n = got ? ib_zc_get_stops(&ic->zc, pkt->payload, pkt->len,
					  room) : 0;
		if (n > 0) {
			*consumed = 0;
			return 0;
		}
		if (!n)
			n = ib_zc_get(&ic->zc, pkt->payload, pkt->len, c,
				      room, &ack);
		if (n < 0) {
			ic->broken = 1;
			return n;
		}
	}
	*consumed = pkt->type == RDMACH_PKT_PAD || ack;
	if (ack) {
		int ret = ib_zc_ack(ic, ack);

		if (ret)
			return ret;
	}
	return n;
}

/* Nothing to read: credits, the peer's finalize, liveness. */
static __attribute__((noinline)) ssize_t ib_get_idle(struct ib_conn *ic)
{
	int r = ib_take_credit(ic, 0);
	uint64_t fin;

	if (r)
		return r;
	/* superpipeline chunks built before the landing address came */
	if (ib_sp_unposted(&ic->sp) && ib_sp_tx_progress(&ic->sp))
		return ic->conn->err;
	ib_credit_out(ic);
	/* once: tested, then compared (half-placed, too small: early end) */
	if (!ib_peer_whole(ib_peer_load64(&ic->ctrl->fin), &fin))
		fin = 0;
	/* its shared-path messages went before fin, their count with it */
	if (fin && ic->rx.pos + 1 >= fin &&
	    (!ic->rx_cold || (ic->srx.head < 0 && ic->srx.rcvd >=
			      ib_peer_load64(&ic->ctrl->srq_fin))))
		return -ESHUTDOWN;
	ib_idle(ic);
	return 0;
}

/* ---- the shared path, receiving (ib_srq.h) ----------------------------- */

/* Did the message come over the QP of ic (its loopback one, to self)? */
static int ib_cold_from(const struct ib_conn *ic, uint32_t qp_num)
{
	return ic->qp->qp_num == qp_num ||
	       (ic->loop_qp && ic->loop_qp->qp_num == qp_num);
}

/* A shared receive arrived: checked, then queued on its connection (the
 * buffer is not posted any more, so the peer cannot change it now). */
static void ib_cold_recv(struct ib_tl *tl, const struct ibv_wc *wc)
{
	struct ib_srq *s = tl->srq;
	uint32_t i = (uint32_t)(wc->wr_id & 0xffffffffu);
	const char *why = NULL;
	struct ib_srq_hdr h;
	struct ib_conn *ic;

	if (!s || i >= s->nbufs)
		return;
	s->posted--;
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			rdmach_debug("ib: a shared receive failed: %s",
				     ibv_wc_status_str(wc->status));
		goto repost;
	}
	if (wc->byte_len < sizeof(h) || wc->byte_len > s->cfg.buf_size)
		goto repost;
	ib_peer_snap(&h, ib_srq_buf(s, i), sizeof(h));
	if (h.src >= (uint32_t)tl->base.ctx->size ||
	    !(ic = tl->conns[h.src]) || !ib_cold_from(ic, wc->qp_num) ||
	    ic->broken)
		goto repost;	/* not a connection of ours (any more) */
	if (!ic->rx_cold)
		why = "a shared-path message after the switch to the ring";
	else if (ic->srx.rcvd >= ic->srx.granted)
		why = "a shared-path message beyond its credits";
	else if (!(h.type == RDMACH_PKT_RNDV || h.type == RDMACH_PKT_SPIPE ||
		   (h.type == RDMACH_PKT_DATA && wc->byte_len > sizeof(h)) ||
		   (h.type == IB_SRQ_SWITCH &&
		    wc->byte_len == sizeof(h) + sizeof(uint64_t))))
		why = "a shared-path message of a bad type or length";
	else if (h.grant > ic->stx.grant &&
		 h.grant - ic->stx.sent > IB_SRQ_GRANT_MAX)
		why = "shared-path credits beyond any pool";
	if (why) {
		char msg[128];

		snprintf(msg, sizeof(msg), "protocol error: %s (type %u, %u "
			 "bytes)", why, h.type, wc->byte_len);
		ic->broken = 1;
		ib_fail(ic, -EPROTO, msg);
		goto repost;
	}
	if (h.grant > ic->stx.grant)
		ic->stx.grant = h.grant;
	ic->srx.rcvd++;
	s->outstanding--;
	ib_srq_push(s, &ic->srx, i, wc->byte_len);
	tl->srq_st.msgs_in++;
	return;
repost:
	if (ib_srq_repost(s, i))
		rdmach_warn("ib: a shared receive not reposted");
}

/* Tell the peer its new grant (an 8-byte write into its ctrl words) once
 * it holds half or less of what it may (one write per credits/2
 * messages read), or at once (now). */
static void ib_cold_tell(struct ib_conn *ic, int now)
{
	struct ib_srq_rx *rx = &ic->srx;
	uint64_t half = (ic->tl->srq_cfg.credits + 1) / 2;

	if (rx->granted == rx->told || (!now && rx->told > rx->rcvd + half) ||
	    ic->broken || ic->sq_free < 1 || !ic->r_ctrl ||
	    ic->conn->tl != &ic->tl->base)
		return;
	if (ib_post_ctrl(ic, offsetof(struct ib_ctrl, srq_grant),
			 rx->granted, IB_WR_DATA, 0))
		return;
	rx->told = rx->granted;
	ic->tl->srq_st.grants_sent++;
}

/*
 * A pool smaller than the peers (cfg.ask): a credit at a time, round
 * robin, to peers that used up what they were told and asked for more
 * (ib_cold_stalled), each holding at most IB_SRQ_ASK_HOLD buffers
 * (credits or messages not read): idle peers hold none, so no peer waits
 * for ever while the reader reads all of them.
 */
static void ib_cold_hungry(struct ib_tl *tl)
{
	struct ib_srq *s = tl->srq;
	/* the connections up, not every rank; one joining meanwhile (a
	 * poll while posting) waits for the next round */
	unsigned int n = tl->nlive, k;

	for (k = 0; k < n && ib_srq_free(s); k++) {
		struct ib_conn *o = tl->live[(tl->grant_next + k) % n];

		if (!o->rx_cold || o->broken)
			continue;
		if (o->srx.granted == o->srx.told &&
		    ib_peer_load64(&o->ctrl->srq_ask) == o->srx.told + 1 &&
		    o->srx.granted - o->srx.popped < IB_SRQ_ASK_HOLD) {
			o->srx.granted++;
			s->outstanding++;
		}
		ib_cold_tell(o, 1);
	}
	if (n)
		tl->grant_next = (tl->grant_next + k) % n;
}

/* Buffers read go back as credits: to this peer (the pool covers every
 * peer's full grant), or to the askers (cfg.ask): at once after a read
 * (read), else every 16th call. */
static void ib_cold_grant_out_at(struct ib_conn *ic, int read)
{
	struct ib_tl *tl = ic->tl;
	struct ib_srq *s = tl->srq;

	if (ic->broken)
		return;
	if (!s->cfg.ask) {
		ib_srq_grant(s, &ic->srx);
		ib_cold_tell(ic, 0);
	} else if (ib_srq_free(s) && (read || !(++tl->grant_tick % 16))) {
		ib_cold_hungry(tl);
	}
}

static void ib_cold_grant_out(struct ib_conn *ic)
{
	ib_cold_grant_out_at(ic, 0);
}

/*
 * The peer has sent enough on the shared path: a ring of its own, offered
 * by a 16-byte write into its ctrl words (address, then key with the
 * offer bit).  At RDMACH_IB_RINGS_MAX, or without memory, it stays on the
 * shared path.
 */
static void ib_cold_offer(struct ib_conn *ic)
{
	struct ib_tl *tl = ic->tl;
	uint64_t r = tl->ring_size, w[2];

	ic->ring_offered = -1;		/* asked once */
	if (tl->srq_st.rings >= tl->rings_max) {
		tl->srq_st.at_cap++;
		return;
	}
	if (posix_memalign((void **)&ic->ring_buf, 4096, r))
		goto err;
	memset(ic->ring_buf, 0, r);
	ic->ring_mr = ibv_reg_mr(tl->dev.pd, ic->ring_buf, r,
				 IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_WRITE);
	if (!ic->ring_mr)
		goto err;
	w[0] = (uintptr_t)ic->ring_buf;
	w[1] = ic->ring_mr->rkey | IB_RING_OFFER;
	if (ib_post_ctrl_words(ic, offsetof(struct ib_ctrl, ring_addr), w, 2))
		return;
	ic->ring_offered = 1;
	ic->ring_held = 1;
	tl->srq_st.promotions++;
	if (++tl->srq_st.rings > tl->srq_st.rings_max)
		tl->srq_st.rings_max = tl->srq_st.rings;
	return;
err:
	rdmach_debug("ib: rank %d: no ring (%s): stays on the shared path",
		     ic->conn->peer, strerror(errno));
	if (ic->ring_mr)
		ibv_dereg_mr(ic->ring_mr);
	ic->ring_mr = NULL;
	free(ic->ring_buf);
	ic->ring_buf = NULL;
}

/* The message at the head of the queue is read: its buffer goes back to
 * the pool, and enough of them earn the peer a ring. */
static void ib_cold_done(struct ib_conn *ic)
{
	struct ib_srq *s = ic->tl->srq;
	uint32_t i = (uint32_t)ic->srx.head;

	ib_srq_pop(s, &ic->srx);
	if (ib_srq_repost(s, i))
		rdmach_warn("ib: a shared receive not reposted");
	ic->conn->stats.packets_received++;
	if (!ic->ring_offered && ic->srx.popped >= ic->tl->ring_after)
		ib_cold_offer(ic);
	if (s->cfg.ask)
		ib_cold_grant_out_at(ic, 1);
}

/* The peer's switch message: every shared-path message it sent is read;
 * the ring follows.  0 or -EPROTO. */
static int ib_cold_switch_in(struct ib_conn *ic, const uint8_t *p)
{
	struct ib_srq *s = ic->tl->srq;
	uint64_t before;

	memcpy(&before, p, sizeof(before));
	if (ic->ring_offered != 1 || before != ic->srx.popped) {
		ic->broken = 1;
		return ib_fail(ic, -EPROTO, "protocol error: a switch to a "
			       "ring not offered, or after a different count "
			       "of shared-path messages");
	}
	ib_cold_done(ic);
	/* what it was granted and will not use goes back to the pool */
	ib_srq_rx_release(s, &ic->srx);
	ring_rx_init(&ic->rx, ic->ring_buf, ic->tl->ring_size);
	ic->rx_cold = 0;
	ic->tl->srq_st.switches++;
	if (s->cfg.ask)
		ib_cold_hungry(ic->tl);
	return 0;
}

static ssize_t ib_get_ring(struct ib_conn *ic, const struct iovec *iov,
			   int iovcnt, size_t total);

/* get on a cold connection: the queued messages in order; the ring once
 * the switch message is read. */
static __attribute__((noinline)) ssize_t
ib_get_cold(struct ib_conn *ic, const struct iovec *iov, int iovcnt,
	    size_t total)
{
	struct ib_tl *tl = ic->tl;
	struct ib_srq *s = tl->srq;
	struct rdmach_iovc c;
	size_t done = 0;
	int consumed;

	if (ib_ep_poll(tl))
		return -EIO;
	if (__builtin_expect(ib_sp_unposted(&ic->sp) != 0, 0))
		ib_sp_tx_progress(&ic->sp);
	rdmach_iovc_init(&c, iov, iovcnt);
	while (done < total && ic->srx.head >= 0) {
		const uint8_t *p = ib_srq_buf(s, (uint32_t)ic->srx.head);
		uint32_t plen = s->len[ic->srx.head] -
				(uint32_t)sizeof(struct ib_srq_hdr);
		struct ib_srq_hdr h;
		struct ring_pkt pkt;
		ssize_t k;

		memcpy(&h, p, sizeof(h));
		p += sizeof(h);
		if (h.type == RDMACH_PKT_DATA) {
			size_t n = rdmach_iovc_scatter(&c, p + ic->srx.off,
						       plen - ic->srx.off);

			done += n;
			ic->srx.off += (uint32_t)n;
			tl->srq_st.bytes_in += n;
			if (ic->srx.off < plen)
				break;
			ib_cold_done(ic);
			continue;
		}
		if (h.type == IB_SRQ_SWITCH) {
			k = ib_cold_switch_in(ic, p);
			if (k)
				return done ? (ssize_t)done : k;
			if (!done)
				return ib_get_ring(ic, iov, iovcnt, total);
			break;
		}
		memset(&pkt, 0, sizeof(pkt));
		pkt.payload = p;
		pkt.len = plen;
		pkt.type = h.type;
		k = ib_get_ctl(ic, &pkt, &c, total - done, done, &consumed);
		if (k < 0)
			return done ? (ssize_t)done : k;
		done += (size_t)k;
		if (!consumed)
			break;
		ib_cold_done(ic);
	}
	if (done) {
		ib_activity(ic);
		ib_credit_out(ic);
		return (ssize_t)done;
	}
	return ib_get_idle(ic);
}

/* The unread rest of the data message at the head of a cold connection's
 * queue, where it lies in the pool: its length, 0 if none is queued,
 * -ENOMSG if the head is not data. */
static ssize_t ib_cold_head(struct ib_conn *ic, const void **buf)
{
	struct ib_srq *s = ic->tl->srq;
	struct ib_srq_hdr h;
	const uint8_t *p;

	if (ic->srx.head < 0)
		return 0;
	p = ib_srq_buf(s, (uint32_t)ic->srx.head);
	memcpy(&h, p, sizeof(h));
	if (h.type != RDMACH_PKT_DATA)
		return -ENOMSG;
	*buf = p + sizeof(h) + ic->srx.off;
	return (ssize_t)(s->len[ic->srx.head] - sizeof(h) - ic->srx.off);
}

/* rdmach_peek on a cold connection; superpipeline chunks waiting to be
 * posted are left to a get (-ENOMSG), as on the ring. */
static ssize_t ib_peek_cold(struct ib_conn *ic, const void **buf)
{
	if (ic->srx.head < 0)
		ib_ep_poll(ic->tl);
	if (ic->srx.head < 0) {
		if ((ic->idle_gets + 1) % IB_IDLE_GETS == 0)
			return -ENOMSG;
		ic->idle_gets++;
		return 0;
	}
	if (ib_sp_unposted(&ic->sp))
		return -ENOMSG;
	return ib_cold_head(ic, buf);
}

/* What peek showed is consumed whatever was put since (a handler's reply
 * may leave superpipeline chunks waiting for the peer's landing area). */
static int ib_consume_cold(struct ib_conn *ic, size_t n)
{
	const void *buf;
	ssize_t have = ib_cold_head(ic, &buf);

	if (have <= 0 || n > (size_t)have)
		return -EINVAL;
	ic->srx.off += (uint32_t)n;
	ic->tl->srq_st.bytes_in += n;
	if ((size_t)have == n)
		ib_cold_done(ic);
	ib_activity(ic);
	ib_credit_out(ic);
	return 0;
}

/* The data packet at the ring head (bottom-fill modes): 1 and *pkt set,
 * 0 if there is none (not arrived, or a control packet). */
static int ib_peek_pkt(struct ib_conn *ic, struct ring_pkt *pkt)
{
	return ring_rx_peek(&ic->rx, 1, pkt) == 1 &&
	       pkt->type == RDMACH_PKT_DATA;
}

/* n more bytes of the data packet at the head are read: the packet goes
 * back to the ring once all of it is. */
static void ib_rx_advance(struct ib_conn *ic, const struct ring_pkt *pkt,
			  size_t n)
{
	if (ring_rx_advance(&ic->rx, pkt, (uint32_t)n))
		ic->conn->stats.packets_received++;
}

static __attribute__((noinline)) ssize_t
ib_get_ring(struct ib_conn *ic, const struct iovec *iov, int iovcnt,
	    size_t total)
{
	struct rdmach_conn *conn = ic->conn;
	int bottom_fill = ic->tl->mode != RING_MODE_BASIC;
	struct rdmach_iovc c;
	struct ring_pkt pkt;
	size_t done = 0;
	int r;

	if (__builtin_expect(ic->rx_cold, 0))
		return ib_get_cold(ic, iov, iovcnt, total);

	if (__builtin_expect(ib_sp_unposted(&ic->sp) != 0, 0))
		ib_sp_tx_progress(&ic->sp);
	rdmach_iovc_init(&c, iov, iovcnt);
	/* the rest of a data packet that fits the first piece (most
	 * messages), or the part of it a one-piece get takes (the CH3
	 * channel's header buffer meeting a longer message, then the
	 * payload's get) */
	if (bottom_fill && ib_peek_pkt(ic, &pkt) &&
	    (pkt.len - ic->rx.off <= iov[0].iov_len || iovcnt == 1)) {
		size_t left = pkt.len - ic->rx.off;

		if (pkt.credit && ib_credit_in(ic, pkt.credit))
			return -EPROTO;
		if (left > iov[0].iov_len) {
			memcpy(iov[0].iov_base, pkt.payload + ic->rx.off,
			       iov[0].iov_len);
			ib_rx_advance(ic, &pkt, iov[0].iov_len);
			ib_activity(ic);
			return (ssize_t)iov[0].iov_len;
		}
		memcpy(iov[0].iov_base, pkt.payload + ic->rx.off, left);
		ib_rx_advance(ic, &pkt, left);
		done = c.off = left;
		if (done == total || !ring_rx_head_arrived(&ic->rx)) {
			ib_activity(ic);
			ib_credit_out(ic);
			return (ssize_t)done;
		}
	}
	while (done < total) {
		size_t n;

		if (!bottom_fill && ic->rx.pos >= ib_peer_load64(&ic->ctrl->head))
			break;
		r = ring_rx_peek(&ic->rx, bottom_fill, &pkt);
		if (r < 0) {
			ic->broken = 1;
			return ib_fail(ic, -EPROTO, "protocol error: corrupt "
				       "packet header in the ring");
		}
		if (!r)
			break;
		if (bottom_fill && pkt.credit && ib_credit_in(ic, pkt.credit))
			return -EPROTO;
		if (pkt.type != RDMACH_PKT_DATA) {
			int consumed;
			ssize_t k = ib_get_ctl(ic, &pkt, &c, total - done,
					       done, &consumed);

			if (k < 0)
				return done ? (ssize_t)done : k;
			done += (size_t)k;
			if (!consumed)
				break;
			ring_rx_consume(&ic->rx, &pkt);
			conn->stats.packets_received++;
			continue;
		}
		n = rdmach_iovc_scatter(&c, pkt.payload + ic->rx.off,
					pkt.len - ic->rx.off);
		done += n;
		ib_rx_advance(ic, &pkt, n);
	}
	if (done) {
		ib_activity(ic);
		ib_credit_out(ic);
		return (ssize_t)done;
	}
	return ib_get_idle(ic);
}

/* The CQ only matters when a signalled write is in flight; otherwise it
 * is polled every IB_CQ_IDLE_POLLS gets or peeks (error completions). */
static inline void ib_poll_cq_when_due(struct ib_tl *tl)
{
	if (tl->sig_inflight || ++tl->cq_skips % IB_CQ_IDLE_POLLS == 0)
		ib_ep_poll(tl);
}

/* Kept small: the empty poll is the hot loop of every waiter. */
ssize_t ib_ep_get(struct rdmach_conn *conn, const struct iovec *iov,
		  int iovcnt, size_t total)
{
	struct ib_conn *ic = ib_ep_enter(conn);
	struct ib_tl *tl;

	if (!ic)
		return 0;
	tl = ic->tl;
	ib_poll_cq_when_due(tl);
	if (ring_rx_head_arrived(&ic->rx))
		return ib_get_ring(ic, iov, iovcnt, total);
	/* credits, the peer's finalize and liveness every few empty polls */
	if (++ic->idle_gets % IB_IDLE_GETS)
		return 0;
	return ib_get_idle(ic);
}

/* rdmach_peek: the rest of the data packet at the head, where it lies in
 * the ring; its credit is taken as a get takes it.  Idle work (credits,
 * the peer's finalize, liveness; superpipeline chunks to post) and every
 * packet but data (large messages) are left to a get, -ENOMSG.  Basic
 * mode has no arrival flags to read a packet by. */
ssize_t ib_ep_peek(struct rdmach_conn *conn, const void **buf)
{
	struct ib_conn *ic = ib_ep_enter(conn);
	struct ib_tl *tl;
	struct ring_pkt pkt;

	if (!ic)
		return 0;
	tl = ic->tl;
	if (tl->mode == RING_MODE_BASIC)
		return -EOPNOTSUPP;
	if (__builtin_expect(ic->rx_cold, 0))
		return ib_peek_cold(ic, buf);
	ib_poll_cq_when_due(tl);
	if (!ring_rx_head_arrived(&ic->rx)) {
		/* the get that follows counts this poll */
		if ((ic->idle_gets + 1) % IB_IDLE_GETS == 0)
			return -ENOMSG;
		ic->idle_gets++;
		return 0;
	}
	if (ib_sp_unposted(&ic->sp) || !ib_peek_pkt(ic, &pkt))
		return -ENOMSG;
	if (pkt.credit && ib_credit_in(ic, pkt.credit))
		return -EPROTO;
	*buf = pkt.payload + ic->rx.off;
	return (ssize_t)(pkt.len - ic->rx.off);
}

/* rdmach_consume: n bytes of the packet ib_ep_peek showed are read (puts
 * in between, a handler's reply, leave the receive ring alone). */
int ib_ep_consume(struct rdmach_conn *conn, size_t n)
{
	struct ib_conn *ic = conn->priv;
	struct ring_pkt pkt;

	if (ic->rx_cold && ic->tl->mode != RING_MODE_BASIC)
		return ib_consume_cold(ic, n);
	if (ic->tl->mode == RING_MODE_BASIC || !ib_peek_pkt(ic, &pkt) ||
	    n > pkt.len - ic->rx.off)
		return -EINVAL;
	ib_rx_advance(ic, &pkt, n);
	ib_activity(ic);
	ib_credit_out(ic);
	return 0;
}

void ib_ep_progress(struct ib_conn *ic)
{
	if (ic->broken || ib_take_credit(ic, 1))
		return;
	if (ic->sp.stage && ib_sp_tx_progress(&ic->sp))
		return;
	ib_credit_out(ic);
	ib_idle(ic);
}

/* ---- the superpipeline's calls (struct ib_sp_ep_ops, ib_spipe.h) -------- */

static int ib_sp_cb_poll(void *arg)
{
	return ib_ep_poll(((struct ib_conn *)arg)->tl);
}

static int ib_sp_cb_post_chunk(void *arg, void *src, uint32_t lkey,
			       uint32_t len, uint64_t raddr, uint32_t rkey,
			       uint64_t g)
{
	struct ib_conn *ic = arg;

	return ib_post_wr(ic, src, len, lkey, raddr, rkey, IB_WR_SPIPE, 1,
			  ic->tx.head, g);
}

static int ib_sp_cb_post_ctrl(void *arg, size_t field, const uint64_t *words,
			      unsigned int n)
{
	return ib_post_ctrl_words(arg, offsetof(struct ib_ctrl, sp) + field,
				  words, n);
}

static int ib_sp_cb_fail(void *arg, int err, const char *what)
{
	struct ib_conn *ic = arg;

	ic->broken = 1;
	return ib_fail(ic, err, what);
}

static const struct ib_sp_ep_ops ib_sp_ops = {
	.poll = ib_sp_cb_poll,
	.post_chunk = ib_sp_cb_post_chunk,
	.post_ctrl = ib_sp_cb_post_ctrl,
	.fail = ib_sp_cb_fail,
};

static void ib_sp_setup(struct ib_conn *ic)
{
	struct ib_sp_ep ep = {
		.ops = &ib_sp_ops,
		.arg = ic,
		.conn = ic->conn,
		.pd = ic->tl->dev.pd,
		.in = &ic->ctrl->sp,
		.fin = &ic->ctrl->fin,
		.broken = &ic->broken,
		.sq_free = &ic->sq_free,
		.sq_keep = IB_SQ_RESERVE,
	};

	ib_sp_conn_init(&ic->sp, &ep, &ic->tl->large);
}

/* ---- set-up and tear-down ------------------------------------------------ */

static void ib_cold_release(struct ib_conn *ic)
{
	ib_sig_drop(ic);
	if (ic->rx_cold)
		ib_srq_rx_release(ic->tl->srq, &ic->srx);
}

void ib_ep_live_add(struct ib_conn *ic)
{
	struct ib_tl *tl = ic->tl;

	if (ic->live_at >= 0)
		return;
	ic->live_at = (int)tl->nlive;
	tl->live[tl->nlive++] = ic;	/* one entry per rank at most: fits */
}

void ib_ep_live_drop(struct ib_conn *ic)
{
	struct ib_tl *tl = ic->tl;
	struct ib_conn *last;

	if (ic->live_at < 0)
		return;
	last = tl->live[--tl->nlive];
	last->live_at = ic->live_at;
	tl->live[ic->live_at] = last;
	ic->live_at = -1;
}

void ib_ep_destroy(struct ib_conn *ic)
{
	ib_wr_retire(ic, ib_ep_wr_out(ic));	/* its QP completes no more */
	if (ic->sp_offered > 0)
		ic->tl->large.land_offered--;
	ib_ep_live_drop(ic);
	if (ic->tl->srq && ic->sig)
		ib_cold_release(ic);
	if (ic->ring_held)
		ic->tl->srq_st.rings--;
	ib_zc_conn_release(&ic->zc);
	ib_sp_conn_release(&ic->sp);
	if (ic->loop_qp)
		ib_qp_destroy(&ic->tl->dev, ic->loop_qp);
	if (ic->qp)
		ib_qp_destroy(&ic->tl->dev, ic->qp);
	if (ic->mr)
		ibv_dereg_mr(ic->mr);
	if (ic->stage_mr)
		ibv_dereg_mr(ic->stage_mr);
	if (ic->ring_mr)
		ibv_dereg_mr(ic->ring_mr);
	free(ic->ring_buf);
	free(ic->stage_buf);
	if (ic->ctrl_slot)
		ib_srq_ctrl_put(ic->tl->srq, ic->buf);
	else
		free(ic->buf);
	free(ic->sig);
	free(ic);
}

_Static_assert(sizeof(struct ib_ctrl) <= IB_SRQ_CTRL_SLOT,
	       "ib_ctrl outgrew its slot of the shared pages");

/* A cold endpoint's memory: its ctrl words alone, a slot of the pool's
 * shared pages; no ring until promoted (ib_cold_offer), no staging until
 * the peer offers its ring. */
static int ib_ep_alloc_cold(struct ib_conn *ic)
{
	struct ib_tl *tl = ic->tl;
	/* the pool grows by the peer's share before it grants it, or goes
	 * by asking (ib_srq.h); the share returns at ib_ep_destroy */
	int ret = ib_srq_rx_join(tl->srq, &ic->srx, ic->conn->peer);

	if (ret)
		return ret;
	ic->rx_cold = 1;
	ic->buf_len = IB_SRQ_CTRL_SLOT;
	ic->buf = ib_srq_ctrl_get(tl->srq);
	if (!ic->buf)
		return -ENOMEM;
	ic->ctrl_slot = 1;
	ic->ctrl = (struct ib_ctrl *)(void *)ic->buf;
	ic->mr = ibv_reg_mr(tl->dev.pd, ic->buf, sizeof(struct ib_ctrl),
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ic->mr)
		return -errno;
	/* reads as an arrival for ever: the get goes to ib_get_cold */
	ib_cold_ring[0] = ring_flag(1, RDMACH_PKT_PAD, 0);
	ring_rx_init(&ic->rx, (uint8_t *)ib_cold_ring, sizeof(ib_cold_ring));
	return 0;
}

/* Today's layout: [ ring | ctrl, to a page | staging ]. */
static int ib_ep_alloc_ring(struct ib_conn *ic)
{
	struct ib_tl *tl = ic->tl;
	uint64_t r = tl->ring_size;

	ic->buf_len = IB_STAGE_OFF(r) + r;
	if (posix_memalign((void **)&ic->buf, 4096, ic->buf_len))
		return -ENOMEM;
	memset(ic->buf, 0, ic->buf_len);
	ic->ctrl = (struct ib_ctrl *)(void *)(ic->buf + r);
	/* the peer writes ring and ctrl words, reads nothing; staging is
	 * only a source of our own writes */
	ic->mr = ibv_reg_mr(tl->dev.pd, ic->buf, r + sizeof(struct ib_ctrl),
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (ic->mr)
		ic->stage_mr = ibv_reg_mr(tl->dev.pd, ic->buf +
					  IB_STAGE_OFF(r), r, 0);
	if (!ic->mr || !ic->stage_mr)
		return -errno;
	ring_rx_init(&ic->rx, ic->buf, r);
	ic->ring_held = 1;
	if (++tl->srq_st.rings > tl->srq_st.rings_max)
		tl->srq_st.rings_max = tl->srq_st.rings;
	return 0;
}

/* Whether the peer may send us superpipeline messages: the first
 * RDMACH_SPIPE_PEERS peers connected may (each costs a landing area at
 * its first), and a connection to oneself. */
static void ib_ep_offer_spipe(struct ib_conn *ic)
{
	struct ib_large *lg = &ic->tl->large;

	if (ic->conn->peer == ic->tl->base.ctx->rank) {
		ic->sp_offered = -1;	/* not counted */
	} else if (lg->land_offered < lg->land_max) {
		ic->sp_offered = 1;
		lg->land_offered++;
	} else {
		lg->land_refused++;
	}
}

struct ib_conn *ib_ep_create(struct ib_tl *tl, int peer)
{
	struct ib_conn *ic = calloc(1, sizeof(*ic));
	unsigned int sigs = 1;
	struct ibv_srq *srq = tl->srq ? tl->srq->srq : NULL;
	int ret;

	if (!ic)
		return NULL;
	ic->tl = tl;
	ic->conn = &tl->base.ctx->conns[peer];
	ic->live_at = -1;
	while (sigs < tl->sq_depth)
		sigs <<= 1;
	ic->sig = calloc(sigs, sizeof(*ic->sig));
	if (!ic->sig)
		goto err;
	ic->sig_mask = sigs - 1;
	/* with the shared path (RDMACH_CONNECT=demand) a connection starts
	 * cold */
	ret = srq ? ib_ep_alloc_cold(ic) : ib_ep_alloc_ring(ic);
	if (ret) {
		if (ic->buf_len)	/* else the pool said why */
			rdmach_err("ib: registering %zu bytes for rank %d on "
				   "%s failed: %s (ulimit -l?)", ic->buf_len,
				   peer, tl->dev.name, strerror(-ret));
		goto err;
	}
	ic->qp = ib_qp_create(&tl->dev, tl->cq, srq, tl->sq_depth,
			      tl->inline_want, &tl->inline_max);
	if (!ic->qp)
		goto err;
	if (peer == tl->base.ctx->rank) {
		unsigned int dummy;

		ic->loop_qp = ib_qp_create(&tl->dev, tl->cq, srq, 1, 8, &dummy);
		if (!ic->loop_qp)
			goto err;
	}
	ic->sq_free = tl->sq_depth;
	ib_ep_offer_spipe(ic);
	ib_zc_conn_init(&ic->zc, tl->zc, ic->conn, ic->qp,
			&(struct ib_zc_sq){ &ic->sq_free, IB_SQ_RESERVE,
					    &ic->wr_seq }, ib_poll_cb, tl);
	ib_sp_setup(ic);
	ic->psn = (uint32_t)(lrand48() ^ getpid() ^ peer) & 0xffffff;
	return ic;
err:
	ib_ep_destroy(ic);
	return NULL;
}

void ib_ep_local_addr(const struct ib_conn *ic, const struct ibv_qp *qp,
		      struct ib_addr *a)
{
	const struct ib_tl *tl = ic->tl;

	memset(a, 0, sizeof(*a));
	a->lid = tl->dev.lid;
	a->gid = tl->dev.gid;
	a->qpn = qp->qp_num;
	a->psn = ic->psn;
	/* cold: no ring; the initial grant and our pool's buffer size */
	a->ring = ic->rx_cold ? IB_ADDR_COLD | ic->srx.grant0 |
		  (uint64_t)tl->srq_cfg.buf_size << 32 : (uintptr_t)ic->buf;
	a->ctrl = (uintptr_t)ic->ctrl;
	a->ring_size = tl->ring_size;
	a->rkey = ic->mr->rkey;
	a->wire = IB_WIRE_VERSION;
	/* the largest MTU we send or take: both ends of a QP pair must use
	 * one path MTU (a responder refuses packets longer than its own) */
	a->mtu = tl->qpp.mtu < tl->dev.active_mtu ? tl->qpp.mtu :
		 tl->dev.active_mtu;
	a->mode = tl->mode + 1;
	/* a peer told "no superpipeline" sends us large messages zero-copy
	 * or through the ring, as to a build from before it */
	a->caps = ic->sp_offered ? IB_CAPS : IB_CAPS & ~IB_CAP_SPIPE;
}

/* The peer is cold towards us: we send on its shared path, with the
 * credits and message size its address names. */
static int ib_ep_connect_cold(struct ib_conn *ic, const struct ib_addr *r)
{
	struct ib_tl *tl = ic->tl;
	uint64_t g = r->ring & 0xffffffffu, bs = (r->ring >> 32) & 0x7fffffffu;

	if (!tl->srq) {
		rdmach_err("ib: rank %d uses the shared receive path "
			   "(RDMACH_IB_SRQ_BUFS > 0 with RDMACH_CONNECT=demand), "
			   "this rank does not: set the same everywhere",
			   ic->conn->peer);
		return -EINVAL;
	}
	if (!(r->caps & IB_CAP_SRQ) || g > IB_SRQ_GRANT_MAX ||
	    bs <= sizeof(struct ib_srq_hdr) + 64) {
		rdmach_err("ib: rank %d: bad shared-path address (grant %"
			   PRIu64 ", buffer %" PRIu64 ")", ic->conn->peer, g,
			   bs);
		return -EPROTO;
	}
	ic->cold_max = bs < tl->srq_cfg.buf_size ? (uint32_t)bs :
		       tl->srq_cfg.buf_size;
	ic->tx_cold = 1;
	ic->stx.grant = g;
	ic->small_max = 0;
	ic->sig_bytes = UINT64_MAX;
	return 0;
}

int ib_ep_connect(struct ib_conn *ic, const struct ib_addr *r)
{
	struct ib_tl *tl = ic->tl;
	int ret;

	if (ic->loop_qp) {
		/* to self: qp <-> loop_qp, writes land in our own ring */
		struct ib_addr l;

		ib_ep_local_addr(ic, ic->qp, &l);
		ret = ib_qp_connect(&tl->dev, ic->loop_qp, ic->psn, &l,
				    &tl->qpp);
		if (ret)
			return ret;
	}
	ret = ib_qp_connect(&tl->dev, ic->qp, ic->psn, r, &tl->qpp);
	if (ret)
		return ret;
	ic->r_ctrl = r->ctrl;
	ic->rkey = r->rkey;
	ic->peer_caps = r->caps;
	if (r->ring & IB_ADDR_COLD)
		return ib_ep_connect_cold(ic, r);
	ic->r_ring = r->ring;
	ic->ring_rkey = r->rkey;
	if (ic->rx_cold) {
		/* the peer gives a ring at once (its shared path is off):
		 * our staging mirror of it apart from the ctrl page */
		if (posix_memalign((void **)&ic->stage_buf, 4096,
				   tl->ring_size))
			return -ENOMEM;
		memset(ic->stage_buf, 0, tl->ring_size);
		ic->stage_mr = ibv_reg_mr(tl->dev.pd, ic->stage_buf,
					  tl->ring_size, 0);
		if (!ic->stage_mr)
			return -errno;
	}
	ring_tx_init(&ic->tx, ic->stage_buf ? ic->stage_buf :
		     ic->buf + IB_STAGE_OFF(tl->ring_size), tl->ring_size);
	ic->tx.near = !!(r->caps & IB_CAP_NEAR);
	ic->sig_bytes = ic->tx.size / 4;
	ic->small_max = tl->mode == RING_MODE_BASIC ? 0 :
			ring_max_payload(tl->mode, tl->chunk, tl->ring_size);
	return 0;
}

/* ---- finalize -------------------------------------------------------------- */

void ib_ep_send_fin(struct ib_conn *ic, uint64_t deadline_ns)
{
	if (!ic->r_ctrl || ic->broken || ic->conn->err)
		return;
	/* superpipeline chunks whose bytes put took must be written before
	 * fin: the landing address comes when the peer's get meets the
	 * message (unless the peer finalizes first) */
	while (ib_sp_unposted(&ic->sp) && !ic->broken &&
	       !ib_peer_load64(&ic->ctrl->fin) && rdmach_now_ns() < deadline_ns) {
		ib_ep_poll(ic->tl);
		if (ib_sp_tx_progress(&ic->sp))
			return;
	}
	if (ib_sp_unposted(&ic->sp) && !ib_peer_load64(&ic->ctrl->fin))
		rdmach_warn("ib: finalize: %llu superpipeline chunks to rank "
			    "%d not written by the deadline (the peer did not "
			    "read them)",
			    (unsigned long long)ib_sp_unposted(&ic->sp),
			    ic->conn->peer);
	while (ic->sq_free < 2 && !ic->broken && rdmach_now_ns() < deadline_ns)
		ib_ep_poll(ic->tl);
	/* the count of our shared-path messages, before fin (in order) */
	if (ic->stx.sent && ic->sq_free >= 2)
		ib_post_ctrl(ic, offsetof(struct ib_ctrl, srq_fin),
			     ic->stx.sent, IB_WR_DATA, 0);
	if (ic->sq_free >= 1)
		ib_post_ctrl(ic, offsetof(struct ib_ctrl, fin),
			     (ic->tx.head + 1) | IB_PEER_WHOLE, IB_WR_FIN, 1);
}

int ib_ep_quiesce(struct ib_conn *ic)
{
	if (ic->broken || ic->conn->err || ic->loop_qp || ic->ring_left ||
	    ib_peer_load64(&ic->ctrl->fin))
		return 0;
	/* bytes arrived and not read (a peek's among them): the reader
	 * needs the connection up (a cold one's ring is a stand-in that
	 * always shows a packet: its messages are queued in srx) */
	if (ic->rx_cold ? ic->srx.head >= 0 :
	    ic->tl->mode != RING_MODE_BASIC && ring_rx_head_arrived(&ic->rx))
		return 0;
	if (ic->sig_tail != ic->sig_head || ic->ka_pending)
		return 0;
	if (ib_ep_wr_out(ic)) {
		/* an unsignalled run: only a signalled write completes it */
		ib_ka_try(ic, rdmach_now_ns());
		return 0;
	}
	/* a zero-copy put not reported done yet (put_done) */
	return !ib_zc_tx_unacked(&ic->zc);
}

int ib_ep_probe(struct ib_conn *ic)
{
	uint64_t now = rdmach_now_ns();

	if (ic->broken || ic->conn->err)
		return -ECONNRESET;
	if (ic->ka_pending)
		return now - ic->ka_sent < ic->conn->ctx->peer_timeout_ns ? 0 :
		       -ETIMEDOUT;
	ib_ka_try(ic, now);
	return 0;
}

int ib_ep_peer_finalizing(const struct ib_conn *ic)
{
	return ib_peer_load64(&ic->ctrl->fin) != 0;
}

uint64_t ib_ep_tickets_next(const struct ib_conn *ic)
{
	return ic->zc.next_id;
}

void ib_ep_tickets_go_on(struct ib_conn *ic, uint64_t next)
{
	ic->zc.next_id = next;
	ic->zc.tx_first = next;
}

int ib_ep_drained(const struct ib_conn *ic)
{
	/* a peer that finalized reads no more: do not wait for acks from a
	 * QP it may have destroyed already */
	if (!ic->qp || ic->broken || ib_peer_load64(&ic->ctrl->fin))
		return 1;
	if (ic->sig_tail != ic->sig_head)
		return 0;
	/* the peer may still be reading our memory */
	return !(ib_zc_tx_unacked(&ic->zc) &&
		 ib_peer_load64(&ic->ctrl->zc_ack) < ic->zc.next_id - 1);
}
