/* ib_zcopy.c - zero-copy large puts by RDMA read: see ib_zcopy.h. */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_peer.h"
#include "ib_zcopy.h"
#include "core/log.h"

/* Local pieces registered and read per round of a get. */
#define IB_ZC_LOCAL_MAX 64
/* Scatter entries per read WR, at most (the QP may allow fewer). */
#define IB_ZC_SGE_MAX 16

/* ---- registration through the cache ------------------------------------ */

static int ib_zc_reg(struct ib_zc *z, void *addr, size_t len, int access,
		     void **handle)
{
	struct ibv_mr *mr = ibv_reg_mr(z->dev->pd, addr, len, access);

	if (!mr)
		return errno ? -errno : -ENOMEM;
	*handle = mr;
	return 0;
}

/* A source, read by the peer.  Local write too, though we never write it:
 * it makes the kernel pin private, writable pages (a read-only pin may
 * take a page shared copy-on-write, such as the zero page of a buffer not
 * yet written, and a cached registration would go on showing the peer
 * that page after the application wrote the buffer); a read-only buffer
 * is then not registered and goes by copy. */
static int ib_zc_reg_src(void *arg, void *addr, size_t len, void **handle)
{
	return ib_zc_reg(arg, addr, len, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_READ, handle);
}

/* A destination: our RDMA reads write it, nobody else touches it. */
static int ib_zc_reg_dst(void *arg, void *addr, size_t len, void **handle)
{
	return ib_zc_reg(arg, addr, len, IBV_ACCESS_LOCAL_WRITE, handle);
}

static int ib_zc_dereg(void *arg, void *handle)
{
	int ret = ibv_dereg_mr(handle);

	return ret > 0 ? -ret : ret;
}

static const struct rdmach_rcache_ops ib_zc_src_ops = {
	.reg = ib_zc_reg_src,
	.dereg = ib_zc_dereg,
};

static const struct rdmach_rcache_ops ib_zc_dst_ops = {
	.reg = ib_zc_reg_dst,
	.dereg = ib_zc_dereg,
};

static struct ibv_mr *ib_zc_mr(const struct rdmach_rcache_region *r)
{
	return r->handle;
}

int ib_zc_open(struct ib_zc **zp, struct ib_dev *dev,
	       const struct ib_zc_cfg *cfg, struct rdmach_ctx *ctx)
{
	struct rdmach_rcache_config rcfg;
	struct ib_zc *z;
	char name[IBV_SYSFS_NAME_MAX + 8];
	int ret;

	z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	z->dev = dev;
	z->enabled = cfg->enabled;
	z->threshold = cfg->threshold;
	z->read_max = cfg->read_max;
	z->bounce = cfg->bounce;
	z->yield = cfg->yield;
	if (dev->max_msg_sz && z->read_max > dev->max_msg_sz)
		z->read_max = dev->max_msg_sz;
	z->rd_atom = (unsigned int)ib_dev_rd_atom(dev);
	z->max_sge = (unsigned int)ib_dev_send_sge(dev);
	if (z->max_sge > IB_ZC_SGE_MAX)
		z->max_sge = IB_ZC_SGE_MAX;
	/* a read in flight is the probe, as a write is for the keepalive */
	z->wait_ns = ib_dev_probe_wait_ns(ctx->peer_timeout_ns);
	ret = rdmach_rcache_config_from_env(&rcfg);
	if (ret)
		goto err_free;
	snprintf(name, sizeof(name), "ib %s", dev->name);
	rcfg.name = name;
	rcfg.stats_mirror = &ctx->ctx_stats;
	ret = rdmach_rcache_create(&ib_zc_src_ops, z, &rcfg, &z->rc);
	if (ret)
		goto err_free;
	snprintf(name, sizeof(name), "ib %s dst", dev->name);
	ret = rdmach_rcache_create(&ib_zc_dst_ops, z, &rcfg, &z->rc_dst);
	if (ret)
		goto err_rc;
	rdmach_debug("ib: zero-copy %s, threshold %" PRIu64 ", reads of at "
		     "most %" PRIu64 " bytes, %u outstanding, %u sge",
		     z->enabled ? "on" : "off", z->threshold, z->read_max,
		     z->rd_atom, z->max_sge);
	*zp = z;
	return 0;
err_rc:
	rdmach_rcache_destroy(z->rc);
err_free:
	free(z);
	return ret;
}

