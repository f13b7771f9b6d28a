/* ib_spipe.c - the superpipeline over verbs: see ib_spipe.h. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/tl.h"
#include "ib_large.h"
#include "ib_peer.h"
#include "ib_spipe.h"

void ib_sp_conn_init(struct ib_sp_conn *sp, const struct ib_sp_ep *ep,
		     struct ib_large *lg)
{
	memset(sp, 0, sizeof(*sp));
	sp->ep = *ep;
	sp->lg = lg;
	spipe_tx_init(&sp->tx, &lg->sp);
	spipe_rx_init(&sp->rx);
}

void ib_sp_conn_release(struct ib_sp_conn *sp)
{
	if (sp->stage_mr) {
		ibv_dereg_mr(sp->stage_mr);
		sp->lg->mem_used -= spipe_area_bytes(&sp->tx.p);
	}
	if (sp->land_mr)
		ibv_dereg_mr(sp->land_mr);
	free(sp->stage);
	free(sp->land);
	sp->stage_mr = sp->land_mr = NULL;
	sp->stage = sp->land = NULL;
}

/* A registered, zeroed area of len bytes, or NULL (logged). */
static uint8_t *ib_sp_area(struct ib_sp_conn *sp, size_t len, int access,
			   struct ibv_mr **mrp, const char *what)
{
	uint8_t *a = NULL;

	if (posix_memalign((void **)&a, 4096, len)) {
		rdmach_warn("ib: superpipeline %s to rank %d: no memory for "
			    "%zu bytes", what, sp->ep.conn->peer, len);
		return NULL;
	}
	memset(a, 0, len);
	*mrp = ibv_reg_mr(sp->ep.pd, a, len, access);
	if (!*mrp) {
		rdmach_warn("ib: superpipeline %s to rank %d: registering %zu "
			    "bytes failed: %s (ulimit -l?)", what,
			    sp->ep.conn->peer, len, strerror(errno));
		free(a);
		return NULL;
	}
	return a;
}

int ib_sp_room(const struct ib_sp_conn *sp)
{
	const struct ib_large *lg = sp->lg;

	return sp->stage ||
	       lg->mem_used + spipe_area_bytes(&sp->tx.p) <= lg->mem_max;
}

/* ---- sender ------------------------------------------------------------- */

static int ib_sp_fail(struct ib_sp_conn *sp, int err, const char *what)
{
	return sp->ep.ops->fail(sp->ep.arg, err, what);
}

static int ib_sp_poll(struct ib_sp_conn *sp)
{
	return sp->ep.ops->poll(sp->ep.arg);
}

/* A chunk keeps the endpoint's reserved send queue slots free. */
static int ib_sp_sq_room(const struct ib_sp_conn *sp)
{
	return *sp->ep.sq_free >= 1 + sp->ep.sq_keep;
}

/* Post built chunks while the landing address is known and the send
 * queue has room. */
static int ib_sp_post_built(struct ib_sp_conn *sp)
{
	const struct spipe_params *p = &sp->tx.p;

	while (sp->r_land && ib_sp_unposted(sp) && ib_sp_sq_room(sp)) {
		uint64_t g = sp->tx.posted + 1, off = spipe_buf_off(p, g);
		uint32_t len = (uint32_t)sp->chunk_bytes[g % p->nbufs];
		int ret = sp->ep.ops->post_chunk(sp->ep.arg, sp->stage + off,
						 sp->stage_mr->lkey, len,
						 sp->r_land + off, sp->r_rkey,
						 g);

		if (ret)
			return ret;
		spipe_tx_posted(&sp->tx, g);
		sp->ep.conn->stats.spipe_chunks++;
	}
	return 0;
}

int ib_sp_tx_progress(struct ib_sp_conn *sp)
{
	const struct ib_sp_ctrl *in = sp->ep.in;
	uint64_t a;

	if (!sp->stage)
		return 0;
	a = ib_peer_load64(&in->ack);
	if (a > sp->tx.acked && spipe_tx_ack(&sp->tx, a))
		return ib_sp_fail(sp, -EPROTO, "protocol error: superpipeline "
				  "ack beyond what was sent");
	/* the address once: tested, then kept (the key, written before it
	 * by the same write, is there once the address's top byte is) */
	if (!sp->r_land && ib_peer_whole(ib_peer_load64(&in->addr), &a)) {
		if (!a)
			return ib_sp_fail(sp, -EPROTO, "protocol error: "
					  "superpipeline landing address 0");
		sp->r_rkey = (uint32_t)ib_peer_load64(&in->rkey);
		sp->r_land = a;
	}
	if (!ib_sp_unposted(sp))
		return 0;
	if (!ib_sp_sq_room(sp))
		ib_sp_poll(sp);
	return ib_sp_post_built(sp);
}

