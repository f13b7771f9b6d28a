/*
 * ib_srq.c - the shared receive pool of cold peers (ib_srq.h): the SRQ,
 * its registered buffers, the send buffers, credit accounting and the
 * per-connection queues of received buffers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/log.h"
#include "ib_srq.h"

int ib_srq_repost(struct ib_srq *s, uint32_t i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)ib_srq_buf(s, i),
		.length = s->cfg.buf_size, .lkey = s->lkey[i],
	};
	struct ibv_recv_wr wr = { .wr_id = IB_SRQ_WRID | i, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	if (ibv_post_srq_recv(s->srq, &wr, &bad))
		return -EIO;
	s->posted++;
	return 0;
}

void ib_srq_cfg_peers(struct ib_srq_cfg *cfg, uint64_t npeers)
{
	uint64_t share = cfg->bufs / (npeers + 1);

	cfg->ask = !share;
	if (share && share < cfg->credits)
		cfg->credits = (unsigned int)share;
}

/* Buffers a cold peer brings: its grant, or what an asker may hold. */
static unsigned int ib_srq_share(const struct ib_srq_cfg *cfg)
{
	unsigned int n = cfg->ask ? IB_SRQ_ASK_HOLD : cfg->credits;

	return n < cfg->bufs ? n : cfg->bufs;
}

