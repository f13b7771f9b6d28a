/*
 * ib_cm.c - rdma_ib's connection manager (ib_cm.h): a UD QP per process,
 * a record per rank, and per pair a short exchange of the RC endpoints'
 * addresses.  Everything a peer sends is checked (length, magic,
 * version, ranks, the nonces of both contexts, flags: ib_cm_msg.h; the
 * sending QP) before a field is used.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/log.h"
#include "core/tl.h"
#include "ib_cm.h"
#include "ib_cm_msg.h"
#include "ib_dev.h"
#include "ib_ep.h"
#include "ib_rec.h"
#include "ib_tl.h"

#define IB_CM_QKEY 0x52444348u
/* Room for a request from every peer of a large job at once, and the
 * answers to them: a receive not posted loses a message, a send slot
 * lacking skips one (both made up for by retransmission, at a cost) */
#define IB_CM_RECVS 256			/* receive buffers posted */
#define IB_CM_SENDS 128			/* sends in flight at most */
_Static_assert(IB_CM_RECVS + IB_CM_SENDS <= IB_CM_CQE,
	       "the shared CQ has room for the UD QP's completions");
#define IB_CM_GRH 40			/* a UD receive starts with it */
#define IB_CM_RTO_MAX_NS (400 * 1000000ull)	/* retransmissions' gap, at
						 * most */
#define IB_CM_SEND_TAG (1ull << 32)	/* wr_id: a send (else a receive) */
#define IB_CM_ROOM_NS (1000000ull)	/* a connection waiting for room
					 * looks again after this */
#define IB_CM_BUSY_NS (10 * 1000000ull)	/* a peer that kept a connection
					 * is not asked again before */
#define IB_CM_IDLE_NS (5 * 1000000ull)	/* a connection closes only after
					 * carrying nothing for this long */
#define IB_CM_FULL_NS (100 * 1000000ull)	/* the device's QPs tried again */

/* What ib_cm_send sends. */
enum ib_cm_kind { IB_CM_ADDR, IB_CM_REJ, IB_CM_CLOSE, IB_CM_CLOSED,
		  IB_CM_BUSY };

_Static_assert(IB_CM_MSG_MTU_MAX == IBV_MTU_4096,
	       "a message's MTU is at most 4096's code");

/* A peer's record ("ib-<rank>") and the state of its connection. */
struct ib_cm_peer {
	struct ibv_ah *ah;	/* NULL: record not read yet */
	uint32_t ud_qpn;
	uint64_t nonce;
	char host[IB_REC_HOST_MAX];	/* its host name, for messages */
	uint32_t r_qpn;		/* its RC QP ours is connected to, or 0 */
	int rtr;		/* it said its QP is connected to ours */
	int active;		/* we want it up (or closed: closing), and
				 * retransmit until it is */
	int closing;		/* we asked it to close the connection ... */
	int overdue;		/* ... and it has not answered in time */
	int waiting;		/* under way, no room for our end yet ... */
	uint64_t wait_since;	/* ... since then */
	unsigned int pend_at;	/* while active: its index in ib_cm.pend */
	uint16_t gen;		/* connections of the pair closed so far */
	uint32_t attempt;	/* our last request to close (IB_CM_F_CLOSE) */
	uint32_t kept;		/* its last request we answered BUSY */
	uint64_t busy_until;	/* it kept one: not asked again before */
	uint64_t tickets;	/* the next zero-copy ticket of the pair's
				 * next connection (0: the first's own) */
	uint64_t deadline, next_tx, rto;
	/* our request under way: its first transmission, and how many so
	 * far (an answer to one sent once times the peers' answers) */
	uint64_t sent_at;
	unsigned int sends;
};

struct ib_cm_stats {
	uint64_t made;		/* connections up (made again included) */
	uint64_t closed;	/* closed idle, at our request ... */
	uint64_t closed_asked;	/* ... and at the peers' */
	uint64_t kept;		/* requests the peer answered BUSY */
	uint64_t waits;		/* connections that waited for room ... */
	uint64_t over;		/* ... and those made beyond the limit */
	uint64_t refused;	/* QPs the adapter refused (max_qp) */
	uint64_t resent;	/* messages sent again, unanswered in time */
	unsigned int eps_most;	/* endpoints at once, at most */
};

struct ib_cm {
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;		/* IB_CM_RECVS receives, IB_CM_SENDS sends */
	unsigned int send_next, sends_out;
	uint64_t nonce;
	unsigned int dropped;	/* by the test hook so far */
	int version_warned;	/* a peer of another protocol version */
	unsigned int pending;	/* peers active or half-open ... */
	int *pend;		/* ... their ranks, densely: [pending] */
	struct ib_cm_peer *peers;	/* [ctx->size] */
	/* receives completed, tl->cm_queued of them from rxq_head, to be
	 * handled by ib_cm_drain (ib_tl.h): one per receive posted at most */
	struct ibv_wc rxq[IB_CM_RECVS];
	unsigned int rxq_head;
	/* in ib_cm_connect_all: nothing is written on any connection
	 * before rdmach_connect's fence, which every rank enters with its
	 * QPs connected, so a connection is up once ours is connected to
	 * the peer's (one message each way, no RTR awaited) */
	int at_once;
	/* ... whose first loop makes every endpoint and sends no message
	 * twice: no peer answers before it has made its own (ib_cm_tick) */
	int making_all;
	/* idle connections closed for room (RDMACH_CONNECT=demand only) */
	int may_close;
	unsigned int eps;	/* endpoints to other ranks: a QP each */
	unsigned int eps_max;	/* RDMACH_IB_QPS_MAX (0: none of ours) */
	uint64_t wait_ns;	/* RDMACH_IB_QPS_WAIT_MS */
	unsigned int eps_full;	/* the device refused a QP at this many ... */
	int full_warned;	/* said so once */
	uint64_t full_at;	/* ... then */
	unsigned int closing;	/* close requests unanswered */
	int finalizing;		/* close requests are answered BUSY */
	uint64_t trim_at;	/* ib_cm_trim looks again then */
	/* how long peers take to answer a request (smoothed, and its mean
	 * deviation; ns; answered: samples), as TCP times its round trips:
	 * a loaded host answers late, and retransmitting into its backlog
	 * only adds to it */
	uint64_t rtt, rtt_var, rto_min;
	unsigned int answered;
	/* a retransmission's gap, kept for new requests until an answer
	 * times one (no sample comes from a request sent more than once) */
	uint64_t rto_backed;
	struct ib_cm_stats st;
};

#define IB_CM_RSLOT (IB_CM_GRH + sizeof(struct ib_cm_msg))

static const char *const ib_cm_mode_names[] = { "basic", "piggyback",
						"pipeline" };

/* ---- the UD QP ------------------------------------------------------------ */

static int ib_cm_post_recv(struct ib_cm *cm, unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(cm->buf + i * IB_CM_RSLOT),
		.length = IB_CM_RSLOT, .lkey = cm->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = IB_CM_WRID | i, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	return ibv_post_recv(cm->qp, &wr, &bad) ? -EIO : 0;
}

static int ib_cm_qp_up(struct ib_dev *d, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = d->port;
	a.qkey = IB_CM_QKEY;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_QKEY))
		return -EIO;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -EIO;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) ? -EIO : 0;
}

