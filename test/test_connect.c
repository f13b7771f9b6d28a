/*
 * test_connect.c - start-up from PMI_process_mapping (the parser, a
 * mapping that contradicts the host ids, one in MPICH 4.3's repeat form
 * read without a warning) and connections on demand (RDMACH_CONNECT=demand, the ib
 * transport's connection manager): both ends making first contact at the
 * same moment, many times over, byte-checked; lost connection messages
 * (RDMACH_IB_CM_DROP) retried, under RDMACH_CONNECT=all too (a rank
 * whose connection is up answers from inside rdmach_connect's fence); a
 * peer that dies before or during the
 * set-up (-ECONNRESET within RDMACH_CONNECT_TIMEOUT_MS, a message naming
 * its rank and host); peers that answer late (the retransmission gap
 * grows with the answers' time, so they are not flooded); and a rank
 * that talks to one peer of four makes
 * one connection (rdmach's counters, and the kernel's QPs where the
 * rdma tool shows them); progress visits the connections up, and only
 * those: a dead peer is found by rdmach_progress alone, whose list then
 * drops it.  Every case sets RDMACH_CONNECT itself;
 * without an ib transport (RDMACH_TRANSPORT=ib) they are skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/nodemap.h"
#include "lib/tst.h"

#define CN_TIMEOUT_MS 1000	/* RDMACH_CONNECT_TIMEOUT_MS of the fault cases */
#define CN_BYTES 4096

/* Words of t->shared. */
enum { CN_DEATH_NS, CN_ASKED };

/* t->oob with every key under a prefix of its own, so that each fresh
 * context of a case publishes keys no earlier one did. */
struct cn_oob {
	rdmach_oob_t oob;
	rdmach_oob_t base;
	char prefix[32];
	const char *mapping;	/* PMI_process_mapping served instead */
};

