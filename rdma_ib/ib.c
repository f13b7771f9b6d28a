/*
 * ib.c - the InfiniBand/RoCE transport: one RC QP per peer, a receiver-side
 * registered ring (proto/ring) written by the peer with RDMA writes from a
 * staging mirror, replicated head/tail, selective signalling, keepalive.
 *
 * Per connection one registered buffer: [ ring | staging | ctrl ].
 * ring    the peer writes its packets here (we poll flags or the head);
 * staging our packets, at the offsets they take in the peer's ring;
 * ctrl    words the peer writes: its head (basic mode), its consumed count
 *         of our packets (explicit credit), fin, keepalive target.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib.h"
#include "ib_fork.h"
#include "ib_zcopy.h"
#include "iov.h"
#include "knob.h"
#include "log.h"
#include "ring.h"
#include "tl.h"

static const struct rdmach_knob ib_knobs[] = {
	{ "RDMACH_IB_DEVICE", RDMACH_KNOB_STRING, "", 0, 0,
	  "RDMA device to use (\"\": the first with an active port)" },
	{ "RDMACH_IB_PORT", RDMACH_KNOB_UINT, "0", 0, 255,
	  "port of the device (0: the first active one)" },
	{ "RDMACH_IB_GID_INDEX", RDMACH_KNOB_STRING, "auto", 0, 0,
	  "RoCE GID index (auto: a RoCE v2 GID, IPv4-mapped preferred)" },
	{ "RDMACH_IB_MODE", RDMACH_KNOB_STRING, "pipeline", 0, 0,
	  "ring protocol: basic | piggyback | pipeline" },
	{ "RDMACH_IB_RING_SIZE", RDMACH_KNOB_SIZE, "128K", 4096, 1u << 30,
	  "receive ring per peer, power of two (staging mirror: same size)" },
	{ "RDMACH_IB_CHUNK_SIZE", RDMACH_KNOB_SIZE, "16K", 64, 16u << 20,
	  "pipeline mode: payload bytes per chunk of a large put" },
	{ "RDMACH_IB_CREDIT_PERCENT", RDMACH_KNOB_UINT, "50", 1, 100,
	  "send an explicit tail update when the sender's free ring space "
	  "would fall under this % of the ring" },
	{ "RDMACH_IB_SQ_DEPTH", RDMACH_KNOB_UINT, "128", 16, 16384,
	  "send queue entries per QP" },
	{ "RDMACH_IB_INLINE", RDMACH_KNOB_SIZE, "256", 8, 4096,
	  "packets up to this size are posted inline" },
	{ "RDMACH_IB_MTU", RDMACH_KNOB_UINT, "4096", 256, 4096,
	  "largest path MTU (the port's active MTU caps it)" },
	{ "RDMACH_IB_TIMEOUT", RDMACH_KNOB_UINT, "14", 1, 31,
	  "QP local ack timeout exponent (4.096 us * 2^n per try)" },
	{ "RDMACH_IB_RETRY_CNT", RDMACH_KNOB_UINT, "7", 0, 7,
	  "QP transport retries before a peer is declared dead" },
	{ "RDMACH_ZCOPY", RDMACH_KNOB_BOOL, "1", 0, 1,
	  "large puts by RDMA read of the sender's registered buffer "
	  "(0: always copy through the ring)" },
	{ "RDMACH_ZCOPY_THRESHOLD", RDMACH_KNOB_SIZE, "64K", 1, 1ull << 40,
	  "puts of at least this many bytes go zero-copy (RDMA read)" },
	{ "RDMACH_ZCOPY_READ_SIZE", RDMACH_KNOB_SIZE, "1M", 4096, 1u << 30,
	  "largest RDMA read the zero-copy receiver posts (port max_msg_sz "
	  "caps it)" },
	{ "RDMACH_ZCOPY_BOUNCE", RDMACH_KNOB_SIZE, "16K", 0, 16u << 20,
	  "a get with room for fewer bytes reads this much of a zero-copy "
	  "put ahead into a bounce buffer (0: always read directly)" },
	{ "RDMACH_ZCOPY_YIELD", RDMACH_KNOB_BOOL, "1", 0, 1,
	  "a get waiting for its RDMA reads yields the CPU every 1024 empty "
	  "polls (Soft-RoCE, oversubscribed cores)" },
};
RDMACH_KNOB_TABLE(ib, ib_knobs);

enum { IB_K_DEVICE, IB_K_PORT, IB_K_GID, IB_K_MODE, IB_K_RING, IB_K_CHUNK,
       IB_K_CREDIT, IB_K_SQ, IB_K_INLINE, IB_K_MTU, IB_K_TIMEOUT,
       IB_K_RETRY, IB_K_ZCOPY, IB_K_ZC_THRESHOLD, IB_K_ZC_READ,
       IB_K_ZC_BOUNCE, IB_K_ZC_YIELD, IB_K_NUM };

#define IB_SQ_RESERVE 3		/* slots kept for credit, keepalive, fin */
#define IB_BATCH 8		/* packets built before posting, no pipeline */
#define IB_IDLE_POLLS 16	/* ib_idle calls between clock reads (an
				 * empty get calls it every IB_IDLE_GETS) */