static int ib_cm_qp_create(struct ib_tl *tl, struct ib_cm *cm)
{
	struct ibv_qp_init_attr ia;
	unsigned int i;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = tl->cq;
	ia.recv_cq = tl->cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = IB_CM_SENDS;
	ia.cap.max_recv_wr = IB_CM_RECVS;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	cm->qp = ibv_create_qp(tl->dev.pd, &ia);
	if (!cm->qp || ib_cm_qp_up(&tl->dev, cm->qp)) {
		rdmach_err("ib: the connection manager's UD QP on %s failed: "
			   "%s", tl->dev.name, strerror(errno));
		return -EIO;
	}
	for (i = 0; i < IB_CM_RECVS; i++)
		if (ib_cm_post_recv(cm, i))
			return -EIO;
	return 0;
}

/* ---- records ------------------------------------------------------------- */

static void ib_cm_key(char *key, size_t len, int rank)
{
	snprintf(key, len, "ib-%d", rank);
}

/* This rank's record (ib_rec.h). */
static int ib_cm_publish(struct ib_tl *tl)
{
	struct ib_rec r;
	char key[32], val[IB_REC_LEN_MAX + 1];

	memset(&r, 0, sizeof(r));
	r.lid = tl->dev.lid;
	memcpy(r.gid, tl->dev.gid.raw, sizeof(r.gid));
	r.ud_qpn = tl->cm->qp->qp_num;
	r.nonce = tl->cm->nonce;
	r.wire = IB_WIRE_VERSION;
	if (gethostname(r.host, sizeof(r.host) - 1))
		r.host[0] = '\0';
	ib_rec_host_clean(r.host);
	ib_rec_format(&r, val, sizeof(val));
	ib_cm_key(key, sizeof(key), tl->base.ctx->rank);
	return rdmach_oob_put(tl->base.ctx, key, val);
}

static struct ibv_ah *ib_cm_ah(struct ib_dev *d, const struct ib_addr *a)
{
	struct ibv_ah_attr at;

	memset(&at, 0, sizeof(at));
	at.dlid = a->lid;
	at.port_num = d->port;
	if (d->gid_index >= 0) {
		at.is_global = 1;
		at.grh.dgid = a->gid;
		at.grh.sgid_index = (uint8_t)d->gid_index;
		at.grh.hop_limit = 64;
	}
	return ibv_create_ah(d->pd, &at);
}

/* Rank peer's record: read it (first contact) and make the address
 * handle its messages go by.  0 or a negative errno (logged). */
static int ib_cm_peer_load(struct ib_tl *tl, int peer)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	char key[32], val[320], esc[128], why[160];
	struct ib_addr a;
	struct ib_rec rec;
	int ret;

	if (p->ah)
		return 0;
	ib_cm_key(key, sizeof(key), peer);
	ret = rdmach_oob_get(tl->base.ctx, key, val, sizeof(val));
	if (ret) {
		rdmach_err("ib: rank %d published no rdma_ib record (%s): a "
			   "build without the connection manager?", peer, key);
		return ret;
	}
	if (ib_rec_parse(val, &rec, why, sizeof(why))) {
		rdmach_err("ib: rank %d published a malformed record (%s), "
			   "%s: \"%s\"", peer, key, why,
			   rdmach_log_esc(val, esc, sizeof(esc)));
		return -EPROTO;
	}
	if (rec.wire != IB_WIRE_VERSION) {
		rdmach_err("ib: rank %d (host %s) speaks rdma_ib wire version "
			   "%u, this rank %u: run the same rdmach build on "
			   "every host", peer, rec.host, rec.wire,
			   IB_WIRE_VERSION);
		return -EPROTO;
	}
	memset(&a, 0, sizeof(a));
	a.lid = rec.lid;
	memcpy(a.gid.raw, rec.gid, sizeof(rec.gid));
	p->ud_qpn = rec.ud_qpn;
	p->nonce = rec.nonce;
	snprintf(p->host, sizeof(p->host), "%s", rec.host);
	p->ah = ib_cm_ah(&tl->dev, &a);
	if (!p->ah) {
		rdmach_err("ib: no address handle to rank %d (host %s) on %s: "
			   "%s", peer, p->host, tl->dev.name, strerror(errno));
		return -EIO;
	}
	return 0;
}

/* ---- messages --------------------------------------------------------- */

/* The flags of each kind (an address's: what we know); the receiver
 * refuses combinations its parser does not list (ib_cm_msg.c). */
static const uint16_t ib_cm_kind_flags[] = {
	[IB_CM_ADDR] = 0, [IB_CM_REJ] = IB_CM_F_REJ,
	[IB_CM_CLOSE] = IB_CM_F_CLOSE, [IB_CM_CLOSED] = IB_CM_F_CLOSED,
	[IB_CM_BUSY] = IB_CM_F_BUSY,
};

static void ib_cm_fill(struct ib_tl *tl, int peer, enum ib_cm_kind kind,
		       uint16_t gen, uint32_t attempt, struct ib_cm_msg *m)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	const rdmach_stats_t *cs = &tl->base.ctx->conns[peer].stats;
	struct ib_addr a;

	memset(m, 0, sizeof(*m));
	m->magic = IB_CM_MAGIC;
	m->version = tl->cm_version;
	m->src = (uint32_t)tl->base.ctx->rank;
	m->dst = (uint32_t)peer;
	m->src_nonce = tl->cm->nonce;
	m->dst_nonce = p->nonce;
	m->gen = gen;
	m->psn = attempt;
	m->flags = ib_cm_kind_flags[kind];
	if (kind == IB_CM_CLOSE) {
		m->ring = cs->bytes_put;
		m->ctrl = cs->bytes_got;
	}
	if (kind != IB_CM_ADDR)
		return;
	ib_ep_local_addr(tl->conns[peer], tl->conns[peer]->qp, &a);
	m->flags = (uint16_t)((p->r_qpn ? IB_CM_F_RTR : 0) |
			      (p->r_qpn && (p->rtr || tl->cm->at_once) ?
			       IB_CM_F_UP : 0));
	m->ring = a.ring;
	m->ctrl = a.ctrl;
	m->ring_size = a.ring_size;
	m->qpn = a.qpn;
	m->psn = a.psn;
	m->rkey = a.rkey;
	m->wire = a.wire;
	m->mtu = a.mtu;
	m->mode = (uint16_t)a.mode;
	m->caps = a.caps;
	m->lid = a.lid;
	memcpy(m->gid, a.gid.raw, 16);
}

/* Our request to the peer went out: its first copy, or one more. */
static void ib_cm_request_sent(struct ib_cm_peer *p)
{
	if (!p->sent_at) {
		p->sent_at = rdmach_now_ns();
		p->sends = 0;
	}
	p->sends++;
}

/* Our endpoint's address to peer, with what we know (IB_CM_ADDR), that
 * our end of the pair failed (REJ), or a message about closing the
 * connection of generation gen (its attempt).  A full send queue drops
 * it: the retransmission (or the peer's) makes up for it. */