int ib_sp_stage(struct ib_sp_conn *sp)
{
	struct ib_large *lg = sp->lg;
	size_t len = spipe_area_bytes(&sp->tx.p);

	if (sp->stage)
		return 0;
	if (lg->mem_used + len > lg->mem_max)
		return -EAGAIN;
	sp->stage = ib_sp_area(sp, len, IBV_ACCESS_LOCAL_WRITE,
			       &sp->stage_mr, "staging");
	if (!sp->stage)
		return -EAGAIN;
	lg->mem_used += len;
	return 0;
}

ssize_t ib_sp_put(struct ib_sp_conn *sp, const struct iovec *iov, int iovcnt,
		  size_t total)
{
	const struct spipe_params *p = &sp->tx.p;
	struct rdmach_iovc cur;
	uint64_t avail, done = 0;
	int ret;

	ret = ib_sp_tx_progress(sp);
	if (ret)
		return ret;
	avail = total < sp->tx.left ? total : sp->tx.left;
	rdmach_iovc_init(&cur, iov, iovcnt);
	while (avail && spipe_tx_writable(&sp->tx)) {
		struct spipe_chunk ch;

		/* a chunk goes out as soon as it is copied: the next copy
		 * overlaps its transfer */
		if (sp->r_land && !ib_sp_sq_room(sp) &&
		    (ib_sp_poll(sp) || !ib_sp_sq_room(sp)))
			break;
		spipe_tx_build(&sp->tx, sp->stage, &cur, avail, &ch);
		sp->chunk_bytes[ch.g % p->nbufs] = ch.bytes;
		avail -= ch.len;
		done += ch.len;
		ret = ib_sp_post_built(sp);
		if (ret)
			return ret;
		if (!spipe_tx_writable(&sp->tx)) {
			/* acks may have come meanwhile */
			ret = ib_sp_tx_progress(sp);
			if (ret)
				return ret;
		}
	}
	sp->ep.conn->stats.spipe_bytes += done;
	return (ssize_t)done;
}

/* ---- receiver ------------------------------------------------------------ */

/* The landing area, registered for the peer's writes; its address and key
 * go into the peer's ctrl area. */
static int ib_sp_land(struct ib_sp_conn *sp)
{
	size_t len = spipe_area_bytes(&sp->rx.p);
	uint64_t w[2];

	sp->land = ib_sp_area(sp, len, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE, &sp->land_mr, "landing "
			      "area");
	if (!sp->land)
		return ib_sp_fail(sp, -ENOMEM, "cannot register the "
				  "superpipeline's landing area (ulimit -l?)");
	sp->land_len = len;
	w[0] = sp->land_mr->rkey;
	w[1] = (uint64_t)(uintptr_t)sp->land | IB_PEER_WHOLE;
	return sp->ep.ops->post_ctrl(sp->ep.arg,
				     offsetof(struct ib_sp_ctrl, rkey), w, 2);
}

ssize_t ib_sp_get(struct ib_sp_conn *sp, const void *pkt, uint32_t len,
		  struct rdmach_iovc *c, size_t room, int *finished)
{
	uint64_t ack;
	int64_t n;
	int fresh, ret;

	*finished = 0;
	if (spipe_rx_begin(&sp->rx, pkt, len, &fresh))
		return ib_sp_fail(sp, -EPROTO, "protocol error: bad "
				  "superpipeline control packet");
	if (fresh && !*sp->ep.broken && (ret = ib_sp_land(sp)))
		return ret;
	if (!sp->land)
		return 0;	/* broken before it began: get reports it */
	n = spipe_rx_take(&sp->rx, sp->land, c, room, &ack);
	if (!n && !spipe_rx_msg_done(&sp->rx) && ib_peer_load64(sp->ep.fin)) {
		/* the writes before fin have landed: what is not there never
		 * comes */
		n = spipe_rx_take(&sp->rx, sp->land, c, room, &ack);
		if (!n)
			return -ESHUTDOWN;
	}
	if (n < 0)
		return ib_sp_fail(sp, -EPROTO, "protocol error: corrupt "
				  "superpipeline block");
	if (ack && !*sp->ep.broken && !ib_peer_load64(sp->ep.fin)) {
		ret = sp->ep.ops->post_ctrl(sp->ep.arg,
					    offsetof(struct ib_sp_ctrl, ack),
					    &ack, 1);
		if (ret)
			return n ? n : ret;
	}
	*finished = spipe_rx_msg_done(&sp->rx);
	return n;
}
