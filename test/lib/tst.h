/*
 * tst.h - the rdmach test kit: every test binary is a table of cases run by
 * tst_main(), with one set of checks, a data pattern keyed by stream offset,
 * and a transfer engine that drives put/get streams over partial completion
 * with byte-exact checks.
 *
 * A test binary:
 *
 *	static int my_case(struct tst *t)
 *	{
 *		TST_CHECK0(t, do_something());           // "expr == 0"
 *		TST_CHECK_EQ(t, rdmach_put(c, NULL, 1), -EINVAL);
 *		TST_CHECK(t, x == 3, "x is %d", x);       // any condition
 *		return 0;                                 // or tst_skip(t, ...)
 *	}
 *	static const struct tst_case cases[] = {
 *		{ "my_case", 2, my_case, 0, NULL, { 0 } },
 *	};
 *	int main(int argc, char **argv)
 *	{
 *		return tst_main(argc, argv, cases, 1);
 *	}
 *
 * Checks.  A case returns 0 (pass), TST_SKIP (not applicable: tst_skip()
 * gives the reason) or a failure: the TST_CHECK* macros record it with
 * tst_fail() and return -1 from the case at once.  A case that must go on
 * after a failure (to stay in step with its group's fences, or to clean up)
 * calls tst_fail() and carries on: a case that recorded a failure fails,
 * whatever it returns.  The first failure is the one reported.  Helpers
 * for checks: tst_capture_begin/end (what a call prints on stderr),
 * tst_status_is (a wait status), tst_errname (an error code's text).
 *
 * How cases run, by flag:
 *  - default: a group of c->nprocs ranks (0 = 2 under the launcher, every
 *    rank under mpiexec), each with a fresh rdmach context already
 *    connected (t->ctx) and a per-case key namespace over the PMI
 *    out-of-band channel (t->oob); finalize and a check that no shared
 *    memory stays mapped follow the case.
 *  - TST_NO_CTX: the group without a context; fn runs on every rank and
 *    does init/connect itself.  TST_RAW_OOB: t->oob is the PMI client's own
 *    (keys not namespaced: for tests of the PMI client itself).
 *  - TST_UNIT: no group, no context, no PMI: fn runs once, with rank 0 of
 *    size 1, in one process forked from the runner (under mpiexec: in rank
 *    0's own process).  For pure unit tests (ring protocol, registration
 *    cache) and for tests that run rdmach_launch themselves.
 *  - TST_LAUNCH_ONLY: not under mpiexec (needs the kit's own launching:
 *    kills, environment, or no PMI server around).  TST_KEEP_GOING: a rank
 *    may die without the others being killed.  TST_ALL_RANKS: fn also runs
 *    on ranks >= nprocs (they take part in barriers).
 *
 * Running.  Outside a PMI server every case runs in fresh processes:
 * rdmach_launch() starts the group (with a timeout, and in a private
 * /dev/shm when root, so that leftovers are caught), or one fork() runs a
 * TST_UNIT case; reasons come back through a pipe, and a process that ends
 * with an unexpected status (c->expect_status: exit code, or -signal) fails
 * the case.  Under mpiexec (PMI_FD set) all ranks run the cases one after
 * the other in the same processes, each case with a fresh rdmach context,
 * and verdicts are gathered through PMI.
 *
 * Command line: test_x [-l] [-v] [filter...]: run (or with -l list) the
 * cases whose name contains a filter or matches it as a glob; -v logs
 * tst_log() lines and failures as they happen on stderr.
 *
 * Output, parsed by test/run-tests.sh and test/run-ib-vm.sh: one line per
 * case, "ok <name>", "FAIL <name>: <why>" or "skip <name>: <why>", then
 * "<N> passed, <M> failed" (cases; skips are in neither); exit status 1 if
 * one failed.  Anything else a case prints goes to stdout as it happens
 * (indented by convention).
 *
 * Environment: RDMACH_TEST_SCALE (volume factor, default 1),
 * RDMACH_TEST_TIMEOUT (seconds per case, default 120),
 * RDMACH_TEST_STALL (seconds without progress before a transfer fails,
 * default 20), RDMACH_TEST_NO_NS=1 (do not make a private /dev/shm),
 * RDMACH_TEST_CORRUPT=<offset> (self-test of the suite: put streams flip
 * the byte at that stream offset, so every data check must fail).
 */
