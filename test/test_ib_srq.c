/*
 * test_ib_srq.c - rdma_ib's shared receive path for cold peers
 * (RDMACH_CONNECT=demand, rdma_ib/README.md "The shared receive path"):
 * byte-exact streams over a pool forced tiny (credits run out, puts
 * return 0 and go on), promotion to a ring in the middle of streams both
 * ways at once, a cap of 2 rings with 8 active peers, large messages
 * (zero-copy, superpipeline) from a cold peer, a read in place whose
 * consume follows a large put back, a pool that grows by a share per
 * cold peer connected (and not before), registration failing under a
 * real `ulimit -l` (at start-up, as cold peers join, for send buffers)
 * and a dead peer holding every send buffer; and, the shared path or
 * not, three peers dying with full send queues, whose flushed writes the
 * CQ holds (ib_cq_dead_peers), a dead peer holding the CQ's budget
 * while a live one waits (ib_cq_dead_hold), idle connections' open
 * unsignalled runs closed (ib_cq_idle_runs) and idle connections closed
 * and made again under streams at RDMACH_IB_QPS_MAX=2 (ib_qps_churn,
 * the kernel's QPs counted too) or on an adapter that refuses a third
 * QP (ib_qps_adapter_full), a failed device's connections (ib_dead_device)
 * and the superpipeline's limits shared by a host's processes
 * (ib_spipe_host_share); the counters of
 * rdmach_print_stats say which path carried what, and the adapter's RNR
 * counters stay 0 (rxe: hw_counters).  Every case sets its knobs itself;
 * without an ib transport (RDMACH_TRANSPORT=ib) they are skipped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench/src/bench_proc.h"
#include "core/log.h"
#include "lib/tst.h"
#include "rdma_ib/ib_ep.h"
#include "rdma_ib/ib_tl.h"

/*
 * An adapter with few QPs: this program's own ibv_create_qp, which every
 * QP rdmach makes goes through (librdmach.a is linked in, libibverbs
 * is not), refuses an RC QP as a full adapter does (NULL, ENOMEM) once
 * srq_rc_qps_max of them are held (0: passes every call on).
 */
static unsigned int srq_rc_qps_max, srq_rc_qps, srq_rc_qps_refused;

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	static struct ibv_qp *(*real)(struct ibv_pd *,
				      struct ibv_qp_init_attr *);
	struct ibv_qp *qp;

	if (!real)
		real = (struct ibv_qp *(*)(struct ibv_pd *,
					   struct ibv_qp_init_attr *))
			dlsym(RTLD_NEXT, "ibv_create_qp");
	if (!real) {
		errno = ENOSYS;
		return NULL;
	}
	if (ia->qp_type == IBV_QPT_RC && srq_rc_qps_max &&
	    srq_rc_qps >= srq_rc_qps_max) {
		srq_rc_qps_refused++;
		errno = ENOMEM;
		return NULL;
	}
	qp = real(pd, ia);
	srq_rc_qps += qp && ia->qp_type == IBV_QPT_RC;
	return qp;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	static int (*real)(struct ibv_qp *);
	int rc = qp->qp_type == IBV_QPT_RC, ret;

	if (!real)
		real = (int (*)(struct ibv_qp *))dlsym(RTLD_NEXT,
						       "ibv_destroy_qp");
	if (!real)
		return ENOSYS;
	ret = real(qp);
	if (!ret)
		srq_rc_qps -= (unsigned int)rc;
	return ret;
}

/* The ib line of rdmach_print_stats (rdma_ib/ib_iface.c). */
struct srq_st {
	uint64_t out, out_b, in, in_b, no_credit, grants;
	uint64_t rings, rings_max, promotions, switches, at_cap;
	unsigned int bufs, bufs_max, buf_size, pieces, txbufs, txmax, txp;
	int rx_stuck, tx_stuck;		/* the pool said it could not grow */
};

/* rdmach_print_stats's text (to free), *line its line that starts with
 * key (NULL if none). */
static char *srq_stats_at(struct tst *t, const char *key, char **line)
{
	char *buf = tst_stats_text(t->ctx);

	*line = buf ? strstr(buf, key) : NULL;
	return buf;
}

static int srq_stats(struct tst *t, struct srq_st *st)
{
	char *p, *buf = srq_stats_at(t, "# ib shared path: ", &p);
	int n = 0;

	memset(st, 0, sizeof(*st));
	if (p)
		n = sscanf(p, "# ib shared path: %" SCNu64 " messages out (%"
			   SCNu64 " bytes), %" SCNu64 " in (%" SCNu64
			   " bytes), %" SCNu64 " credits exhausted, %" SCNu64
			   " credit writes; rings: %" SCNu64 " held (%" SCNu64
			   " at most), %" SCNu64 " promotions, %" SCNu64
			   " switched, %" SCNu64 " refused at "
			   "RDMACH_IB_RINGS_MAX=%*u; pool %u of %u x %u in %u "
			   "pieces, %u of %u send buffers in %u", &st->out,
			   &st->out_b, &st->in, &st->in_b, &st->no_credit,
			   &st->grants, &st->rings, &st->rings_max,
			   &st->promotions, &st->switches, &st->at_cap,
			   &st->bufs, &st->bufs_max, &st->buf_size,
			   &st->pieces, &st->txbufs, &st->txmax, &st->txp);
	if (p) {
		char *eol = strchr(p, '\n');

		if (eol)
			*eol = '\0';
		st->rx_stuck = !!strstr(p, "the pool could not grow");
		st->tx_stuck = !!strstr(p, "the send buffers could not grow");
	}
	free(buf);
	if (n != 18)
		return tst_fail(t, "no ib shared-path counters (%d fields)", n);
	tst_log(t, "shared: out %" PRIu64 " in %" PRIu64 " no_credit %"
		PRIu64 " rings %" PRIu64 " promotions %" PRIu64 " switches %"
		PRIu64 " at_cap %" PRIu64 "; pool %u/%u (%u pieces), send %u/%u",
		st->out, st->in, st->no_credit, st->rings, st->promotions,
		st->switches, st->at_cap, st->bufs, st->bufs_max, st->pieces,
		st->txbufs, st->txmax);
	return 0;
}

/* rxe's RNR counters, summed over the devices: 0 unless a SEND met an
 * empty receive queue.  -1: the kernel shows none. */
static int64_t srq_rnr(void)
{
	static const char *const pat[] = {
		"/sys/class/infiniband/*/ports/*/hw_counters/rcvd_rnr_err",
		"/sys/class/infiniband/*/ports/*/hw_counters/send_rnr_err",
	};
	int64_t sum = -1;
	unsigned int i;
	size_t j;

	for (i = 0; i < 2; i++) {
		glob_t g;

		if (glob(pat[i], 0, NULL, &g))
			continue;
		for (j = 0; j < g.gl_pathc; j++) {
			FILE *f = fopen(g.gl_pathv[j], "r");
			long long v = 0;

			if (f && fscanf(f, "%lld", &v) == 1)
				sum = (sum < 0 ? 0 : sum) + v;
			if (f)
				fclose(f);
		}
		globfree(&g);
	}
	return sum;
}

static int srq_check_rnr(struct tst *t)
{
	int64_t rnr = srq_rnr();

	if (rnr > 0)
		return tst_fail(t, "the adapter counted %" PRId64 " RNR "
				"events", rnr);
	return 0;
}

/* RDMACH_TRANSPORT=ib, or the case is skipped (TST_SKIP). */
static int srq_ib_only(struct tst *t)
{
	const char *tr = getenv("RDMACH_TRANSPORT");

	return tr && !strcmp(tr, "ib") ? 0 :
	       tst_skip(t, "RDMACH_TRANSPORT=ib only");
}

/* Knobs (name, value, ..., NULL), demand connections, context up. */
static int srq_connect(struct tst *t, const char *const *env)
{
	int err = srq_ib_only(t);

	if (err)
		return err;
	setenv("RDMACH_CONNECT", "demand", 1);
	for (; env[0]; env += 2)
		setenv(env[0], env[1], 1);
	err = tst_connect(t, &t->ctx);
	if (err)
		return tst_fail(t, "connect: %s", rdmach_strerror(err));
	return 0;
}

/* Streams to and from every other rank of the group, all at once; salt
 * makes a round's bytes differ from another's. */
