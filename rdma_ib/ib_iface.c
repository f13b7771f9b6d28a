/*
 * ib_iface.c - the InfiniBand/RoCE transport's interface: knobs, device
 * open, the completion queue shared by every endpoint, the collective
 * wire-up (addresses exchanged out of band), progress and finalize: the
 * top of rdma_ib, calling down into the endpoints (ib_ep.h: per peer,
 * the data path and the CQ's completions) and never called by them; the
 * state both share is struct ib_tl (ib_tl.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/knob.h"
#include "core/log.h"
#include "core/tl.h"
#include "ib_cm.h"
#include "ib_dev.h"
#include "ib_ep.h"
#include "ib_fork.h"
#include "ib_large.h"
#include "ib_tl.h"
#include "ib_tune.h"
#include "ib_zcopy.h"
#include "proto/ring.h"

enum { IB_K_DEVICE, IB_K_PORT, IB_K_GID, IB_K_MODE, IB_K_RING, IB_K_CHUNK,
       IB_K_CREDIT, IB_K_SQ, IB_K_INLINE, IB_K_MTU, IB_K_TIMEOUT,
       IB_K_RETRY, IB_K_ZCOPY, IB_K_ZC_THRESHOLD, IB_K_ZC_READ,
       IB_K_ZC_BOUNCE, IB_K_ZC_YIELD, IB_K_CM_DROP, IB_K_CM_VERSION,
       IB_K_SRQ_BUFS, IB_K_SRQ_BUF_SIZE, IB_K_SRQ_CREDITS, IB_K_RING_AFTER,
       IB_K_RINGS_MAX, IB_K_CQ_WRS, IB_K_QPS_MAX, IB_K_QPS_WAIT, IB_K_CM_RTO,
       IB_K_NUM };

static const struct rdmach_knob ib_knobs[IB_K_NUM] = {
	[IB_K_DEVICE] = { "RDMACH_IB_DEVICE", RDMACH_KNOB_STRING, "", 0, 0,
		"RDMA device to use (\"\": the first with an active port)" },
	[IB_K_PORT] = { "RDMACH_IB_PORT", RDMACH_KNOB_UINT, "0", 0, 255,
		"port of the device (0: the first active one)" },
	[IB_K_GID] = { "RDMACH_IB_GID_INDEX", RDMACH_KNOB_STRING, "auto", 0, 0,
		"RoCE GID index (auto: a RoCE v2 GID, IPv4-mapped preferred)" },
	[IB_K_MODE] = { "RDMACH_IB_MODE", RDMACH_KNOB_STRING, "pipeline", 0, 0,
		"ring protocol: basic | piggyback | pipeline" },
	[IB_K_RING] = { "RDMACH_IB_RING_SIZE", RDMACH_KNOB_SIZE, "128K", 4096,
		1u << 30,
		"receive ring per peer, power of two (staging mirror: same size)",
		RDMACH_KNOB_POW2 },
	[IB_K_CHUNK] = { "RDMACH_IB_CHUNK_SIZE", RDMACH_KNOB_SIZE, "16K", 64,
		16u << 20, "pipeline mode: payload bytes per chunk of a large put" },
	[IB_K_CREDIT] = { "RDMACH_IB_CREDIT_PERCENT", RDMACH_KNOB_UINT, "50", 1,
		100, "send an explicit tail update when the sender's free ring "
		"space would fall under this % of the ring" },
	[IB_K_SQ] = { "RDMACH_IB_SQ_DEPTH", RDMACH_KNOB_UINT, "128", 16, 16384,
		"send queue entries per QP" },
	[IB_K_INLINE] = { "RDMACH_IB_INLINE", RDMACH_KNOB_SIZE, "256", 8, 4096,
		"packets up to this size are posted inline" },
	[IB_K_MTU] = { "RDMACH_IB_MTU", RDMACH_KNOB_UINT, "4096", 256, 4096,
		"largest path MTU (the port's active MTU caps it)" },
	[IB_K_TIMEOUT] = { "RDMACH_IB_TIMEOUT", RDMACH_KNOB_UINT, "14", 1, 31,
		"QP local ack timeout exponent (4.096 us * 2^n per try)" },
	[IB_K_RETRY] = { "RDMACH_IB_RETRY_CNT", RDMACH_KNOB_UINT, "7", 0, 7,
		"QP transport retries before a peer is declared dead" },
	[IB_K_ZCOPY] = { "RDMACH_ZCOPY", RDMACH_KNOB_BOOL, "1", 0, 1,
		"large puts by RDMA read of the sender's registered buffer "
		"(0: always copy through the ring)" },
	[IB_K_ZC_THRESHOLD] = { "RDMACH_ZCOPY_THRESHOLD", RDMACH_KNOB_SIZE,
		"64K", 1, 1ull << 40,
		"puts of at least this many bytes go zero-copy (RDMA read)" },
	[IB_K_ZC_READ] = { "RDMACH_ZCOPY_READ_SIZE", RDMACH_KNOB_SIZE, "1M",
		4096, 1u << 30, "largest RDMA read the zero-copy receiver posts "
		"(port max_msg_sz caps it)" },
	[IB_K_ZC_BOUNCE] = { "RDMACH_ZCOPY_BOUNCE", RDMACH_KNOB_SIZE, "16K", 0,
		16u << 20, "a get with room for fewer bytes reads this much of a "
		"zero-copy put ahead into a bounce buffer (0: always read "
		"directly)" },
	[IB_K_ZC_YIELD] = { "RDMACH_ZCOPY_YIELD", RDMACH_KNOB_BOOL, "1", 0, 1,
		"a get waiting for its RDMA reads yields the CPU every 1024 "
		"empty polls (Soft-RoCE, oversubscribed cores)" },
	[IB_K_CM_DROP] = { "RDMACH_IB_CM_DROP", RDMACH_KNOB_UINT, "0", 0,
		1000, "test hook: the connection manager drops the first n "
		"messages it receives (requests and replies; retransmission "
		"makes up for them)" },
	[IB_K_CM_VERSION] = { "RDMACH_IB_CM_VERSION", RDMACH_KNOB_UINT, "0",
		0, 65535, "test hook: the connection protocol version this "
		"process speaks, as an rdmach of another version would (0: its "
		"own)" },
	[IB_K_SRQ_BUFS] = { "RDMACH_IB_SRQ_BUFS", RDMACH_KNOB_UINT, "256", 0,
		65536, "RDMACH_CONNECT=demand: receive buffers of the shared "
		"receive queue that cold peers send into, at most (registered "
		"a peer's credits at a time as cold peers connect; 0: no "
		"shared path, every connection gets its ring at once)" },
	[IB_K_SRQ_BUF_SIZE] = { "RDMACH_IB_SRQ_BUF_SIZE", RDMACH_KNOB_SIZE,
		"8K", 256, 1u << 20, "bytes of each shared receive buffer "
		"(one message of a cold peer, 16 of them its header)" },
	[IB_K_SRQ_CREDITS] = { "RDMACH_IB_SRQ_CREDITS", RDMACH_KNOB_UINT,
		"16", 1, 65536, "shared receive buffers a cold peer may hold "
		"at once (its credits; fewer while the pool is short)" },
	[IB_K_RING_AFTER] = { "RDMACH_IB_RING_AFTER", RDMACH_KNOB_UINT, "256",
		0, 1u << 30, "messages a cold peer sends on the shared path "
		"before it gets a ring (promotion)" },
	[IB_K_RINGS_MAX] = { "RDMACH_IB_RINGS_MAX", RDMACH_KNOB_UINT, "64", 0,
		1u << 20, "rings a process gives cold peers at most; beyond, "
		"they stay on the shared path" },
	[IB_K_CQ_WRS] = { "RDMACH_IB_CQ_WRS", RDMACH_KNOB_UINT, "1024",
		64, 1u << 20, "writes and sends in flight per process at "
		"most, signalled or not (a QP in error completes each): the "
		"completion queue is sized by it, not by peers; past half of "
		"it every post is signalled" },
	[IB_K_QPS_MAX] = { "RDMACH_IB_QPS_MAX", RDMACH_KNOB_UINT, "0", 0,
		1u << 24, "RDMACH_CONNECT=demand: QPs to other ranks a process "
		"keeps; a connection it starts beyond waits while the idlest "
		"quiet one is closed (both ends agree; its next put makes it "
		"again), and idle ones are closed down to it (0: no limit of "
		"our own; idle ones are closed when the device has no QP "
		"left)" },
	[IB_K_QPS_WAIT] = { "RDMACH_IB_QPS_WAIT_MS", RDMACH_KNOB_UINT, "100",
		0, 3600000, "how long a connection waits for another to close "
		"at RDMACH_IB_QPS_MAX before it is made beyond (one closes "
		"only once each end read all the other put)" },
	[IB_K_CM_RTO] = { "RDMACH_IB_CM_RTO_MS", RDMACH_KNOB_UINT, "20", 1,
		400, "a connection message unanswered this long is sent "
		"again (then after twice as long, up to 400 ms); longer when "
		"the peers' answers take longer (measured: a loaded host "
		"answers late), and under RDMACH_CONNECT=all as long as "
		"making the endpoints took" },
};
RDMACH_KNOB_TABLE(ib, ib_knobs);

static const struct rdmach_tl_ops ib_ops;

static const char *const ib_mode_names[] = {
	[RING_MODE_BASIC] = "basic",
	[RING_MODE_PIGGYBACK] = "piggyback",
	[RING_MODE_PIPELINE] = "pipeline",
};

/* ---- progress ------------------------------------------------------------ */