void ib_zc_close(struct ib_zc *z)
{
	if (!z)
		return;
	rdmach_rcache_destroy(z->rc_dst);
	rdmach_rcache_destroy(z->rc);
	free(z);
}

void ib_zc_conn_init(struct ib_zc_conn *zcc, struct ib_zc *z,
		     struct rdmach_conn *conn, struct ibv_qp *qp,
		     const struct ib_zc_sq *sq, int (*poll)(void *arg),
		     void *poll_arg)
{
	memset(zcc, 0, sizeof(*zcc));
	zcc->zc = z;
	zcc->conn = conn;
	zcc->qp = qp;
	zcc->sq = *sq;
	zcc->poll = poll;
	zcc->poll_arg = poll_arg;
	zcc->next_id = 1;
	zcc->tx_first = 1;
}

static void ib_zc_tx_release(struct ib_zc_conn *zcc, struct ib_zc_tx *tx)
{
	int i;

	for (i = 0; i < tx->nreg; i++)
		rdmach_rcache_put(zcc->zc->rc, tx->reg[i]);
	tx->nreg = 0;
}

void ib_zc_conn_release(struct ib_zc_conn *zcc)
{
	if (zcc->zc) {
		for (; zcc->tx_first != zcc->next_id; zcc->tx_first++)
			ib_zc_tx_release(zcc, &zcc->m->tx[zcc->tx_first %
							  IB_ZC_TX_MAX]);
		zcc->wait_id = 0;
	}
	free(zcc->m);
	zcc->m = NULL;
	if (zcc->b_mr)
		ibv_dereg_mr(zcc->b_mr);
	free(zcc->b_buf);
	zcc->b_mr = NULL;
	zcc->b_buf = NULL;
}

/* The connection's rendezvous records, made at its first zero-copy
 * message either way: 0, or -ENOMEM. */
static int ib_zc_mem(struct ib_zc_conn *zcc)
{
	if (!zcc->m)
		zcc->m = calloc(1, sizeof(*zcc->m));
	return zcc->m ? 0 : -ENOMEM;
}

/* ---- sender --------------------------------------------------------------- */

uint32_t ib_zc_ctl_len(const struct ib_zc_conn *zcc, const struct iovec *iov,
		       int iovcnt, size_t head, size_t *bytes)
{
	int i, n = rdmach_rndv_pieces(iovcnt, head);
	uint32_t nsegs = 0;
	size_t sum = 0;

	iov += !!head;
	for (i = 0; i < n; i++) {
		if (!iov[i].iov_len)
			continue;
		nsegs++;
		sum += iov[i].iov_len;
	}
	*bytes = sum < zcc->zc->threshold ? 0 : sum;
	return (uint32_t)rdmach_rndv_size(nsegs);
}

int64_t ib_zc_put_start(struct ib_zc_conn *zcc, const struct iovec *iov,
			int iovcnt, size_t head, void *out, int wait)
{
	struct ib_zc_ctl *ctl = out;
	const struct iovec *pv = iov + !!head;
	int i, n = rdmach_rndv_pieces(iovcnt, head), ret;
	struct ib_zc_tx *tx;
	size_t sum = 0;

	if (ib_zc_mem(zcc))
		return -EAGAIN;		/* the caller copies instead */
	tx = &zcc->m->tx[zcc->next_id % IB_ZC_TX_MAX];
	tx->nreg = 0;
	ctl->h.nsegs = 0;
	for (i = 0; i < n; i++) {
		struct rdmach_rcache_region *r;
		struct rdmach_rndv_seg *s = &ctl->s[ctl->h.nsegs];

		if (!pv[i].iov_len)
			continue;
		ret = rdmach_rcache_get(zcc->zc->rc, pv[i].iov_base,
					pv[i].iov_len, &r);
		if (ret) {
			rdmach_debug("ib: zero-copy put to rank %d: cannot "
				     "register %zu bytes at %p (%s): copying",
				     zcc->conn->peer, pv[i].iov_len,
				     pv[i].iov_base, strerror(-ret));
			ib_zc_tx_release(zcc, tx);
			return -EAGAIN;
		}
		tx->reg[tx->nreg++] = r;
		s->addr = (uint64_t)(uintptr_t)pv[i].iov_base;
		s->len = pv[i].iov_len;
		s->key = ib_zc_mr(r)->rkey;
		ctl->h.nsegs++;
		sum += pv[i].iov_len;
	}
	ctl->h.id = zcc->next_id++;
	ctl->h.total = sum;
	ctl->h.flags = 0;
	tx->bytes = sum;
	tx->head = head;
	if (wait) {
		zcc->wait_id = ctl->h.id;
		zcc->tx_iovcnt = n + !!head;
		memcpy(zcc->m->tx_iov, iov,
		       (size_t)zcc->tx_iovcnt * sizeof(*iov));
	}
	return (int64_t)ctl->h.id;
}