static int srq_all_pairs(struct tst *t, uint64_t salt, uint64_t total,
			 const struct tst_shape *put_sh,
			 const struct tst_shape *get_sh)
{
	struct tst_stream s[2 * 8];
	int n = 0, p, ret;

	for (p = 0; p < t->np && n + 2 <= 16; p++) {
		rdmach_conn_t *c;

		if (p == t->rank)
			continue;
		c = tst_conn(t, p);
		if (!c)
			return -1;
		tst_stream_init(&s[n++], c, p, 1,
				tst_stream_seed(t, t->rank, p) ^ salt, total,
				put_sh);
		tst_stream_init(&s[n++], c, p, 0,
				tst_stream_seed(t, p, t->rank) ^ salt, total,
				get_sh);
	}
	ret = tst_run(t, s, n);
	while (n--)
		tst_stream_free(&s[n]);
	return ret;
}

/* A pool of 4 buffers of 256 bytes, 2 credits a peer: every put runs
 * out of credits many times; nothing may be lost, duplicated or RNR'd. */
static int srq_tiny_pool(struct tst *t)
{
	static const char *const env[] = {
		"RDMACH_IB_SRQ_BUFS", "4", "RDMACH_IB_SRQ_BUF_SIZE", "256",
		"RDMACH_IB_SRQ_CREDITS", "2", "RDMACH_IB_RING_AFTER",
		"1000000000", NULL };
	struct tst_shape sh = { .min_call = 1, .max_call = 3000,
				.min_pieces = 1, .max_pieces = 4 };
	struct srq_st st;
	int ret = srq_connect(t, env);

	if (ret)
		return ret;
	ret = srq_all_pairs(t, 0, tst_scaled(4u << 20, 256 << 10), &sh, &sh);
	if (ret)
		return ret;
	TST_CHECK0(t, srq_stats(t, &st));
	TST_CHECK(t, st.out > 0 && st.in > 0 && st.no_credit > 0 &&
		  st.rings == 0 && st.promotions == 0, "shared path: out %"
		  PRIu64 " in %" PRIu64 " credits exhausted %" PRIu64
		  " rings %" PRIu64, st.out, st.in, st.no_credit, st.rings);
	return srq_check_rnr(t);
}

/* Both ways at once with small messages: the ring comes after 50, in the
 * middle of both streams; the bytes before, during and after the switch
 * arrive in order. */
static int srq_promote_duplex(struct tst *t)
{
	static const char *const env[] = {
		"RDMACH_IB_RING_AFTER", "50", "RDMACH_IB_SRQ_CREDITS", "4",
		NULL };
	struct tst_shape sh = { .min_call = 1, .max_call = 700,
				.min_pieces = 1, .max_pieces = 3 };
	struct srq_st st;
	int ret = srq_connect(t, env);

	if (ret)
		return ret;
	ret = srq_all_pairs(t, 0, tst_scaled(2u << 20, 256 << 10), &sh, &sh);
	if (ret)
		return ret;
	TST_CHECK0(t, srq_stats(t, &st));
	TST_CHECK(t, st.promotions == 1 && st.switches == 1 && st.rings == 1 &&
		  st.in >= 50, "promotions %" PRIu64 " switches %" PRIu64
		  " rings %" PRIu64 " shared in %" PRIu64, st.promotions,
		  st.switches, st.rings, st.in);
	return srq_check_rnr(t);
}

/* 8 ranks, every pair busy both ways, at most 2 rings per process: two
 * peers promoted, the other five stay on the shared path (and keep
 * working), byte-checked. */
static int srq_cap_churn(struct tst *t)
{
	static const char *const env[] = {
		"RDMACH_IB_RING_AFTER", "20", "RDMACH_IB_RINGS_MAX", "2",
		"RDMACH_IB_SRQ_BUFS", "64", NULL };
	struct tst_shape sh = { .min_call = 1, .max_call = 2000,
				.min_pieces = 1, .max_pieces = 2 };
	struct srq_st st;
	int ret = srq_connect(t, env);

	if (ret)
		return ret;
	ret = srq_all_pairs(t, 0, tst_scaled(512u << 10, 64 << 10), &sh, &sh);
	if (ret)
		return ret;
	TST_CHECK0(t, srq_stats(t, &st));
	TST_CHECK(t, st.rings == 2 && st.rings_max == 2 && st.at_cap == 5 &&
		  st.switches == 2, "rings %" PRIu64 " (most %" PRIu64
		  ") refused %" PRIu64 " switches %" PRIu64, st.rings,
		  st.rings_max, st.at_cap, st.switches);
	return srq_check_rnr(t);
}

/* Large puts from a cold peer, one protocol forced per case (arg): their
 * control messages go on the shared path, the data by RDMA read or
 * through the landing buffers; no ring is made. */
static int srq_large(struct tst *t)
{
	const char *large = t->c->arg;
	const char *const env[] = {
		"RDMACH_LARGE", large, "RDMACH_SPIPE_THRESHOLD", "16K",
		"RDMACH_ZCOPY_THRESHOLD", "16K", "RDMACH_IB_RING_AFTER",
		"1000000000", NULL };
	size_t sizes[] = { 300, 64 << 10, 17, 300 << 10, 1 << 20, 5 };
	size_t gets[] = { 100000, 7, 64 << 10, 1 << 20 };
	struct tst_shape put_sh = { .sizes = sizes, .nsizes = 6 };
	struct tst_shape get_sh = { .sizes = gets, .nsizes = 4 };
	rdmach_stats_t cs;
	struct srq_st st;
	int ret = srq_connect(t, env);

	if (ret)
		return ret;
	ret = srq_all_pairs(t, 0, tst_scaled(16u << 20, 4u << 20), &put_sh,
			    &get_sh);
	if (ret)
		return ret;
	TST_CHECK0(t, srq_stats(t, &st));
	TST_CHECK0(t, rdmach_ctx_stats(t->ctx, &cs));
	TST_CHECK(t, st.rings == 0 && st.out > 0, "rings %" PRIu64
		  " shared out %" PRIu64, st.rings, st.out);
	if (!strcmp(large, "zcopy"))
		TST_CHECK(t, cs.zcopy_msgs > 0, "no zero-copy message");
	else
		TST_CHECK(t, cs.spipe_msgs > 0, "no superpipeline message");
	return srq_check_rnr(t);
}

/* Rank 0's wait for rank 1's small message (SRQ_SMALL bytes) in place:
 * peek's length (bytes from *off); a get of one byte (into in, *off
 * moved) whenever peek says -ENOMSG, as a reader must; 0 on a stall. */
#define SRQ_SMALL 100
static ssize_t srq_peek_wait(struct tst *t, rdmach_conn_t *c, uint8_t *in,
			     size_t *off, const void **p)
{
	uint64_t t0 = rdmach_now_ns();
	ssize_t n = 0;

	while (*off < SRQ_SMALL && rdmach_now_ns() - t0 < tst_stall_ns()) {
		struct iovec one = { in + *off, 1 };

		n = rdmach_peek(c, p);
		if (n == -ENOMSG && (n = rdmach_get(c, &one, 1)) > 0) {
			*off += (size_t)n;
			continue;
		}
		if (n)
			return n;
		rdmach_progress(t->ctx);
	}
	return 0;
}

/* Rank 0 reads rank 1's small message in place on the cold path and,
 * between rdmach_peek and rdmach_consume, puts a large message back (as
 * MPI's handler of a rendezvous request does): its first superpipeline
 * chunks wait for rank 1's landing area, which rank 1 only makes when it
 * reads; the consume must still take what peek showed. */
static int srq_peek_put_consume(struct tst *t)
{
	static const char *const env[] = {
		"RDMACH_LARGE", "superpipeline", "RDMACH_SPIPE_THRESHOLD", "16K",
		"RDMACH_IB_RING_AFTER", "1000000000", NULL };
	const size_t large = 1u << 20;
	uint64_t seed = tst_stream_seed(t, 1, 0);
	uint64_t lseed = tst_stream_seed(t, 0, 1);
	uint8_t in[SRQ_SMALL];
	struct iovec iov;
	const void *p = NULL;
	rdmach_conn_t *c;
	size_t off = 0;
	uint8_t *buf;
	ssize_t n, w;
	int iovcnt = 1, ret = srq_connect(t, env);

	if (ret)
		return ret;
	c = tst_conn(t, 1 - t->rank);
	if (!c)
		return -1;
	if (t->rank == 1) {
		TST_CHECK0(t, tst_put_all(t, c, 0, seed, SRQ_SMALL));
		TST_CHECK0(t, tst_barrier(t));
		return tst_get_all(t, c, 0, lseed, large);
	}
	n = srq_peek_wait(t, c, in, &off, &p);
	TST_CHECK(t, n > 0 && (size_t)n <= SRQ_SMALL - off, "peek after %zu "
		  "bytes: %zd (%s)", off, n, tst_errname(n));
	memcpy(in + off, p, (size_t)n);
	buf = malloc(large);
	if (!buf)
		return tst_fail(t, "out of memory");
	tst_pat_fill(buf, large, lseed, 0);
	iov.iov_base = buf;
	iov.iov_len = large;
	w = rdmach_put(c, &iov, 1);
	ret = rdmach_consume(c, (size_t)n);
	if (w <= 0 || ret) {
		free(buf);
		return tst_fail(t, "put %zd (%s), then consume of the %zd "
				"peeked bytes: %s", w, tst_errname(w), n,
				tst_errname(ret));
	}
	off += (size_t)n;
	ret = tst_barrier(t);
	tst_iov_advance(&iov, &iovcnt, (size_t)w);
	if (!ret && iovcnt)
		ret = tst_xfer_iov(t, c, 1, &iov, 1);
	free(buf);
	if (!ret && off < SRQ_SMALL) {	/* peek showed part of it */
		iov.iov_base = in + off;
		iov.iov_len = SRQ_SMALL - off;
		ret = tst_xfer_iov(t, c, 0, &iov, 1);
	}
	if (ret)
		return ret;
	TST_CHECK(t, tst_pat_check(in, SRQ_SMALL, seed, 0) == SRQ_SMALL,
		  "the small message read in place differs from the one sent");
	return 0;
}