/* The connections up (tl->live), not every rank: an idle call costs what
 * the peers in use do, not the job size.  A failed one leaves the list
 * here, the last entry taking its slot (visited next: none is skipped). */
static int ib_progress(struct rdmach_tl *base)
{
	struct ib_tl *tl = (struct ib_tl *)base;
	unsigned int i;
	int ret;

	if (!tl->cq)
		return 0;
	ret = ib_ep_poll(tl);
	if (ret)
		return ret;
	ib_ep_async_tick(tl);
	ib_cm_progress(tl);
	for (i = 0; i < tl->nlive;) {
		struct ib_conn *ic = tl->live[i];

		if (ic->broken || ic->conn->err) {
			if (!tl->failed)
				tl->failed = ic->conn->err;
			ib_ep_live_drop(ic);
			continue;
		}
		ib_ep_progress(ic);
		i++;
	}
	return tl->failed;
}

/* ---- open and wire-up ------------------------------------------------------ */

/* Every knob into tl; *port the port asked for (0: the first active). */
static int ib_read_knobs(struct ib_tl *tl, unsigned int *port)
{
	uint64_t v[IB_K_NUM] = { 0 };
	const char *mode;
	int i;

	for (i = 0; i < IB_K_NUM; i++)
		if (ib_knobs[i].type != RDMACH_KNOB_STRING &&
		    rdmach_knob_u64(&ib_knobs[i], &v[i]))
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
	tl->cm_drop = (unsigned int)v[IB_K_CM_DROP];
	tl->cm_version = (uint16_t)v[IB_K_CM_VERSION];
	tl->srq_cfg.bufs = (unsigned int)v[IB_K_SRQ_BUFS];
	tl->srq_cfg.buf_size = (uint32_t)v[IB_K_SRQ_BUF_SIZE];
	tl->srq_cfg.credits = (unsigned int)v[IB_K_SRQ_CREDITS];
	tl->ring_after = v[IB_K_RING_AFTER];
	tl->rings_max = (unsigned int)v[IB_K_RINGS_MAX];
	tl->wr_max = (unsigned int)v[IB_K_CQ_WRS];
	tl->qps_max = (unsigned int)v[IB_K_QPS_MAX];
	tl->qps_wait_ms = v[IB_K_QPS_WAIT];
	tl->cm_rto_ms = v[IB_K_CM_RTO];
	*port = (unsigned int)v[IB_K_PORT];
	return 0;
}