#define IB_IDLE_GETS 16		/* empty gets between looks at credits,
				 * finalize and liveness */
#define IB_CQ_IDLE_POLLS 64	/* gets between CQ polls when nothing
				 * signalled is in flight (an error
				 * completion of an unsignalled write) */

struct ib_ctrl {
	uint64_t head;		/* basic mode: the peer's head in our ring */
	uint64_t tail;		/* the peer's consumed count of our packets */
	uint64_t fin;		/* the peer finalized: its final head + 1 */
	uint64_t ka;		/* keepalive target, never read */
	uint64_t zc_ack;	/* last zero-copy put the peer has read */
};

enum ib_wr_kind { IB_WR_DATA, IB_WR_KA, IB_WR_FIN };

struct ib_sig {			/* a signalled WR in flight */
	uint64_t head;		/* ring bytes written when it completes */
	uint32_t nwr;		/* send queue slots it retires */
	uint32_t kind;
};

struct ib_tl;

struct ib_conn {
	struct rdmach_conn *conn;
	struct ib_tl *tl;
	struct ibv_qp *qp;
	struct ibv_qp *loop_qp;	/* connection to self: the responder QP */
	uint8_t *buf;
	size_t buf_len;
	struct ibv_mr *mr;
	struct ib_ctrl *ctrl;
	struct ring_tx tx;
	struct ring_rx rx;
	struct ring_scan scan;
	uint32_t psn;
	uint64_t r_ring, r_ctrl;
	uint32_t rkey;
	uint64_t tail_seen;	/* last explicit credit read from ctrl */
	/* send queue */
	unsigned int sq_free;
	unsigned int unsig_wrs;
	uint64_t unsig_bytes;
	struct ib_sig *sig;
	unsigned int sig_mask;
	uint64_t sig_head, sig_tail;
	/* liveness */
	int broken;		/* an error completion was seen */
	int ka_pending;
	uint64_t ka_sent;
	unsigned int idle;
	unsigned int idle_gets;	/* empty gets, see IB_IDLE_GETS */
	uint64_t idle_since;
	uint64_t small_max;	/* largest put of ib_put_one (0: none) */
	struct ib_zc_conn zc;	/* zero-copy (ib_zcopy.c) */
};

struct ib_tl {
	struct rdmach_tl base;
	struct ib_dev dev;
	struct ibv_cq *cq;
	struct ib_conn **conns;	/* [ctx->size], NULL for other transports */
	enum ring_mode mode;
	uint64_t ring_size, chunk, credit_thr;
	unsigned int sq_depth, inline_want, inline_max;
	struct ib_qp_params qpp;
	unsigned int sig_inflight;	/* signalled WRs not completed yet */
	unsigned int cq_skips;		/* gets that did not poll the CQ */
	struct ib_zc *zc;
	struct ib_zc_cfg zc_cfg;
};

static const char *const ib_mode_names[] = {
	[RING_MODE_BASIC] = "basic",
	[RING_MODE_PIGGYBACK] = "piggyback",
	[RING_MODE_PIPELINE] = "pipeline",
};

static inline uint64_t ib_load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static int ib_fail(struct ib_conn *ic, int err, const char *what)
{
	return rdmach_conn_fail(ic->conn, err, "%s (device %s port %u)", what,
				ic->tl->dev.name, ic->tl->dev.port);
}

/* ---- send queue: posting with selective signalling -------------------- */

