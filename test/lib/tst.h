/*
 * tst.h - the rdmach test kit: a case table and its runner, a data pattern
 * keyed by stream offset, and a transfer engine that drives put/get streams
 * over partial completion with byte-exact checks.
 *
 * A test binary lists its cases and calls tst_main().  Outside a PMI server
 * every case runs in fresh processes started by rdmach_launch() (with a
 * timeout, and in a private /dev/shm so that leftovers are caught); under
 * mpiexec (PMI_FD set) all ranks run the cases one after the other in the
 * same processes, each case with a fresh rdmach context, and results are
 * gathered through PMI.  Output: "ok <name>", "FAIL <name>: reason",
 * "skip <name>: reason", then "<N> passed, <M> failed".
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
};

struct tst;

struct tst_case {
	const char *name;
	int nprocs;		/* ranks taking part (launcher: processes) */
	int (*fn)(struct tst *t);
	unsigned flags;
	const void *arg;
	/* launcher only: status each rank must end with (0 = exit 0; a
	 * signal number n is written as -n). */
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
	char why[512];		/* first failure */
};

/* Run the selected cases; returns the process exit status. */
int tst_main(int argc, char **argv, const struct tst_case *cases, int ncases);

/* Record the first failure (the rank is added) and return -1. */
int tst_fail(struct tst *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Report a skip reason and return TST_SKIP. */
int tst_skip(struct tst *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tst_log(struct tst *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define TST_CHECK(t, cond, ...)                                       \
	do {                                                          \
		if (!(cond))                                          \
			return tst_fail((t), __VA_ARGS__);           \
	} while (0)

/* Collective barrier over the group (oob fence). */
int tst_barrier(struct tst *t);
/* init + connect with this case's oob; 0 or the negative error. */
int tst_connect(struct tst *t, rdmach_ctx_t **ctxp);
rdmach_conn_t *tst_conn(struct tst *t, int peer);

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

#endif /* RDMACH_TST_H */