void ib_zc_tx_reap(struct ib_zc_conn *zcc, uint64_t acked_id)
{
	while (zcc->tx_first != zcc->next_id && zcc->tx_first <= acked_id) {
		struct ib_zc_tx *tx = &zcc->m->tx[zcc->tx_first % IB_ZC_TX_MAX];

		zcc->conn->stats.zcopy_msgs++;
		zcc->conn->stats.zcopy_bytes += tx->bytes;
		ib_zc_tx_release(zcc, tx);
		zcc->tx_first++;
	}
}

ssize_t ib_zc_put_poll(struct ib_zc_conn *zcc, const struct iovec *iov,
		       int iovcnt, uint64_t acked_id)
{
	const struct ib_zc_tx *tx = &zcc->m->tx[zcc->wait_id % IB_ZC_TX_MAX];
	size_t bytes = tx->head + tx->bytes;

	if (iovcnt < zcc->tx_iovcnt ||
	    memcmp(iov, zcc->m->tx_iov,
		   (size_t)zcc->tx_iovcnt * sizeof(*iov))) {
		rdmach_err("ib: put to rank %d retried with a different iovec "
			   "while a zero-copy put of %zu bytes is pending",
			   zcc->conn->peer, bytes);
		return -EINVAL;
	}
	ib_zc_tx_reap(zcc, acked_id);
	if (acked_id < zcc->wait_id)
		return 0;
	zcc->wait_id = 0;
	return (ssize_t)bytes;
}

/* ---- receiver ----------------------------------------------------------- */

void ib_zc_completion(struct ib_zc_conn *zcc, const struct ibv_wc *wc)
{
	if (zcc->reads_out) {
		zcc->reads_out--;
		(*zcc->sq.free)++;
	}
	if (wc->status != IBV_WC_SUCCESS && !zcc->read_status)
		zcc->read_status = wc->status ? (int)wc->status : -1;
}

static int ib_zc_bad(struct ib_zc_conn *zcc, const char *field, uint64_t v)
{
	return rdmach_conn_fail(zcc->conn, -EPROTO, "ib: protocol error: "
				"zero-copy control packet from rank %d: %s "
				"%" PRIu64, zcc->conn->peer, field, v);
}

/* Copy the rendezvous at the ring head out of the ring (once per packet)
 * and check the copy: everything after uses only it. */
static int ib_zc_rx_snap(struct ib_zc_conn *zcc, const void *pkt,
			 uint32_t len)
{
	const struct rdmach_rndv_hdr *r;
	uint64_t sum = 0;
	uint32_t i;

	if (zcc->rx_have)
		return 0;
	if (ib_zc_mem(zcc))
		return rdmach_conn_fail(zcc->conn, -ENOMEM, "ib: no memory "
					"for a zero-copy put's records");
	r = &zcc->m->rx_pkt.h;
	if (len < sizeof(*r) || len > sizeof(zcc->m->rx_pkt))
		return ib_zc_bad(zcc, "length", len);
	ib_peer_snap(&zcc->m->rx_pkt, pkt, len);
	if (!r->nsegs || r->nsegs > RDMACH_RNDV_MAX_SEGS ||
	    len != rdmach_rndv_size(r->nsegs))
		return ib_zc_bad(zcc, "nsegs", r->nsegs);
	for (i = 0; i < r->nsegs; i++) {
		if (!r->seg[i].len || r->seg[i].len > UINT64_MAX - sum)
			return ib_zc_bad(zcc, "segment length", r->seg[i].len);
		sum += r->seg[i].len;
	}
	if (sum != r->total)
		return ib_zc_bad(zcc, "total", r->total);
	zcc->rx_off = 0;
	zcc->rx_have = 1;
	return 0;
}