static int ib_post(struct ib_conn *ic, void *src, uint32_t len,
		   uint64_t raddr, enum ib_wr_kind kind, int signal,
		   uint64_t head_after)
{
	struct ib_tl *tl = ic->tl;
	struct ibv_sge sge = { (uintptr_t)src, len, ic->mr->lkey };
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
	wr.wr.rdma.rkey = ic->rkey;
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
		tl->sig_inflight++;
		ic->unsig_wrs = 0;
		ic->unsig_bytes = 0;
	}
	return 0;
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
	if (ib_load(&ic->ctrl->fin)) {
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

static int ib_poll(struct ib_tl *tl)
{
	struct ibv_wc wc[16];
	int n, i;

	while ((n = ibv_poll_cq(tl->cq, 16, wc)) > 0) {
		for (i = 0; i < n; i++) {
			uint64_t wr_id = wc[i].wr_id;
			struct ib_conn *ic = tl->conns[wr_id & ~IB_ZC_WRID];
			struct ib_sig *s;

			if (!ic)
				continue;
			if (wr_id & IB_ZC_WRID)
				ib_zc_completion(&ic->zc, &wc[i]);
			if (wr_id & IB_ZC_WRID && wc[i].status == IBV_WC_SUCCESS)
				continue;
			if (wc[i].status != IBV_WC_SUCCESS) {
				ib_wc_error(ic, &wc[i]);
				continue;
			}
			if (ic->sig_tail == ic->sig_head)
				continue;	/* cannot happen */
			s = &ic->sig[ic->sig_tail++ & ic->sig_mask];
			tl->sig_inflight--;
			ic->sq_free += s->nwr;
			ring_tx_acked(&ic->tx, s->head);
			if (s->kind == IB_WR_KA) {
				ic->ka_pending = 0;
				ic->idle_since = rdmach_now_ns();
			}
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
	return ib_poll(tl);
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
	uint64_t t = ib_load(&ic->ctrl->tail);
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
	    ib_load(&ic->ctrl->fin))
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
	if (ib_load(&ic->ctrl->fin))
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
		if (ib_poll(tl) || ib_take_credit(ic, 1))
			return -EIO;
	}
	return -EAGAIN;
}

/*
 * Zero-copy put (ib_zcopy.h): a pending one is polled for its ack; a new
 * one registers the buffers and sends one RING_T_RNDV packet, whole (the
 * ring end is padded if needed).  -EAGAIN: take the copy path.
 */
static ssize_t ib_put_zcopy(struct ib_conn *ic, const struct iovec *iov,
			    int iovcnt)
{
	struct ib_tl *tl = ic->tl;
	struct ib_zc_ctl ctl;
	struct ring_slot pad, s;
	uint64_t credit = tl->mode == RING_MODE_BASIC ? 0 : ic->rx.pos;
	unsigned int need = 2 * (tl->mode == RING_MODE_BASIC ? 2 : 1) +
			    IB_SQ_RESERVE;
	size_t bytes;
	uint32_t len;
	ssize_t n;
	int ret;

	if (ib_zc_tx_pending(&ic->zc)) {
		int gone;

		ib_poll(tl);
		/* fin before ack: the peer writes them in the other order */
		gone = ic->broken || ib_load(&ic->ctrl->fin);
		n = ib_zc_put_poll(&ic->zc, iov, iovcnt,
				   ib_load(&ic->ctrl->zc_ack));
		if (n)
			return n;
		if (gone)
			return ib_put_error(ic);
		ib_take_credit(ic, 1);
		ib_credit_out(ic);
		ib_idle(ic);
		return 0;
	}
	if (ic->broken || ib_load(&ic->ctrl->fin))
		return ib_put_error(ic);
	len = ib_zc_ctl_len(&ic->zc, iov, iovcnt, &bytes);
	if (!bytes)
		return -EAGAIN;
	if (ic->sq_free < need)
		ib_poll(tl);
	ret = ring_tx_reserve_whole(&ic->tx, len, &pad, &s);
	if (ret == -EAGAIN && !ib_poll(tl) && !ib_take_credit(ic, 1))
		ret = ring_tx_reserve_whole(&ic->tx, len, &pad, &s);
	if (ret || ic->sq_free < need) {
		ic->conn->stats.ring_full_stalls++;
		ib_idle(ic);
		return ic->broken ? ib_put_error(ic) : 0;
	}
	if (ib_zc_put_start(&ic->zc, iov, iovcnt, &ctl))
		return -EAGAIN;
	if (pad.bytes) {
		ring_tx_commit(&ic->tx, &pad, credit);
		ret = ib_post_packet(ic, pad.off, pad.bytes, ic->tx.head);
		if (ret)
			return ret;
	}
	memcpy(s.payload, &ctl, len);
	s.type = RING_T_RNDV;
	ring_tx_commit(&ic->tx, &s, credit);
	if (credit)
		ring_rx_credit_told(&ic->rx, credit);
	ret = ib_post_packet(ic, s.off, s.bytes, ic->tx.head);
	if (ret)
		return ret;
	ic->conn->stats.packets_sent += pad.bytes ? 2 : 1;
	return 0;
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

	if (total > ic->small_max || ib_zc_wanted(&ic->zc, total) ||
	    ic->sq_free < 1 + IB_SQ_RESERVE || ic->broken ||
	    ib_load(&ic->ctrl->fin) ||
	    ring_tx_reserve(&ic->tx, total, ic->small_max, &s) || s.len != total)
		return 0;
	rdmach_iovc_init(&c, iov, iovcnt);
	rdmach_iovc_gather(&c, s.payload, total);
	ring_tx_commit(&ic->tx, &s, credit);
	ring_rx_credit_told(&ic->rx, credit);
	ret = ib_post_packet(ic, s.off, s.bytes, ic->tx.head);
	ic->conn->stats.packets_sent++;
	*n = ret ? ret : (ssize_t)total;
	return 1;
}

static ssize_t ib_put(struct rdmach_conn *conn, const struct iovec *iov,
		      int iovcnt, size_t total)
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
	if (ib_zc_wanted(&ic->zc, total)) {
		n = ib_put_zcopy(ic, iov, iovcnt);

		if (n != -EAGAIN)
			return n;
	}
	if (ic->broken || ib_load(&ic->ctrl->fin))
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
			batch.bytes[batch.n] = s.bytes;
			batch.end[batch.n++] = ic->tx.head;
			if (batch.n == IB_BATCH)
				ret = ib_batch_flush(ic, &batch);
		} else {
			/* pipeline: chunk i is on the wire while i+1 is
			 * copied */
			ret = ib_post_packet(ic, s.off, s.bytes, ic->tx.head);
		}
		if (ret)
			return ret;
		done += s.len;
		npkt++;
	}
	if (batch.n && (ret = ib_batch_flush(ic, &batch)))
		return ret;
	conn->stats.packets_sent += npkt;
	if (npkt > 1 && tl->mode == RING_MODE_PIPELINE)
		conn->stats.pipelined_msgs++;
	if (!done)
		ib_idle(ic);
	return (ssize_t)done;
}