static void ib_cm_send(struct ib_tl *tl, int peer, enum ib_cm_kind kind,
		       uint16_t gen, uint32_t attempt)
{
	struct ib_cm *cm = tl->cm;
	/* sends complete in order: with fewer than IB_CM_SENDS out, the
	 * slot IB_CM_SENDS sends back is free */
	unsigned int slot = cm->send_next % IB_CM_SENDS;
	uint8_t *b = cm->buf + IB_CM_RECVS * IB_CM_RSLOT +
		     slot * sizeof(struct ib_cm_msg);
	struct ibv_sge sge = { .addr = (uintptr_t)b,
			       .length = sizeof(struct ib_cm_msg),
			       .lkey = cm->mr->lkey };
	struct ibv_send_wr wr, *bad;

	if (cm->sends_out >= IB_CM_SENDS)
		return;
	ib_cm_fill(tl, peer, kind, gen, attempt,
		   (struct ib_cm_msg *)(void *)b);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = IB_CM_WRID | IB_CM_SEND_TAG;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = cm->peers[peer].ah;
	wr.wr.ud.remote_qpn = cm->peers[peer].ud_qpn;
	wr.wr.ud.remote_qkey = IB_CM_QKEY;
	if (ibv_post_send(cm->qp, &wr, &bad)) {
		rdmach_debug("ib: connection message to rank %d not posted: %s",
			     peer, strerror(errno));
		return;
	}
	cm->send_next++;
	cm->sends_out++;
	if (kind == IB_CM_CLOSE ||
	    (kind == IB_CM_ADDR && cm->peers[peer].active)) {
		cm->st.resent += cm->peers[peer].sent_at != 0;
		ib_cm_request_sent(&cm->peers[peer]);
	}
}

/* In or out of the peers under way (cm->pend: what ib_cm_progress
 * visits); one leaving gives its slot to the last, and leaves its wait
 * for room or its request to close with it. */
static void ib_cm_set_pending(struct ib_cm *cm, int peer, int on)
{
	struct ib_cm_peer *p = &cm->peers[peer];
	int last;

	if (on && !p->active) {
		p->active = 1;
		p->pend_at = cm->pending;
		cm->pend[cm->pending++] = peer;
	} else if (!on && p->active) {
		p->active = 0;
		p->waiting = 0;
		p->sent_at = 0;
		if (p->closing) {
			p->closing = 0;
			cm->closing--;
		}
		last = cm->pend[--cm->pending];
		cm->pend[p->pend_at] = last;
		cm->peers[last].pend_at = p->pend_at;
	}
}

/* The core reports the connection, progress visits it. */
static void ib_cm_conn_up(struct ib_tl *tl, int peer)
{
	rdmach_conn_up(&tl->base.ctx->conns[peer], &tl->base);
	ib_ep_live_add(tl->conns[peer]);
}

/* Both QPs are connected to each other: the connection is up. */
static void ib_cm_up(struct ib_tl *tl, int peer)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	struct rdmach_conn *conn = &tl->base.ctx->conns[peer];

	ib_cm_set_pending(tl->cm, peer, 0);
	if (conn->tl)
		return;
	ib_cm_conn_up(tl, peer);
	tl->cm->st.made++;
	tl->conns[peer]->cm_used = conn->stats.bytes_put +
				   conn->stats.bytes_got;
	tl->conns[peer]->cm_used_at = rdmach_now_ns();
	rdmach_debug("ib: connected to rank %d (host %s), QP %u -> %u", peer,
		     p->host, tl->conns[peer]->qp->qp_num, p->r_qpn);
}

/* ---- closing idle connections ---------------------------------------------
 *
 * Under RDMACH_CONNECT=demand a process keeps RDMACH_IB_QPS_MAX
 * endpoints to other ranks (0: as many as the device gives it; when it
 * refuses one, the count held then is the limit, tried again every
 * IB_CM_FULL_NS).  A connection this process starts beyond it waits, and the
 * peer of the idlest quiet connection is asked to close theirs
 * (IB_CM_F_CLOSE); the next put on a closed connection makes it anew,
 * cold, as the first did.  A peer's request is answered at once, even
 * beyond the limit: were it to wait too, processes holding half-made
 * connections to one another would wait for ever.  Nor does ours wait
 * longer than RDMACH_IB_QPS_WAIT_MS: a connection closes only when each
 * end has read all the other put, and a reader that reads on only once
 * this connection is made would hold the others for ever.  Beyond that
 * the limit is exceeded (counted), unless it is the device's.  Progress
 * then closes idle ones until the count is back within the limit. */

/* Both ends agreed: the endpoint goes, and the pair's next connection
 * is one generation on (asked: the peer asked for it). */
static void ib_cm_closed(struct ib_tl *tl, int peer, int asked)
{
	struct ib_cm *cm = tl->cm;
	struct ib_cm_peer *p = &cm->peers[peer];
	struct rdmach_conn *conn = &tl->base.ctx->conns[peer];

	ib_cm_set_pending(cm, peer, 0);
	p->tickets = ib_ep_tickets_next(tl->conns[peer]);
	rdmach_conn_down(conn, p->tickets - 1);
	conn->priv = NULL;
	ib_ep_destroy(tl->conns[peer]);
	tl->conns[peer] = NULL;
	cm->eps--;
	p->r_qpn = 0;
	p->rtr = 0;
	p->gen++;
	if (asked)
		cm->st.closed_asked++;
	else
		cm->st.closed++;
	rdmach_debug("ib: the idle connection to rank %d closed (at %s "
		     "request); %u QPs to peers left", peer,
		     asked ? "its" : "our", cm->eps);
}

/* The first retransmission's delay: RDMACH_IB_CM_RTO_MS, or what the
 * answers so far say (mean + 4 deviations), or the last backed-off gap
 * until an answer times one, within IB_CM_RTO_MAX_NS. */
static uint64_t ib_cm_rto(const struct ib_cm *cm)
{
	uint64_t rto = cm->answered ? cm->rtt + 4 * cm->rtt_var : 0;

	if (rto < cm->rto_min)
		rto = cm->rto_min;
	if (rto < cm->rto_backed)
		rto = cm->rto_backed;
	return rto < IB_CM_RTO_MAX_NS ? rto : IB_CM_RTO_MAX_NS;
}

/* The peer answered our request: one sent once times it (Karn: which
 * copy an answer is for is unknown otherwise). */
static void ib_cm_answered(struct ib_cm *cm, struct ib_cm_peer *p)
{
	uint64_t now = rdmach_now_ns(), t, d;

	if (p->sends != 1 || !p->sent_at || now < p->sent_at) {
		p->sent_at = 0;
		return;
	}
	t = now - p->sent_at;
	p->sent_at = 0;
	cm->rto_backed = 0;
	if (!cm->answered++) {
		cm->rtt = t;
		cm->rtt_var = t / 2;
		return;
	}
	d = t > cm->rtt ? t - cm->rtt : cm->rtt - t;
	cm->rtt_var = cm->rtt_var - cm->rtt_var / 4 + d / 4;
	cm->rtt = cm->rtt - cm->rtt / 8 + t / 8;
}