#ifndef RDMACH_TST_H
#define RDMACH_TST_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rdmach.h"
#include "rdmach_pmi.h"

#define TST_SKIP 77		/* a case's return value: not applicable */

enum {
	TST_NO_CTX = 1 << 0,	/* the case does init/connect itself */
	TST_LAUNCH_ONLY = 1 << 1, /* needs rdmach_launch (kills, env) */
	TST_KEEP_GOING = 1 << 2, /* a rank may die: do not kill the rest */
	TST_ALL_RANKS = 1 << 3,	/* fn runs on ranks >= np too (barriers) */
	TST_UNIT = 1 << 4,	/* no group: one forked process (see above) */
	TST_RAW_OOB = 1 << 5,	/* t->oob is PMI's own, keys not namespaced */
	TST_NAMED = 1 << 6,	/* runs only when a filter names it (many
				 * processes: a step of run-tests.sh) */
};

struct tst;

struct tst_case {
	const char *name;
	int nprocs;		/* ranks taking part (launcher: processes) */
	int (*fn)(struct tst *t);
	unsigned flags;
	const void *arg;
	/* launcher only: status each rank must end with (0 = exit 0; a
	 * signal number n is written as -n); exit 0 also passes when the
	 * case was skipped. */
	int expect_status[8];
};

/* What a running case sees. */
struct tst {
	const struct tst_case *c;
	int rank, size;		/* in the group */
	int np;			/* ranks that take part: 0..np-1 */
	rdmach_oob_t oob;	/* per-case key namespace */
	rdmach_ctx_t *ctx;	/* connected, unless TST_NO_CTX */
	volatile uint64_t *shared; /* launcher: 512 words shared by all ranks */
	int verbose;
	int failed;		/* tst_fail() was called */
	char why[512];		/* first failure, or the skip reason */
};

/* Run the selected cases; returns the process exit status. */
int tst_main(int argc, char **argv, const struct tst_case *cases, int ncases);

/* Record a failure (the first one is kept; the rank is added) and return
 * -1.  The case fails even if it goes on and returns 0. */