/* The kernel's count of this process's pinned memory (VmPin, bytes),
 * or -1 when it shows none. */
static int64_t srq_vmpin(void)
{
	long kb = bench_proc_kb("status", "VmPin");

	return kb < 0 ? -1 : (int64_t)kb * 1024;
}

/* Small messages to and from rank ^ 1; or (all) every other rank, in
 * puts of up to 15 messages (more than the first piece of send
 * buffers). */
static int srq_pool_phase(struct tst *t, int all)
{
	struct tst_shape sh = { .min_call = 1, .max_call = 4000,
				.min_pieces = 1, .max_pieces = 2 };
	struct tst_shape big = { .min_call = 1, .max_call = 120000,
				 .min_pieces = 1, .max_pieces = 2 };
	struct tst_stream s[2];
	rdmach_conn_t *c;
	int ret, peer = t->rank ^ 1;

	if (all)
		return srq_all_pairs(t, 0, 256 << 10, &big, &sh);
	c = tst_conn(t, peer);
	if (!c)
		return -1;
	tst_stream_init(&s[0], c, peer, 1, tst_stream_seed(t, t->rank, peer),
			64 << 10, &sh);
	tst_stream_init(&s[1], c, peer, 0, tst_stream_seed(t, peer, t->rank),
			64 << 10, &sh);
	ret = tst_run(t, s, 2);
	tst_stream_free(&s[0]);
	tst_stream_free(&s[1]);
	return ret;
}

/* VmPin grew from a to b by the send and receive buffers registered
 * between st_a and st_b, and a page per new peer (its ctrl words: a
 * registration of their own).  Skipped without VmPin. */
static int srq_pin_check(struct tst *t, int64_t a, int64_t b,
			 const struct srq_st *st_a, const struct srq_st *st_b,
			 int peers)
{
	int64_t want = (int64_t)(st_b->bufs + st_b->txbufs - st_a->bufs -
				 st_a->txbufs) * st_b->buf_size +
		       peers * sysconf(_SC_PAGESIZE);

	if (a < 0 || b < 0)
		return 0;
	TST_CHECK(t, b - a == want,
		  "VmPin grew by %" PRId64 " bytes for %d peers, the pool "
		  "and their ctrl pages by %" PRId64, b - a, peers, want);
	return 0;
}

/* The registered pool follows the cold peers: one share (8 ranks: 16
 * buffers, RDMACH_IB_SRQ_CREDITS) at start-up and none more before a
 * peer connects, a share more per peer (1 peer: 2 shares; 7: 8 of the
 * 256), each a piece of its own; send buffers 8 at start-up, more in
 * pieces of 8 when puts need them; the kernel's VmPin grows by the
 * pieces registered and a ctrl page per peer, no more; no RNR. */
static int srq_pool_grows(struct tst *t)
{
	static const char *const env[] = {
		"RDMACH_IB_RING_AFTER", "1000000000", "RDMACH_LARGE",
		"pipeline", NULL };
	struct srq_st st0, st1, st7;
	int64_t pin0, pin1, pin7;
	int ret = srq_connect(t, env);

	if (ret)
		return ret;
	TST_CHECK0(t, srq_stats(t, &st0));
	pin0 = srq_vmpin();
	TST_CHECK(t, st0.bufs == 16 && st0.pieces == 1 &&
		  st0.bufs_max == 256 && st0.txbufs == 8 && st0.txp == 1,
		  "at start-up: pool %u of %u in %u pieces, %u send buffers",
		  st0.bufs, st0.bufs_max, st0.pieces, st0.txbufs);
	TST_CHECK0(t, tst_barrier(t));	/* before any peer comes */
	TST_CHECK0(t, srq_pool_phase(t, 0));
	TST_CHECK0(t, srq_stats(t, &st1));
	pin1 = srq_vmpin();
	TST_CHECK(t, st1.bufs == 32 && st1.pieces == 2, "after one peer: "
		  "pool %u in %u pieces", st1.bufs, st1.pieces);
	TST_CHECK0(t, tst_barrier(t));
	TST_CHECK0(t, srq_pool_phase(t, 1));
	TST_CHECK0(t, srq_stats(t, &st7));
	pin7 = srq_vmpin();
	TST_CHECK(t, st7.bufs == 128 && st7.pieces == 8 && st7.rings == 0,
		  "after seven peers: pool %u in %u pieces, %" PRIu64
		  " rings", st7.bufs, st7.pieces, st7.rings);
	TST_CHECK(t, st7.txbufs > 8 && st7.txbufs == 8 * st7.txp,
		  "send buffers %u in %u pieces after puts of 15 messages",
		  st7.txbufs, st7.txp);
	tst_log(t, "VmPin %" PRId64 " -> %" PRId64 " -> %" PRId64 " bytes",
		pin0, pin1, pin7);
	TST_CHECK0(t, srq_pin_check(t, pin0, pin1, &st0, &st1, 1));
	TST_CHECK0(t, srq_pin_check(t, pin1, pin7, &st1, &st7, 6));
	return srq_check_rnr(t);
}

/* This process may pin bytes at most (RLIM_INFINITY: any), as a user
 * whose `ulimit -l` is that: RLIMIT_MEMLOCK.  0 or -errno. */
static int srq_memlock(uint64_t bytes)
{
	struct rlimit rl = { bytes, bytes };

	return setrlimit(RLIMIT_MEMLOCK, &rl) ? -errno : 0;
}

/* The limit binds this process: CAP_IPC_LOCK dropped (root ignores
 * RLIMIT_MEMLOCK with it).  Before init: uverbs refuses the commands
 * it takes by write() from credentials other than the opener's (EACCES
 * on every post of rxe's), so they must not change once the device is
 * open.  0 or -errno. */
static int srq_no_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	uint32_t bit = 1u << (CAP_IPC_LOCK % 32);

	if (syscall(SYS_capget, &h, d))
		return -errno;
	d[CAP_IPC_LOCK / 32].effective &= ~bit;
	d[CAP_IPC_LOCK / 32].permitted &= ~bit;
	d[CAP_IPC_LOCK / 32].inheritable &= ~bit;
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

/* srq_connect with rank 0 rid of CAP_IPC_LOCK first (and without a
 * memlock limit until start-up is over): the caller sets the limit. */
static int srq_connect_unlocked(struct tst *t, const char *const *env)
{
	int ret = srq_ib_only(t);

	if (ret)
		return ret;
	if (t->rank == 0)
		ret = srq_memlock(RLIM_INFINITY) ?: srq_no_ipc_lock();
	if (ret)
		return tst_fail(t, "dropping CAP_IPC_LOCK: %s",
				strerror(-ret));
	return srq_connect(t, env);
}

/* How often needle occurs in hay. */
static int srq_count(const char *hay, const char *needle)
{
	int n = 0;

	for (; (hay = strstr(hay, needle)); hay++)
		n++;
	return n;
}

/* `ulimit -l` too small for even the pool's first piece (16 x 8 KiB): the
 * context does not come up; init says so (device, bytes, ulimit -l) and
 * returns -ENOMEM, on every rank, without waiting for anything. */
