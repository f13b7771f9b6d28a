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

enum ib_wr_kind { IB_WR_DATA, IB_WR_KA, IB_WR_FIN, IB_WR_SPIPE };

/* The peer writes our ctrl words at these offsets: wire format. */
_Static_assert(offsetof(struct ib_ctrl, zc_ack) == 32 &&
	       offsetof(struct ib_ctrl, sp) == 40 &&
	       offsetof(struct ib_sp_ctrl, addr) == 16 &&
	       sizeof(struct ib_ctrl) == 80, "struct ib_ctrl is wire format");

static int ib_fail(struct ib_conn *ic, int err, const char *what)
{
	return rdmach_conn_fail(ic->conn, err, "%s (device %s port %u)", what,
				ic->tl->dev.name, ic->tl->dev.port);
}

/* ---- send queue: posting with selective signalling -------------------- */

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
		  ic->unsig_bytes + len >= ic->tx.size / 4;
	wr.wr_id = (uint64_t)ic->conn->peer;
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
	ic->sq_free--;
	ic->unsig_wrs++;
	ic->unsig_bytes += len;
	if (signal) {
		struct ib_sig *s = &ic->sig[ic->sig_head++ & ic->sig_mask];

		s->head = head_after;
		s->nwr = ic->unsig_wrs;
		s->kind = kind;
		s->chunk = chunk;
		tl->sig_inflight++;
		ic->unsig_wrs = 0;
		ic->unsig_bytes = 0;
	}
	return 0;
}

static int ib_post(struct ib_conn *ic, void *src, uint32_t len,
		   uint64_t raddr, enum ib_wr_kind kind, int signal,
		   uint64_t head_after)
{
	const uint8_t *p = src;
	/* staging has a registration of its own (the peer cannot reach it) */
	uint32_t lkey = p >= ic->tx.stage && p < ic->tx.stage + ic->tx.size ?
			ic->stage_mr->lkey : ic->mr->lkey;

	return ib_post_wr(ic, src, len, lkey, raddr, ic->rkey, kind, signal,
			  head_after, 0);
}

/* An 8-byte control word into the peer's ctrl area (inline). */
static int ib_post_ctrl(struct ib_conn *ic, size_t field, uint64_t value,
			enum ib_wr_kind kind, int signal)
{
	return ib_post(ic, &value, sizeof(value), ic->r_ctrl + field, kind,
		       signal, ic->tx.head);
}

static int ib_post_packet(struct ib_conn *ic, uint64_t off, uint64_t bytes,
			  uint64_t head_after)
{
	int ret = ib_post(ic, ic->tx.stage + off, (uint32_t)bytes,
			  ic->r_ring + off, IB_WR_DATA, 0, head_after);

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
		       IB_WR_DATA, 0, ic->tx.head);
}

/* ---- completions ------------------------------------------------------- */

static void ib_activity(struct ib_conn *ic)
{
	ic->idle = 0;
	ic->idle_since = 0;
}