/* The reads failed or hang: fail the connection (once) and make sure the
 * adapter writes nothing more into the caller's buffer. */
static int ib_zc_read_fail(struct ib_zc_conn *zcc, const char *why)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	ibv_modify_qp(zcc->qp, &a, IBV_QP_STATE);
	if (zcc->conn->err)
		return zcc->conn->err;
	return rdmach_conn_fail(zcc->conn, -ECONNRESET, "ib: zero-copy RDMA "
				"read from rank %d %s (device %s)",
				zcc->conn->peer, why, zcc->zc->dev->name);
}

/* Poll until at most `max` reads are outstanding.  0 or a negative errno.
 * The peer is given 1.5 x RDMACH_PEER_TIMEOUT_MS per read that completes, not
 * for all of them: on a slow link, megabytes of reads in flight may take
 * longer than that while every one of them arrives. */
static int ib_zc_wait(struct ib_zc_conn *zcc, unsigned int max)
{
	uint64_t deadline = 0;
	unsigned int spins = 0, out = zcc->reads_out;
	char why[96];

	while (zcc->reads_out > max) {
		if (zcc->poll(zcc->poll_arg))
			return ib_zc_read_fail(zcc, "failed: cannot poll the "
					       "completion queue");
		if (zcc->read_status)
			break;
		if (zcc->reads_out <= max || ++spins % 1024)
			continue;
		if (zcc->zc->yield)
			sched_yield();
		if (zcc->reads_out < out) {	/* progress: a new period */
			out = zcc->reads_out;
			deadline = 0;
		}
		if (!deadline) {
			deadline = rdmach_now_ns() + zcc->zc->wait_ns;
		} else if (rdmach_now_ns() > deadline) {
			snprintf(why, sizeof(why), "did not complete within "
				 "%.1f s (RDMACH_PEER_TIMEOUT_MS)",
				 (double)zcc->zc->wait_ns / 1e9);
			return ib_zc_read_fail(zcc, why);
		}
	}
	if (zcc->read_status) {
		snprintf(why, sizeof(why), "failed: %s",
			 zcc->read_status > 0 ? ibv_wc_status_str(
				 (enum ibv_wc_status)zcc->read_status) : "?");
		return ib_zc_read_fail(zcc, why);
	}
	return 0;
}

/* Room for one more read: the QP's limit of outstanding reads and the
 * send queue slots the transport keeps for its control writes. */
static int ib_zc_slot(struct ib_zc_conn *zcc)
{
	unsigned int lim = zcc->zc->rd_atom;

	while (*zcc->sq.free <= zcc->sq.keep && zcc->reads_out) {
		int ret = ib_zc_wait(zcc, zcc->reads_out - 1);

		if (ret)
			return ret;
	}
	if (*zcc->sq.free <= zcc->sq.keep) {	/* data writes fill it */
		uint64_t deadline = rdmach_now_ns() + zcc->zc->wait_ns;

		while (*zcc->sq.free <= zcc->sq.keep) {
			if (zcc->poll(zcc->poll_arg) || zcc->conn->err ||
			    rdmach_now_ns() > deadline)
				return ib_zc_read_fail(zcc, "failed: the send "
						       "queue stays full");
		}
	}
	return zcc->reads_out >= lim ? ib_zc_wait(zcc, lim - 1) : 0;
}