static int srq_reg_fails_at_start(struct tst *t)
{
	struct tst_capture cap;
	char out[4096];
	uint64_t t0;
	int err = srq_ib_only(t);

	if (err)
		return err;
	setenv("RDMACH_CONNECT", "demand", 1);
	TST_CHECK0(t, srq_memlock(64 << 10));
	TST_CHECK0(t, srq_no_ipc_lock());
	TST_CHECK0(t, tst_capture_begin(&cap, 0));
	t0 = rdmach_now_ns();
	err = tst_connect(t, &t->ctx);
	t0 = rdmach_now_ns() - t0;
	tst_capture_end(t, &cap, out, sizeof(out));
	tst_log(t, "init with 64 KiB of memlock: %s after %" PRIu64 " ms",
		tst_errname(err), t0 / 1000000);
	TST_CHECK(t, err == -ENOMEM, "init and connect with 64 KiB of memlock "
		  "returned %d (%s), not -ENOMEM", err, tst_errname(err));
	TST_CHECK(t, strstr(out, "first 16 buffers (131072 bytes) on ") &&
		  strstr(out, "ulimit -l") && strstr(out, strerror(ENOMEM)),
		  "no message naming the bytes and ulimit -l: %s", out);
	return 0;
}

/* 4 ranks; rank 0 may pin what it has after start-up, one cold peer's
 * share (16 x 8 KiB) and ctrl page, and a few ctrl pages more: its pool
 * grows for rank 1, then cannot for ranks 2 and 3, nor can its send
 * buffers (8 x 8 KiB a piece).  Each is said once (device, bytes, rank,
 * ulimit -l); the pool stays at 2 shares and goes by asking, the send
 * buffers at 8; every stream both ways between all pairs completes
 * byte-exact, without an RNR, within the stall limit. */
static int srq_reg_fails_grow(struct tst *t)
{
	static const char *const env[] = {
		"RDMACH_IB_RING_AFTER", "1000000000", "RDMACH_LARGE",
		"pipeline", NULL };
	struct srq_st st;
	struct tst_capture cap;
	char out[8192];
	int64_t pin0, pin1, lim = 0;
	int ret = 0;

	ret = srq_connect_unlocked(t, env);
	if (ret)
		return ret;
	pin0 = srq_vmpin();
	if (t->rank == 0) {
		if (pin0 < 0)
			return tst_skip(t, "no VmPin to size the limit by");
		lim = pin0 + (16 << 13) + 4096 + 4 * 4096;
		TST_CHECK0(t, srq_memlock((uint64_t)lim));
		TST_CHECK0(t, tst_capture_begin(&cap, 0));
	}
	TST_CHECK0(t, tst_barrier(t));
	ret = srq_pool_phase(t, 0);
	if (!ret)
		ret = tst_barrier(t);
	if (!ret)
		ret = srq_pool_phase(t, 1);
	if (t->rank)
		return ret;
	tst_capture_end(t, &cap, out, sizeof(out));
	if (ret)
		return ret;
	pin1 = srq_vmpin();
	TST_CHECK0(t, srq_stats(t, &st));
	tst_log(t, "memlock %" PRId64 ": VmPin %" PRId64 " -> %" PRId64,
		lim, pin0, pin1);
	TST_CHECK(t, st.bufs == 32 && st.pieces == 2 && st.txbufs == 8 &&
		  st.txp == 1 && st.rings == 0, "pool %u in %u pieces, %u "
		  "send buffers in %u (the limit not enforced?)", st.bufs,
		  st.pieces, st.txbufs, st.txp);
	TST_CHECK(t, st.rx_stuck && st.tx_stuck, "RDMACH_STATS does not say "
		  "that the pool (%d) and the send buffers (%d) could not grow",
		  st.rx_stuck, st.tx_stuck);
	TST_CHECK(t, pin1 <= lim, "VmPin %" PRId64 " above the limit %" PRId64,
		  pin1, lim);
	TST_CHECK(t, srq_count(out, "more shared receive buffers (131072 "
			       "bytes) on ") == 1 &&
		  (strstr(out, "for rank 2 failed: ") ||
		   strstr(out, "for rank 3 failed: ")) &&
		  srq_count(out, "more shared-path send buffers (65536 "
			    "bytes) on ") == 1 &&
		  srq_count(out, "(ulimit -l?)") == 2 &&
		  srq_count(out, strerror(ENOMEM)) == 2,
		  "not one message each naming the bytes, the rank, the error "
		  "and ulimit -l: %s", out);
	return srq_check_rnr(t);
}

/* 2 ranks; rank 0 may pin nothing beyond what start-up left: not even
 * the ctrl words of a connection.  Rank 1's first put asks for one; rank
 * 0 cannot make its end (its message names the bytes, the rank, the
 * device, ulimit -l; the connection -ENOMEM) and says so to rank 1, whose
 * put fails with -ECONNRESET at once, not at RDMACH_CONNECT_TIMEOUT_MS. */
static int srq_reg_fails_endpoint(struct tst *t)
{
	uint8_t b[100] = { 0 };
	struct iovec iov = { b, sizeof(b) };
	struct tst_capture cap;
	char out[4096];
	const char *why;
	rdmach_conn_t *c;
	uint64_t t0;
	ssize_t n;
	int ret = 0;

	ret = srq_connect_unlocked(t, (const char *const[]){ NULL });
	if (ret)
		return ret;
	c = tst_conn(t, 1 - t->rank);
	if (!c)
		return -1;
	if (t->rank == 0) {
		TST_CHECK0(t, srq_memlock((uint64_t)srq_vmpin()));
		TST_CHECK0(t, tst_capture_begin(&cap, 0));
	}
	TST_CHECK0(t, tst_barrier(t));
	t0 = rdmach_now_ns();
	do	/* rank 0 only answers: its get polls */
		n = t->rank ? rdmach_put(c, &iov, 1) : rdmach_get(c, &iov, 1);
	while (n == 0 && rdmach_now_ns() - t0 < 60000000000ull);
	t0 = rdmach_now_ns() - t0;
	why = rdmach_conn_error(c);
	if (t->rank == 0)
		tst_capture_end(t, &cap, out, sizeof(out));
	tst_log(t, "%s after %.1f ms: %s", tst_errname(n), (double)t0 / 1e6,
		why ? why : "");
	if (t->rank)
		TST_CHECK(t, n == -ECONNRESET && t0 < 5000000000ull && why &&
			  strstr(why, "rank 0 on host ") &&
			  strstr(why, "could not make its end"), "put to "
			  "rank 0: %zd (%s) after %.1f s: %s", n,
			  tst_errname(n), (double)t0 / 1e9, why ? why : "");
	else
		TST_CHECK(t, n == -ENOMEM && strstr(out, "bytes for rank 1 on ")
			  && strstr(out, "(ulimit -l?)") &&
			  strstr(out, strerror(ENOMEM)), "get from rank 1: %zd "
			  "(%s); logged: %s", n, tst_errname(n), out);
	return srq_check_rnr(t);
}

/* Whether what the process counts in flight is its live ib connections'
 * own: a failed connection's signalled WRs and its writes (against the
 * CQ, RDMACH_IB_CQ_WRS) leave the counts as its QP completes them as
 * errors.  1, or 0 with why. */
static int srq_inflight_ok(struct tst *t, char *why, size_t len)
{
	const struct ib_tl *tl = NULL;
	uint64_t sig = 0, wr = 0;
	int p;

	for (p = 0; p < t->size; p++) {
		rdmach_conn_t *c = tst_conn(t, p);
		const char *tr = c ? rdmach_conn_transport(c) : NULL;
		const struct ib_conn *ic;

		if (!tr || strcmp(tr, "ib") || !c->priv)
			continue;
		ic = c->priv;
		tl = ic->tl;
		if (!ic->broken) {
			sig += ic->sig_head - ic->sig_tail;
			wr += ib_ep_wr_out(ic);
		} else if (ic->sig_head != ic->sig_tail || ib_ep_wr_out(ic)) {
			snprintf(why, len, "the failed connection to rank %d "
				 "still counts %" PRIu64 " signalled WRs and %u "
				 "writes", p, ic->sig_head - ic->sig_tail,
				 ib_ep_wr_out(ic));
			return 0;
		}
	}
	if (tl && (tl->sig_inflight != sig || tl->wr_out != wr)) {
		snprintf(why, len, "the process counts %u signalled WRs and %u "
			 "writes, the live connections %" PRIu64 " and %"
			 PRIu64, tl->sig_inflight, tl->wr_out, sig, wr);
		return 0;
	}
	return 1;
}

/* srq_inflight_ok, once the failed QPs' completions have all come (with
 * progress, for up to tst_stall_ns()). */
static int srq_inflight_settles(struct tst *t)
{
	uint64_t t0 = rdmach_now_ns();
	char why[192] = "";

	while (!srq_inflight_ok(t, why, sizeof(why))) {
		if (rdmach_now_ns() - t0 > tst_stall_ns())
			return tst_fail(t, "in flight: %s", why);
		rdmach_progress(t->ctx);
	}
	return 0;
}