/* Stop sending to peer and ask it to close the connection. */
static void ib_cm_close_start(struct ib_tl *tl, struct ib_conn *ic,
			      uint64_t now)
{
	int peer = ic->conn->peer;
	struct ib_cm_peer *p = &tl->cm->peers[peer];

	ib_ep_live_drop(ic);
	rdmach_conn_down(ic->conn, ib_ep_tickets_next(ic) - 1);
	p->closing = 1;
	p->overdue = 0;
	p->attempt++;
	tl->cm->closing++;
	p->deadline = now + tl->base.ctx->connect_timeout_ns;
	p->rto = ib_cm_rto(tl->cm);
	p->next_tx = now + p->rto;
	ib_cm_set_pending(tl->cm, peer, 1);
	rdmach_debug("ib: asking rank %d to close the idle connection "
		     "(generation %u, attempt %u)", peer, p->gen, p->attempt);
	p->sent_at = 0;		/* a new request */
	ib_cm_send(tl, peer, IB_CM_CLOSE, p->gen, p->attempt);
}

/* The peer keeps it (BUSY): it is up again here. */
static void ib_cm_close_undo(struct ib_tl *tl, int peer)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];

	ib_cm_set_pending(tl->cm, peer, 0);
	p->busy_until = rdmach_now_ns() + IB_CM_BUSY_NS;
	tl->cm->st.kept++;
	rdmach_debug("ib: rank %d keeps the connection (attempt %u)", peer,
		     p->attempt);
	ib_cm_conn_up(tl, peer);
}

/* Has the connection carried no bytes either way for IB_CM_IDLE_NS
 * (a connection just made, or about to be used, does not close)?  Read
 * off the core's counters when asked: nothing is spent per message. */
static int ib_cm_unused(struct ib_conn *ic, uint64_t now)
{
	uint64_t used = ic->conn->stats.bytes_put + ic->conn->stats.bytes_got;

	if (used != ic->cm_used) {
		ic->cm_used = used;
		ic->cm_used_at = now;
	}
	return now - ic->cm_used_at >= IB_CM_IDLE_NS;
}

/* The connection unused the longest of those that can close now
 * (ib_cm_unused, ib_ep_quiesce) is asked to; 0 when none can. */
static int ib_cm_close_idlest(struct ib_tl *tl)
{
	uint64_t now = rdmach_now_ns(), best_at = UINT64_MAX;
	struct ib_conn *best = NULL;
	unsigned int i;

	if (tl->cm->finalizing)
		return 0;

	for (i = 0; i < tl->nlive; i++) {
		struct ib_conn *ic = tl->live[i];

		if (!ib_cm_unused(ic, now) || ic->cm_used_at >= best_at ||
		    tl->cm->peers[ic->conn->peer].busy_until > now ||
		    !ib_ep_quiesce(ic))
			continue;
		best = ic;
		best_at = ic->cm_used_at;
	}
	if (!best)
		return 0;
	ib_cm_close_start(tl, best, now);
	return 1;
}

/* The endpoints this process keeps (0: any number).  The device's
 * limit is tried again every IB_CM_FULL_NS: the other processes of the
 * host may have given QPs back. */
static unsigned int ib_cm_cap(struct ib_cm *cm)
{
	if (cm->eps_full && rdmach_now_ns() - cm->full_at >= IB_CM_FULL_NS)
		cm->eps_full = 0;
	return cm->eps_full ? cm->eps_full : cm->eps_max;
}

/* Room for one more endpoint?  If not, one more idle connection is
 * asked to close, unless those asked already make the room. */
static int ib_cm_room(struct ib_tl *tl)
{
	struct ib_cm *cm = tl->cm;
	unsigned int cap = ib_cm_cap(cm);

	if (!cap || cm->eps < cap)
		return 1;
	if (cm->eps - cm->closing >= cap)
		ib_cm_close_idlest(tl);
	return 0;
}

/* Beyond the limit (peers' requests took us there): close the idlest
 * quiet connection, one at a time, a look a millisecond at most. */
static void ib_cm_trim(struct ib_tl *tl, uint64_t now)
{
	struct ib_cm *cm = tl->cm;
	unsigned int cap = ib_cm_cap(cm);

	if (!cm->may_close || !cap || cm->eps <= cap || cm->closing ||
	    now < cm->trim_at)
		return;
	cm->trim_at = now + IB_CM_ROOM_NS;
	ib_cm_close_idlest(tl);
}

/* Has our connection to peer waited for room as long as it may (never,
 * when the limit is the device's)?  It is made beyond the limit then. */
static int ib_cm_waited(struct ib_tl *tl, int peer)
{
	struct ib_cm *cm = tl->cm;
	struct ib_cm_peer *p = &cm->peers[peer];

	if (cm->eps_full || !p->waiting ||
	    rdmach_now_ns() - p->wait_since < cm->wait_ns)
		return 0;
	rdmach_debug("ib: the connection to rank %d waited %" PRIu64 " ms "
		     "for room: made beyond RDMACH_IB_QPS_MAX=%u", peer,
		     cm->wait_ns / 1000000u, cm->eps_max);
	return 1;
}

/* The endpoint to peer: 1 and *icp when there is one or room to make it
 * (made now, not up), 0 while there is no room (idle connections are
 * asked to close), or a negative errno (the connection failed).  ours:
 * a connection this process starts, which waits for room (a peer's
 * request does not: ib_cm_trim). */
static int ib_cm_ep(struct ib_tl *tl, int peer, struct ib_conn **icp,
		    int ours)
{
	struct ib_cm *cm = tl->cm;
	struct rdmach_conn *conn = &tl->base.ctx->conns[peer];
	struct ib_conn *ic = tl->conns[peer];
	int other = peer != tl->base.ctx->rank, beyond = 0;

	if (!ic) {
		if (other && cm->finalizing)
			return 0;	/* none made while finalizing */
		if (other && ours && cm->may_close && !ib_cm_room(tl)) {
			if (!ib_cm_waited(tl, peer))
				return 0;
			beyond = 1;
		}
		tl->dev.qp_errno = 0;
		ic = ib_ep_create(tl, peer);
		cm->st.refused += !ic && tl->dev.qp_errno && other;
		if (!ic && tl->dev.qp_errno && other && cm->may_close &&
		    cm->eps) {
			/* the device's QPs are all taken, by this process
			 * and the others of the host: make room (or wait
			 * for the closes under way) */
			if (!cm->full_warned)
				rdmach_warn("ib: %s holds no more QPs (max_qp "
					    "%d for the host; this process "
					    "has %u): closing idle "
					    "connections to make room",
					    tl->dev.name, tl->dev.max_qp,
					    tl->dev.qps);
			cm->full_warned = 1;
			cm->eps_full = cm->eps;
			cm->full_at = rdmach_now_ns();
			ib_cm_room(tl);
			return 0;
		}
		if (!ic) {
			if (tl->dev.qp_errno)
				ib_dev_qp_refused(&tl->dev);
			return rdmach_conn_fail(conn, -ENOMEM, "no endpoint");
		}
		tl->conns[peer] = ic;
		conn->priv = ic;
		if (other && cm->peers[peer].tickets)
			ib_ep_tickets_go_on(ic, cm->peers[peer].tickets);
		if (other && ++cm->eps > cm->st.eps_most)
			cm->st.eps_most = cm->eps;
		cm->st.over += (uint64_t)beyond;
		cm->eps_full = 0;
	}
	*icp = ic;
	return 1;
}

/* ---- receiving ---------------------------------------------------------- */