int tst_fail(struct tst *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Report a skip reason and return TST_SKIP. */
int tst_skip(struct tst *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tst_log(struct tst *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Fail the case (return -1 from it) unless cond holds. */
#define TST_CHECK(t, cond, ...)                                       \
	do {                                                          \
		if (!(cond))                                          \
			return tst_fail((t), __VA_ARGS__);           \
	} while (0)

/* Fail the case unless the integer expression expr equals want; the
 * message names the expression, both values and, for negative values,
 * the error (errno for -1). */
#define TST_CHECK_EQ(t, expr, want)                                   \
	do {                                                          \
		long got_, want_ = (long)(want);                      \
		int errno_;                                           \
		errno = 0;                                            \
		got_ = (long)(expr);                                  \
		errno_ = errno;                                       \
		if (got_ != want_)                                    \
			return tst_fail_eq((t), __FILE__, __LINE__, #expr, \
					   got_, want_, errno_);      \
	} while (0)

/* Fail the case unless expr (0 or an error code) is 0. */
#define TST_CHECK0(t, expr) TST_CHECK_EQ(t, expr, 0)

/* What TST_CHECK_EQ records; returns -1. */
int tst_fail_eq(struct tst *t, const char *file, int line, const char *expr,
		long got, long want, int err);
/* "ok" for v >= 0, else rdmach_strerror(v). */
const char *tst_errname(long v);
/* Does a waitpid() status match want (exit code, or -signal)? */
int tst_status_is(int status, int want);

/* Capture stderr (and stdout if with_stdout) in a temporary file until
 * tst_capture_end(), which restores them and gives what was written (NUL-
 * terminated, cut to len); with -v it is also shown.  0 or -errno. */
struct tst_capture {
	int fd, saved_err, saved_out;
};
int tst_capture_begin(struct tst_capture *cap, int with_stdout);
/* RC QPs of this process, as the kernel lists them (rdma resource show
 * qp); -1 if it cannot. */
int tst_kernel_rc_qps(void);
/* What rdmach_print_stats(ctx) prints (malloc'd, to free), or NULL. */
char *tst_stats_text(rdmach_ctx_t *ctx);
/* The "# ib connections:" line of rdmach_print_stats (rdma_ib/ib_cm.c). */
struct tst_ib_conns {
	uint64_t made, refused, closed, closed_asked, kept, waits, over;
	uint64_t resent;
	unsigned int now, most;
	double answer_ms;
};
/* 0 and *c, or -ENOENT when ctx prints no such line (no ib). */
int tst_ib_conns(rdmach_ctx_t *ctx, struct tst_ib_conns *c);
void tst_capture_end(struct tst *t, struct tst_capture *cap, char *buf,
		     size_t len);

/* Collective barrier over the group (oob fence). */
int tst_barrier(struct tst *t);
/* init + connect with this case's oob; 0 or the negative error. */
int tst_connect(struct tst *t, rdmach_ctx_t **ctxp);
rdmach_conn_t *tst_conn(struct tst *t, int peer);
/* Set env (name, value, ..., NULL), connect t->ctx, and return the
 * connection to the other rank of two if it runs over transport; NULL
 * otherwise, with *ret the case's result (TST_SKIP: another transport). */
rdmach_conn_t *tst_connect_env(struct tst *t, const char *const *env,
			       const char *transport, int *ret);
/* The same for a case of any number of ranks: 0 once every connection
 * to another rank runs over transport, else the case's result
 * (TST_SKIP: another transport). */
int tst_connect_all_env(struct tst *t, const char *const *env,
			const char *transport);

/* Settings. */
double tst_scale(void);
/* n scaled by RDMACH_TEST_SCALE, at least min. */
uint64_t tst_scaled(uint64_t n, uint64_t min);
uint64_t tst_stall_ns(void);
/* Value of a knob (environment or default); 0 when unknown. */
uint64_t tst_knob(const char *name);
/* Ring size of the transport serving conn ("shm" or "ib" knob). */
uint64_t tst_ring_size(rdmach_conn_t *conn);
int tst_have_ib_device(void);

/* Pattern: byte at stream offset off of the stream keyed by seed. */
uint64_t tst_seed(uint64_t test_id, int from, int to);
/* Seed of the stream from -> to in this case. */
uint64_t tst_stream_seed(struct tst *t, int from, int to);
void tst_pat_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off);
/* Index of the first byte that differs from the pattern, or len. */
size_t tst_pat_check(const uint8_t *buf, size_t len, uint64_t seed,
		     uint64_t off);
uint8_t tst_pat_byte(uint64_t seed, uint64_t off);
uint64_t tst_rand(uint64_t *state);
/* Uniform in [lo, hi]. */
uint64_t tst_rand_range(uint64_t *state, uint64_t lo, uint64_t hi);

/*
 * Transfer engine.  A stream is one direction of one pipe as seen by this
 * process: puts of a pattern to a peer, or gets checked against the
 * pattern from a peer.  tst_run() polls every stream (and progress) until
 * all are done, failing on an error, a corrupt byte, a byte written
 * outside the iovec, or no progress for RDMACH_TEST_STALL seconds.
 */
struct tst_shape {
	size_t min_call, max_call;	/* bytes per call (random between) */
	int min_pieces, max_pieces;	/* iovec entries per call */
	int zero_pct;			/* % of extra zero-length entries */
	int gaps;			/* random gaps with canaries */
	int null_zero;			/* zero-length entries with NULL base */
	const size_t *sizes;		/* if set: call i moves sizes[i % n] */
	int nsizes;
	int sleep_us;			/* pause after each call (slow peer) */
};

struct tst_stream {
	rdmach_conn_t *conn;
	int peer;
	int is_put;
	uint64_t seed;
	uint64_t total;
	struct tst_shape shape;
	int expect_shutdown;	/* get: after total, wait for -ESHUTDOWN */
	/* state, set by tst_stream_init */
	uint64_t done;
	uint64_t calls, zero_returns;
	int finished;
	uint64_t rng;
	uint8_t *buf;
	size_t bufsz;
	struct iovec *iov;
	int iovcnt, iovmax;
	size_t pend_len;	/* put: bytes left in the pending iovec */
	uint64_t ncall;
};

void tst_stream_init(struct tst_stream *s, rdmach_conn_t *conn, int peer,
		     int is_put, uint64_t seed, uint64_t total,
		     const struct tst_shape *shape);
void tst_stream_free(struct tst_stream *s);
int tst_run(struct tst *t, struct tst_stream *s, int n);

/* Simple blocking helpers: move exactly len bytes of the pattern. */
int tst_put_all(struct tst *t, rdmach_conn_t *conn, int peer, uint64_t seed,
		uint64_t len);
int tst_get_all(struct tst *t, rdmach_conn_t *conn, int peer, uint64_t seed,
		uint64_t len);

/* Move all of iov[0..iovcnt) (consumed as it goes: pieces done are dropped,
 * the first one left is trimmed), retrying partial and empty calls with
 * progress; fails on an error or when nothing moves for tst_stall_ns(). */
int tst_xfer_iov(struct tst *t, rdmach_conn_t *conn, int is_put,
		 struct iovec *iov, int iovcnt);
/* Drop the first r bytes of iov[0..*iovcnt). */
void tst_iov_advance(struct iovec *iov, int *iovcnt, size_t r);

/* rdmach_put_deferred of len bytes at p, whole: its ticket, 0 if copied,
 * or a negative errno (a zero-copy put must take its piece at once). */
int64_t tst_put_deferred_whole(struct tst *t, rdmach_conn_t *c, uint8_t *p,
			       size_t len);
/* rdmach_put_done until it returns 0 (*done set) or fails. */
int tst_put_done_wait(struct tst *t, rdmach_conn_t *c, uint64_t *done);
/* n deferred puts of large bytes from buf, each followed by one of small
 * bytes, to a reader that does not read yet: the large ones must return
 * at once with tickets growing from *last (set to the last), the small
 * ones with none, and put_done must say none is done.  0 or -1. */
int tst_put_deferred_burst(struct tst *t, rdmach_conn_t *c, uint8_t *buf,
			   int n, size_t large, size_t small, int64_t *last);
/* Rank 0 puts TST_RNDV_HEAD_MSGS messages [head bytes, payload bytes] (one
 * iovec of two pieces, as the CH3 channel puts a message: waiting and
 * deferred puts in turn, several in a row) through a rendezvous; rank 1
 * must get just the header from a get with room for 1 KiB (the header
 * travels through the ring ahead of the rendezvous, and the get stops
 * there), then the payload by a get of its own, in one zero-copy read;
 * every byte is checked.  0 or -1. */
#define TST_RNDV_HEAD_MSGS 6
int tst_rndv_small_head(struct tst *t, rdmach_conn_t *c, size_t head,
			size_t payload);

/* Read total bytes of the pattern keyed by seed from c in place: random
 * parts of what rdmach_peek shows, consumed, mixed with gets of random
 * sizes (a get also whenever peek says -ENOMSG); every byte checked, and
 * the bad calls (NULL, consume of 0 or beyond the peeked bytes) must say
 * -EINVAL.  reply (a put stream to the same peer, or NULL): put by steps
 * between a peek and its consume, as a handler's reply would be, and to
 * its end after the reading; the peeked bytes must not change meanwhile.
 * *in_place and *nomsg count the reads in place and the -ENOMSG answers;
 * a transport without peek (-EOPNOTSUPP) is read by gets, *in_place =
 * -1.  0 or -1. */
int tst_peek_reader(struct tst *t, rdmach_conn_t *c, uint64_t seed,
		    size_t total, struct tst_stream *reply, long *in_place,
		    long *nomsg);
/* Ranks 0 and 1 (connected): rank 0 puts total bytes to rank 1, call i
 * of sizes[i % nsizes] bytes in one or two pieces, and reads reply_total
 * bytes back; rank 1 reads with tst_peek_reader, putting the reply
 * between peeks and consumes.  *in_place: rank 1's count (0 on rank 0).
 * 0 or -1. */
int tst_peek_pair(struct tst *t, const size_t *sizes, int nsizes,
		  uint64_t total, uint64_t reply_total, long *in_place);

#endif /* RDMACH_TST_H */
