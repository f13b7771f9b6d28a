/*
 * ib_srq.c - the shared receive pool of cold peers (ib_srq.h): the SRQ,
 * its registered buffers, the send buffers, credit accounting and the
 * per-connection queues of received buffers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "ib_srq.h"

#define IB_SRQ_TXBUFS 64	/* send buffers: SENDs too long for inline */

int ib_srq_repost(struct ib_srq *s, uint32_t i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)ib_srq_buf(s, i),
		.length = s->cfg.buf_size, .lkey = s->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = IB_SRQ_WRID | i, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	if (ibv_post_srq_recv(s->srq, &wr, &bad))
		return -EIO;
	s->posted++;
	return 0;
}

static int ib_srq_alloc(struct ib_srq *s)
{
	unsigned int n = s->cfg.bufs;

	s->txbufs = IB_SRQ_TXBUFS;
	s->buf_len = (size_t)(n + s->txbufs) * s->cfg.buf_size;
	if (posix_memalign((void **)&s->buf, 4096, s->buf_len))
		return -ENOMEM;
	s->len = calloc(n, sizeof(*s->len));
	s->next = calloc(n, sizeof(*s->next));
	s->tx_free = calloc(s->txbufs, sizeof(*s->tx_free));
	if (!s->len || !s->next || !s->tx_free)
		return -ENOMEM;
	for (s->tx_nfree = 0; s->tx_nfree < s->txbufs; s->tx_nfree++)
		s->tx_free[s->tx_nfree] = (int32_t)(s->txbufs - 1 - s->tx_nfree);
	return 0;
}

int ib_srq_open(struct ib_srq **srqp, struct ib_dev *dev, struct ibv_cq *cq,
		const struct ib_srq_cfg *cfg)
{
	struct ib_srq *s = calloc(1, sizeof(*s));
	struct ibv_srq_init_attr ia;
	unsigned int i;
	int ret = -ENOMEM;

	(void)cq;	/* receives complete on the CQ of the QPs */
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	if (ib_srq_alloc(s))
		goto err;
	s->mr = ibv_reg_mr(dev->pd, s->buf, s->buf_len,
			   IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr) {
		rdmach_err("ib: registering the shared receive pool (%zu "
			   "bytes) on %s failed: %s (ulimit -l?)", s->buf_len,
			   dev->name, strerror(errno));
		goto err;
	}
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
	for (i = 0; i < cfg->bufs; i++)
		if (ib_srq_repost(s, i)) {
			rdmach_err("ib: posting shared receive %u failed", i);
			ret = -EIO;
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
	if (s->mr)
		ibv_dereg_mr(s->mr);
	free(s->buf);
	free(s->len);
	free(s->next);
	free(s->tx_free);
	while (s->ctrl_npages)
		free(s->ctrl_pages[--s->ctrl_npages]);
	free(s->ctrl_pages);
	free(s);
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

void ib_srq_rx_init(struct ib_srq_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
	rx->head = rx->tail = -1;
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

#define IB_MODEL_PER_NODE 128u	/* processes per node of the QP column */

static void ib_srq_mem_line(FILE *out, uint64_t n, uint64_t active,
			    uint64_t rings, uint64_t fixed, uint64_t cold,
			    uint64_t warm)
{
	double mib = (double)(fixed + (n - rings) * cold + rings * warm) /
		     (1024.0 * 1024.0);

	/* a QP per peer connected, IB_MODEL_PER_NODE processes per node */
	fprintf(out, "#   %8" PRIu64 " %8" PRIu64 " %8" PRIu64 " %10.1f %12" PRIu64
		"\n", n, active, rings, mib, n * IB_MODEL_PER_NODE);
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
		       uint64_t demand_above)
{
	/* per peer with a ring: ring + ctrl page here, the mirror of its
	 * ring (staging) in the peer; both directions counted, the ring
	 * pair of README.md */
	uint64_t warm = 2 * ring_size + 4096, cold = IB_SRQ_CTRL_SLOT;
	uint64_t fixed = cfg->bufs ? (uint64_t)(cfg->bufs + IB_SRQ_TXBUFS) *
				     cfg->buf_size : 0;
	static const uint64_t ns[] = { 64, 1024, 16384, 65536 };
	static const uint64_t as[] = { 2, 16, 64, UINT64_MAX };
	unsigned int i, j;

	fprintf(out, "# registered memory per process (rdma_ib): ring pair "
		"%" PRIu64 " KiB per peer with a ring; ", warm / 1024);
	if (demand_above == UINT64_MAX)
		fprintf(out, "RDMACH_CONNECT=all: every peer has one\n");
	else
		fprintf(out, "on demand in jobs of more than %" PRIu64 " ranks: shared pool "
			"%" PRIu64 " KiB, ctrl words %u B per cold peer, rings "
			"at most %u\n", demand_above, fixed / 1024,
			IB_SRQ_CTRL_SLOT, rings_max);
	fprintf(out, "#   %8s %8s %8s %10s %12s\n", "peers", "active",
		"rings", "MiB", "QPs/node");
	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		/* a process of a job of ns[i] + 1 ranks */
		int shared = ns[i] + 1 > demand_above && cfg->bufs;

		for (j = 0; j < sizeof(as) / sizeof(as[0]); j++) {
			uint64_t a = as[j] < ns[i] ? as[j] : ns[i];
			uint64_t r = a < rings_max ? a : rings_max;

			if (!shared) {
				ib_srq_mem_line(out, ns[i], ns[i], ns[i], 0,
						0, warm);
				break;
			}
			ib_srq_mem_line(out, ns[i], a, r, fixed, cold, warm);
			if (a == ns[i])
				break;
		}
	}
	fprintf(out, "# QPs/node: one RC QP per peer connected, %u processes "
		"per node; an adapter holds max_qp for the whole host ",
		IB_MODEL_PER_NODE);
	ib_srq_max_qp_line(out);
}