/* The address m carries, each field checked against its range
 * (ib_cm_msg_addr_check).  0, or -EPROTO naming the field (logged). */
static int ib_cm_addr_of(int peer, const struct ib_cm_msg *m,
			 struct ib_addr *a)
{
	char why[96];

	if (ib_cm_msg_addr_check(m, why, sizeof(why))) {
		rdmach_err("ib: rank %d's connection message: %s", peer, why);
		return -EPROTO;
	}
	memset(a, 0, sizeof(*a));
	a->lid = (uint16_t)m->lid;
	memcpy(a->gid.raw, m->gid, 16);
	a->qpn = m->qpn;
	a->psn = m->psn;
	a->ring = m->ring;
	a->ctrl = m->ctrl;
	a->ring_size = m->ring_size;
	a->rkey = m->rkey;
	a->wire = m->wire;
	a->mtu = m->mtu;
	a->mode = m->mode;
	a->caps = m->caps;
	return 0;
}

/* The message received in slot b (wc its completion): ours, from a rank
 * of the group, for this context, of flags a sender makes
 * (ib_cm_msg_parse), from a rank reached through ib, its context and the
 * QP its record names.  The sender's record is read here at its first
 * message.  0 and *m set, or -EPROTO with why. */
static int ib_cm_check_msg(struct ib_tl *tl, const struct ibv_wc *wc,
			   const uint8_t *b, struct ib_cm_msg *m, char *why,
			   size_t whylen)
{
	struct rdmach_ctx *ctx = tl->base.ctx;
	struct ib_cm_msg_want w = {
		.rank = (uint32_t)ctx->rank, .size = (uint32_t)ctx->size,
		.nonce = tl->cm->nonce, .version = tl->cm_version,
	};
	struct ib_cm_peer *p;
	struct ib_cm_msg t;
	int ret;

	ret = ib_cm_msg_parse(b + IB_CM_GRH, wc->byte_len > IB_CM_GRH ?
			      wc->byte_len - IB_CM_GRH : 0, &w, &t, why,
			      whylen);
	if (ret == -EPROTONOSUPPORT) {
		/* a peer that will never understand us: say (once) why
		 * its connection times out */
		if (!tl->cm->version_warned)
			rdmach_warn("ib: a connection message of %s (every "
				    "rank must run the same rdmach)", why);
		tl->cm->version_warned = 1;
	}
	if (ret)
		return -EPROTO;
	if (ctx->conns[t.src].via != &tl->base) {
		snprintf(why, whylen, "from rank %u, which this rank reaches "
			 "through another transport", t.src);
		return -EPROTO;
	}
	if (ib_cm_peer_load(tl, (int)t.src)) {
		snprintf(why, whylen, "from rank %u, whose record is not "
			 "usable (above)", t.src);
		return -EPROTO;
	}
	p = &tl->cm->peers[t.src];
	if (t.src_nonce != p->nonce || wc->src_qp != p->ud_qpn) {
		/* an old context's, or not the peer's QP */
		snprintf(why, whylen, "not from rank %u's context (nonce "
			 "0x%016" PRIx64 ") and QP (%u)", t.src, p->nonce,
			 p->ud_qpn);
		return -EPROTO;
	}
	*m = t;
	return 0;
}

/* Can we talk to the peer that sent r?  Names what differs. */
static int ib_cm_check_peer(const struct ib_tl *tl, int peer,
			    const struct ib_addr *r)
{
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
	if (r->mode != tl->mode + 1U) {
		rdmach_err("ib: rank %d has RDMACH_IB_MODE=%s, this rank %s: "
			   "set the same everywhere", peer,
			   r->mode >= 1 && r->mode <= 3 ?
			   ib_cm_mode_names[r->mode - 1] : "?",
			   ib_cm_mode_names[tl->mode]);
		return -EINVAL;
	}
	return ib_dev_check_reach(&tl->dev, peer, r);
}

/* Peer joins the ones under way, bounded from now (a half-open one
 * keeps its deadline). */
static void ib_cm_arm(struct ib_tl *tl, int peer, uint64_t now)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];

	if (!p->r_qpn) {
		p->deadline = now + tl->base.ctx->connect_timeout_ns;
		p->rto = ib_cm_rto(tl->cm);
	}
	p->next_tx = now + p->rto;
	ib_cm_set_pending(tl->cm, peer, 1);
}

/* Our endpoint to a peer under way: 1 and *icp, or 0 while there is no
 * room (ib_cm_tick looks again), or a negative errno. */
static int ib_cm_ep_or_wait(struct ib_tl *tl, int peer,
			    struct ib_conn **icp, int ours)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	int ret = ib_cm_ep(tl, peer, icp, ours);

	if (ret > 0) {
		p->waiting = 0;
	} else if (!ret) {
		if (!p->waiting) {
			tl->cm->st.waits++;
			p->wait_since = rdmach_now_ns();
		}
		p->waiting = 1;
		p->next_tx = rdmach_now_ns() + IB_CM_ROOM_NS;
	}
	return ret;
}

/* Start the connection to peer (not up, no request of ours under way):
 * our address as soon as there is an endpoint.  0, or a negative
 * errno. */
static int ib_cm_begin(struct ib_tl *tl, int peer)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	struct ib_conn *ic;
	int ret;

	ib_cm_arm(tl, peer, rdmach_now_ns());
	ret = ib_cm_ep_or_wait(tl, peer, &ic, 1);
	if (ret > 0)
		ib_cm_send(tl, peer, IB_CM_ADDR, p->gen, 0);
	return ret < 0 ? ret : 0;
}

/* Connect our endpoint to the one m describes (once: a later message
 * must name the same QP).  0, 1 while there is no room for our endpoint
 * (we answer when there is), or a negative errno. */
static int ib_cm_connect_ep(struct ib_tl *tl, int peer,
			    const struct ib_cm_msg *m)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	struct rdmach_conn *conn = &tl->base.ctx->conns[peer];
	struct ib_conn *ic;
	struct ib_addr r;
	int ret;

	if (p->r_qpn)
		return m->qpn == p->r_qpn ? 0 : -EPROTO;
	ret = ib_cm_addr_of(peer, m, &r);
	if (!ret)
		ret = ib_cm_check_peer(tl, peer, &r);
	if (ret)
		return rdmach_conn_fail(conn, ret, "the peer's address or "
					"settings (above)");
	if (!p->active)		/* its request: bounded like one of ours */
		ib_cm_arm(tl, peer, rdmach_now_ns());
	ret = ib_cm_ep_or_wait(tl, peer, &ic, 0);
	if (ret <= 0)		/* no QP: our address follows when there is */
		return ret < 0 ? ret : 1;
	ret = ib_ep_connect(ic, &r);
	if (ret)
		return rdmach_conn_fail(conn, ret, "its QP did not connect");
	p->r_qpn = m->qpn;
	ib_cm_set_pending(tl->cm, peer, 1);
	rdmach_info("ib: rank %d: path MTU %s (this port %s, the peer's %s, "
		    "RDMACH_IB_MTU %s here)", peer,
		    ib_mtu_str(ib_path_mtu(&tl->dev, &r, &tl->qpp)),
		    ib_mtu_str(tl->dev.active_mtu),
		    r.mtu ? ib_mtu_str((enum ibv_mtu)r.mtu) : "unknown",
		    ib_mtu_str(tl->qpp.mtu));
	if (!(r.caps & IB_CAP_SPIPE))
		rdmach_debug("ib: rank %d takes no superpipeline messages "
			     "from this process (its RDMACH_SPIPE_PEERS, or a "
			     "build from before them): large messages to it "
			     "go zero-copy or through the ring", peer);
	return 0;
}