/* Buffers [first, first + n) of the reservation as one more piece. */
static int ib_srq_reg(struct ib_srq *s, uint32_t first, uint32_t n)
{
	struct ibv_mr *mr;
	uint32_t i;

	mr = ibv_reg_mr(s->dev->pd, ib_srq_buf(s, first),
			(size_t)n * s->cfg.buf_size, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return errno ? -errno : -ENOMEM;
	s->mrs[s->npieces++] = mr;
	for (i = first; i < first + n; i++)
		s->lkey[i] = mr->lkey;
	return 0;
}

/* Receive buffers registered and posted up to want (at most cfg.bufs).
 * 0, -EIO (a post failed, logged), or the registration's negative errno
 * with *np the buffers it was for (the caller says for whom). */
static int ib_srq_rx_grow(struct ib_srq *s, uint64_t want, unsigned int *np)
{
	unsigned int n, i;
	int ret;

	if (want > s->cfg.bufs)
		want = s->cfg.bufs;
	if (want <= s->nbufs)
		return 0;
	n = (unsigned int)want - s->nbufs;
	ret = ib_srq_reg(s, s->nbufs, n);
	if (ret) {
		*np = n;
		return ret;
	}
	/* registered; credits come only from what gets posted */
	for (i = s->nbufs, s->nbufs = (unsigned int)want; i < want; i++)
		if (ib_srq_repost(s, i)) {
			rdmach_err("ib: posting shared receive %u failed", i);
			return -EIO;
		}
	return 0;
}

/* IB_SRQ_TX_PIECE send buffers more.  0 or a negative errno. */
static int ib_srq_tx_grow(struct ib_srq *s)
{
	unsigned int n = IB_SRQ_TXBUFS - s->txbufs;
	int ret;

	if (n > IB_SRQ_TX_PIECE)
		n = IB_SRQ_TX_PIECE;
	if (!n)
		return -ENOSPC;
	ret = ib_srq_reg(s, s->cfg.bufs + s->txbufs, n);
	if (ret)
		return ret;
	s->tx_pieces++;
	while (n--)
		s->tx_free[s->tx_nfree++] = (int32_t)s->txbufs++;
	return 0;
}

/* The reservation (pages untouched until a piece is registered) and the
 * tables, sized for the largest pool. */
static int ib_srq_alloc(struct ib_srq *s)
{
	unsigned int n = s->cfg.bufs, all = n + IB_SRQ_TXBUFS;
	void *p;

	s->buf_len = (size_t)all * s->cfg.buf_size;
	p = mmap(NULL, s->buf_len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	s->buf = p;
	/* a piece per share of cfg.bufs at most, and per send piece */
	s->mrs = calloc(all, sizeof(*s->mrs));
	s->lkey = calloc(all, sizeof(*s->lkey));
	s->len = calloc(n, sizeof(*s->len));
	s->next = calloc(n, sizeof(*s->next));
	s->tx_free = calloc(IB_SRQ_TXBUFS, sizeof(*s->tx_free));
	if (!s->mrs || !s->lkey || !s->len || !s->next || !s->tx_free)
		return -ENOMEM;
	return 0;
}

int ib_srq_open(struct ib_srq **srqp, struct ib_dev *dev,
		const struct ib_srq_cfg *cfg)
{
	struct ib_srq *s = calloc(1, sizeof(*s));
	struct ibv_srq_init_attr ia;
	unsigned int n = 0;
	int ret = -ENOMEM;

	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->dev = dev;
	s->share = ib_srq_share(cfg);
	if (ib_srq_alloc(s))
		goto err;
	memset(&ia, 0, sizeof(ia));
	ia.attr.max_wr = cfg->bufs;
	ia.attr.max_sge = 1;
	s->srq = ibv_create_srq(dev->pd, &ia);
	if (!s->srq) {
		rdmach_err("ib: ibv_create_srq(%u) on %s failed: %s "
			   "(RDMACH_IB_SRQ_BUFS)", cfg->bufs, dev->name,
			   strerror(errno));
		ret = -EIO;
		goto err;
	}
	/* the first piece: a bad memlock limit shows at start-up */
	ret = ib_srq_rx_grow(s, s->share, &n);
	if (ret) {
		if (n)
			rdmach_err("ib: registering the shared receive pool's "
				   "first %u buffers (%zu bytes) on %s failed: "
				   "%s (ulimit -l?)", n,
				   (size_t)n * cfg->buf_size, dev->name,
				   strerror(-ret));
		goto err;
	}
	ret = ib_srq_tx_grow(s);
	if (ret) {
		rdmach_err("ib: registering the shared path's first %u send "
			   "buffers (%zu bytes) on %s failed: %s (ulimit -l?)",
			   IB_SRQ_TX_PIECE, (size_t)IB_SRQ_TX_PIECE *
			   cfg->buf_size, dev->name, strerror(-ret));
		goto err;
	}
	*srqp = s;
	return 0;
err:
	ib_srq_close(s);
	return ret;
}

void ib_srq_close(struct ib_srq *s)
{
	if (!s)
		return;
	if (s->srq)
		ibv_destroy_srq(s->srq);
	while (s->npieces)
		ibv_dereg_mr(s->mrs[--s->npieces]);
	if (s->buf)
		munmap(s->buf, s->buf_len);
	free(s->mrs);
	free(s->lkey);
	free(s->len);
	free(s->next);
	free(s->tx_free);
	while (s->ctrl_npages)
		free(s->ctrl_pages[--s->ctrl_npages]);
	free(s->ctrl_pages);
	free(s);
}

void ib_srq_print(const struct ib_srq *s, FILE *out)
{
	fprintf(out, "pool %u of %u x %u in %u pieces, %u of %u send "
		"buffers in %u", s->nbufs, s->cfg.bufs, s->cfg.buf_size,
		s->npieces - s->tx_pieces, s->txbufs, IB_SRQ_TXBUFS,
		s->tx_pieces);
	if (s->rx_stuck)
		fprintf(out, "; the pool could not grow: credits by asking");
	if (s->tx_stuck)
		fprintf(out, "; the send buffers could not grow");
}

/* ---- ctrl slots of cold connections ------------------------------------ */

static int ib_srq_ctrl_grow(struct ib_srq *s)
{
	uint8_t *page;
	unsigned int i;

	if (s->ctrl_npages == s->ctrl_cap) {
		unsigned int cap = s->ctrl_cap ? 2 * s->ctrl_cap : 16;
		void **pages = realloc(s->ctrl_pages, cap * sizeof(*pages));

		if (!pages)
			return -ENOMEM;
		s->ctrl_pages = pages;
		s->ctrl_cap = cap;
	}
	if (posix_memalign((void **)&page, 4096, 4096))
		return -ENOMEM;
	s->ctrl_pages[s->ctrl_npages++] = page;
	for (i = 0; i < 4096 / IB_SRQ_CTRL_SLOT; i++)
		ib_srq_ctrl_put(s, page + i * IB_SRQ_CTRL_SLOT);
	return 0;
}

void *ib_srq_ctrl_get(struct ib_srq *s)
{
	void *slot;

	if (!s->ctrl_free && ib_srq_ctrl_grow(s))
		return NULL;
	slot = s->ctrl_free;
	memcpy(&s->ctrl_free, slot, sizeof(void *));
	memset(slot, 0, IB_SRQ_CTRL_SLOT);
	return slot;
}

void ib_srq_ctrl_put(struct ib_srq *s, void *slot)
{
	memcpy(slot, &s->ctrl_free, sizeof(void *));
	s->ctrl_free = slot;
}

/* ---- credits ---------------------------------------------------------- */

/* The pool could not grow for peer: from now on it goes by asking
 * (ib_srq.h), said once. */
static void ib_srq_rx_stuck(struct ib_srq *s, int peer, unsigned int n,
			    int err)
{
	s->rx_stuck = 1;
	s->cfg.ask = 1;
	rdmach_warn("ib: registering %u more shared receive buffers (%zu "
		    "bytes) on %s for rank %d failed: %s (ulimit -l?); the "
		    "pool stays at %u of %u buffers and grants credits one at "
		    "a time to the peers that ask", n,
		    (size_t)n * s->cfg.buf_size, s->dev->name, peer,
		    strerror(-err), s->nbufs, s->cfg.bufs);
}

int ib_srq_rx_join(struct ib_srq *s, struct ib_srq_rx *rx, int peer)
{
	unsigned int n = 0;
	int ret = 0;

	/* its share posted first: the grant below is of posted buffers */
	if (!s->rx_stuck)
		ret = ib_srq_rx_grow(s, ((uint64_t)s->peers + 2) * s->share,
				     &n);
	if (ret && !n)
		return ret;
	if (ret)
		ib_srq_rx_stuck(s, peer, n, ret);
	memset(rx, 0, sizeof(*rx));
	rx->head = rx->tail = -1;
	s->peers++;
	rx->grant0 = ib_srq_grant(s, rx);
	rx->told = rx->grant0;
	return 0;
}

uint64_t ib_srq_grant(struct ib_srq *s, struct ib_srq_rx *rx)
{
	/* what it holds: credits not used and messages not read yet, so
	 * that a peer nobody reads cannot take more than its share */
	uint64_t live = rx->granted - rx->popped, n;

	if (s->cfg.ask || live >= s->cfg.credits)
		return 0;
	n = s->cfg.credits - live;
	if (n > ib_srq_free(s))
		n = ib_srq_free(s);
	rx->granted += n;
	s->outstanding += n;
	return n;
}

void ib_srq_rx_release(struct ib_srq *s, struct ib_srq_rx *rx)
{
	s->peers--;
	s->outstanding -= rx->granted - rx->rcvd;
	rx->granted = rx->rcvd;
	while (rx->head >= 0) {
		uint32_t i = (uint32_t)rx->head;

		ib_srq_pop(s, rx);
		if (ib_srq_repost(s, i))
			rdmach_warn("ib: a shared receive not reposted");
	}
}

/* ---- queues ------------------------------------------------------------ */

void ib_srq_push(struct ib_srq *s, struct ib_srq_rx *rx, uint32_t i,
		 uint32_t len)
{
	s->len[i] = len;
	s->next[i] = -1;
	if (rx->tail >= 0)
		s->next[rx->tail] = (int32_t)i;
	else
		rx->head = (int32_t)i;
	rx->tail = (int32_t)i;
}

void ib_srq_pop(struct ib_srq *s, struct ib_srq_rx *rx)
{
	int32_t i = rx->head;

	rx->head = s->next[i];
	if (rx->head < 0)
		rx->tail = -1;
	rx->off = 0;
	rx->popped++;
}

int ib_srq_tx_room(struct ib_srq *s, unsigned int n)
{
	int ret;

	if (s->tx_nfree >= n)
		return 1;
	if (s->tx_stuck || s->txbufs >= IB_SRQ_TXBUFS)
		return 0;
	ret = ib_srq_tx_grow(s);
	if (ret) {
		s->tx_stuck = 1;
		rdmach_warn("ib: registering %u more shared-path send buffers "
			    "(%zu bytes) on %s failed: %s (ulimit -l?); sends "
			    "wait for the %u there are", IB_SRQ_TX_PIECE,
			    (size_t)IB_SRQ_TX_PIECE * s->cfg.buf_size,
			    s->dev->name, strerror(-ret), s->txbufs);
		return 0;
	}
	return s->tx_nfree >= n;
}

int32_t ib_srq_tx_get(struct ib_srq *s)
{
	return s->tx_nfree ? s->tx_free[--s->tx_nfree] : -1;
}

void ib_srq_tx_put(struct ib_srq *s, int32_t t)
{
	if (t >= 0 && s->tx_nfree < s->txbufs)
		s->tx_free[s->tx_nfree++] = t;
}

/* ---- rdmach_info ------------------------------------------------------- */


/* A process with n peers, conns of them connected (a QP each), active
 * of those in use, rings of them with a ring. */
static void ib_srq_mem_line(FILE *out, uint64_t n, uint64_t conns,
			    uint64_t active, uint64_t rings, uint64_t pool,
			    uint64_t cold, uint64_t warm)
{
	double mib = (double)(pool + (conns - rings) * cold + rings * warm) /
		     (1024.0 * 1024.0);

	/* IB_MODEL_PER_NODE processes per node */
	fprintf(out, "#   %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8" PRIu64
		" %10.1f %12" PRIu64 "\n", n, active, rings, conns, mib,
		conns * IB_MODEL_PER_NODE);
}

/* The pool of a process of a job of n + 1 ranks, conns peers connected
 * of which rings have left the shared path: the first piece and a share
 * per cold peer, the first piece of send buffers. */
static uint64_t ib_srq_pool_bytes(const struct ib_srq_cfg *cfg, uint64_t n,
				  uint64_t conns, uint64_t rings)
{
	struct ib_srq_cfg c = *cfg;
	uint64_t bufs;

	ib_srq_cfg_peers(&c, n);
	bufs = (conns - rings + 1) * ib_srq_share(&c);
	if (bufs > c.bufs)
		bufs = c.bufs;
	return (bufs + IB_SRQ_TX_PIECE) * c.buf_size;
}

/* The max_qp of the devices of this host, or why there is none. */
static void ib_srq_max_qp_line(FILE *out)
{
	struct ibv_device **list;
	int i, n = 0, shown = 0;

	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_device_attr da;

		if (!ctx)
			continue;
		if (!ibv_query_device(ctx, &da))
			fprintf(out, "%s%s %d", shown++ ? ", " : "(here: ",
				ibv_get_device_name(list[i]), da.max_qp);
		ibv_close_device(ctx);
	}
	if (list)
		ibv_free_device_list(list);
	fprintf(out, "%s\n", shown ? ")" : "(no device here to read it from)");
}

void ib_srq_mem_report(FILE *out, const struct ib_srq_cfg *cfg,
		       uint64_t ring_size, unsigned int rings_max,
		       unsigned int qps_max, uint64_t demand_above)
{
	/* per peer with a ring: ring + ctrl page here, the mirror of its
	 * ring (staging) in the peer; both directions counted, the ring
	 * pair of README.md */
	uint64_t warm = 2 * ring_size + 4096, cold = IB_SRQ_CTRL_SLOT;
	static const uint64_t ns[] = { 64, 1024, 16384, 65536 };
	static const uint64_t as[] = { 2, 16, 64, UINT64_MAX };
	unsigned int i, j;

	fprintf(out, "# registered memory per process (rdma_ib): ring pair "
		"%" PRIu64 " KiB per peer with a ring; ", warm / 1024);
	if (demand_above == UINT64_MAX)
		fprintf(out, "RDMACH_CONNECT=all: every peer has one\n");
	else
		fprintf(out, "on demand in jobs of more than %" PRIu64 " ranks: shared pool "
			"of up to %u x %u B growing by a peer's credits per "
			"cold peer, %u-%u send buffers, ctrl words %u B per "
			"cold peer, rings at most %u\n", demand_above,
			cfg->bufs, cfg->buf_size, IB_SRQ_TX_PIECE,
			IB_SRQ_TXBUFS, IB_SRQ_CTRL_SLOT, rings_max);
	fprintf(out, "#   %8s %8s %8s %8s %10s %12s\n", "peers", "active",
		"rings", "QPs", "MiB", "QPs/node");
	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		/* a process of a job of ns[i] + 1 ranks */
		int shared = ns[i] + 1 > demand_above && cfg->bufs;

		for (j = 0; j < sizeof(as) / sizeof(as[0]); j++) {
			uint64_t a = as[j] < ns[i] ? as[j] : ns[i];
			uint64_t r = a < rings_max ? a : rings_max;
			/* connected: every peer, or those RDMACH_IB_QPS_MAX
			 * keeps (the active ones at least) */
			uint64_t c = !qps_max || qps_max >= ns[i] ? ns[i] :
				     a > qps_max ? a : qps_max;

			if (!shared) {
				ib_srq_mem_line(out, ns[i], ns[i], ns[i],
						ns[i], 0, 0, warm);
				break;
			}
			ib_srq_mem_line(out, ns[i], c, a, r,
					ib_srq_pool_bytes(cfg, ns[i], c, r),
					cold, warm);
			if (a == ns[i])
				break;
		}
	}
	fprintf(out, "# QPs: one RC QP per peer connected: every peer, or "
		"under demand with RDMACH_IB_QPS_MAX (%u here) that many (the "
		"active ones at least); QPs/node: %u processes per node; an "
		"adapter holds max_qp for the whole host ", qps_max,
		IB_MODEL_PER_NODE);
	ib_srq_max_qp_line(out);
}