static int ib_open(struct rdmach_ctx *ctx, struct rdmach_tl **tlp)
{
	struct ib_tl *tl = calloc(1, sizeof(*tl));
	unsigned int port;
	int ret;

	if (!tl)
		return -ENOMEM;
	/* before any registration (and device list): ib_fork.h */
	ib_fork_setup();
	tl->base.ops = &ib_ops;
	tl->base.ctx = ctx;
	ret = ib_read_knobs(tl, &port);
	if (ret)
		goto err_free;
	ret = ib_dev_open(&tl->dev, rdmach_knob_str(&ib_knobs[IB_K_DEVICE]),
			  port, rdmach_knob_str(&ib_knobs[IB_K_GID]));
	if (ret == -ENODEV)
		rdmach_tl_unavailable(ctx, RDMACH_TL_IB, "%s", tl->dev.why);
	if (ret)
		goto err_free;
	tl->conns = calloc((size_t)ctx->size, sizeof(*tl->conns));
	tl->live = calloc((size_t)ctx->size, sizeof(*tl->live));
	if (!tl->conns || !tl->live) {
		ret = -ENOMEM;
		goto err_conns;
	}
	ret = ib_zc_open(&tl->zc, &tl->dev, &tl->zc_cfg, ctx);
	if (ret)
		goto err_conns;
	ret = ib_large_open(&tl->large, &tl->dev, tl->chunk,
			    tl->zc_cfg.enabled, tl->zc_cfg.threshold);
	if (ret)
		goto err_zc;
	*tlp = &tl->base;
	return 0;
err_zc:
	ib_zc_close(tl->zc);
err_conns:
	free(tl->live);
	free(tl->conns);
	ib_dev_close(&tl->dev);
err_free:
	free(tl);
	return ret;
}

