/* ib_spipe.c - the superpipeline over verbs: see ib_spipe.h. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "ib_ep.h"
#include "ib_spipe.h"

static inline uint64_t ib_sp_load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

void ib_sp_conn_init(struct ib_sp_conn *sp, const struct spipe_params *p)
{
	memset(sp, 0, sizeof(*sp));
	spipe_tx_init(&sp->tx, p);
	spipe_rx_init(&sp->rx);
}

void ib_sp_conn_release(struct ib_conn *ic)
{
	struct ib_sp_conn *sp = &ic->sp;

	if (sp->stage_mr) {
		ibv_dereg_mr(sp->stage_mr);
		ic->tl->large.mem_used -= spipe_area_bytes(&sp->tx.p);
	}
	if (sp->land_mr)
		ibv_dereg_mr(sp->land_mr);
	free(sp->stage);
	free(sp->land);
	sp->stage_mr = sp->land_mr = NULL;
	sp->stage = sp->land = NULL;
}

/* A registered, zeroed area of len bytes, or NULL (logged). */
static uint8_t *ib_sp_area(struct ib_conn *ic, size_t len, int access,
			   struct ibv_mr **mrp, const char *what)
{
	uint8_t *a = NULL;

	if (posix_memalign((void **)&a, 4096, len)) {
		rdmach_warn("ib: superpipeline %s to rank %d: no memory for "
			    "%zu bytes", what, ic->conn->peer, len);
		return NULL;
	}
	memset(a, 0, len);
	*mrp = ibv_reg_mr(ic->tl->dev.pd, a, len, access);
	if (!*mrp) {
		rdmach_warn("ib: superpipeline %s to rank %d: registering %zu "
			    "bytes failed: %s (ulimit -l?)", what,
			    ic->conn->peer, len, strerror(errno));
		free(a);
		return NULL;
	}
	return a;
}

int ib_sp_room(const struct ib_conn *ic)
{
	const struct ib_large *lg = &ic->tl->large;

	if (!(ic->peer_caps & IB_CAP_SPIPE))
		return 0;	/* a peer from before the superpipeline */
	return ic->sp.stage ||
	       lg->mem_used + spipe_area_bytes(&ic->sp.tx.p) <= lg->mem_max;
}

/* ---- sender ------------------------------------------------------------- */

static int ib_sp_fail(struct ib_conn *ic, int err, const char *what)
{
	ic->broken = 1;
	return ib_ep_fail(ic, err, what);
}

/* Post built chunks while the landing address is known and the send
 * queue has room (a chunk keeps IB_SQ_RESERVE slots free). */
static int ib_sp_post_built(struct ib_conn *ic)
{
	struct ib_sp_conn *sp = &ic->sp;
	const struct spipe_params *p = &sp->tx.p;

	while (sp->r_land && ib_sp_unposted(sp) &&
	       ic->sq_free >= 1 + IB_SQ_RESERVE) {
		uint64_t g = sp->tx.posted + 1, off = spipe_buf_off(p, g);
		int ret = ib_ep_post_chunk(ic, sp->stage + off,
					   sp->stage_mr->lkey,
					   (uint32_t)sp->chunk_bytes[g % p->nbufs],
					   sp->r_land + off, sp->r_rkey, g);

		if (ret)
			return ret;
		spipe_tx_posted(&sp->tx, g);
		ic->conn->stats.spipe_chunks++;
	}
	return 0;
}

int ib_sp_tx_progress(struct ib_conn *ic)
{
	struct ib_sp_conn *sp = &ic->sp;
	uint64_t a;

	if (!sp->stage)
		return 0;
	a = ib_sp_load(&ic->ctrl->sp_ack);
	if (a > sp->tx.acked && spipe_tx_ack(&sp->tx, a))
		return ib_sp_fail(ic, -EPROTO, "protocol error: superpipeline "
				  "ack beyond what was sent");
	if (!sp->r_land && ib_sp_load(&ic->ctrl->sp_addr)) {
		sp->r_rkey = (uint32_t)ib_sp_load(&ic->ctrl->sp_rkey);
		sp->r_land = ib_sp_load(&ic->ctrl->sp_addr);
	}
	if (!ib_sp_unposted(sp))
		return 0;
	if (ic->sq_free < 1 + IB_SQ_RESERVE)
		ib_iface_poll(ic->tl);
	return ib_sp_post_built(ic);
}

/* Open a message: staging (the first time), the control packet in the
 * ring.  1 opened, 0 no ring space or send queue slots now (retry),
 * -EAGAIN no memory (another protocol), or a negative errno. */