/* Rank 0's stream of total bytes to rank 1 (is_put: rank 0's side), in
 * one buffer: the progress of tst_xfer_iov reports the dead ranks'
 * failures and leaves them be; the bytes got are checked. */
static int srq_stream_past_dead(struct tst *t, rdmach_conn_t *c,
				int is_put, uint64_t total)
{
	uint64_t seed = tst_stream_seed(t, 0, 1);
	struct iovec iov;
	uint8_t *big = malloc(total);
	size_t bad;
	int ret;

	if (!big)
		return tst_fail(t, "out of memory");
	if (is_put)
		tst_pat_fill(big, total, seed, 0);
	iov.iov_base = big;
	iov.iov_len = total;
	ret = tst_xfer_iov(t, c, is_put, &iov, 1);
	bad = ret || is_put ? total : tst_pat_check(big, total, seed, 0);
	free(big);
	if (!ret && bad < total)
		return tst_fail(t, "byte %zu of rank 0's stream is wrong", bad);
	return ret;
}

/* Puts to the dead rank peer, with progress, until one fails: it must
 * say -ECONNRESET. */
static int srq_dead_says_reset(struct tst *t, rdmach_conn_t *c, int peer)
{
	uint8_t msg[16] = { 0 };
	struct iovec iov = { msg, sizeof(msg) };
	uint64_t t0 = rdmach_now_ns();
	ssize_t n;

	while ((n = rdmach_put(c, &iov, 1)) >= 0 &&
	       rdmach_now_ns() - t0 < tst_stall_ns())
		rdmach_progress(t->ctx);
	TST_CHECK(t, n == -ECONNRESET, "put to the dead rank %d: %zd (%s)",
		  peer, n, tst_errname(n));
	return 0;
}

/* 3 ranks; rank 0's send buffers cannot grow past the first 8 (its
 * `ulimit -l` what start-up left).  Rank 2 is killed; rank 0's puts to it
 * then take all 8 (SENDs nobody acknowledges) until its QP fails, and
 * must give them back then: else rank 0 could never again send rank 1 a
 * message that does not go inline.  The stream to rank 1 completes
 * byte-exact; rank 2's connection says -ECONNRESET. */
static int srq_tx_dead_peer(struct tst *t)
{
	static const char *const env[] = {
		"RDMACH_IB_RING_AFTER", "1000000000", "RDMACH_LARGE",
		"pipeline", NULL };
	uint64_t total = tst_scaled(1u << 20, 256 << 10);
	uint8_t msg[4000] = { 0 };
	struct iovec iov = { msg, sizeof(msg) };
	rdmach_conn_t *c1, *c2;
	struct srq_st st;
	uint64_t t0;
	ssize_t n = 0;
	int ret = 0, held = 0;

	ret = srq_connect_unlocked(t, env);
	if (ret)
		return ret;
	c1 = tst_conn(t, t->rank ? 0 : 1);
	c2 = tst_conn(t, t->rank ? 0 : 2);
	if (!c1 || !c2)
		return -1;
	if (t->rank) {		/* connected, with a message from rank 0 */
		TST_CHECK0(t, tst_get_all(t, c1, 0, tst_stream_seed(t, 0,
							t->rank), 100));
		TST_CHECK0(t, tst_barrier(t));
		if (t->rank == 2) {
			t->shared[0] = 1;
			raise(SIGKILL);
		}
		return tst_get_all(t, c1, 0, tst_stream_seed(t, 0, 1), total);
	}
	TST_CHECK0(t, tst_put_all(t, c1, 1, tst_stream_seed(t, 0, 1), 100));
	TST_CHECK0(t, tst_put_all(t, c2, 2, tst_stream_seed(t, 0, 2), 100));
	TST_CHECK0(t, srq_memlock((uint64_t)srq_vmpin()));
	TST_CHECK0(t, tst_barrier(t));
	for (t0 = rdmach_now_ns(); !__atomic_load_n(&t->shared[0],
						      __ATOMIC_SEQ_CST);)
		TST_CHECK(t, rdmach_now_ns() - t0 < 10000000000ull, "rank 2 "
			  "did not die");
	usleep(100000);
	rdmach_progress(t->ctx);	/* the 100-byte SENDs' completions */
	/* each put a SEND from a send buffer of its own, within credits */
	while (held < 64 && (n = rdmach_put(c2, &iov, 1)) == sizeof(msg))
		held++;
	TST_CHECK(t, held == 8 && n == 0, "puts to the dead rank 2 took %d "
		  "send buffers, then %zd (%s), not the 8 there are", held, n,
		  tst_errname(n));
	/* in messages of a buffer each (8 KiB) */
	t0 = rdmach_now_ns();
	TST_CHECK0(t, srq_stream_past_dead(t, c1, 1, total));
	tst_log(t, "the stream to rank 1 took %.1f ms",
		(double)(rdmach_now_ns() - t0) / 1e6);
	TST_CHECK0(t, srq_dead_says_reset(t, c2, 2));
	TST_CHECK0(t, srq_inflight_settles(t));
	TST_CHECK0(t, srq_stats(t, &st));
	TST_CHECK(t, st.txbufs == 8, "%u send buffers: the limit did not "
		  "hold them at 8", st.txbufs);
	return srq_check_rnr(t);
}

/* The "# ib progress" line of rdmach_print_stats: writes in flight and
 * the error completions of failed connections' writes. */
static int srq_flushed(struct tst *t, unsigned int *out, uint64_t *flushed)
{
	char *buf = tst_stats_text(t->ctx), *p;
	int n = 0;

	p = buf ? strstr(buf, "# ib progress: ") : NULL;
	if (p)
		n = sscanf(p, "# ib progress: %*u connections up and polled, "
			   "%*u being made; %u writes in flight (%*u at most), "
			   "%" SCNu64 " flushed", out, flushed);
	free(buf);
	return n == 2 ? 0 : tst_fail(t, "no ib progress counters (%d)", n);
}

/* Whether process pid is gone: reaped, or a zombie (its QPs destroyed). */
static int srq_gone(pid_t pid)
{
	char path[64], stat[256], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 1;
	n = fread(stat, 1, sizeof(stat) - 1, f);
	fclose(f);
	stat[n] = '\0';
	p = strrchr(stat, ')');
	return p && (p[2] == 'Z' || p[2] == 'X');
}

/* The knobs env, every pair connected; rank 0 sends every other rank 100
 * bytes; ranks 2 and up then die (SIGKILL), rank 1 takes total bytes of
 * rank 0's stream and is *done (its result returned).  Rank 0 returns
 * once every victim's process is gone: nothing of it acknowledges a
 * write after that. */
static int srq_victims(struct tst *t, const char *const *env, uint64_t total,
		       int *done)
{
	uint64_t t0;
	int p, ret;

	*done = t->rank != 0;
	ret = srq_connect(t, env);
	if (ret)
		return ret;
	for (p = 1; t->rank == 0 && p < t->size; p++)
		TST_CHECK0(t, tst_put_all(t, tst_conn(t, p), p,
					  tst_stream_seed(t, 0, p), 100));
	if (t->rank) {
		TST_CHECK0(t, tst_get_all(t, tst_conn(t, 0), 0,
					  tst_stream_seed(t, 0, t->rank),
					  100));
		TST_CHECK0(t, tst_barrier(t));
		if (t->rank >= 2) {
			t->shared[8 + t->rank] = (uint64_t)getpid();
			__atomic_add_fetch(&t->shared[0], 1, __ATOMIC_SEQ_CST);
			raise(SIGKILL);
		}
		return srq_stream_past_dead(t, tst_conn(t, 0), 0, total);
	}
	TST_CHECK0(t, tst_barrier(t));
	for (t0 = rdmach_now_ns(), p = 2; p < t->size;) {
		TST_CHECK(t, rdmach_now_ns() - t0 < 10000000000ull, "ranks "
			  "2-%d did not die", t->size - 1);
		if (__atomic_load_n(&t->shared[0], __ATOMIC_SEQ_CST) >=
		    (uint64_t)(t->size - 2) &&
		    srq_gone((pid_t)t->shared[8 + p]))
			p++;
		else
			usleep(1000);
	}
	return 0;
}