static int ib_zc_post(struct ib_zc_conn *zcc, struct ibv_sge *sge, int nsge,
		      uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;
	int ret = ib_zc_slot(zcc);

	if (ret)
		return ret;
	memset(&wr, 0, sizeof(wr));
	/* the writes before it complete before it: at an error, the
	 * transport knows from this which of its writes will complete too */
	wr.wr_id = (uint64_t)(uint32_t)zcc->conn->peer | IB_ZC_WRID |
		   (uint64_t)(*zcc->sq.wr_seq & IB_WR_SEQ_MASK) <<
		   IB_WR_SEQ_SHIFT;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	ret = ibv_post_send(zcc->qp, &wr, &bad);
	if (ret) {
		char why[64];

		snprintf(why, sizeof(why), "failed: ibv_post_send: %s",
			 strerror(ret));
		return ib_zc_read_fail(zcc, why);
	}
	(*zcc->sq.free)--;
	zcc->reads_out++;
	zcc->conn->stats.zcopy_reads++;
	return 0;
}

struct ib_zc_src {		/* position in the sender's segments */
	const struct rdmach_rndv_hdr *r;
	uint32_t seg;
	uint64_t off;
};

static void ib_zc_src_seek(struct ib_zc_src *s, const struct rdmach_rndv_hdr *r,
			   uint64_t pos)
{
	s->r = r;
	for (s->seg = 0; pos >= r->seg[s->seg].len; s->seg++)
		pos -= r->seg[s->seg].len;
	s->off = pos;
}

/* Read bytes [pos, pos + sum of liov) of the rendezvous into liov, whose
 * pieces are registered as mr[]; returns after every read completed. */
static int ib_zc_read(struct ib_zc_conn *zcc, const struct rdmach_rndv_hdr *r,
		      uint64_t pos, const struct iovec *liov,
		      struct rdmach_rcache_region *const *reg, int nl)
{
	struct ibv_sge sge[IB_ZC_SGE_MAX];
	struct ib_zc_src src;
	uint64_t loff = 0;
	int li = 0, ret;

	ib_zc_src_seek(&src, r, pos);
	while (li < nl) {
		const struct rdmach_rndv_seg *s = &r->seg[src.seg];
		uint64_t raddr = s->addr + src.off, wlen = 0;
		int nsge = 0;

		/* one WR: one remote range, up to max_sge local pieces */
		while (li < nl && nsge < (int)zcc->zc->max_sge &&
		       wlen < zcc->zc->read_max && src.off + wlen < s->len) {
			uint64_t k = liov[li].iov_len - loff;

			if (k > s->len - src.off - wlen)
				k = s->len - src.off - wlen;
			if (k > zcc->zc->read_max - wlen)
				k = zcc->zc->read_max - wlen;
			sge[nsge].addr = (uintptr_t)liov[li].iov_base + loff;
			sge[nsge].length = (uint32_t)k;
			sge[nsge].lkey = ib_zc_mr(reg[li])->lkey;
			nsge++;
			wlen += k;
			loff += k;
			if (loff == liov[li].iov_len) {
				li++;
				loff = 0;
			}
		}
		ret = ib_zc_post(zcc, sge, nsge, raddr, (uint32_t)s->key);
		if (ret)
			return ret;
		src.off += wlen;
		if (src.off == s->len) {
			src.seg++;
			src.off = 0;
		}
	}
	return ib_zc_wait(zcc, 0);
}

/* One round: up to IB_ZC_LOCAL_MAX local pieces, registered, read. */
static ssize_t ib_zc_round(struct ib_zc_conn *zcc,
			   const struct rdmach_rndv_hdr *r,
			   struct rdmach_iovc *c, size_t want)
{
	struct iovec liov[IB_ZC_LOCAL_MAX];
	struct rdmach_rcache_region *reg[IB_ZC_LOCAL_MAX];
	size_t taken;
	int nl, i, ret = 0;

	nl = rdmach_iovc_slice(c, want, liov, IB_ZC_LOCAL_MAX, &taken);
	for (i = 0; i < nl && !ret; i++)
		ret = rdmach_rcache_get(zcc->zc->rc_dst, liov[i].iov_base,
					liov[i].iov_len, &reg[i]);
	if (ret) {
		nl = i - 1;
		ret = rdmach_conn_fail(zcc->conn, ret == -ECHILD ? ret : -ENOMEM,
				       "ib: zero-copy get from rank %d: cannot "
				       "register the destination (%s; ulimit "
				       "-l?)", zcc->conn->peer,
				       strerror(-ret));
	} else {
		ret = ib_zc_read(zcc, r, zcc->rx_off, liov, reg, nl);
	}
	for (i = 0; i < nl; i++)
		rdmach_rcache_put(zcc->zc->rc_dst, reg[i]);
	return ret ? ret : (ssize_t)taken;
}