/* The peer asks us to close the connection of generation gen (age: how
 * many generations we are past it): closed (now, or before: our answer
 * was lost) or kept (BUSY).  We close only a connection that is quiet
 * here too and on which each end got all the other put. */
static enum ib_cm_kind ib_cm_close_answer(struct ib_tl *tl, int peer,
					  const struct ib_cm_msg *m, int age)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	struct rdmach_conn *conn = &tl->base.ctx->conns[peer];
	struct ib_conn *ic = tl->conns[peer];

	if (age > 0)
		return IB_CM_CLOSED;
	if ((int32_t)(m->psn - p->kept) <= 0)
		return IB_CM_BUSY;	/* kept: its counts are old */
	if (age < 0 || !tl->cm->may_close || tl->cm->finalizing || !ic ||
	    conn->err ||
	    (!conn->tl && !p->closing) ||
	    (!p->closing && !ib_cm_unused(ic, rdmach_now_ns())) ||
	    !ib_ep_quiesce(ic) ||
	    conn->stats.bytes_got != m->ring ||
	    conn->stats.bytes_put != m->ctrl) {
		p->kept = m->psn;
		return IB_CM_BUSY;
	}
	ib_cm_closed(tl, peer, 1);
	return IB_CM_CLOSED;
}

static void ib_cm_handle_close(struct ib_tl *tl, const struct ib_cm_msg *m,
			       int age)
{
	int peer = (int)m->src;
	struct ib_cm_peer *p = &tl->cm->peers[peer];

	if (m->flags & IB_CM_F_CLOSE) {
		ib_cm_send(tl, peer, ib_cm_close_answer(tl, peer, m, age),
			   m->gen, m->psn);
		return;
	}
	if (age || !p->closing ||
	    ((m->flags & IB_CM_F_BUSY) && m->psn != p->attempt))
		return;		/* an answer to an earlier request */
	ib_cm_answered(tl->cm, p);
	if (m->flags & IB_CM_F_CLOSED)
		ib_cm_closed(tl, peer, 0);
	else
		ib_cm_close_undo(tl, peer);
}

static void ib_cm_handle(struct ib_tl *tl, const struct ib_cm_msg *m)
{
	int peer = (int)m->src;
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	struct rdmach_conn *conn = &tl->base.ctx->conns[peer];
	/* > 0: a message of a connection closed since (stale) */
	int age = (int16_t)(uint16_t)(p->gen - m->gen);
	int ret;

	if (m->flags & IB_CM_F_CLOSING) {
		ib_cm_handle_close(tl, m, age);
		return;
	}
	if (age > 0 || (age == 0 && p->closing) || tl->cm->finalizing)
		return;		/* stale, the closing one's set-up, or late */
	if (age < 0) {
		/* the peer closed the connection we asked it to and makes
		 * the next: its answer to us was lost */
		if (age != -1 || !p->closing)
			return;
		ib_cm_closed(tl, peer, 0);
	}
	if (m->flags & IB_CM_F_REJ) {	/* never answered: no ping-pong */
		ib_cm_set_pending(tl->cm, peer, 0);
		rdmach_conn_fail(conn, -ECONNRESET, "rank %d on host %s could "
				 "not make its end of the connection (its own "
				 "message says why)", peer, p->host);
		return;
	}
	ret = conn->err ? 0 : ib_cm_connect_ep(tl, peer, m);
	if (ret > 0 || (ret && !conn->err))
		return;		/* no room yet, or not for this pair's QPs */
	if (conn->err) {
		/* failed here (no endpoint, a bad address, timed out): the
		 * peer fails now instead of at its connect timeout */
		ib_cm_send(tl, peer, IB_CM_REJ, p->gen, 0);
		return;
	}
	if (m->flags & IB_CM_F_RTR) {	/* an answer to our address */
		ib_cm_answered(tl->cm, p);
		p->rtr = 1;
	}
	if (p->rtr || tl->cm->at_once)
		ib_cm_up(tl, peer);
	if (!(m->flags & IB_CM_F_UP))
		ib_cm_send(tl, peer, IB_CM_ADDR, p->gen, 0);
}

static void ib_cm_recv(struct ib_tl *tl, const struct ibv_wc *wc,
		       unsigned int slot)
{
	struct ib_cm *cm = tl->cm;
	struct ib_cm_msg m;
	char why[160];

	if (wc->status == IBV_WC_SUCCESS) {
		if (wc->byte_len == IB_CM_RSLOT && cm->dropped < tl->cm_drop)
			cm->dropped++;	/* the test hook: as if lost */
		else if (!ib_cm_check_msg(tl, wc, cm->buf + slot * IB_CM_RSLOT,
					  &m, why, sizeof(why)))
			ib_cm_handle(tl, &m);
		else
			rdmach_debug("ib: a connection message refused (from "
				     "QP %u, %u bytes): %s", wc->src_qp,
				     wc->byte_len, why);
	}
	if (ib_cm_post_recv(cm, slot))
		rdmach_warn("ib: a connection manager receive not reposted");
}

static void ib_cm_wc(struct ib_tl *tl, const struct ibv_wc *wc)
{
	struct ib_cm *cm = tl->cm;

	if (wc->wr_id & IB_CM_SEND_TAG) {
		cm->sends_out--;
		return;
	}
	if (wc->status == IBV_WC_WR_FLUSH_ERR)
		return;		/* closing */
	if ((wc->wr_id & 0xffffffffu) < IB_CM_RECVS)
		cm->rxq[(cm->rxq_head + tl->cm_queued++) % IB_CM_RECVS] = *wc;
}

static void ib_cm_drain(struct ib_tl *tl)
{
	struct ib_cm *cm = tl->cm;

	while (tl->cm_queued) {
		struct ibv_wc wc = cm->rxq[cm->rxq_head];

		cm->rxq_head = (cm->rxq_head + 1) % IB_CM_RECVS;
		tl->cm_queued--;
		ib_cm_recv(tl, &wc, (unsigned int)(wc.wr_id & 0xffffffffu));
	}
}

/* ---- connecting ----------------------------------------------------------- */

/* The loopback connection: both QPs are ours. */
static int ib_cm_self(struct ib_tl *tl, int me)
{
	struct ib_conn *ic;
	struct ib_addr r;
	int ret = ib_cm_ep(tl, me, &ic, 1);

	if (ret <= 0)
		return ret < 0 ? ret : -ENOMEM;
	ib_ep_local_addr(ic, ic->loop_qp, &r);
	if (ib_ep_connect(ic, &r))
		return rdmach_conn_fail(&tl->base.ctx->conns[me], -EIO,
					"loopback QPs");
	ib_cm_conn_up(tl, me);
	return 0;
}