/* The peer read all of zero-copy put `id`: tell it (an 8-byte write into
 * its ctrl area; the send queue keeps slots for such words). */
static int ib_zc_ack(struct ib_conn *ic, uint64_t id)
{
	uint64_t deadline = rdmach_now_ns() + ic->conn->ctx->peer_timeout_ns;

	while (ic->sq_free < 1 && !ic->broken) {
		if (ib_poll(ic->tl) || rdmach_now_ns() > deadline)
			return ib_fail(ic, -ECONNRESET, "send queue full: "
				       "cannot acknowledge a zero-copy put");
	}
	if (ic->broken)
		return ib_put_error(ic);
	return ib_post_ctrl(ic, offsetof(struct ib_ctrl, zc_ack), id,
			    IB_WR_DATA, 0);
}

/* A packet other than data at the ring head: bytes delivered (>= 0) or a
 * negative errno; *consumed set when the packet is done. */
static ssize_t ib_get_ctl(struct ib_conn *ic, const struct ring_pkt *pkt,
			  struct rdmach_iovc *c, size_t room, int *consumed)
{
	uint64_t ack = 0;
	ssize_t n = 0;

	if (pkt->type == RING_T_RNDV && ic->broken)
		return ic->conn->err ? ic->conn->err :
		       ib_fail(ic, -ECONNRESET, "the peer left before its "
			       "zero-copy put was read");
	if (pkt->type == RING_T_RNDV) {
		n = ib_zc_get(&ic->zc, pkt->payload, pkt->len, c, room, &ack);
		if (n < 0) {
			ic->broken = 1;
			return n;
		}
	}
	*consumed = pkt->type == RING_T_PAD || ack;
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

	if (r)
		return r;
	ib_credit_out(ic);
	if (ib_load(&ic->ctrl->fin) &&
	    ic->rx.pos + 1 >= ib_load(&ic->ctrl->fin))
		return -ESHUTDOWN;
	ib_idle(ic);
	return 0;
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