/* Bytes of the bounce buffer holding rendezvous r at rx_off, copied out. */
static size_t ib_zc_bounce_out(struct ib_zc_conn *zcc,
			       const struct rdmach_rndv_hdr *r,
			       struct rdmach_iovc *c, size_t want)
{
	uint64_t at = zcc->rx_off - zcc->b_start;

	if (!zcc->b_len || zcc->b_id != r->id || zcc->rx_off < zcc->b_start ||
	    at >= zcc->b_len)
		return 0;
	if (want > zcc->b_len - at)
		want = zcc->b_len - at;
	return rdmach_iovc_scatter(c, zcc->b_buf + at, want);
}

/* Read ahead up to the bounce size from rx_off.  0 or a negative errno. */
static int ib_zc_bounce_fill(struct ib_zc_conn *zcc,
			     const struct rdmach_rndv_hdr *r)
{
	struct rdmach_rcache_region reg, *regp = &reg;
	struct iovec v;
	uint64_t len = r->total - zcc->rx_off;
	int ret;

	if (!zcc->b_buf) {
		if (posix_memalign((void **)&zcc->b_buf, 4096,
				   zcc->zc->bounce))
			zcc->b_buf = NULL;
		if (zcc->b_buf)
			zcc->b_mr = ibv_reg_mr(zcc->zc->dev->pd, zcc->b_buf,
					       zcc->zc->bounce,
					       IBV_ACCESS_LOCAL_WRITE);
		if (!zcc->b_mr) {
			free(zcc->b_buf);
			zcc->b_buf = NULL;
			return -ENOMEM;
		}
	}
	if (len > zcc->zc->bounce)
		len = zcc->zc->bounce;
	v.iov_base = zcc->b_buf;
	v.iov_len = len;
	reg.handle = zcc->b_mr;
	zcc->b_len = 0;
	ret = ib_zc_read(zcc, r, zcc->rx_off, &v, &regp, 1);
	if (ret)
		return ret;
	zcc->b_id = r->id;
	zcc->b_start = zcc->rx_off;
	zcc->b_len = len;
	return 0;
}

int ib_zc_get_stops(struct ib_zc_conn *zcc, const void *pkt, uint32_t len,
		    size_t room)
{
	int ret = ib_zc_rx_snap(zcc, pkt, len);

	if (ret)
		return ret;
	return !zcc->rx_off && zcc->m->rx_pkt.h.total > room;
}

ssize_t ib_zc_get(struct ib_zc_conn *zcc, const void *pkt, uint32_t len,
		  struct rdmach_iovc *c, size_t room, uint64_t *ack)
{
	const struct rdmach_rndv_hdr *r;
	size_t done = 0, want;
	ssize_t n;
	int ret;

	*ack = 0;
	ret = ib_zc_rx_snap(zcc, pkt, len);
	if (ret)
		return ret;
	r = &zcc->m->rx_pkt.h;
	want = r->total - zcc->rx_off;
	if (want > room)
		want = room;
	while (done < want) {
		n = (ssize_t)ib_zc_bounce_out(zcc, r, c, want - done);
		if (!n && want - done < zcc->zc->bounce &&
		    want < r->total - zcc->rx_off + done) {
			/* room-limited tiny get: read ahead, then copy */
			ret = ib_zc_bounce_fill(zcc, r);
			if (ret == -ENOMEM)
				zcc->zc->bounce = 0;	/* direct reads */
			else if (ret)
				return ret;
			continue;
		}
		if (!n)
			n = ib_zc_round(zcc, r, c, want - done);
		if (n < 0)
			return n;
		if (!n)
			break;
		done += (size_t)n;
		zcc->rx_off += (uint64_t)n;
	}
	if (zcc->rx_off == r->total) {
		zcc->rx_off = 0;
		zcc->rx_have = 0;
		zcc->b_len = 0;
		*ack = r->id;
	}
	return (ssize_t)done;
}