static int ib_cm_start(struct ib_tl *tl, int peer)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	struct rdmach_conn *conn = &tl->base.ctx->conns[peer];

	if (peer == tl->base.ctx->rank)
		return ib_cm_self(tl, peer);
	if (p->active)		/* under way, or closing */
		return 0;
	if (ib_cm_peer_load(tl, peer))
		return rdmach_conn_fail(conn, -ECONNRESET, "no record");
	return ib_cm_begin(tl, peer);
}

/* A peer at its deadline: why it failed. */
static void ib_cm_expired(struct ib_tl *tl, int peer)
{
	struct ib_cm *cm = tl->cm;
	struct ib_cm_peer *p = &cm->peers[peer];
	struct rdmach_conn *conn = &tl->base.ctx->conns[peer];
	uint64_t ms = tl->base.ctx->connect_timeout_ns / 1000000u;

	if (p->waiting) {
		rdmach_conn_fail(conn, -ENOBUFS, "no room for a connection to "
				 "rank %d (host %s) within %" PRIu64 " ms: "
				 "this process holds %u QPs to peers "
				 "(RDMACH_IB_QPS_MAX=%u%s), none idle to close",
				 peer, p->host, ms, cm->eps, cm->eps_max,
				 cm->full_warned ? "; the adapter refused "
				 "more (max_qp)" : "");
	} else {
		rdmach_conn_fail(conn, -ECONNRESET, "rank %d on host %s did "
				 "not answer the connection request within "
				 "%" PRIu64 " ms (RDMACH_CONNECT_TIMEOUT_MS)",
				 peer, p->host, ms);
	}
	ib_cm_set_pending(cm, peer, 0);
}

/* A close request unanswered at its deadline.  Taking the connection up
 * again without the peer's word could meet a stale copy of the request,
 * taken later against bytes put since; so it waits on while the peer's
 * adapter answers keepalives (its process makes no rdmach call: said
 * once), and fails when one goes unanswered.  0 when it failed. */
static int ib_cm_overdue(struct ib_tl *tl, int peer, uint64_t now)
{
	struct ib_cm *cm = tl->cm;
	struct ib_cm_peer *p = &cm->peers[peer];
	uint64_t timeout = tl->base.ctx->peer_timeout_ns;
	char msg[200];

	if (!ib_ep_probe(tl->conns[peer])) {
		if (!p->overdue)
			rdmach_warn("ib: rank %d (host %s) has not answered "
				    "the request to close an idle connection "
				    "for %" PRIu64 " ms; its adapter answers: "
				    "puts to it wait", peer, p->host,
				    tl->base.ctx->connect_timeout_ns /
				    1000000u);
		p->overdue = 1;
		p->deadline = now + timeout / 4;
		return 1;
	}
	ib_cm_set_pending(cm, peer, 0);
	snprintf(msg, sizeof(msg), "rank %d on host %s did not answer the "
		 "request to close an idle connection, nor its adapter a "
		 "keepalive within %.1f s (peer dead?)", peer, p->host,
		 (double)timeout / 1e9);
	ib_ep_fail(tl->conns[peer], -ECONNRESET, msg);
	return 0;
}

/* Our next message to a peer under way: the close request again, our
 * address again, or the first one once there is room for our end. */
static void ib_cm_resend(struct ib_tl *tl, int peer, uint64_t now)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	struct ib_conn *ic;

	if (!p->closing && !tl->conns[peer]) {
		int ret = ib_cm_ep_or_wait(tl, peer, &ic, 1);

		if (ret < 0)
			ib_cm_set_pending(tl->cm, peer, 0);
		if (ret <= 0)
			return;
	} else {
		uint64_t rto = ib_cm_rto(tl->cm);

		if (p->sends == 1 && p->sent_at && now < p->sent_at + rto) {
			p->next_tx = p->sent_at + rto;	/* answers take longer
							 * now */
			return;
		}
		if (p->rto < rto)
			p->rto = rto;
		/* doubled up to IB_CM_RTO_MAX_NS, or kept beyond it */
		if (p->rto < IB_CM_RTO_MAX_NS)
			p->rto = p->rto * 2 < IB_CM_RTO_MAX_NS ? p->rto * 2 :
				 IB_CM_RTO_MAX_NS;
		if (p->rto > tl->cm->rto_backed)
			tl->cm->rto_backed = p->rto;
	}
	p->next_tx = now + p->rto;
	ib_cm_send(tl, peer, p->closing ? IB_CM_CLOSE : IB_CM_ADDR, p->gen,
		   p->attempt);
}

/* One peer under way: retransmit when due, fail at its deadline.  1
 * while it stays under way, 0 when it left (failed, here or elsewhere). */
static int ib_cm_tick(struct ib_tl *tl, int peer, uint64_t now)
{
	struct ib_cm_peer *p = &tl->cm->peers[peer];
	struct rdmach_conn *conn = &tl->base.ctx->conns[peer];

	if (tl->dead[0] && !conn->err)
		rdmach_conn_fail(conn, -EIO, "%s", tl->dead);
	if (conn->err) {	/* failed elsewhere: nothing to retransmit */
		ib_cm_set_pending(tl->cm, peer, 0);
		return 0;
	}
	if (p->closing && ib_ep_peer_finalizing(tl->conns[peer])) {
		/* a finalizing peer keeps every connection, and one whose
		 * fin came has closed none: ours stays */
		ib_cm_close_undo(tl, peer);
		return 0;
	}
	if (now >= p->deadline) {
		if (p->closing)
			return ib_cm_overdue(tl, peer, now);
		ib_cm_expired(tl, peer);
		return 0;
	}
	if (now >= p->next_tx && !tl->cm->making_all)
		ib_cm_resend(tl, peer, now);
	return p->active;
}

/* The peers under way only (cm->pend), not every rank: one that leaves
 * gives its slot to the last, visited next. */
void ib_cm_progress(struct ib_tl *tl)
{
	struct ib_cm *cm = tl->cm;
	unsigned int i, cap;
	uint64_t now;

	if (!cm)
		return;
	ib_cm_drain(tl);
	cap = ib_cm_cap(cm);
	if (!cm->pending && (!cap || cm->eps <= cap))
		return;
	now = rdmach_now_ns();
	ib_cm_trim(tl, now);
	for (i = 0; i < cm->pending;)
		i += (unsigned int)ib_cm_tick(tl, cm->pend[i], now);
}

unsigned int ib_cm_pending(const struct ib_tl *tl)
{
	return tl->cm ? tl->cm->pending : 0;
}

int ib_cm_connect_peer(struct rdmach_tl *base, int peer, int start)
{
	struct ib_tl *tl = (struct ib_tl *)base;
	struct rdmach_conn *conn = &base->ctx->conns[peer];
	int ret;

	if (!tl->cm)
		return rdmach_conn_fail(conn, -ENOTCONN, "no connection "
					"manager");
	if (conn->err)
		return conn->err;
	ib_ep_async_tick(tl);
	if (tl->dead[0] && !conn->tl)
		return rdmach_conn_fail(conn, -EIO, "%s", tl->dead);
	if (start && !conn->tl) {
		ret = ib_cm_start(tl, peer);
		if (ret)
			return ret;
	}
	ret = ib_ep_poll(tl);
	if (ret)
		return ret;
	ib_cm_progress(tl);
	if (conn->err)
		return conn->err;
	if (conn->tl)
		return 1;
	/* the answer comes from the peer's process and the kernel (rxe
	 * runs in it): a caller spinning on put must not starve them on
	 * an oversubscribed host; a yield costs nothing beside a round trip
	 * (a get polling a pair nobody connects does not wait on anything) */
	if (tl->cm->peers[peer].active)
		sched_yield();
	return 0;
}