	rdmach_iovc_init(&c, iov, iovcnt);
	/* a whole data packet that fits the first piece: most messages */
	if (bottom_fill && !ic->rx.off && ring_rx_peek(&ic->rx, 1, &pkt) == 1 &&
	    pkt.type == RING_T_DATA && pkt.len <= iov[0].iov_len) {
		if (pkt.credit && ib_credit_in(ic, pkt.credit))
			return -EPROTO;
		memcpy(iov[0].iov_base, pkt.payload, pkt.len);
		ring_rx_consume(&ic->rx, &pkt);
		conn->stats.packets_received++;
		done = c.off = pkt.len;
		if (done == total || !ring_rx_head_arrived(&ic->rx)) {
			ib_activity(ic);
			ib_credit_out(ic);
			return (ssize_t)done;
		}
	}
	while (done < total) {
		size_t n;

		if (!bottom_fill && ic->rx.pos >= ib_load(&ic->ctrl->head))
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
		if (pkt.type != RING_T_DATA) {
			int consumed;
			ssize_t k = ib_get_ctl(ic, &pkt, &c, total - done,
					       &consumed);

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
		ic->rx.off += (uint32_t)n;
		if (ic->rx.off == pkt.len) {
			ring_rx_consume(&ic->rx, &pkt);
			conn->stats.packets_received++;
		}
	}
	if (done) {
		ib_activity(ic);
		ib_credit_out(ic);
		return (ssize_t)done;
	}
	return ib_get_idle(ic);
}

/* Kept small: the empty poll is the hot loop of every waiter.  The CQ
 * only matters when a signalled write is in flight; otherwise it is
 * polled every IB_CQ_IDLE_POLLS gets (error completions). */
static ssize_t ib_get(struct rdmach_conn *conn, const struct iovec *iov,
		      int iovcnt, size_t total)
{
	struct ib_conn *ic = conn->priv;
	struct ib_tl *tl = ic->tl;

	if (tl->sig_inflight || ++tl->cq_skips % IB_CQ_IDLE_POLLS == 0)
		ib_poll(tl);
	if (ring_rx_head_arrived(&ic->rx))
		return ib_get_ring(ic, iov, iovcnt, total);
	/* credits, the peer's finalize and liveness every few empty polls */
	if (++ic->idle_gets % IB_IDLE_GETS)
		return 0;
	return ib_get_idle(ic);
}

static int ib_progress(struct rdmach_tl *base)
{
	struct ib_tl *tl = (struct ib_tl *)base;
	int i, ret;

	ret = ib_poll(tl);
	if (ret)
		return ret;
	for (i = 0; i < base->ctx->size; i++) {
		struct ib_conn *ic = tl->conns[i];

		if (!ic || ic->broken)
			continue;
		if (ib_take_credit(ic, 1))
			continue;
		ib_credit_out(ic);
		ib_idle(ic);
	}
	return 0;
}

/* ---- wire-up ------------------------------------------------------------- */

static int ib_read_knobs(struct ib_tl *tl)
{
	uint64_t v[IB_K_NUM] = { 0 };
	const char *mode;
	int i;

	for (i = IB_K_RING; i < IB_K_NUM; i++)
		if (rdmach_knob_u64(&ib_knobs[i], &v[i]))
			return -EINVAL;
	if (rdmach_knob_u64(&ib_knobs[IB_K_PORT], &v[IB_K_PORT]))
		return -EINVAL;
	mode = rdmach_knob_str(&ib_knobs[IB_K_MODE]);
	for (i = 0; i < 3 && strcmp(mode, ib_mode_names[i]); i++)
		;
	if (i == 3) {
		rdmach_err("RDMACH_IB_MODE=%s: use basic, piggyback or "
			   "pipeline", mode);
		return -EINVAL;
	}
	tl->mode = (enum ring_mode)i;
	if (ring_size_check(v[IB_K_RING])) {
		rdmach_err("RDMACH_IB_RING_SIZE=%" PRIu64 ": must be a power "
			   "of two >= %u", v[IB_K_RING], RING_MIN_SIZE);
		return -EINVAL;
	}
	tl->ring_size = v[IB_K_RING];
	tl->chunk = v[IB_K_CHUNK];
	tl->credit_thr = tl->ring_size * v[IB_K_CREDIT] / 100;
	tl->sq_depth = (unsigned int)v[IB_K_SQ];
	tl->inline_want = (unsigned int)v[IB_K_INLINE];
	tl->qpp.mtu = v[IB_K_MTU] >= 4096 ? IBV_MTU_4096 :
		      v[IB_K_MTU] >= 2048 ? IBV_MTU_2048 :
		      v[IB_K_MTU] >= 1024 ? IBV_MTU_1024 :
		      v[IB_K_MTU] >= 512 ? IBV_MTU_512 : IBV_MTU_256;
	tl->qpp.timeout = (uint8_t)v[IB_K_TIMEOUT];
	tl->qpp.retry_cnt = (uint8_t)v[IB_K_RETRY];
	tl->zc_cfg.enabled = (int)v[IB_K_ZCOPY];
	tl->zc_cfg.threshold = v[IB_K_ZC_THRESHOLD];
	tl->zc_cfg.read_max = v[IB_K_ZC_READ];
	tl->zc_cfg.bounce = v[IB_K_ZC_BOUNCE];
	tl->zc_cfg.yield = (int)v[IB_K_ZC_YIELD];
	return 0;
}

static int ib_open(struct rdmach_ctx *ctx, struct rdmach_tl **tlp)
{
	struct ib_tl *tl = calloc(1, sizeof(*tl));
	uint64_t port = 0;
	int ret;

	if (!tl)
		return -ENOMEM;
	/* before any registration (and device list): ib_fork.h */
	ib_fork_setup();
	tl->base.ops = &rdmach_ib_ops;
	tl->base.ctx = ctx;
	ret = ib_read_knobs(tl);
	if (ret)
		goto err_free;
	rdmach_knob_u64(&ib_knobs[IB_K_PORT], &port);
	ret = ib_dev_open(&tl->dev, rdmach_knob_str(&ib_knobs[IB_K_DEVICE]),
			  (unsigned int)port,
			  rdmach_knob_str(&ib_knobs[IB_K_GID]));
	if (ret == -ENODEV)
		rdmach_tl_unavailable(ctx, RDMACH_TL_IB, "%s", tl->dev.why);
	if (ret)
		goto err_free;
	tl->conns = calloc((size_t)ctx->size, sizeof(*tl->conns));
	if (!tl->conns) {
		ret = -ENOMEM;
		goto err_dev;
	}
	ret = ib_zc_open(&tl->zc, &tl->dev, &tl->zc_cfg, ctx);
	if (ret)
		goto err_conns;
	*tlp = &tl->base;
	return 0;
err_conns:
	free(tl->conns);
err_dev:
	ib_dev_close(&tl->dev);
err_free:
	free(tl);
	return ret;
}

static void ib_conn_destroy(struct ib_conn *ic)
{
	ib_zc_conn_release(&ic->zc);
	if (ic->loop_qp)
		ibv_destroy_qp(ic->loop_qp);
	if (ic->qp)
		ibv_destroy_qp(ic->qp);
	if (ic->mr)
		ibv_dereg_mr(ic->mr);
	free(ic->buf);
	free(ic->sig);
	free(ic);
}

static struct ib_conn *ib_conn_create(struct ib_tl *tl, int peer)
{
	struct ib_conn *ic = calloc(1, sizeof(*ic));
	uint64_t r = tl->ring_size;
	unsigned int sigs = 1;