static void ib_wc_error(struct ib_conn *ic, const struct ibv_wc *wc)
{
	char msg[160];

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

static void ib_completion(struct ib_conn *ic, const struct ibv_wc *wc)
{
	struct ib_sig *s;

	if (wc->status != IBV_WC_SUCCESS) {
		ib_wc_error(ic, wc);
		return;
	}
	if (ic->sig_tail == ic->sig_head)
		return;		/* cannot happen */
	s = &ic->sig[ic->sig_tail++ & ic->sig_mask];
	ic->tl->sig_inflight--;
	ic->sq_free += s->nwr;
	ring_tx_acked(&ic->tx, s->head);
	if (s->kind == IB_WR_SPIPE)
		ib_sp_completed(&ic->sp, s->chunk);
	if (s->kind == IB_WR_KA) {
		ic->ka_pending = 0;
		ic->idle_since = rdmach_now_ns();
	}
}

/* Out of line: the gets that call it when due stay small. */
__attribute__((noinline)) int ib_ep_poll(struct ib_tl *tl)
{
	struct ibv_wc wc[16];
	int n, i;

	while ((n = ibv_poll_cq(tl->cq, 16, wc)) > 0) {
		for (i = 0; i < n; i++) {
			uint64_t wr_id = wc[i].wr_id;
			struct ib_conn *ic;

			if (__builtin_expect(wr_id & IB_CM_WRID, 0)) {
				tl->cm_wc(tl, &wc[i]);
				continue;
			}
			ic = tl->conns[wr_id & ~IB_ZC_WRID];
			if (!ic)
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
	if (!scan || ic->tl->mode == RING_MODE_BASIC)
		return 0;
	c = ring_rx_scan(&ic->rx, &ic->scan, 1, UINT64_MAX);
	if (c < 0) {
		ic->broken = 1;
		return ib_fail(ic, -EPROTO, "protocol error: corrupt packet "
			       "header in the ring");
	}
	return c ? ib_credit_in(ic, (uint64_t)c) : 0;
}

static void ib_credit_out(struct ib_conn *ic)
{
	struct ib_tl *tl = ic->tl;
	uint64_t pos = ic->rx.pos;

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
static void ib_idle(struct ib_conn *ic)
{
	uint64_t now, limit = ic->conn->ctx->peer_timeout_ns;
	char msg[128];

	if (++ic->idle % IB_IDLE_POLLS || ic->broken ||
	    ib_peer_load64(&ic->ctrl->fin))
		return;
	now = rdmach_now_ns();
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
		if (now - ic->idle_since < limit + limit / 2)
			return;
		snprintf(msg, sizeof(msg), "no answer from the peer's adapter "
			 "within %.1f s, send queue full (peer dead?)",
			 (double)(limit + limit / 2) / 1e9);
		ic->broken = 1;
		ib_fail(ic, -ECONNRESET, msg);
		return;
	}
	rdmach_debug("ib: rank %d silent for %.1f s: keepalive write",
		     ic->conn->peer, (double)(now - ic->idle_since) / 1e9);
	if (!ib_post_ctrl(ic, offsetof(struct ib_ctrl, ka), now, IB_WR_KA, 1)) {
		ic->ka_pending = 1;
		ic->ka_sent = now;
	}
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

/* rdmach_put (ticket NULL) or rdmach_put_deferred. */
static inline ssize_t ib_put(struct rdmach_conn *conn, const struct iovec *iov,
			     int iovcnt, size_t total, uint64_t *ticket)
{
	struct ib_conn *ic = conn->priv;
	struct ib_tl *tl = ic->tl;
	struct rdmach_iovc c;
	struct ib_batch batch;
	struct ring_slot s;
	size_t done = 0;
	uint64_t npkt = 0;
	ssize_t n;
	int ret;

	if (ib_put_one(ic, iov, iovcnt, total, &n))
		return n;
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
	struct ib_conn *ic = conn->priv;
	uint64_t acked;
	int gone;

	if (ib_zc_tx_unacked(&ic->zc))
		ib_ep_poll(ic->tl);
	/* fin before ack: the peer writes them in the other order */
	gone = ic->broken || ib_peer_load64(&ic->ctrl->fin);
	acked = ib_peer_load64(&ic->ctrl->zc_ack);
	ib_zc_tx_reap(&ic->zc, acked);
	*done = acked;
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
	fin = ib_peer_load64(&ic->ctrl->fin);	/* once: tested, then compared */
	if (fin && ic->rx.pos + 1 >= fin)
		return -ESHUTDOWN;
	ib_idle(ic);
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
	struct ib_conn *ic = conn->priv;
	struct ib_tl *tl = ic->tl;

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
	struct ib_conn *ic = conn->priv;
	struct ib_tl *tl = ic->tl;
	struct ring_pkt pkt;

	if (tl->mode == RING_MODE_BASIC)
		return -EOPNOTSUPP;
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

void ib_ep_destroy(struct ib_conn *ic)
{
	ib_zc_conn_release(&ic->zc);
	ib_sp_conn_release(&ic->sp);
	if (ic->loop_qp)
		ibv_destroy_qp(ic->loop_qp);
	if (ic->qp)
		ibv_destroy_qp(ic->qp);
	if (ic->mr)
		ibv_dereg_mr(ic->mr);
	if (ic->stage_mr)
		ibv_dereg_mr(ic->stage_mr);
	free(ic->buf);
	free(ic->sig);
	free(ic);
}

struct ib_conn *ib_ep_create(struct ib_tl *tl, int peer)
{
	struct ib_conn *ic = calloc(1, sizeof(*ic));
	uint64_t r = tl->ring_size;
	unsigned int sigs = 1;

	if (!ic)
		return NULL;
	ic->tl = tl;
	ic->conn = &tl->base.ctx->conns[peer];
	ic->buf_len = IB_STAGE_OFF(r) + r;
	if (posix_memalign((void **)&ic->buf, 4096, ic->buf_len))
		goto err;
	memset(ic->buf, 0, ic->buf_len);
	ic->ctrl = (struct ib_ctrl *)(void *)(ic->buf + r);
	while (sigs < tl->sq_depth)
		sigs <<= 1;
	ic->sig = calloc(sigs, sizeof(*ic->sig));
	if (!ic->sig)
		goto err;
	ic->sig_mask = sigs - 1;
	/* the peer writes ring and ctrl words, reads nothing; staging is
	 * only a source of our own writes */
	ic->mr = ibv_reg_mr(tl->dev.pd, ic->buf, r + sizeof(struct ib_ctrl),
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (ic->mr)
		ic->stage_mr = ibv_reg_mr(tl->dev.pd, ic->buf +
					  IB_STAGE_OFF(r), r, 0);
	if (!ic->mr || !ic->stage_mr) {
		rdmach_err("ib: registering %zu bytes for rank %d on %s "
			   "failed: %s (ulimit -l?)", ic->buf_len, peer,
			   tl->dev.name, strerror(errno));
		goto err;
	}
	ic->qp = ib_qp_create(&tl->dev, tl->cq, tl->sq_depth,
			      tl->inline_want, &tl->inline_max);
	if (!ic->qp)
		goto err;
	if (peer == tl->base.ctx->rank) {
		unsigned int dummy;

		ic->loop_qp = ib_qp_create(&tl->dev, tl->cq, 1, 8, &dummy);
		if (!ic->loop_qp)
			goto err;
	}
	ic->sq_free = tl->sq_depth;
	ib_zc_conn_init(&ic->zc, tl->zc, ic->conn, ic->qp, &ic->sq_free,
			IB_SQ_RESERVE, ib_poll_cb, tl);
	ib_sp_setup(ic);
	ic->psn = (uint32_t)(lrand48() ^ getpid() ^ peer) & 0xffffff;
	ring_rx_init(&ic->rx, ic->buf, r);
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
	a->ring = (uintptr_t)ic->buf;
	a->ctrl = (uintptr_t)ic->ctrl;
	a->ring_size = tl->ring_size;
	a->rkey = ic->mr->rkey;
	a->wire = IB_WIRE_VERSION;
	/* the largest MTU we send or take: both ends of a QP pair must use
	 * one path MTU (a responder refuses packets longer than its own) */
	a->mtu = tl->qpp.mtu < tl->dev.active_mtu ? tl->qpp.mtu :
		 tl->dev.active_mtu;
	a->mode = tl->mode + 1;
	a->caps = IB_CAPS;
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
	ic->r_ring = r->ring;
	ic->r_ctrl = r->ctrl;
	ic->rkey = r->rkey;
	ic->peer_caps = r->caps;
	ring_tx_init(&ic->tx, ic->buf + IB_STAGE_OFF(tl->ring_size),
		     tl->ring_size);
	ic->tx.near = !!(r->caps & IB_CAP_NEAR);
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
	while (ic->sq_free < 1 && !ic->broken && rdmach_now_ns() < deadline_ns)
		ib_ep_poll(ic->tl);
	if (ic->sq_free >= 1)
		ib_post_ctrl(ic, offsetof(struct ib_ctrl, fin),
			     ic->tx.head + 1, IB_WR_FIN, 1);
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