/* Completions (the connection manager's messages among them), then
 * retransmissions and time-outs; a failure there is a connection's,
 * reported by its calls. */
static void ib_cm_poll(struct ib_tl *tl)
{
	if (!ib_ep_poll(tl))
		ib_cm_progress(tl);
}

void ib_cm_listen(struct rdmach_tl *base)
{
	struct ib_tl *tl = (struct ib_tl *)base;

	if (tl->cm)
		ib_cm_poll(tl);
}

/* Every peer was just sent our address: the peers, which entered
 * rdmach_connect's phase with us, each make their endpoints first too,
 * which took us made_ns: a request is sent again only that long after
 * the loop, not while the peer cannot have answered yet (half the time
 * left to its deadline at most: a lost one still has retries); one that
 * did not go out (no send slot) goes now. */
static void ib_cm_all_sent(struct ib_cm *cm, uint64_t made_ns)
{
	uint64_t now = rdmach_now_ns(), rto = ib_cm_rto(cm);
	unsigned int i;

	if (rto < made_ns)
		rto = made_ns;
	for (i = 0; i < cm->pending; i++) {
		struct ib_cm_peer *p = &cm->peers[cm->pend[i]];
		uint64_t left = p->deadline > now ? p->deadline - now : 0;

		if (!p->sent_at) {
			p->next_tx = now;
			continue;
		}
		if (p->rto < rto)
			p->rto = rto < left / 2 ? rto : left / 2;
		p->next_tx = now + p->rto;
	}
}

int ib_cm_connect_all(struct ib_tl *tl, const int *peers, int npeers)
{
	int i, ret = 0, left = npeers;
	uint64_t t0 = rdmach_now_ns();

	if (tl->cm) {
		tl->cm->at_once = 1;
		tl->cm->making_all = 1;
	}
	for (i = 0; i < npeers && ret >= 0; i++)
		ret = ib_cm_connect_peer(&tl->base, peers[i], 1);
	if (tl->cm) {
		tl->cm->making_all = 0;
		ib_cm_all_sent(tl->cm, rdmach_now_ns() - t0);
	}
	while (left && ret >= 0) {
		for (i = 0, left = 0; i < npeers && ret >= 0; i++) {
			ret = ib_cm_connect_peer(&tl->base, peers[i], 0);
			left += !ret;
		}
	}
	/* a peer may still wait for our address: rdmach_connect's fence
	 * keeps answering (core_fence_answering); connections made later
	 * await the peer's RTR */
	if (tl->cm)
		tl->cm->at_once = 0;
	return ret < 0 ? ret : 0;
}

void ib_cm_finalizing(struct ib_tl *tl, uint64_t deadline_ns)
{
	struct ib_cm *cm = tl->cm;

	if (!cm)
		return;
	cm->finalizing = 1;
	/* our requests to close: answered (closed, or kept and up again:
	 * its fin follows), or left at the finalize deadline */
	while (cm->closing && rdmach_now_ns() < deadline_ns)
		ib_cm_poll(tl);
}

void ib_cm_print(const struct ib_tl *tl, FILE *out)
{
	const struct ib_cm *cm = tl->cm;

	if (!cm)
		return;
	fprintf(out, "# ib connections: %" PRIu64 " made, %u QPs to peers "
		"now (%u at most, RDMACH_IB_QPS_MAX=%u, %" PRIu64 " refused "
		"by the adapter%s); idle ones closed: "
		"%" PRIu64 " asked by us, %" PRIu64 " by peers, %" PRIu64
		" kept by a busy peer; %" PRIu64 " waited for room, %" PRIu64
		" made beyond it; %" PRIu64 " messages resent, answers in "
		"%.1f ms\n", cm->st.made, cm->eps, cm->st.eps_most,
		cm->eps_max, cm->st.refused,
		cm->eps_full ? ", which is full now" : "",
		cm->st.closed, cm->st.closed_asked, cm->st.kept,
		cm->st.waits, cm->st.over, cm->st.resent,
		(double)cm->rtt / 1e6);
}

/* ---- open and close -------------------------------------------------------- */

static uint64_t ib_cm_new_nonce(void)
{
	uint64_t n = 0;

	if (getrandom(&n, sizeof(n), GRND_NONBLOCK) != sizeof(n))
		n = rdmach_now_ns() ^ ((uint64_t)getpid() << 32);
	return n ? n : 1;
}

int ib_cm_open(struct ib_tl *tl)
{
	size_t len = IB_CM_RECVS * IB_CM_RSLOT +
		     IB_CM_SENDS * sizeof(struct ib_cm_msg);
	struct ib_cm *cm = calloc(1, sizeof(*cm));
	int ret = -ENOMEM;

	if (!cm)
		return -ENOMEM;
	tl->cm = cm;
	tl->cm_wc = ib_cm_wc;
	tl->cm_drain = ib_cm_drain;
	if (!tl->cm_version)
		tl->cm_version = IB_CM_VERSION;
	cm->nonce = ib_cm_new_nonce();
	/* only demand makes a closed connection again */
	cm->may_close = tl->base.ctx->demand;
	cm->eps_max = cm->may_close ? tl->qps_max : 0;
	cm->wait_ns = tl->qps_wait_ms * 1000000ull;
	cm->rto_min = tl->cm_rto_ms * 1000000ull;
	if (tl->qps_max && !cm->may_close)
		rdmach_warn("ib: RDMACH_IB_QPS_MAX=%u has no effect under "
			    "RDMACH_CONNECT=all (a QP to every peer)",
			    tl->qps_max);
	cm->peers = calloc((size_t)tl->base.ctx->size, sizeof(*cm->peers));
	cm->pend = calloc((size_t)tl->base.ctx->size, sizeof(*cm->pend));
	cm->buf = calloc(1, len);
	if (!cm->peers || !cm->pend || !cm->buf)
		goto err;
	cm->mr = ibv_reg_mr(tl->dev.pd, cm->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!cm->mr) {
		rdmach_err("ib: registering the connection manager's %zu "
			   "bytes on %s failed: %s (ulimit -l?)", len,
			   tl->dev.name, strerror(errno));
		goto err;
	}
	ret = ib_cm_qp_create(tl, cm);
	if (!ret)
		ret = ib_cm_publish(tl);
	if (ret)
		goto err;
	return 0;
err:
	ib_cm_close(tl);
	return ret;
}

void ib_cm_close(struct ib_tl *tl)
{
	struct ib_cm *cm = tl->cm;
	int i;

	if (!cm)
		return;
	if (cm->qp)
		ibv_destroy_qp(cm->qp);
	for (i = 0; cm->peers && i < tl->base.ctx->size; i++)
		if (cm->peers[i].ah)
			ibv_destroy_ah(cm->peers[i].ah);
	if (cm->mr)
		ibv_dereg_mr(cm->mr);
	free(cm->buf);
	free(cm->pend);
	free(cm->peers);
	free(cm);
	tl->cm = NULL;
}