	if (!ic)
		return NULL;
	ic->tl = tl;
	ic->conn = &tl->base.ctx->conns[peer];
	ic->buf_len = 2 * r + sizeof(struct ib_ctrl);
	if (posix_memalign((void **)&ic->buf, 4096, ic->buf_len))
		goto err;
	memset(ic->buf, 0, ic->buf_len);
	ic->ctrl = (struct ib_ctrl *)(void *)(ic->buf + 2 * r);
	while (sigs < tl->sq_depth)
		sigs <<= 1;
	ic->sig = calloc(sigs, sizeof(*ic->sig));
	if (!ic->sig)
		goto err;
	ic->sig_mask = sigs - 1;
	ic->mr = ibv_reg_mr(tl->dev.pd, ic->buf, ic->buf_len,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ);
	if (!ic->mr) {
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
	ic->psn = (uint32_t)(lrand48() ^ getpid() ^ peer) & 0xffffff;
	ring_rx_init(&ic->rx, ic->buf, r);
	return ic;
err:
	ib_conn_destroy(ic);
	return NULL;
}

static void ib_local_addr(struct ib_tl *tl, struct ib_conn *ic,
			  struct ibv_qp *qp, struct ib_addr *a)
{
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
}

/* Can our port reach the peer's at all?  RoCE has no LIDs; a RoCE v2
 * packet carries an IPv4 or an IPv6 header, the same at both ends. */
static int ib_check_reach(struct ib_tl *tl, int peer, const struct ib_addr *r)
{
	const struct ib_dev *d = &tl->dev;
	char g1[48], g2[48];

	if (d->is_roce && r->lid) {
		rdmach_err("ib: rank %d is on an InfiniBand port (LID %u), "
			   "this rank on RoCE (%s port %u): no path between "
			   "them", peer, r->lid, d->name, d->port);
		return -ENETUNREACH;
	}
	if (!d->is_roce && !r->lid) {
		rdmach_err("ib: rank %d has no LID (a RoCE port, or an "
			   "InfiniBand port without a subnet manager), this "
			   "rank is on InfiniBand (%s port %u, LID %u)", peer,
			   d->name, d->port, d->lid);
		return -ENETUNREACH;
	}
	if (d->is_roce &&
	    ib_gid_is_v4mapped(&r->gid) != ib_gid_is_v4mapped(&d->gid)) {
		rdmach_err("ib: rank %d's RoCE GID %s is %s, this rank's "
			   "(%s port %u GID %d) %s is %s: both ends need an "
			   "address of one IP family (an IPv4 address on "
			   "each host's RDMA interface, or RDMACH_IB_GID_INDEX)",
			   peer, ib_gid_str(&r->gid, g1, sizeof(g1)),
			   ib_gid_is_v4mapped(&r->gid) ? "IPv4" : "IPv6",
			   d->name, d->port, d->gid_index,
			   ib_gid_str(&d->gid, g2, sizeof(g2)),
			   ib_gid_is_v4mapped(&d->gid) ? "IPv4" : "IPv6");
		return -ENETUNREACH;
	}
	return 0;
}

/* Can we talk to the peer that sent r?  Names what differs. */
static int ib_check_peer(struct ib_tl *tl, int peer, const struct ib_addr *r)
{
	int ret = ib_check_reach(tl, peer, r);

	if (ret)
		return ret;
	if (r->wire != IB_WIRE_VERSION) {
		rdmach_err("ib: rank %d speaks rdma_ib wire version %u, this "
			   "rank %u: run the same rdmach build on every host",
			   peer, r->wire, IB_WIRE_VERSION);
		return -EPROTO;
	}
	if (r->ring_size != tl->ring_size) {
		rdmach_err("ib: rank %d has RDMACH_IB_RING_SIZE=%" PRIu64
			   ", this rank %" PRIu64 ": set the same everywhere",
			   peer, r->ring_size, tl->ring_size);
		return -EINVAL;
	}
	if (r->mode && r->mode != tl->mode + 1U) {
		rdmach_err("ib: rank %d has RDMACH_IB_MODE=%s, this rank %s: "
			   "set the same everywhere", peer,
			   r->mode <= 3 ? ib_mode_names[r->mode - 1] : "?",
			   ib_mode_names[tl->mode]);
		return -EINVAL;
	}
	return 0;
}

static int ib_publish(struct rdmach_tl *base, const int *peers, int npeers)
{
	struct ib_tl *tl = (struct ib_tl *)base;
	struct rdmach_ctx *ctx = base->ctx;
	char key[64], val[IB_ADDR_STRLEN];
	int cqe, i, ret;

	if (!npeers)
		return 0;
	cqe = (int)tl->sq_depth * (npeers + 1) + 16;
	if (tl->dev.max_cqe > 0 && cqe > tl->dev.max_cqe)
		cqe = tl->dev.max_cqe;
	tl->cq = ibv_create_cq(tl->dev.ctx, cqe, NULL, NULL, 0);
	if (!tl->cq) {
		rdmach_err("ib: ibv_create_cq(%d) on %s failed: %s", cqe,
			   tl->dev.name, strerror(errno));
		return -ENOMEM;
	}
	for (i = 0; i < npeers; i++) {
		struct ib_conn *ic = ib_conn_create(tl, peers[i]);
		struct ib_addr a;

		if (!ic)
			return -ENOMEM;
		tl->conns[peers[i]] = ic;
		ic->conn->priv = ic;
		ic->conn->tl = base;
		if (peers[i] == ctx->rank)
			continue;
		ib_local_addr(tl, ic, ic->qp, &a);
		ib_addr_format(&a, val, sizeof(val));
		snprintf(key, sizeof(key), "ib-%d-%d", ctx->rank, peers[i]);
		ret = rdmach_oob_put(ctx, key, val);
		if (ret)
			return ret;
	}
	return 0;
}

static int ib_connect_one(struct ib_tl *tl, struct ib_conn *ic)
{
	struct rdmach_ctx *ctx = tl->base.ctx;
	int peer = ic->conn->peer;
	struct ib_addr r;
	char key[64], val[IB_ADDR_STRLEN + 64];
	int ret;

	if (peer == ctx->rank) {
		/* to self: qp <-> loop_qp, writes land in our own ring */
		struct ib_addr l;

		ib_local_addr(tl, ic, ic->loop_qp, &r);
		ib_local_addr(tl, ic, ic->qp, &l);
		ret = ib_qp_connect(&tl->dev, ic->loop_qp, ic->psn, &l,
				    &tl->qpp);
		if (ret)
			return ret;
	} else {
		snprintf(key, sizeof(key), "ib-%d-%d", peer, ctx->rank);
		ret = rdmach_oob_get(ctx, key, val, sizeof(val));
		if (ret)
			return ret;
		if (ib_addr_parse(val, &r)) {
			rdmach_err("ib: bad address from rank %d: \"%s\"",
				   peer, val);
			return -EPROTO;
		}
	}
	ret = ib_check_peer(tl, peer, &r);
	if (ret)
		return ret;
	ret = ib_qp_connect(&tl->dev, ic->qp, ic->psn, &r, &tl->qpp);
	if (ret)
		return ret;
	if (peer != ctx->rank)
		rdmach_info("ib: rank %d: path MTU %s (this port %s, the "
			    "peer's %s, RDMACH_IB_MTU %s here)", peer,
			    ib_mtu_str(ib_path_mtu(&tl->dev, &r, &tl->qpp)),
			    ib_mtu_str(tl->dev.active_mtu),
			    r.mtu ? ib_mtu_str((enum ibv_mtu)r.mtu) : "unknown",
			    ib_mtu_str(tl->qpp.mtu));
	ic->r_ring = r.ring;
	ic->r_ctrl = r.ctrl;
	ic->rkey = r.rkey;
	ring_tx_init(&ic->tx, ic->buf + tl->ring_size, tl->ring_size);
	ic->small_max = tl->mode == RING_MODE_BASIC ? 0 :
			ring_max_payload(tl->mode, tl->chunk, tl->ring_size);
	return 0;
}

static int ib_connect(struct rdmach_tl *base, const int *peers, int npeers)
{
	struct ib_tl *tl = (struct ib_tl *)base;
	int i, ret;

	for (i = 0; i < npeers; i++) {
		ret = ib_connect_one(tl, tl->conns[peers[i]]);
		if (ret)
			return ret;
	}
	return 0;
}

static int ib_ready(struct rdmach_tl *base)
{
	struct ib_tl *tl = (struct ib_tl *)base;

	rdmach_debug("ib: ready on %s port %u, mode %s, ring %" PRIu64
		     ", chunk %" PRIu64 ", inline %u", tl->dev.name,
		     tl->dev.port, ib_mode_names[tl->mode], tl->ring_size,
		     tl->chunk, tl->inline_max);
	return 0;
}

/* ---- finalize ------------------------------------------------------------- */

static int ib_drained(struct ib_tl *tl)
{
	int i;

	for (i = 0; i < tl->base.ctx->size; i++) {
		struct ib_conn *ic = tl->conns[i];

		/* a peer that finalized reads no more: do not wait for
		 * acks from a QP it may have destroyed already */
		if (ic && ic->qp && !ic->broken && ic->sig_tail != ic->sig_head &&
		    !ib_load(&ic->ctrl->fin))
			return 0;
		/* the peer may still be reading our memory */
		if (ic && ic->qp && !ic->broken && ib_zc_tx_pending(&ic->zc) &&
		    ib_load(&ic->ctrl->zc_ack) < ic->zc.tx_id &&
		    !ib_load(&ic->ctrl->fin))
			return 0;
	}
	return 1;
}

static void ib_send_fin(struct ib_tl *tl, struct ib_conn *ic,
			uint64_t deadline_ns)
{
	if (!ic->r_ctrl || ic->broken || ic->conn->err)
		return;
	while (ic->sq_free < 1 && !ic->broken && rdmach_now_ns() < deadline_ns)
		ib_poll(tl);
	if (ic->sq_free >= 1)
		ib_post_ctrl(ic, offsetof(struct ib_ctrl, fin),
			     ic->tx.head + 1, IB_WR_FIN, 1);
}

static int ib_close(struct rdmach_tl *base, uint64_t deadline_ns)
{
	struct ib_tl *tl = (struct ib_tl *)base;
	int i, ret = 0;

	for (i = 0; tl->cq && i < base->ctx->size; i++)
		if (tl->conns[i])
			ib_send_fin(tl, tl->conns[i], deadline_ns);
	while (tl->cq && !ib_drained(tl) && rdmach_now_ns() < deadline_ns)
		ib_poll(tl);
	if (tl->cq && !ib_drained(tl)) {
		rdmach_warn("ib: finalize: writes still in flight at the "
			    "deadline (RDMACH_FINALIZE_TIMEOUT_MS)");
		ret = -ETIMEDOUT;
	}
	for (i = 0; i < base->ctx->size; i++) {
		if (!tl->conns[i])
			continue;
		ib_conn_destroy(tl->conns[i]);
		tl->conns[i] = NULL;
	}
	if (tl->cq)
		ibv_destroy_cq(tl->cq);
	ib_zc_close(tl->zc);
	ib_dev_close(&tl->dev);
	free(tl->conns);
	free(tl);
	return ret;
}

const struct rdmach_tl_ops rdmach_ib_ops = {
	.name = "ib",
	.open = ib_open,
	.publish = ib_publish,
	.connect = ib_connect,
	.ready = ib_ready,
	.put = ib_put,
	.get = ib_get,
	.progress = ib_progress,
	.close = ib_close,
};