static int cn_key(const struct cn_oob *o, const char *key, char *out,
		  size_t len)
{
	int n = strncmp(key, "PMI_", 4) ?
		snprintf(out, len, "%s%s", o->prefix, key) :
		snprintf(out, len, "%s", key);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int cn_put(void *arg, const char *key, const char *value)
{
	struct cn_oob *o = arg;
	char k[256];
	int ret = cn_key(o, key, k, sizeof(k));

	return ret ? ret : o->base.put(o->base.arg, k, value);
}

static int cn_get(void *arg, const char *key, char *value, size_t len)
{
	struct cn_oob *o = arg;
	char k[256];
	int ret = cn_key(o, key, k, sizeof(k));

	if (o->mapping && !strcmp(key, "PMI_process_mapping")) {
		snprintf(value, len, "%s", o->mapping);
		return 0;
	}
	return ret ? ret : o->base.get(o->base.arg, k, value, len);
}

static int cn_fence(void *arg)
{
	struct cn_oob *o = arg;

	return o->base.fence(o->base.arg);
}

static void cn_oob_init(struct cn_oob *o, const struct tst *t, int round)
{
	o->base = t->oob;
	o->mapping = NULL;
	snprintf(o->prefix, sizeof(o->prefix), "cn%d.", round);
	o->oob = t->oob;
	o->oob.arg = o;
	o->oob.put = cn_put;
	o->oob.get = cn_get;
	o->oob.fence = cn_fence;
}

/* A fresh context under demand; *conn to peer.  1: not over ib (skip). */
static int cn_open_as(struct tst *t, struct cn_oob *o, int round,
		      rdmach_ctx_t **ctx, int peer, rdmach_conn_t **conn,
		      const char *connect)
{
	setenv("RDMACH_CONNECT", connect, 1);
	cn_oob_init(o, t, round);
	TST_CHECK0(t, rdmach_init(ctx, &o->oob));
	TST_CHECK0(t, rdmach_connect(*ctx));
	TST_CHECK0(t, rdmach_conn(*ctx, peer, conn));
	if (strcmp(rdmach_conn_transport(*conn), "ib")) {
		rdmach_finalize(ctx);
		return 1;
	}
	return 0;
}

static int cn_open(struct tst *t, struct cn_oob *o, int round,
		   rdmach_ctx_t **ctx, int peer, rdmach_conn_t **conn)
{
	return cn_open_as(t, o, round, ctx, peer, conn, "demand");
}

/* One put or get of what is left of buf; -1 after a failure. */
static int cn_step(struct tst *t, rdmach_conn_t *c, int is_put, uint8_t *buf,
		   size_t *done)
{
	struct iovec v = { buf + *done, CN_BYTES - *done };
	ssize_t n;

	if (*done == CN_BYTES)
		return 0;
	n = is_put ? rdmach_put(c, &v, 1) : rdmach_get(c, &v, 1);
	TST_CHECK(t, n >= 0, "%s: %s (%s)", is_put ? "put" : "get",
		  tst_errname(n), rdmach_conn_error(c));
	*done += (size_t)n;
	return 0;
}

/* Put CN_BYTES to the peer and get its CN_BYTES, both at once. */
static int cn_exchange(struct tst *t, rdmach_conn_t *c, int peer,
		       uint64_t round)
{
	static uint8_t out[CN_BYTES], in[CN_BYTES];
	uint64_t deadline = rdmach_now_ns() + 20000000000ull;
	size_t sent = 0, got = 0, bad;

	tst_pat_fill(out, sizeof(out), tst_seed(round, t->rank, peer), 0);
	memset(in, 0, sizeof(in));
	while (sent < sizeof(out) || got < sizeof(in)) {
		if (cn_step(t, c, 1, out, &sent) || cn_step(t, c, 0, in, &got))
			return -1;
		TST_CHECK(t, rdmach_now_ns() < deadline, "round %llu: %zu "
			  "bytes sent, %zu got after 20 s",
			  (unsigned long long)round, sent, got);
	}
	bad = tst_pat_check(in, sizeof(in), tst_seed(round, peer, t->rank), 0);
	TST_CHECK(t, bad == sizeof(in), "round %llu: byte %zu differs",
		  (unsigned long long)round, bad);
	return 0;
}

/* What rdmach_print_stats says of the connections. */
static int cn_conns_line(rdmach_ctx_t *ctx, char *line, size_t len)
{
	char *buf = tst_stats_text(ctx), *p;

	if (!buf)
		return -ENOMEM;
	p = strstr(buf, "# connections:");
	snprintf(line, len, "%.*s", p ? (int)strcspn(p, "\n") : 0,
		 p ? p : "");
	free(buf);
	return p ? 0 : -ENOENT;
}

/* 50 rounds: a fresh pair of contexts, both putting at once. */
static int cn_simultaneous(struct tst *t)
{
	int rounds = (int)tst_scaled(50, 50), peer = 1 - t->rank, k, ret;
	char line[160];
	struct cn_oob o;
	rdmach_ctx_t *ctx;
	rdmach_conn_t *c;

	for (k = 0; k < rounds; k++) {
		ret = cn_open(t, &o, k, &ctx, peer, &c);
		if (ret)
			return ret < 0 ? ret : tst_skip(t, "not over ib");
		TST_CHECK0(t, tst_barrier(t));
		ret = cn_exchange(t, c, peer, (uint64_t)k);
		if (!ret && !cn_conns_line(ctx, line, sizeof(line)) &&
		    !strstr(line, " ib 1, not made 1 "))
			ret = tst_fail(t, "round %d: %s (want one connection)",
				       k, line);
		rdmach_finalize(&ctx);
		if (ret)
			return ret;
		TST_CHECK0(t, tst_barrier(t));
	}
	return 0;
}

/* The first connection messages each side receives are dropped. */
static int cn_lost_messages(struct tst *t)
{
	int peer = 1 - t->rank, ret;
	struct cn_oob o;
	rdmach_ctx_t *ctx;
	rdmach_conn_t *c;

	setenv("RDMACH_IB_CM_DROP", "2", 1);
	ret = cn_open(t, &o, 0, &ctx, peer, &c);
	if (ret)
		return ret < 0 ? ret : tst_skip(t, "not over ib");
	ret = cn_exchange(t, c, peer, 7);
	rdmach_finalize(&ctx);
	return ret;
}

/* Rank 1 speaks another connection protocol (RDMACH_IB_CM_VERSION, as an
 * older rdmach would): each side refuses the other's messages with one
 * warning that names the version and the rank, and both connections fail
 * within RDMACH_CONNECT_TIMEOUT_MS instead of hanging. */
static int cn_version_mismatch(struct tst *t)
{
	static uint8_t buf[64];
	struct iovec v = { buf, sizeof(buf) };
	uint64_t t0, bound = (CN_TIMEOUT_MS + 4000) * 1000000ull;
	int peer = 1 - t->rank, ret;
	const char *want = t->rank ? "from rank 0; this rdmach speaks 1" :
				     "protocol version 1 from rank 1;";
	struct tst_capture cap;
	char text[2048];
	struct cn_oob o;
	rdmach_ctx_t *ctx;
	rdmach_conn_t *c;
	ssize_t n = 0;

	setenv("RDMACH_CONNECT_TIMEOUT_MS", "1000", 1);
	if (t->rank == 1)
		setenv("RDMACH_IB_CM_VERSION", "1", 1);
	TST_CHECK0(t, tst_capture_begin(&cap, 0));
	ret = cn_open(t, &o, 0, &ctx, peer, &c);
	if (!ret) {
		t0 = rdmach_now_ns();
		while ((n = rdmach_put(c, &v, 1)) == 0 &&
		       rdmach_now_ns() - t0 < bound)
			;
		rdmach_finalize(&ctx);
	}
	tst_capture_end(t, &cap, text, sizeof(text));
	unsetenv("RDMACH_IB_CM_VERSION");
	if (ret)
		return ret < 0 ? ret : tst_skip(t, "not over ib");
	TST_CHECK(t, n == -ECONNRESET, "put to a rank of another protocol: "
		  "%s (want -ECONNRESET)", tst_errname(n));
	TST_CHECK(t, strstr(text, want), "no warning \"%s\" in what rank %d "
		  "logged: %s", want, t->rank, text);
	return tst_barrier(t);
}

/* Under all, connection messages lost on one side or both: rdmach_connect
 * still ends on both (a rank with its connection up answers the peer's
 * retransmissions from inside the fence), and the pair carries data. */
static int cn_lost_messages_all(struct tst *t)
{
	static const struct { int drop0, drop1; } c[] = {
		{ 0, 1 }, { 0, 2 }, { 0, 3 }, { 1, 0 }, { 2, 2 }, { 3, 1 },
	};
	int peer = 1 - t->rank, ret = 0;
	unsigned int k;
	struct cn_oob o;
	rdmach_ctx_t *ctx;
	rdmach_conn_t *c_;
	char drop[16];

	for (k = 0; k < sizeof(c) / sizeof(c[0]) && !ret; k++) {
		snprintf(drop, sizeof(drop), "%d",
			 t->rank ? c[k].drop1 : c[k].drop0);
		setenv("RDMACH_IB_CM_DROP", drop, 1);
		ret = cn_open_as(t, &o, (int)k, &ctx, peer, &c_, "all");
		if (ret)
			return ret < 0 ? ret : tst_skip(t, "not over ib");
		ret = cn_exchange(t, c_, peer, k);
		rdmach_finalize(&ctx);
		TST_CHECK0(t, tst_barrier(t));
	}
	unsetenv("RDMACH_IB_CM_DROP");
	return ret;
}

/* What rdmach_print_stats says of ib's progress: the connections it
 * polls and those being made; -1 when it says nothing. */
static int cn_progress_counts(rdmach_ctx_t *ctx, long *polled, long *making)
{
	char *buf = tst_stats_text(ctx), *p;

	*polled = *making = -1;
	p = buf ? strstr(buf, "# ib progress: ") : NULL;
	if (p && sscanf(p, "# ib progress: %ld connections up and polled, "
			"%ld being made", polled, making) != 2)
		*polled = *making = -1;
	free(buf);
	return *polled < 0 ? -1 : 0;
}

static long cn_polled(rdmach_ctx_t *ctx)
{
	long polled, making;

	cn_progress_counts(ctx, &polled, &making);
	return polled;
}

static void cn_die(struct tst *t)
{
	__atomic_store_n(&t->shared[CN_DEATH_NS], rdmach_now_ns(),
			 __ATOMIC_SEQ_CST);
	raise(SIGKILL);
}

/* Rank 0 puts to the dead rank 1 until an error: -ECONNRESET within the
 * timeout (and some slack for a busy host), naming rank 1 and a host. */
static int cn_survive(struct tst *t, rdmach_ctx_t *ctx, rdmach_conn_t *c)
{
	static uint8_t buf[64];
	struct iovec v = { buf, sizeof(buf) };
	uint64_t t0, bound = (CN_TIMEOUT_MS + 4000) * 1000000ull;
	long polled, making;
	ssize_t n;

	while (!__atomic_load_n(&t->shared[CN_DEATH_NS], __ATOMIC_SEQ_CST))
		usleep(1000);
	t0 = rdmach_now_ns();
	while ((n = rdmach_put(c, &v, 1)) == 0 &&
	       rdmach_now_ns() - t0 < bound)
		;
	TST_CHECK(t, n == -ECONNRESET, "put to the dead rank 1: %s after "
		  "%.1f s", tst_errname(n),
		  (double)(rdmach_now_ns() - t0) / 1e9);
	TST_CHECK(t, strstr(rdmach_conn_error(c), "rank 1") &&
		  strstr(rdmach_conn_error(c), "host "),
		  "the message names neither rank nor host: %s",
		  rdmach_conn_error(c));
	/* nothing left to retransmit or poll */
	rdmach_progress(ctx);
	TST_CHECK(t, !cn_progress_counts(ctx, &polled, &making) &&
		  polled == 0 && making == 0, "after the failure: %ld "
		  "connections polled, %ld being made (want 0 and 0)", polled,
		  making);
	rdmach_finalize(&ctx);
	return 0;
}

/* Rank 1 dies before any connection (t->c->arg NULL: rank 0's requests
 * go unanswered) or during its set-up (rank 1 starts the connection, its
 * request reaches rank 0, and dies: rank 0's half-open connection never
 * hears back). */
static int cn_dies(struct tst *t)
{
	static uint8_t buf[64];
	struct iovec v = { buf, sizeof(buf) };
	struct cn_oob o;
	rdmach_ctx_t *ctx;
	rdmach_conn_t *c;
	int ret;

	setenv("RDMACH_CONNECT_TIMEOUT_MS", "1000", 1);
	ret = cn_open(t, &o, 0, &ctx, 1 - t->rank, &c);
	if (ret)	/* skipped: exit 0 passes too */
		return ret < 0 ? ret : tst_skip(t, "not over ib");
	if (t->rank == 1 && t->c->arg) {
		TST_CHECK(t, rdmach_put(c, &v, 1) == 0, "the first put of a "
			  "connection on demand took bytes");
		usleep(20000);	/* the request leaves */
	}
	if (t->rank == 1)
		cn_die(t);
	return cn_survive(t, ctx, c);
}

/* The out-of-band puts rdmach_print_stats counts. */
static long cn_oob_puts(rdmach_ctx_t *ctx)
{
	char *buf = tst_stats_text(ctx), *p;
	long puts = -1;

	p = buf ? strstr(buf, "# out-of-band: ") : NULL;
	if (p)
		puts = strtol(p + 15, NULL, 10);
	free(buf);
	return puts;
}

/* Four ranks: 0 and 1 talk, 2 and 3 talk; nobody else connects. */
static int cn_only_pairs(struct tst *t)
{
	int peer = t->rank ^ 1, qps, ret;
	char line[160];
	struct cn_oob o;
	rdmach_ctx_t *ctx;
	rdmach_conn_t *c;

	ret = cn_open(t, &o, 0, &ctx, peer, &c);
	if (ret)
		return ret < 0 ? ret : tst_skip(t, "not over ib");
	ret = cn_exchange(t, c, peer, 3);
	if (!ret && !cn_conns_line(ctx, line, sizeof(line)) &&
	    !strstr(line, " ib 1, not made 3 "))
		ret = tst_fail(t, "%s (want one connection of four)", line);
	/* one record of the core and one of ib: none per peer */
	if (!ret && cn_oob_puts(ctx) != 2)
		ret = tst_fail(t, "%ld out-of-band puts (want 2)",
			       cn_oob_puts(ctx));
	qps = tst_kernel_rc_qps();
	if (!ret && qps >= 0 && qps != 1)
		ret = tst_fail(t, "the kernel lists %d RC QPs of this process "
			       "(want 1: to rank %d)", qps, peer);
	if (!ret)
		tst_log(t, "rank %d: %s; kernel RC QPs: %d", t->rank, line,
			qps);
	TST_CHECK0(t, tst_barrier(t));	/* nobody finalizes before all count */
	rdmach_finalize(&ctx);
	return ret;
}

/* Six ranks; rank 0 connects to ranks 1-5 one after the other (a put,
 * then their answer), and each of them answers 150 ms late: it sleeps
 * that long, outside rdmach, once rank 0 has asked.  Rank 0's first
 * request is sent again at 20, 60 and 140 ms (RDMACH_IB_CM_RTO_MS and
 * its backoff); later ones start from the backed-off gap and, once an
 * answer to a request sent once has been timed, from what the answers
 * take: 8 resends at most in all (a fixed 20 ms gap sends each request
 * 3 or 4 times), and the answers' time reported above 100 ms. */
static int cn_slow_answers(struct tst *t)
{
	static const char *const env[] = { "RDMACH_CONNECT", "demand",
		"RDMACH_IB_CM_RTO_MS", "20", NULL };
	const char *tr = getenv("RDMACH_TRANSPORT");
	struct tst_ib_conns q;
	rdmach_conn_t *c;
	int p, ret = 0;

	if (!tr || strcmp(tr, "ib"))
		return tst_skip(t, "RDMACH_TRANSPORT=ib only");
	for (p = 0; env[p]; p += 2)
		setenv(env[p], env[p + 1], 1);
	TST_CHECK0(t, tst_connect(t, &t->ctx));
	if (t->rank) {
		uint64_t t0 = rdmach_now_ns();

		while (!__atomic_load_n(&t->shared[CN_ASKED + t->rank],
					__ATOMIC_SEQ_CST)) {
			TST_CHECK(t, rdmach_now_ns() - t0 < 60000000000ull,
				  "rank 0 did not ask within 60 s");
			sched_yield();
		}
		usleep(150000);
		c = tst_conn(t, 0);
		TST_CHECK0(t, tst_get_all(t, c, 0, tst_stream_seed(t, 0, t->rank),
					  CN_BYTES));
		return tst_put_all(t, c, 0, tst_stream_seed(t, t->rank, 0),
				   CN_BYTES);
	}
	for (p = 1; p < t->np && !ret; p++) {
		c = tst_conn(t, p);
		__atomic_store_n(&t->shared[CN_ASKED + p], 1, __ATOMIC_SEQ_CST);
		ret = tst_put_all(t, c, p, tst_stream_seed(t, 0, p), CN_BYTES);
		if (!ret)
			ret = tst_get_all(t, c, p, tst_stream_seed(t, p, 0),
					  CN_BYTES);
	}
	if (ret)
		return ret;
	TST_CHECK(t, !tst_ib_conns(t->ctx, &q), "no resend counter in "
		  "RDMACH_STATS");
	tst_log(t, "%" PRIu64 " messages resent, answers in %.1f ms",
		q.resent, q.answer_ms);
	TST_CHECK(t, q.resent <= 8 && q.answer_ms > 100, "%" PRIu64
		  " messages resent to 5 peers answering 150 ms late, answers "
		  "in %.1f ms (want 8 at most, over 100 ms)", q.resent,
		  q.answer_ms);
	return 0;
}

/* Four ranks, pairs (0, 1) and (2, 3): each polls its one connection,
 * not the job's.  Rank 3 dies; rank 2 then calls nothing but
 * rdmach_progress, which alone must find the death (its keepalive:
 * within 1.5 x RDMACH_PEER_TIMEOUT_MS and the adapter's retries) and
 * then poll nothing; the pair (0, 1) goes on polling its own. */
static int cn_progress_list(struct tst *t)
{
	uint64_t t0, bound = 15000000000ull;
	int peer = t->rank ^ 1, k, ret;
	struct cn_oob o;
	rdmach_ctx_t *ctx;
	rdmach_conn_t *c;

	setenv("RDMACH_PEER_TIMEOUT_MS", "1000", 1);
	ret = cn_open(t, &o, 0, &ctx, peer, &c);
	if (ret)
		return ret < 0 ? ret : tst_skip(t, "not over ib");
	ret = cn_exchange(t, c, peer, 11);
	if (!ret && cn_polled(ctx) != 1)
		ret = tst_fail(t, "%ld connections polled (want 1, to rank "
			       "%d)", cn_polled(ctx), peer);
	TST_CHECK0(t, tst_barrier(t));	/* both pairs up, nothing in flight */
	if (ret || t->rank == 3) {
		if (!ret)
			cn_die(t);
		rdmach_finalize(&ctx);
		return ret;
	}
	while (!__atomic_load_n(&t->shared[CN_DEATH_NS], __ATOMIC_SEQ_CST))
		usleep(1000);
	t0 = rdmach_now_ns();
	for (k = 0; t->rank < 2 && k < 1000; k++)
		TST_CHECK0(t, rdmach_progress(ctx));
	while (t->rank == 2 && !rdmach_conn_error(c)[0] &&
	       rdmach_now_ns() - t0 < bound)
		rdmach_progress(ctx);
	TST_CHECK(t, t->rank < 2 || strstr(rdmach_conn_error(c), "rank 3"),
		  "rdmach_progress alone did not find rank 3 dead within "
		  "%.1f s", (double)(rdmach_now_ns() - t0) / 1e9);
	TST_CHECK(t, rdmach_progress(ctx) == (t->rank < 2 ? 0 : -ECONNRESET),
		  "rdmach_progress after rank 3 died: %s (want %s)",
		  rdmach_strerror(rdmach_progress(ctx)),
		  t->rank < 2 ? "0" : "ECONNRESET");
	TST_CHECK(t, cn_polled(ctx) == (t->rank < 2),
		  "%ld connections polled after rank 3 died (want %d)",
		  cn_polled(ctx), t->rank < 2);
	rdmach_finalize(&ctx);
	return 0;
}

/* PMI_process_mapping, strictly: blocks in turn, repeated; anything
 * malformed or out of bounds refused without touching the output. */
static int cn_nodemap_parse(struct tst *t)
{
	static const struct { const char *s; int size, ok; int node[12]; } c[] = {
		{ "(vector,(0,1,4))", 4, 1, { 0, 0, 0, 0 } },
		{ "(vector,(0,2,2))", 4, 1, { 0, 0, 1, 1 } },
		{ "(vector,(0,2,1))", 5, 1, { 0, 1, 0, 1, 0 } },
		{ "(vector,(0,1,2),(3,2,1))", 6, 1, { 0, 0, 3, 4, 0, 0 } },
		{ "(vector,(0,2,1))", 1, 1, { 0 } },
		/* MPICH 4.3's Hydra: a bare id is one node of one rank */
		{ "(vector,0)", 1, 1, { 0 } },
		{ "(vector,0,1)", 4, 1, { 0, 1, 0, 1 } },
		{ "(vector,(0,1,2),3)", 4, 1, { 0, 0, 3, 0 } },
		{ "(vector,16777216)", 1, 0, { 0 } },
		{ "(vector,0x)", 1, 0, { 0 } },
		/* MPICH 4.3 and 5.0's Hydra (MPL_rankmap_array_to_str):
		 * "[blocks]xN" repeats in place; what its writer gives for
		 * round-robin, vm1:2,vm2:2 cyclic and an irregular layout */
		{ "(vector,[(0,2,1)]x4)", 8, 1, { 0, 1, 0, 1, 0, 1, 0, 1 } },
		{ "(vector,[(0,2,1)]x2,0)", 5, 1, { 0, 1, 0, 1, 0 } },
		{ "(vector,[(0,2,2)]x2)", 8, 1, { 0, 0, 1, 1, 0, 0, 1, 1 } },
		{ "(vector,[(0,2,2)]x2,(0,1,2))", 10, 1,
		  { 0, 0, 1, 1, 0, 0, 1, 1, 0, 0 } },
		{ "(vector,[(0,1,2),1]x2,2)", 7, 1, { 0, 0, 1, 0, 0, 1, 2 } },
		{ "(vector,[(0,3,1)]x2,0)", 7, 1, { 0, 1, 2, 0, 1, 2, 0 } },
		{ "(vector,[(0,2,1)]x2,(2,1,2),3,(2,2,1))", 9, 1,
		  { 0, 1, 0, 1, 2, 2, 3, 2, 3 } },
		/* groups in turn; a repeat beyond the job stops at its end */
		{ "(vector,[0]x2,[1,2]x2)", 6, 1, { 0, 0, 1, 2, 1, 2 } },
		{ "(vector,[(0,2,1)]x16777216)", 3, 1, { 0, 1, 0 } },
		/* the whole mapping again when it is shorter than the job */
		{ "(vector,[0]x2,1)", 6, 1, { 0, 0, 1, 0, 0, 1 } },
		{ "(vector,[[(0,2,1)]x2]x2)", 8, 0, { 0 } },
		{ "(vector,[(0,2,1)]x0)", 4, 0, { 0 } },
		{ "(vector,[(0,2,1)]x16777217)", 4, 0, { 0 } },
		{ "(vector,[(0,2,1)]x)", 4, 0, { 0 } },
		{ "(vector,[(0,2,1)]2)", 4, 0, { 0 } },
		{ "(vector,[(0,2,1)])", 4, 0, { 0 } },
		{ "(vector,[(0,2,1)x2)", 4, 0, { 0 } },
		{ "(vector,(0,2,1)]x2)", 4, 0, { 0 } },
		{ "(vector,[]x2)", 4, 0, { 0 } },
		{ "(vector,[(0,2,1),]x2)", 4, 0, { 0 } },
		{ "(vector,[(0,2,1)]x2,)", 4, 0, { 0 } },
		{ "(vector,[(0,2,1)]x-1)", 4, 0, { 0 } },
		{ "(vector, [(0,2,1)]x2)", 4, 0, { 0 } },
		{ "(vector)", 2, 0, { 0 } },
		{ "(vector,(0,0,1))", 2, 0, { 0 } },
		{ "(vector,(0,1,0))", 2, 0, { 0 } },
		{ "(vector,(-1,1,1))", 2, 0, { 0 } },
		{ "(vector,(0,1,1)", 2, 0, { 0 } },
		{ "(vector,(0,1,1)) ", 2, 0, { 0 } },
		{ "(vector,(0,1,99999999999))", 2, 0, { 0 } },
		{ "(vector,(16777215,2,1))", 2, 0, { 0 } },
		{ "(vector,(0,1,1),)", 2, 0, { 0 } },
		{ "", 2, 0, { 0 } },
	};
	char why[160];
	size_t i;
	int node[12], k, ret;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		for (k = 0; k < 12; k++)
			node[k] = -5;
		ret = rdmach_nodemap_parse(c[i].s, c[i].size, node, why,
					   sizeof(why));
		TST_CHECK(t, (ret == 0) == c[i].ok, "\"%s\": %s", c[i].s,
			  tst_errname(ret));
		for (k = 0; k < 12; k++)
			TST_CHECK(t, node[k] == (c[i].ok && k < c[i].size ?
						 c[i].node[k] : -5),
				  "\"%s\": rank %d on node %d", c[i].s, k,
				  node[k]);
	}
	/* the message says where and what */
	ret = rdmach_nodemap_parse("(vector,[[(0,2,1)]x2]x2)", 8, node, why,
				   sizeof(why));
	TST_CHECK(t, ret == -EINVAL && strstr(why, "offset 9: a group inside "
					      "a group"),
		  "nested group: %s, \"%s\"", tst_errname(ret), why);
	return 0;
}

