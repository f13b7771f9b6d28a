/*
 * rdmach_bench.h - start-up and data movement shared by the rdmach
 * benchmarks: self-launch (or join Hydra's PMI), wire-up of a pair of
 * ranks, and a transfer loop that drives one send and one receive cursor
 * on a connection with partial completion, as the contract requires:
 * retry the rest of a put with an iovec advanced by the count (the very
 * same iovec while a zero-copy put returns 0), and keep calling get (or
 * progress, when nothing is expected) while a put is outstanding.
 */
#ifndef RDMACH_BENCH_H
#define RDMACH_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE		/* cpu_set_t; include this header first */
#endif

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "bench_common.h"
#include "rdmach.h"
#include "rdmach_launch.h"
#include "rdmach_pmi.h"

struct rb {
	rdmach_pmi_t *pmi;
	rdmach_ctx_t *ctx;
	rdmach_conn_t *conn;
	int rank, peer;
	double stall_us;	/* watchdog: give up after this long idle */
	const char *prog;
};

/* A contiguous buffer being put or got; done counts completed bytes. */
struct rb_cursor {
	char *buf;
	size_t len, done;
};

static inline void rb_die(const struct rb *b, const char *what, int err)
{
	const char *detail = b->conn ? rdmach_conn_error(b->conn) : "";

	fprintf(stderr, "%s[rank %d]: %s (peer rank %d): %s%s%s\n", b->prog,
		b->rank, what, b->peer, rdmach_strerror(err),
		*detail ? ": " : "", detail);
	exit(1);
}

/* -P: rank r on the r-th CPU of the allowed set, like raw_shm_pingpong -P. */
static inline void rb_pin(const struct rb *b)
{
	cpu_set_t set, one;
	int c, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		rb_die(b, "sched_getaffinity failed", -errno);
	for (c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &set) || n++ != b->rank)
			continue;
		CPU_ZERO(&one);
		CPU_SET(c, &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			rb_die(b, "sched_setaffinity failed", -errno);
		return;
	}
	fprintf(stderr, "%s[rank %d]: -P: fewer than 2 CPUs available\n",
		b->prog, b->rank);
	exit(2);
}

/*
 * Become one of two ranks: under no PMI server, start two copies of this
 * program under the built-in launcher (this call then exits with their
 * status); under one, connect to it and wire up the pair.
 */
static inline void rb_start(struct rb *b, int argc, char **argv,
			    const struct bench_opts *o)
{
	rdmach_oob_t oob;
	int rc;

	memset(b, 0, sizeof(*b));
	b->prog = o->prog;
	b->rank = -1;
	b->peer = -1;
	b->stall_us = o->timeout_s * 1e6;
	if (o->transport && setenv("RDMACH_TRANSPORT", o->transport, 1))
		exit(1);
	/* The watchdog in rb_xfer catches a stalled transfer; the launcher's
	 * limit on the whole run catches a hang anywhere else. */
	rc = rdmach_launch_self(argc, argv, 2, o->timeout_s * 10);
	if (rc)
		rb_die(b, "cannot launch 2 processes", rc);
	rc = rdmach_pmi_init(&b->pmi, &oob);
	if (rc)
		rb_die(b, "PMI init failed", rc);
	b->rank = oob.rank;
	if (oob.size != 2) {
		fprintf(stderr, "%s: needs exactly 2 processes, got %d\n",
			b->prog, oob.size);
		exit(2);
	}
	b->peer = 1 - oob.rank;
	if (o->pin)
		rb_pin(b);
	rc = rdmach_init(&b->ctx, &oob);
	if (rc)
		rb_die(b, "rdmach_init failed", rc);
	rc = rdmach_connect(b->ctx);
	if (rc)
		rb_die(b, "rdmach_connect failed", rc);
	rc = rdmach_conn(b->ctx, b->peer, &b->conn);
	if (rc)
		rb_die(b, "rdmach_conn failed", rc);
}

static inline void rb_cursor_set(struct rb_cursor *c, void *buf, size_t len)
{
	c->buf = buf;
	c->len = len;
	c->done = 0;
}

static inline int rb_cursor_busy(const struct rb_cursor *c)
{
	return c && c->done < c->len;
}