/*
 * 5 ranks, every pair connected (RDMACH_CONNECT=all).  Ranks 2-4 are
 * killed; rank 0 then fills their send queues (1024 each) with 16-byte
 * puts nobody acknowledges, up to RDMACH_IB_CQ_WRS=2048 writes in flight:
 * five times what the CQ would hold if they were not counted (its
 * connection manager's entries and the rest, 432).  Each QP fails at its
 * retry limit and completes every write not complete as an error, the
 * three at once: the CQ must hold them all (an overrun loses completions
 * and fails every connection, rank 1's too).  Rank 1's stream then comes
 * byte-exact, each dead rank's connection says -ECONNRESET, each write to
 * a dead rank came back as an error, and the counts in flight come back
 * to the live connection's own.
 */
static int ib_cq_dead_peers(struct tst *t)
{
	static const char *const env[] = {
		"RDMACH_CONNECT", "all", "RDMACH_IB_CQ_WRS", "2048",
		"RDMACH_IB_SQ_DEPTH", "1024", "RDMACH_IB_RETRY_CNT", "1",
		"RDMACH_LARGE", "pipeline", NULL };
	uint64_t total = tst_scaled(1u << 20, 256 << 10), flushed;
	uint8_t msg[16] = { 0 };
	struct iovec iov = { msg, sizeof(msg) };
	unsigned int out, puts = 0;
	ssize_t n;
	int p, ret, done;

	ret = srq_victims(t, env, total, &done);
	if (ret || done)
		return ret;
	for (p = 2; p < t->size; p++) {
		rdmach_conn_t *c = tst_conn(t, p);
		unsigned int k;

		for (k = 0; k < 4096 && (n = rdmach_put(c, &iov, 1)) ==
		     (ssize_t)sizeof(msg); k++)
			puts++;
		tst_log(t, "rank %d: %u puts, then %zd", p, k, n);
	}
	TST_CHECK0(t, srq_flushed(t, &out, &flushed));
	TST_CHECK(t, puts > 2000 && out <= 2048, "%u puts to the dead ranks, "
		  "%u writes in flight: the send queues did not fill, or the "
		  "count went past RDMACH_IB_CQ_WRS", puts, out);
	TST_CHECK0(t, srq_stream_past_dead(t, tst_conn(t, 1), 1, total));
	for (p = 2; p < t->size; p++)
		TST_CHECK0(t, srq_dead_says_reset(t, tst_conn(t, p), p));
	TST_CHECK0(t, srq_inflight_settles(t));
	TST_CHECK0(t, srq_flushed(t, &out, &flushed));
	TST_CHECK(t, flushed >= puts, "%u puts to the dead ranks, %" PRIu64
		  " writes completed as errors", puts, flushed);
	return srq_check_rnr(t);
}

/*
 * 3 ranks, every pair connected, 64 writes in flight at most; rank 2 is
 * killed and its adapter's retries outlast the test (RDMACH_IB_TIMEOUT=20:
 * 4.3 s a try).  Rank 0 puts to it until its writes in flight fill the
 * budget, then streams to rank 1, whose first post finds no room: the
 * dead connection must not hold the CQ for good.  It fails within 1.5 x RDMACH_PEER_TIMEOUT_MS,
 * its writes flush, and rank 1's stream arrives byte-exact (without the
 * sweep, rank 1's connection failed: "completion queue full").
 */
static int ib_cq_dead_hold(struct tst *t)
{
	static const char *const env[] = {
		"RDMACH_CONNECT", "all", "RDMACH_IB_CQ_WRS", "64",
		"RDMACH_IB_TIMEOUT", "20", "RDMACH_LARGE", "pipeline", NULL };
	uint64_t total = tst_scaled(1u << 20, 256 << 10), t0;
	uint8_t msg[16] = { 0 };
	struct iovec iov = { msg, sizeof(msg) };
	const struct ib_tl *tl;
	rdmach_conn_t *dead;
	const char *why;
	int k, ret, done;

	ret = srq_victims(t, env, total, &done);
	if (ret || done)
		return ret;
	dead = tst_conn(t, 2);
	tl = ((const struct ib_conn *)dead->priv)->tl;
	for (k = 0; tl->wr_out < tl->wr_max; k++)
		TST_CHECK(t, k < 64 && rdmach_put(dead, &iov, 1) ==
			  sizeof(msg), "put %d to the dead rank 2 (%u writes "
			  "in flight)", k, tl->wr_out);
	t0 = rdmach_now_ns();
	TST_CHECK0(t, srq_stream_past_dead(t, tst_conn(t, 1), 1, total));
	tst_log(t, "the stream to rank 1 took %.1f ms",
		(double)(rdmach_now_ns() - t0) / 1e6);
	TST_CHECK0(t, srq_dead_says_reset(t, dead, 2));
	why = rdmach_conn_error(dead);
	TST_CHECK(t, why && strstr(why, "no completion from the peer's "
				   "adapter"), "rank 2's connection: %s",
		  why ? why : "(no message)");
	return srq_inflight_settles(t);
}

/*
 * 4 ranks, every pair connected, 64 writes in flight at most: rank 0's
 * 16-byte puts, round robin, leave unsignalled writes in flight on three
 * connections until they reach half of the budget (32), past which every
 * post is signalled.  They would stay there, connections idle, until a
 * keepalive: progress must close the runs (a signalled write each) within
 * 300 ms.  Every rank then takes 1 KiB of rank 0's stream, byte-exact.
 */
static int ib_cq_idle_runs(struct tst *t)
{
	static const char *const env[] = {
		"RDMACH_CONNECT", "all", "RDMACH_IB_CQ_WRS", "64", NULL };
	const uint64_t total = 1024;
	uint64_t sent[4] = { 0 }, t0;
	const struct ib_tl *tl;
	uint8_t msg[16];
	struct iovec iov = { msg, sizeof(msg) };
	int p = 1, ret;

	ret = srq_connect(t, env);
	if (ret)
		return ret;
	if (t->rank) {
		TST_CHECK0(t, tst_barrier(t));
		return tst_get_all(t, tst_conn(t, 0), 0,
				   tst_stream_seed(t, 0, t->rank), total);
	}
	tl = ((const struct ib_conn *)tst_conn(t, 1)->priv)->tl;
	while (tl->wr_out < tl->wr_signal_at) {
		TST_CHECK(t, sent[p] < total, "%u writes in flight after %"
			  PRIu64 " bytes to rank %d", tl->wr_out, sent[p], p);
		tst_pat_fill(msg, sizeof(msg), tst_stream_seed(t, 0, p),
			     sent[p]);
		TST_CHECK(t, rdmach_put(tst_conn(t, p), &iov, 1) ==
			  sizeof(msg), "put to rank %d", p);
		sent[p] += sizeof(msg);
		p = p % 3 + 1;
	}
	for (t0 = rdmach_now_ns(); tl->wr_out >= tl->wr_signal_at &&
	     rdmach_now_ns() - t0 < 300000000ull;)
		rdmach_progress(t->ctx);
	TST_CHECK(t, tl->wr_out < tl->wr_signal_at, "%u writes still in "
		  "flight after 300 ms of progress (%u at most)", tl->wr_out,
		  tl->wr_max);
	TST_CHECK0(t, tst_barrier(t));
	for (p = 1; p < 4; p++) {
		uint8_t *rest = malloc(total - sent[p]);
		struct iovec r = { rest, total - sent[p] };

		if (!rest)
			return tst_fail(t, "out of memory");
		tst_pat_fill(rest, r.iov_len, tst_stream_seed(t, 0, p),
			     sent[p]);
		ret = tst_xfer_iov(t, tst_conn(t, p), 1, &r, 1);
		free(rest);
		if (ret)
			return ret;
	}
	return 0;
}

/* The "# ib connections:" line of rdmach_print_stats, logged. */
static int qps_stats(struct tst *t, struct tst_ib_conns *q)
{
	if (tst_ib_conns(t->ctx, q))
		return tst_fail(t, "no ib connection counters");
	tst_log(t, "connections: made %" PRIu64 ", QPs now %u (most %u), "
		"refused %" PRIu64 ", closed %" PRIu64 " + %" PRIu64 " asked, "
		"kept %" PRIu64 ", waited %" PRIu64 ", beyond %" PRIu64,
		q->made, q->now, q->most, q->refused, q->closed,
		q->closed_asked, q->kept, q->waits, q->over);
	return 0;
}

/* Progress until every rank has come here (word: a counter of
 * t->shared): the others' close and connection requests need our
 * answers, and a rank in an out-of-band barrier gives none. */
static int srq_progress_until_all(struct tst *t, unsigned int word)
{
	uint64_t deadline = rdmach_now_ns() + 60000000000ull;

	__atomic_add_fetch(&t->shared[word], 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&t->shared[word], __ATOMIC_SEQ_CST) <
	       (uint64_t)t->np) {
		int err = rdmach_progress(t->ctx);

		TST_CHECK(t, !err, "rdmach_progress: %s",
			  rdmach_strerror(err));
		TST_CHECK(t, rdmach_now_ns() < deadline, "the other ranks did "
			  "not finish within 60 s");
		sched_yield();
	}
	return 0;
}