/*
 * The CQ every QP shares and the connection manager, whose record is
 * this rank's one key.  The CQ holds what can complete at once: the
 * writes and sends in flight, signalled or not, as every QP may fail and
 * flush them (capped: ib_ep.c waits for room beyond tl->wr_max), the
 * zero-copy reads a get waits for, the shared receive buffers and the
 * connection manager's entries; not a queue per peer.
 */
static int ib_publish(struct rdmach_tl *base, const int *peers, int npeers)
{
	struct ib_tl *tl = (struct ib_tl *)base;
	uint64_t per_qp = (uint64_t)tl->sq_depth * ((uint64_t)npeers + 1);
	uint64_t cqe;
	int ret;

	(void)peers;
	if (!npeers)
		return 0;
	ib_large_host_procs(&tl->large, (unsigned int)base->ctx->host_procs);
	tl->cm_peers = (unsigned int)npeers;
	if (per_qp < tl->wr_max)
		tl->wr_max = (unsigned int)per_qp;	/* never reached */
	tl->wr_signal_at = tl->wr_max / 2;
	if (!base->ctx->demand)
		tl->srq_cfg.bufs = 0;	/* every ring at connect: no pool */
	/* reads: a get's, and those a failed one left to flush */
	cqe = tl->wr_max + 2ull * ib_dev_rd_atom(&tl->dev) +
	      tl->srq_cfg.bufs + IB_CM_CQE + 16;
	if (tl->dev.max_cqe > 0 && cqe > (uint64_t)tl->dev.max_cqe) {
		uint64_t over = cqe - (uint64_t)tl->dev.max_cqe;

		/* the writes in flight give way: the CQ must hold them */
		tl->wr_max = over + 64 < tl->wr_max ?
			     tl->wr_max - (unsigned int)over : 64;
		tl->wr_signal_at = tl->wr_max / 2;
		rdmach_warn("ib: a CQ of %" PRIu64 " entries wanted, %s has "
			    "%d at most: %u writes in flight at most "
			    "(RDMACH_IB_CQ_WRS, RDMACH_IB_SRQ_BUFS)", cqe,
			    tl->dev.name, tl->dev.max_cqe, tl->wr_max);
		cqe = (uint64_t)tl->dev.max_cqe;
	}
	tl->cq = ibv_create_cq(tl->dev.ctx, (int)cqe, NULL, NULL, 0);
	if (!tl->cq) {
		rdmach_err("ib: ibv_create_cq(%" PRIu64 ") on %s failed: %s",
			   cqe, tl->dev.name, strerror(errno));
		return -ENOMEM;
	}
	if (tl->srq_cfg.bufs) {
		ib_srq_cfg_peers(&tl->srq_cfg, (uint64_t)npeers);
		ret = ib_srq_open(&tl->srq, &tl->dev, &tl->srq_cfg);
		if (ret)
			return ret;
	}
	rdmach_debug("ib: CQ of %" PRIu64 " entries, %u writes and sends "
		     "in flight at most, shared receive pool of up to %u x %u, "
		     "%u credits a peer%s", cqe, tl->wr_max, tl->srq_cfg.bufs,
		     tl->srq_cfg.buf_size, tl->srq_cfg.credits,
		     tl->srq_cfg.ask ? " (asked for)" : "");
	return ib_cm_open(tl);
}