static int ib_sp_open(struct ib_conn *ic, size_t total)
{
	struct ib_sp_conn *sp = &ic->sp;
	struct ib_tl *tl = ic->tl;
	struct rdmach_spipe_hdr hdr;
	struct ring_slot pad, s;
	uint64_t credit = tl->mode == RING_MODE_BASIC ? 0 : ic->rx.pos;
	unsigned int need = 2 * (tl->mode == RING_MODE_BASIC ? 2 : 1) +
			    IB_SQ_RESERVE;
	int ret;

	if (!sp->stage) {
		size_t len = spipe_area_bytes(&sp->tx.p);

		if (tl->large.mem_used + len > tl->large.mem_max)
			return -EAGAIN;
		sp->stage = ib_sp_area(ic, len, IBV_ACCESS_LOCAL_WRITE,
				       &sp->stage_mr, "staging");
		if (!sp->stage)
			return -EAGAIN;
		tl->large.mem_used += len;
	}
	if (ic->sq_free < need)
		ib_iface_poll(tl);
	ret = ring_tx_reserve_whole(&ic->tx, sizeof(hdr), &pad, &s);
	if (ret == -EAGAIN && !ib_iface_poll(tl) && !ib_ep_take_credit(ic))
		ret = ring_tx_reserve_whole(&ic->tx, sizeof(hdr), &pad, &s);
	if (ret || ic->sq_free < need) {
		ic->conn->stats.ring_full_stalls++;
		return 0;
	}
	spipe_tx_open(&sp->tx, total, &hdr);
	if (pad.bytes) {
		ring_tx_commit(&ic->tx, &pad, credit);
		ret = ib_ep_post_packet(ic, pad.off, pad.wire, ic->tx.head);
		if (ret)
			return ret;
	}
	memcpy(s.payload, &hdr, sizeof(hdr));
	s.type = RDMACH_PKT_SPIPE;
	ring_tx_commit(&ic->tx, &s, credit);
	if (credit)
		ring_rx_credit_told(&ic->rx, credit);
	ret = ib_ep_post_packet(ic, s.off, s.wire, ic->tx.head);
	if (ret)
		return ret;
	ic->conn->stats.packets_sent += pad.bytes ? 2 : 1;
	ic->conn->stats.spipe_msgs++;
	return 1;
}

ssize_t ib_sp_put(struct ib_conn *ic, const struct iovec *iov, int iovcnt,
		  size_t total, int start, int *started)
{
	struct ib_sp_conn *sp = &ic->sp;
	const struct spipe_params *p = &sp->tx.p;
	struct rdmach_iovc cur;
	uint64_t avail, done = 0;
	int ret;

	if (started)
		*started = 0;
	/* chunk completions free staging; keepalive completions prove the
	 * peer alive: a writer that only puts must reap them too */
	if (ic->tl->sig_inflight)
		ib_iface_poll(ic->tl);
	if (start) {
		ret = ib_sp_open(ic, total);
		if (ret <= 0)
			return ret;
		if (started)
			*started = 1;
	}
	ret = ib_sp_tx_progress(ic);
	if (ret)
		return ret;
	avail = total < sp->tx.left ? total : sp->tx.left;
	rdmach_iovc_init(&cur, iov, iovcnt);
	while (avail && spipe_tx_writable(&sp->tx)) {
		struct spipe_chunk ch;

		/* a chunk goes out as soon as it is copied: the next copy
		 * overlaps its transfer */
		if (sp->r_land && ic->sq_free < 1 + IB_SQ_RESERVE &&
		    (ib_iface_poll(ic->tl) || ic->sq_free < 1 + IB_SQ_RESERVE))
			break;
		spipe_tx_build(&sp->tx, sp->stage, &cur, avail, &ch);
		sp->chunk_bytes[ch.g % p->nbufs] = ch.bytes;
		avail -= ch.len;
		done += ch.len;
		ret = ib_sp_post_built(ic);
		if (ret)
			return ret;
		if (!spipe_tx_writable(&sp->tx)) {
			/* acks may have come meanwhile */
			ret = ib_sp_tx_progress(ic);
			if (ret)
				return ret;
		}
	}
	ic->conn->stats.spipe_bytes += done;
	return (ssize_t)done;
}

/* ---- receiver ------------------------------------------------------------ */

/* The landing area, registered for the peer's writes; its address and key
 * go into the peer's ctrl area. */
static int ib_sp_land(struct ib_conn *ic)
{
	struct ib_sp_conn *sp = &ic->sp;
	size_t len = spipe_area_bytes(&sp->rx.p);

	sp->land = ib_sp_area(ic, len, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE, &sp->land_mr, "landing "
			      "area");
	if (!sp->land)
		return ib_sp_fail(ic, -ENOMEM, "cannot register the "
				  "superpipeline's landing area (ulimit -l?)");
	sp->land_len = len;
	ic->ctrl->out[0] = sp->land_mr->rkey;
	ic->ctrl->out[1] = (uint64_t)(uintptr_t)sp->land;
	return ib_ep_post_ctrl_words(ic, offsetof(struct ib_ctrl, sp_rkey),
				     ic->ctrl->out, 2);
}

ssize_t ib_sp_get(struct ib_conn *ic, const void *pkt, uint32_t len,
		  struct rdmach_iovc *c, size_t room, int *finished)
{
	struct ib_sp_conn *sp = &ic->sp;
	uint64_t ack;
	int64_t n;
	int fresh, ret;

	*finished = 0;
	if (spipe_rx_begin(&sp->rx, pkt, len, &fresh))
		return ib_sp_fail(ic, -EPROTO, "protocol error: bad "
				  "superpipeline control packet");
	if (fresh && !ic->broken && (ret = ib_sp_land(ic)))
		return ret;
	if (!sp->land)
		return 0;	/* broken before it began: get reports it */
	n = spipe_rx_take(&sp->rx, sp->land, c, room, &ack);
	if (!n && !spipe_rx_msg_done(&sp->rx) &&
	    ib_sp_load(&ic->ctrl->fin)) {
		/* the writes before fin have landed: what is not there never
		 * comes */
		n = spipe_rx_take(&sp->rx, sp->land, c, room, &ack);
		if (!n)
			return -ESHUTDOWN;
	}
	if (n < 0)
		return ib_sp_fail(ic, -EPROTO, "protocol error: corrupt "
				  "superpipeline block");
	if (ack && !ic->broken && !ib_sp_load(&ic->ctrl->fin)) {
		uint64_t w = ack;

		ret = ib_ep_post_ctrl_words(ic, offsetof(struct ib_ctrl,
							 sp_ack), &w, 1);
		if (ret)
			return n ? n : ret;
	}
	*finished = spipe_rx_msg_done(&sp->rx);
	return n;
}