/* Progress until this process is back within RDMACH_IB_QPS_MAX (want):
 * peers' requests may take it beyond for a while. */
static int qps_trimmed(struct tst *t, unsigned int want, struct tst_ib_conns *q)
{
	uint64_t deadline = rdmach_now_ns() + 30000000000ull;

	for (;;) {
		TST_CHECK0(t, qps_stats(t, q));
		if (q->now <= want)
			return 0;
		TST_CHECK(t, rdmach_now_ns() < deadline, "%u QPs to peers "
			  "after 30 s (want %u at most)", q->now, want);
		for (int k = 0; k < 1000; k++) {
			int err = rdmach_progress(t->ctx);

			TST_CHECK(t, !err, "rdmach_progress: %s",
				  rdmach_strerror(err));
		}
	}
}

/* Round round of streams between every pair, both ways at once: the
 * second of puts up to 200 KB (zero-copy and the superpipeline), the
 * others of up to 3000 bytes. */
static int qps_streams(struct tst *t, int round)
{
	static const struct tst_shape small = { .min_call = 1,
		.max_call = 3000, .min_pieces = 1, .max_pieces = 3 };
	static const struct tst_shape big = { .min_call = 1,
		.max_call = 200000, .min_pieces = 1, .max_pieces = 2 };
	const struct tst_shape *sh = round == 2 ? &big : &small;

	return srq_all_pairs(t, (uint64_t)round << 40,
			     tst_scaled(256u << 10, 64 << 10), sh, sh);
}

/* 6 ranks, RDMACH_IB_QPS_MAX=2: every pair streams both ways at once,
 * three rounds (the second with puts of up to 200 KB: zero-copy and the
 * superpipeline), byte-checked, so connections close while idle and are
 * made again under the streams, many times.  Connections wait for room
 * (somewhere in the job); once the streams are done, every process is
 * back to 2 (rdmach's count and the kernel's) and closed at least the 3
 * it could not keep. */
static int ib_qps_churn(struct tst *t)
{
	static const char *const env[] = { "RDMACH_IB_QPS_MAX", "2", NULL };
	struct tst_ib_conns q;
	uint64_t waits;
	int round, qps, ret = srq_connect(t, env);

	if (ret)
		return ret;
	for (round = 1; round <= 3; round++) {
		ret = qps_streams(t, round);
		if (ret)
			return ret;
	}
	TST_CHECK0(t, srq_progress_until_all(t, 0));
	ret = qps_trimmed(t, 2, &q);
	/* a rank whose peers all asked first waited for none: the job has */
	__atomic_add_fetch(&t->shared[2], q.waits, __ATOMIC_SEQ_CST);
	TST_CHECK0(t, srq_progress_until_all(t, 1));
	if (ret)
		return ret;
	waits = __atomic_load_n(&t->shared[2], __ATOMIC_SEQ_CST);
	TST_CHECK(t, q.closed + q.closed_asked >= (uint64_t)t->np - 3 &&
		  q.made >= (uint64_t)t->np - 1 && waits > 0, "%" PRIu64
		  " connections made, %" PRIu64 " closed, %" PRIu64 " waits "
		  "in the job (want %d made, %d closed at least, some waits)",
		  q.made, q.closed + q.closed_asked, waits, t->np - 1,
		  t->np - 3);
	qps = tst_kernel_rc_qps();
	TST_CHECK(t, qps <= 2, "the kernel lists %d RC QPs of this process "
		  "(want 2 at most)", qps);
	tst_log(t, "kernel RC QPs: %d", qps);
	return srq_check_rnr(t);
}

/* 6 ranks on an adapter that holds 2 RC QPs per process (srq_rc_qps_max;
 * no RDMACH_IB_QPS_MAX): every pair streams both ways at once, two
 * rounds (the second with puts of up to 200 KB: zero-copy and the
 * superpipeline), byte-checked.  The refusals make the count held the
 * limit: idle connections close, the refused ones wait (never beyond)
 * and are made again; the kernel lists 2 RC QPs of each process at
 * most, and rdmach's counter of refusals agrees with the calls. */
static int ib_qps_adapter_full(struct tst *t)
{
	static const char *const env[] = { NULL };
	struct tst_ib_conns q;
	uint64_t refused;
	int round, qps, ret;

	srq_rc_qps_max = 2;
	ret = srq_connect(t, env);
	for (round = 1; round <= 2 && !ret; round++) {
		ret = qps_streams(t, round);
		/* a rank a round ahead would put bytes a rank behind does
		 * not read yet, which keeps their connection from closing */
		if (!ret)
			ret = srq_progress_until_all(t, (unsigned int)round);
	}
	if (ret)
		return ret;
	TST_CHECK0(t, qps_stats(t, &q));
	__atomic_add_fetch(&t->shared[3], q.refused, __ATOMIC_SEQ_CST);
	TST_CHECK0(t, srq_progress_until_all(t, 0));
	refused = __atomic_load_n(&t->shared[3], __ATOMIC_SEQ_CST);
	/* each refusal here is one or more calls: ib_qp_create tries
	 * smaller inline sizes before it gives up */
	TST_CHECK(t, q.refused <= srq_rc_qps_refused &&
		  !q.refused == !srq_rc_qps_refused && !q.over &&
		  q.most <= 2 && q.closed + q.closed_asked >=
		  (uint64_t)t->np - 3 && refused > 0, "%" PRIu64 " refusals "
		  "counted (%u made here), %" PRIu64 " connections made "
		  "beyond, %u at most, %" PRIu64 " closed, %" PRIu64
		  " refusals in the job (want each counted, none beyond, 2 "
		  "at most, %d closed at least, some refusals)", q.refused,
		  srq_rc_qps_refused, q.over, q.most,
		  q.closed + q.closed_asked, refused, t->np - 3);
	qps = tst_kernel_rc_qps();	/* -1: no rdma tool to ask */
	TST_CHECK(t, qps <= 2, "the kernel lists %d RC QPs of this process "
		  "(want 2 at most)", qps);
	tst_log(t, "kernel RC QPs: %d; %u refusals", qps, srq_rc_qps_refused);
	return srq_check_rnr(t);
}

/* 20 ranks on one host: the superpipeline's limits at auto are the
 * host's budgets shared (2 GiB of staging, 1024 landing areas), read
 * back from the transport and from RDMACH_STATS. */
static int ib_spipe_host_share(struct tst *t)
{
	static const char *const env[] = { NULL };
	const struct ib_tl *tl;
	char *p, *buf;
	unsigned int max = 0;
	int ret;

	unsetenv("RDMACH_SPIPE_MEM_MAX");	/* auto, both */
	unsetenv("RDMACH_SPIPE_PEERS");
	ret = srq_connect(t, env);
	if (ret)
		return ret;
	tl = (const struct ib_tl *)t->ctx->tls[RDMACH_TL_IB];
	TST_CHECK(t, tl && t->ctx->host_procs == t->np &&
		  tl->large.mem_max == (2ull << 30) / (unsigned int)t->np &&
		  tl->large.land_max == 1024u / (unsigned int)t->np,
		  "%d processes on this host: staging %llu bytes, %u landing "
		  "areas at most (want %d, %llu, %u)", t->ctx->host_procs,
		  tl ? (unsigned long long)tl->large.mem_max : 0ull,
		  tl ? tl->large.land_max : 0u, t->np,
		  (unsigned long long)((2ull << 30) / (unsigned int)t->np),
		  1024u / (unsigned int)t->np);
	buf = srq_stats_at(t, "# ib superpipeline: ", &p);
	if (p)
		sscanf(p, "# ib superpipeline: %*u landing areas (%*u bytes) "
		       "registered, offered to %*u peers of %u", &max);
	free(buf);
	TST_CHECK(t, max == tl->large.land_max, "RDMACH_STATS says %u "
		  "landing areas at most", max);
	return 0;
}

/* 3 ranks: the device fails (IBV_EVENT_DEVICE_FATAL, which rxe cannot
 * send: its reason is set as ib_async_check sets it) while rank 0's
 * connection to rank 2, which makes no progress, is under way: that
 * one fails at once with the device's reason, not at its time-out, and
 * so does a later first put to a peer; rank 1's connection, up before,
 * is not the connection manager's to fail. */