/* A mapping that puts the two ranks (on one host) on two nodes (as
 * Slurm's does for some task distributions): every record is read
 * (RDMACH_CONNECT=all), so a warning naming both ranks and their host ids,
 * and the host ids decide: the pair connects, over shm.  Under
 * RDMACH_CONNECT=demand (arg "demand"), which reads only the records the
 * mapping calls local, connect fails instead (without ib: the "other
 * node" is out of reach; over ib the first contact names the mismatch). */
/* Under demand a rank the mapping puts on another node is met at the
 * first put: with no transport to it, connect itself fails; with ib, the
 * first contact reads its record, whose host id contradicts the mapping.
 * The put's result (0 until then, bounded), or connect's. */
static int cn_first_put(rdmach_ctx_t *ctx, int peer)
{
	uint64_t deadline = rdmach_now_ns() + 5000000000ull;
	uint8_t byte = 1;
	struct iovec v = { &byte, 1 };
	rdmach_conn_t *c;
	ssize_t r = 0;
	int ret = rdmach_conn(ctx, peer, &c);

	if (ret)
		return ret;
	while (!r && rdmach_now_ns() < deadline)
		r = rdmach_put(c, &v, 1);
	return (int)(r < 0 ? r : 0);
}

static int cn_nodemap_mismatch(struct tst *t)
{
	int demand = t->c->arg && !strcmp(t->c->arg, "demand");
	struct tst_capture cap;
	char out[4096];
	struct cn_oob o;
	rdmach_ctx_t *ctx;
	int ret, connected, local, h0, h1;

	cn_oob_init(&o, t, 0);
	o.mapping = "(vector,(0,2,1))";
	setenv("RDMACH_CONNECT", demand ? "demand" : "all", 1);
	ret = rdmach_init(&ctx, &o.oob);
	unsetenv("RDMACH_CONNECT");
	TST_CHECK0(t, ret);
	TST_CHECK0(t, tst_capture_begin(&cap, 0));
	ret = rdmach_connect(ctx);
	connected = !ret;
	if (demand && !ret)
		ret = cn_first_put(ctx, 1 - t->rank);
	tst_capture_end(t, &cap, out, sizeof(out));
	local = rdmach_peer_local(ctx, 1 - t->rank);
	h0 = rdmach_peer_host(ctx, 0);
	h1 = rdmach_peer_host(ctx, 1);
	rdmach_finalize(&ctx);
	/* the other node's ranks are not read at start-up under demand */
	if (demand && connected)
		TST_CHECK(t, h0 == -ENODATA && h1 == -ENODATA,
			  "host numbers %d %d under demand, not -ENODATA",
			  h0, h1);
	/* else the host ids decide: one host, host 0 for both */
	if (!demand && !ret)
		TST_CHECK(t, local == 1 && h0 == 0 && h1 == 0,
			  "one host: peer local %d, host numbers %d %d",
			  local, h0, h1);
	if (demand) {
		TST_CHECK(t, ret < 0, "connect and first put under demand: %s",
			  tst_errname(ret));
		return 0;
	}
	TST_CHECK(t, ret == 0, "connect: %s (%s)", tst_errname(ret), out);
	TST_CHECK(t, strstr(out, "PMI_process_mapping puts rank") &&
		  strstr(out, "rank 0 on ") && strstr(out, "rank 1 on ") &&
		  strstr(out, "the host ids decide"),
		  "the warning names not both ranks: %s", out);
	return 0;
}