/* RDMACH_CONNECT=all: every pair now, through the connection manager. */
static int ib_connect(struct rdmach_tl *base, const int *peers, int npeers)
{
	return npeers ? ib_cm_connect_all((struct ib_tl *)base, peers,
					  npeers) : 0;
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

static int ib_iface_drained(struct ib_tl *tl)
{
	int i;

	for (i = 0; i < tl->base.ctx->size; i++)
		if (tl->conns[i] && !ib_ep_drained(tl->conns[i]))
			return 0;
	return 1;
}

static int ib_close(struct rdmach_tl *base, uint64_t deadline_ns)
{
	struct ib_tl *tl = (struct ib_tl *)base;
	int i, ret = 0;

	ib_cm_finalizing(tl, deadline_ns);
	for (i = 0; tl->cq && i < base->ctx->size; i++)
		if (tl->conns[i] && base->ctx->conns[i].tl == base)
			ib_ep_send_fin(tl->conns[i], deadline_ns);
	while (tl->cq && !ib_iface_drained(tl) && rdmach_now_ns() < deadline_ns) {
		ib_ep_poll(tl);
		if (tl->cm_queued)	/* close requests: answered BUSY */
			tl->cm_drain(tl);
	}
	if (tl->cq && !ib_iface_drained(tl)) {
		rdmach_warn("ib: finalize: writes still in flight at the "
			    "deadline (RDMACH_FINALIZE_TIMEOUT_MS)");
		ret = -ETIMEDOUT;
	}
	for (i = 0; i < base->ctx->size; i++) {
		if (!tl->conns[i])
			continue;
		ib_ep_destroy(tl->conns[i]);
		tl->conns[i] = NULL;
	}
	ib_cm_close(tl);
	ib_srq_close(tl->srq);
	if (tl->cq)
		ibv_destroy_cq(tl->cq);
	ib_large_close(&tl->large);
	ib_zc_close(tl->zc);
	ib_dev_close(&tl->dev);
	free(tl->live);
	free(tl->conns);
	free(tl);
	return ret;
}

/* ---- counters ------------------------------------------------------------- */

/* The superpipeline's landing areas: offered (RDMACH_SPIPE_PEERS), and
 * registered by the peers' first messages. */
static void ib_print_landing(const struct ib_tl *tl, FILE *out)
{
	const struct ib_large *lg = &tl->large;
	uint64_t bytes = 0;
	unsigned int areas = 0;
	int i;

	for (i = 0; i < tl->base.ctx->size; i++) {
		const struct ib_conn *ic = tl->conns[i];

		if (ic && ic->sp.land) {
			areas++;
			bytes += ic->sp.land_len;
		}
	}
	fprintf(out, "# ib superpipeline: %u landing areas (%" PRIu64
		" bytes) registered, offered to %u peers of %u at most "
		"(RDMACH_SPIPE_PEERS), refused to %u\n", areas, bytes,
		lg->land_offered, lg->land_max, lg->land_refused);
}

static void ib_print_stats(struct rdmach_tl *base, FILE *out)
{
	const struct ib_tl *tl = (const struct ib_tl *)base;
	const struct ib_srq_stats *st = &tl->srq_st;

	fprintf(out, "# ib shared path: %" PRIu64 " messages out (%" PRIu64
		" bytes), %" PRIu64 " in (%" PRIu64 " bytes), %" PRIu64
		" credits exhausted, %" PRIu64 " credit writes; rings: %"
		PRIu64 " held (%" PRIu64 " at most), %" PRIu64
		" promotions, %" PRIu64 " switched, %" PRIu64 " refused at "
		"RDMACH_IB_RINGS_MAX=%u; ", st->msgs_out,
		st->bytes_out, st->msgs_in, st->bytes_in, st->no_credit,
		st->grants_sent, st->rings, st->rings_max, st->promotions,
		st->switches, st->at_cap, tl->rings_max);
	if (tl->srq)
		ib_srq_print(tl->srq, out);
	else
		fprintf(out, "no pool");
	fprintf(out, "\n");
	fprintf(out, "# ib progress: %u connections up and polled, %u being "
		"made; %u writes in flight (%u at most), %" PRIu64 " flushed "
		"by failed connections\n", tl->nlive, ib_cm_pending(tl),
		tl->wr_out, tl->wr_max, tl->wr_flushed);
	ib_cm_print(tl, out);
	ib_print_landing(tl, out);
}

/* ---- rdmach_info --tune ------------------------------------------------------ */

/* A transport state holding only the knobs (rdmach_info's reports); NULL
 * and *ret set on failure. */
static struct ib_tl *ib_knobs_tl(unsigned int *port, int *ret)
{
	struct ib_tl *tl = calloc(1, sizeof(*tl));

	*ret = tl ? ib_read_knobs(tl, port) : -ENOMEM;
	if (*ret) {
		free(tl);
		return NULL;
	}
	return tl;
}

int ib_mem_report(FILE *out, uint64_t demand_above)
{
	unsigned int port;
	int ret;
	struct ib_tl *tl = ib_knobs_tl(&port, &ret);

	if (tl) {
		ib_srq_mem_report(out, &tl->srq_cfg, tl->ring_size,
				  tl->rings_max, tl->qps_max, demand_above);
		ib_large_mem_report(out, IB_MODEL_PER_NODE);
	}
	free(tl);
	return ret;
}

int ib_tune_report(FILE *out)
{
	unsigned int port;
	int ret;
	struct ib_tl *tl = ib_knobs_tl(&port, &ret);

	if (!tl)
		return ret;
	ret = ib_dev_open(&tl->dev, rdmach_knob_str(&ib_knobs[IB_K_DEVICE]),
			  port, rdmach_knob_str(&ib_knobs[IB_K_GID]));
	if (ret)
		goto out;
	ret = ib_large_open(&tl->large, &tl->dev, tl->chunk,
			    tl->zc_cfg.enabled, tl->zc_cfg.threshold);
	if (!ret) {
		fprintf(out, "# rdmach large-message tuning: device %s port "
			"%u, MTU %s\n", tl->dev.name, tl->dev.port,
			ib_mtu_str(tl->dev.active_mtu));
		ib_large_print(&tl->large, out);
		ib_large_close(&tl->large);
	}
	ib_dev_close(&tl->dev);
out:
	free(tl);
	return ret;
}

static const struct rdmach_tl_ops ib_ops = {
	.name = "ib",
	.id = RDMACH_TL_IB,
	.same_host_only = 0,
	.open = ib_open,
	.publish = ib_publish,
	.connect = ib_connect,
	.ready = ib_ready,
	.connect_peer = ib_cm_connect_peer,
	.listen = ib_cm_listen,
	.put = ib_ep_put,
	.get = ib_ep_get,
	.put_deferred = ib_ep_put_deferred,
	.put_done = ib_ep_put_done,
	.peek = ib_ep_peek,
	.consume = ib_ep_consume,
	.progress = ib_progress,
	.print_stats = ib_print_stats,
	.close = ib_close,
};
RDMACH_TL_REGISTER(ib_ops);