static int ib_dead_device(struct tst *t)
{
	static const char *const env[] = { "RDMACH_CONNECT_TIMEOUT_MS",
					   "60000", NULL };
	static const char why[] = "device rxe0 failed (injected)";
	uint8_t byte = 1;
	struct iovec iov = { &byte, 1 };
	struct ib_tl *tl;
	rdmach_conn_t *c2;
	uint64_t t0;
	ssize_t n;
	int ret = srq_connect(t, env);

	if (ret)
		return ret;
	if (t->rank == 2) {	/* no progress until rank 0 is done */
		for (t0 = rdmach_now_ns(); !__atomic_load_n(&t->shared[0],
		     __ATOMIC_SEQ_CST) && rdmach_now_ns() - t0 < 30000000000ull;)
			usleep(1000);
		return 0;
	}
	if (t->rank == 1)
		return tst_get_all(t, tst_conn(t, 0), 0,
				   tst_stream_seed(t, 0, 1), 4096);
	ret = tst_put_all(t, tst_conn(t, 1), 1, tst_stream_seed(t, 0, 1),
			  4096);
	c2 = tst_conn(t, 2);
	n = ret ? 0 : rdmach_put(c2, &iov, 1);
	TST_CHECK(t, !ret && n == 0, "first put to rank 2: %zd (want 0: the "
		  "connection under way)", n);
	tl = ((struct ib_conn *)tst_conn(t, 1)->priv)->tl;
	memcpy(tl->dead, why, sizeof(why));
	/* progress alone fails the connection under way ... */
	for (t0 = rdmach_now_ns(); !rdmach_conn_error(c2)[0] &&
	     rdmach_now_ns() - t0 < 5000000000ull;)
		rdmach_progress(t->ctx);
	n = rdmach_put(c2, &iov, 1);	/* ... and a put says so */
	__atomic_store_n(&t->shared[0], 1, __ATOMIC_SEQ_CST);
	TST_CHECK(t, n == -EIO && strstr(rdmach_conn_error(c2), why),
		  "put to rank 2 after the device failed and 5 s of progress: "
		  "%zd, \"%s\" (want -EIO, naming the device's failure)", n,
		  rdmach_conn_error(c2));
	tst_log(t, "rank 2: %s", rdmach_conn_error(c2));
	return 0;
}

/* 3 ranks, RDMACH_IB_QPS_MAX=1 (waits not bounded): rank 0 puts 256 KiB
 * to rank 1 deferred (zero-copy forced: a ticket) and waits for it, then
 * 4 KiB to rank 2, which waits until the connection to rank 1 is closed;
 * rdmach_put_done on it reports the ticket done.  The next round's first
 * put to rank 1 (a small copied one) makes the connection again: its
 * put_done still reports the ticket, before any zero-copy put on it, and
 * the next deferred put gets a larger ticket.  Three rounds, checked. */
static int ib_qps_tickets(struct tst *t)
{
	static const char *const env[] = { "RDMACH_IB_QPS_MAX", "1",
					   "RDMACH_IB_QPS_WAIT_MS", "3600000",
					   "RDMACH_LARGE", "zcopy", NULL };
	const size_t big = 256 << 10;
	struct tst_ib_conns q;
	int64_t last = 0, tk;
	uint64_t done;
	uint8_t *buf = NULL;
	int k, ret = srq_connect(t, env);

	if (ret)
		return ret;
	if (t->rank == 0 && !(buf = malloc(big)))
		return tst_fail(t, "no memory");
	for (k = 0; k < 3 && !ret; k++) {
		uint64_t seed = tst_stream_seed(t, 0, 1) + (uint64_t)k;
		rdmach_conn_t *c1 = tst_conn(t, 1);

		if (t->rank) {
			rdmach_conn_t *c0 = tst_conn(t, 0);

			if (t->rank == 1 && k)
				ret = tst_get_all(t, c0, 0, ~seed, 100);
			if (!ret)
				ret = tst_get_all(t, c0, 0, seed,
						  t->rank == 1 ? big : 4096);
			continue;
		}
		if (k) {	/* made again: what its put_done says first */
			TST_CHECK0(t, tst_put_all(t, c1, 1, ~seed, 100));
			TST_CHECK(t, rdmach_put_done(c1, &done) == 0 &&
				  done == (uint64_t)last, "round %d: the "
				  "connection made again says done %llu "
				  "(ticket %lld)", k, (unsigned long long)done,
				  (long long)last);
		}
		tst_pat_fill(buf, big, seed, 0);
		tk = tst_put_deferred_whole(t, c1, buf, big);
		TST_CHECK(t, tk > last, "round %d: ticket %lld after %lld", k,
			  (long long)tk, (long long)last);
		last = tk;
		TST_CHECK0(t, tst_put_done_wait(t, c1, &done));
		TST_CHECK(t, done >= (uint64_t)tk, "round %d: done %llu, "
			  "ticket %lld", k, (unsigned long long)done,
			  (long long)tk);
		/* room for rank 2 only once rank 1's connection closed */
		TST_CHECK0(t, tst_put_all(t, tst_conn(t, 2), 2, seed, 4096));
		TST_CHECK(t, rdmach_put_done(c1, &done) == 0 &&
			  done == (uint64_t)tk, "round %d: closed, put_done "
			  "says %llu (ticket %lld)", k,
			  (unsigned long long)done, (long long)tk);
	}
	free(buf);
	TST_CHECK0(t, srq_progress_until_all(t, 0));
	if (ret || t->rank)
		return ret;
	TST_CHECK0(t, qps_stats(t, &q));
	TST_CHECK(t, q.closed + q.closed_asked >= 5 && !q.over, "%" PRIu64
		  " connections closed, %" PRIu64 " made beyond the limit "
		  "(want 5 closed at least, none beyond)",
		  q.closed + q.closed_asked, q.over);
	return 0;
}

static const struct tst_case srq_cases[] = {
	{ "srq_tiny_pool", 2, srq_tiny_pool, TST_NO_CTX, NULL, { 0 } },
	{ "srq_tiny_pool_4", 4, srq_tiny_pool, TST_NO_CTX, NULL, { 0 } },
	{ "srq_promote_duplex", 2, srq_promote_duplex, TST_NO_CTX, NULL,
	  { 0 } },
	{ "srq_cap_churn", 8, srq_cap_churn, TST_NO_CTX, NULL, { 0 } },
	{ "srq_pool_grows", 8, srq_pool_grows, TST_NO_CTX, NULL, { 0 } },
	{ "srq_large_zcopy", 2, srq_large, TST_NO_CTX, "zcopy", { 0 } },
	{ "srq_large_spipe", 2, srq_large, TST_NO_CTX, "superpipeline",
	  { 0 } },
	{ "srq_peek_put_consume", 2, srq_peek_put_consume, TST_NO_CTX, NULL,
	  { 0 } },
	{ "srq_reg_fails_at_start", 2, srq_reg_fails_at_start, TST_NO_CTX,
	  NULL, { 0 } },
	{ "srq_reg_fails_grow", 4, srq_reg_fails_grow, TST_NO_CTX, NULL,
	  { 0 } },
	{ "srq_reg_fails_endpoint", 2, srq_reg_fails_endpoint, TST_NO_CTX,
	  NULL, { 0 } },
	{ "srq_tx_dead_peer", 3, srq_tx_dead_peer,
	  TST_NO_CTX | TST_LAUNCH_ONLY | TST_KEEP_GOING, NULL,
	  { 0, 0, -SIGKILL } },
	{ "ib_cq_idle_runs", 4, ib_cq_idle_runs, TST_NO_CTX, NULL, { 0 } },
	{ "ib_qps_churn", 6, ib_qps_churn, TST_NO_CTX | TST_LAUNCH_ONLY, NULL,
	  { 0 } },
	{ "ib_qps_adapter_full", 6, ib_qps_adapter_full,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "ib_spipe_host_share", 20, ib_spipe_host_share, TST_NO_CTX, NULL,
	  { 0 } },
	{ "ib_dead_device", 3, ib_dead_device, TST_NO_CTX | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
	{ "ib_qps_tickets", 3, ib_qps_tickets, TST_NO_CTX | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
	{ "ib_cq_dead_hold", 3, ib_cq_dead_hold,
	  TST_NO_CTX | TST_LAUNCH_ONLY | TST_KEEP_GOING, NULL,
	  { 0, 0, -SIGKILL } },
	{ "ib_cq_dead_peers", 5, ib_cq_dead_peers,
	  TST_NO_CTX | TST_LAUNCH_ONLY | TST_KEEP_GOING, NULL,
	  { 0, 0, -SIGKILL, -SIGKILL, -SIGKILL } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, srq_cases,
			(int)(sizeof(srq_cases) / sizeof(srq_cases[0])));
}