/* A mapping in MPICH 4.3's repeat form that puts both ranks on one node
 * is read, not refused: no warning, and under demand (which reads the
 * records of the mapped node only) the pair connects over shm. */
static int cn_nodemap_repeat(struct tst *t)
{
	struct tst_capture cap;
	char out[4096];
	struct cn_oob o;
	rdmach_ctx_t *ctx;
	int ret;

	cn_oob_init(&o, t, 0);
	o.mapping = "(vector,[0]x2)";
	setenv("RDMACH_CONNECT", "demand", 1);
	ret = rdmach_init(&ctx, &o.oob);
	unsetenv("RDMACH_CONNECT");
	TST_CHECK0(t, ret);
	TST_CHECK0(t, tst_capture_begin(&cap, 0));
	ret = rdmach_connect(ctx);
	tst_capture_end(t, &cap, out, sizeof(out));
	if (!ret)
		TST_CHECK(t, rdmach_peer_local(ctx, 1 - t->rank) == 1,
			  "the pair on one node is not local");
	rdmach_finalize(&ctx);
	TST_CHECK(t, ret == 0, "connect: %s (%s)", tst_errname(ret), out);
	TST_CHECK(t, !strstr(out, "PMI_process_mapping"),
		  "the mapping was not read: %s", out);
	return 0;
}

