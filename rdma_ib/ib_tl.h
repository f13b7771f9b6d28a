/*
 * ib_tl.h - the rdma_ib transport's per-process state (rdma_ib private,
 * prefix ib_), in the sense of UCX's uct_iface: the opened device and
 * port, the completion queue shared by every connection, the
 * knob-derived settings, the zero-copy engine, the large-message choice
 * and tuning (ib_large.h) and the connection table.  The interface
 * (ib_iface.c: open, wire-up, progress, finalize) fills it in; the
 * endpoints (ib_ep.h) read it and poll its CQ.  It has a header of its
 * own so that the endpoints need nothing of the interface above them.
 */
#ifndef RDMACH_IB_TL_H
#define RDMACH_IB_TL_H

#include <stdint.h>
#include <infiniband/verbs.h>

#include "core/tl.h"
#include "ib_dev.h"
#include "ib_large.h"
#include "ib_srq.h"
#include "ib_zcopy.h"
#include "proto/ring.h"

struct ib_conn;
struct ib_cm;

/* wr_id of the connection manager's UD work requests (ib_cm.h): its
 * completions go to ib_tl.cm_wc */
#define IB_CM_WRID (1ull << 61)

struct ib_tl {
	struct rdmach_tl base;
	struct ib_dev dev;
	struct ibv_cq *cq;
	struct ib_conn **conns;	/* [ctx->size], NULL for other transports */
	/* the connections up and not failed, densely (ib_conn.live_at is
	 * each one's index): progress visits these, not every rank */
	struct ib_conn **live;
	unsigned int nlive;
	int failed;		/* the first failed connection's error, which
				 * progress returns from then on (as shm) */
	char dead[128];		/* why the device failed ("": it works):
				 * no connection is made from then on */
	enum ring_mode mode;
	uint64_t ring_size, chunk, credit_thr;
	unsigned int sq_depth, inline_want, inline_max;
	struct ib_qp_params qpp;
	unsigned int sig_inflight;	/* signalled WRs not completed yet */
	/* every write and send posted and not known complete, signalled or
	 * not: a QP in error completes each one (ib_ep.c), so the CQ holds
	 * wr_max of them; past wr_signal_at every post is signalled, so
	 * that a wait for room always has a completion to wait for */
	unsigned int wr_out, wr_max, wr_signal_at;
	uint64_t wr_flushed;	/* error completions of writes and sends */
	unsigned int async_tick;	/* progress calls: async events due */
	unsigned int cq_skips;		/* gets that did not poll the CQ */
	struct ib_zc *zc;
	struct ib_zc_cfg zc_cfg;
	struct ib_large large;	/* protocol choice, tuning, superpipeline */
	struct ib_cm *cm;	/* connection manager (ib_cm.h) */
	/* set by the connection manager: a completion of its UD QP; a
	 * message received is only queued (cm_queued), and handled by
	 * cm_drain where no endpoint is in use (its handling may close
	 * one): the connection manager's calls, and a put, get or peek
	 * before it takes its endpoint */
	void (*cm_wc)(struct ib_tl *tl, const struct ibv_wc *wc);
	void (*cm_drain)(struct ib_tl *tl);
	unsigned int cm_queued;
	unsigned int cm_drop;	/* test hook: connection messages to drop */
	uint16_t cm_version;	/* connection protocol spoken (a test hook
				 * may pretend another) */
	unsigned int cm_peers;	/* peers it may connect (CQ sizing) */
	unsigned int qps_max;	/* RDMACH_IB_QPS_MAX: QPs to peers kept */
	uint64_t qps_wait_ms;	/* RDMACH_IB_QPS_WAIT_MS */
	uint64_t cm_rto_ms;	/* RDMACH_IB_CM_RTO_MS */
	/* the shared receive path (ib_srq.h): NULL when off; new demand
	 * connections start cold on it */
	struct ib_srq *srq;
	struct ib_srq_cfg srq_cfg;
	uint64_t ring_after;	/* shared-path messages that earn a ring */
	unsigned int rings_max;	/* receive rings offered, at most */
	unsigned int grant_next;	/* round robin of credits asked for
					 * (an index in live) */
	unsigned int grant_tick;
	struct ib_srq_stats srq_st;
};

#endif /* RDMACH_IB_TL_H */