/* One put or get attempt on the rest of c; returns bytes moved. */
static inline size_t rb_step(struct rb *b, struct rb_cursor *c, int is_put)
{
	struct iovec iov = { c->buf + c->done, c->len - c->done };
	ssize_t n;

	n = is_put ? rdmach_put(b->conn, &iov, 1) : rdmach_get(b->conn, &iov, 1);
	if (n < 0)
		rb_die(b, is_put ? "rdmach_put failed" : "rdmach_get failed",
		       (int)n);
	c->done += (size_t)n;
	return (size_t)n;
}

/*
 * Drive send (may be NULL) and recv (may be NULL) until send is complete
 * and, if wait_recv, recv too.  A receive still open when this returns
 * keeps its progress for the next call.
 */
static inline void rb_xfer(struct rb *b, struct rb_cursor *send,
			   struct rb_cursor *recv, int wait_recv)
{
	double idle_since = 0;
	unsigned spins = 0;

	while (rb_cursor_busy(send) || (wait_recv && rb_cursor_busy(recv))) {
		size_t moved = 0;
		int rc;

		if (rb_cursor_busy(send))
			moved += rb_step(b, send, 1);
		if (rb_cursor_busy(recv)) {
			moved += rb_step(b, recv, 0);
		} else if (!moved) {
			rc = rdmach_progress(b->ctx);
			if (rc)
				rb_die(b, "rdmach_progress failed", rc);
		}
		if (moved) {
			spins = 0;
			idle_since = 0;
			continue;
		}
		/* Read the clock rarely: it would cost more than a get. */
		if (++spins % 65536)
			continue;
		if (!idle_since) {
			idle_since = bench_now_us();
		} else if (bench_now_us() - idle_since > b->stall_us) {
			fprintf(stderr, "%s[rank %d]: no progress for %.0f s "
				"(peer rank %d; %s %zu/%zu B, %s %zu/%zu B)\n",
				b->prog, b->rank, b->stall_us / 1e6, b->peer,
				"put", send ? send->done : 0,
				send ? send->len : 0, "get",
				recv ? recv->done : 0, recv ? recv->len : 0);
			exit(1);
		}
	}
}

static inline void rb_put_all(struct rb *b, void *buf, size_t len,
			      struct rb_cursor *recv)
{
	struct rb_cursor c;

	rb_cursor_set(&c, buf, len);
	rb_xfer(b, &c, recv, 0);
}

static inline void rb_get_all(struct rb *b, void *buf, size_t len)
{
	struct rb_cursor c;

	rb_cursor_set(&c, buf, len);
	rb_xfer(b, NULL, &c, 1);
}

static inline void rb_check(struct rb *b, const void *buf, size_t len,
			    unsigned seed, size_t size, long iter)
{
	long bad = bench_check(buf, len, seed);

	if (bad < 0)
		return;
	fprintf(stderr, "%s[rank %d]: DATA MISMATCH from rank %d: size %zu, "
		"iteration %ld, byte %ld: got 0x%02x, expected 0x%02x\n",
		b->prog, b->rank, b->peer, size, iter, bad,
		((const unsigned char *)buf)[bad],
		bench_pattern((size_t)bad, seed));
	exit(1);
}

/* The rdmach counters of each rank in turn, rank 0 first. */
static inline void rb_print_stats(struct rb *b)
{
	int r, rc;

	for (r = 0; r < 2; r++) {
		if (r == b->rank) {
			printf("# rank %d counters (connection to rank %d, "
			       "transport %s)\n", b->rank, b->peer,
			       rdmach_conn_transport(b->conn));
			fflush(stdout);
			rdmach_print_stats(b->ctx, stdout);
			fflush(stdout);
		}
		rc = rdmach_pmi_barrier(b->pmi);
		if (rc)
			rb_die(b, "PMI barrier failed", rc);
	}
}

static inline int rb_finish(struct rb *b)
{
	int rc;

	b->conn = NULL;		/* dead after finalize */
	rc = rdmach_finalize(&b->ctx);
	if (rc)
		rb_die(b, "rdmach_finalize failed", rc);
	rc = rdmach_pmi_finalize(b->pmi);
	if (rc)
		rb_die(b, "PMI finalize failed", rc);
	return 0;
}

#endif /* RDMACH_BENCH_H */