#define CN_VICTIM_1 { 0, -SIGKILL }

static const struct tst_case cn_cases[] = {
	{ "nodemap_parse", 1, cn_nodemap_parse, TST_UNIT, NULL, { 0 } },
	{ "nodemap_mismatch", 2, cn_nodemap_mismatch,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "nodemap_mismatch_demand", 2, cn_nodemap_mismatch,
	  TST_NO_CTX | TST_LAUNCH_ONLY, "demand", { 0 } },
	{ "nodemap_repeat", 2, cn_nodemap_repeat,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "simultaneous", 2, cn_simultaneous, TST_NO_CTX | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
	{ "lost_messages_all", 2, cn_lost_messages_all,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "lost_messages", 2, cn_lost_messages,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "version_mismatch", 2, cn_version_mismatch,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "dies_before", 2, cn_dies,
	  TST_NO_CTX | TST_LAUNCH_ONLY | TST_KEEP_GOING, NULL, CN_VICTIM_1 },
	{ "dies_during", 2, cn_dies,
	  TST_NO_CTX | TST_LAUNCH_ONLY | TST_KEEP_GOING, "during",
	  CN_VICTIM_1 },
	{ "only_pairs", 4, cn_only_pairs, TST_NO_CTX | TST_LAUNCH_ONLY, NULL,
	  { 0 } },
	{ "slow_answers", 6, cn_slow_answers, TST_NO_CTX | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
	{ "progress_list", 4, cn_progress_list,
	  TST_NO_CTX | TST_LAUNCH_ONLY | TST_KEEP_GOING, NULL,
	  { 0, 0, 0, -SIGKILL } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, cn_cases,
			(int)(sizeof(cn_cases) / sizeof(cn_cases[0])));
}
