/*
 * tl.h - the transport interface (internal).  The core (core/rdmach.c) owns
 * the context, the connection table, argument checks, counters of user
 * bytes and the wire-up sequence; a transport (rdma_shm/, rdma_ib/) owns
 * how bytes move.  Transports never see one another.
 *
 * Wire-up, run by rdmach_connect() on every process:
 *   core phase 0: publish host id + transports opened;      fence
 *   ops->publish(tl, peers): create endpoints, oob put;     fence
 *   ops->connect(tl, peers): oob get, connect endpoints;    fence
 *   ops->ready(tl): local clean-up (e.g. close exchange fds)
 * Every transport that opened runs every phase, with npeers possibly 0, so
 * that the fences stay collective.  Publish puts at most one key per rank
 * and transport (one record, read by a peer at first contact).
 *
 * Connections on demand (RDMACH_CONNECT=demand): a transport with
 * connect_peer gets its peers in publish (to size what is shared) but
 * none in connect; the core then calls connect_peer from the first put
 * (start = 1) or get/peek/progress (start = 0) on a connection whose tl
 * is not set yet.  The transport calls rdmach_conn_up(conn, tl) when the
 * connection is up, also for connections a peer started (and for those
 * connect makes): rdmach_conns_up reports it to the caller.  It may
 * close an idle connection again (rdmach_conn_down) to stay within its
 * resources; the next put makes it anew, as the first did.
 */
#ifndef RDMACH_CORE_TL_H
#define RDMACH_CORE_TL_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "rdmach.h"

struct rdmach_ctx;
struct rdmach_conn;
struct rdmach_tl;

struct rdmach_tl_ops {
	const char *name;	/* "shm", "ib" */
	int id;			/* RDMACH_TL_*: its slot in ctx->tls */
	int same_host_only;	/* reaches only peers on this host (shm) */
	/* Open for this process.  -ENODEV (with a message logged at debug
	 * level) when the transport cannot run here. */
	int (*open)(struct rdmach_ctx *ctx, struct rdmach_tl **tlp);
	int (*publish)(struct rdmach_tl *tl, const int *peers, int npeers);
	int (*connect)(struct rdmach_tl *tl, const int *peers, int npeers);
	int (*ready)(struct rdmach_tl *tl);
	/* Optional: connections on demand (above).  start: begin one if none
	 * is under way (else only advance: answer the peer, retry, time
	 * out).  1 when up (conn->tl set), 0 while under way or not started,
	 * or a negative errno (after rdmach_conn_fail: a peer that never
	 * answers fails with -ECONNRESET within RDMACH_PEER_TIMEOUT_MS). */
	int (*connect_peer)(struct rdmach_tl *tl, int peer, int start);
	/* Optional, with connect_peer: answer connection requests peers
	 * sent (rdmach_conns_up under demand); errors go to the connections
	 * they concern. */
	void (*listen)(struct rdmach_tl *tl);
	/* iov/iovcnt already checked by the core; total = sum of lengths > 0.
	 * Return bytes completed (0..total) or a negative errno; a transport
	 * that detects a failure calls rdmach_conn_fail() first. */
	ssize_t (*put)(struct rdmach_conn *conn, const struct iovec *iov,
		       int iovcnt, size_t total);
	ssize_t (*get)(struct rdmach_conn *conn, const struct iovec *iov,
		       int iovcnt, size_t total);
	/* Optional (NULL: the core calls put and reports no ticket).
	 * put_deferred: put, except that a put served by the peer reading
	 * the caller's memory returns total at once with *ticket set (> 0);
	 * *ticket is left alone otherwise.  put_done: *done = the highest
	 * ticket read; 1 while one is not, 0 when none is pending, or a
	 * negative errno (after rdmach_conn_fail). */
	ssize_t (*put_deferred)(struct rdmach_conn *conn,
				const struct iovec *iov, int iovcnt,
				size_t total, uint64_t *ticket);
	int (*put_done)(struct rdmach_conn *conn, uint64_t *done);
	/* Optional (NULL: rdmach_peek says -EOPNOTSUPP).  peek: the next
	 * bytes of the stream where they lie, *buf and their count; 0 when
	 * none have arrived; -ENOMSG when get must read what comes next (or
	 * do its idle work first); or a negative errno.  consume: the first
	 * n (1 .. peek's count) are read; 0 or -EINVAL. */
	ssize_t (*peek)(struct rdmach_conn *conn, const void **buf);
	int (*consume)(struct rdmach_conn *conn, size_t n);
	int (*progress)(struct rdmach_tl *tl);
	/* Optional: the transport's own counters, for rdmach_print_stats
	 * (lines starting "# "). */
	void (*print_stats)(struct rdmach_tl *tl, FILE *out);
	/* Idle waits (rdmach_wait_arm, rdmach_wait, rdmach_wake); NULL when
	 * the transport's peers cannot end a sleep.  wait_arm: about to
	 * sleep (the caller polls every connection next); 1 and *token set
	 * when the peers will ring, else 0 and no wait follows.  wait: sleep
	 * until rung or timeout_ns (0: just disarm).  wake: ring my own
	 * bell (another thread of this process posted work). */
	int (*wait_arm)(struct rdmach_tl *tl, uint32_t *token);
	void (*wait)(struct rdmach_tl *tl, uint32_t token, uint64_t timeout_ns);
	void (*wake)(struct rdmach_tl *tl);
	/* Drain what this process put (until deadline_ns, CLOCK_MONOTONIC),
	 * tell the peers, release everything; tl is freed. */
	int (*close)(struct rdmach_tl *tl, uint64_t deadline_ns);
};

/* First member of every transport's private state. */
struct rdmach_tl {
	const struct rdmach_tl_ops *ops;
	struct rdmach_ctx *ctx;
};

/* Transport slots, in order of preference for a pair both can serve. */
enum { RDMACH_TL_SHM, RDMACH_TL_IB, RDMACH_TL_MAX };

/* A transport registers its ops in the linker section "rdmach_tls"; the
 * core finds them there (it never names a transport). */
#define RDMACH_TL_REGISTER(ops)                                         \
	static const struct rdmach_tl_ops *const rdmach_tl_ref_##ops      \
	__attribute__((used, section("rdmach_tls"))) = &ops

struct rdmach_conn {
	struct rdmach_ctx *ctx;
	struct rdmach_tl *tl;		/* NULL until connected */
	struct rdmach_tl *via;		/* the transport chosen for the peer
					 * (set by connect; tl = via once up) */
	int contacted;			/* the peer's record was checked */
	int announced;			/* up: queued for rdmach_conns_up */
	void *priv;			/* transport's per-connection state */
	int peer;
	int err;			/* 0, or the negative errno of a failure */
	int stall_warned;		/* puts stalled: said so once */
	uint64_t stall_since_ns;	/* first put that took nothing, or 0 */
	uint64_t put_done_seen;		/* last rdmach_put_done answer */
	uint64_t tickets_done;		/* while down: rdmach_conn_down's */
	rdmach_stats_t stats;
	/* rdmach_consume calls and bytes: printed by rdmach_print_stats, not
	 * in rdmach_stats_t (its size is part of the ABI) */
	uint64_t in_place_reads, in_place_bytes;
	/* with err: what failed (allocated then: a process keeps one
	 * rdmach_conn per rank of the job, most never fail) */
	char *errmsg;
};

struct rdmach_ctx {
	rdmach_oob_t oob;
	int rank, size;
	int connected;
	struct rdmach_tl *tls[RDMACH_TL_MAX];	/* opened transports */
	struct rdmach_conn *conns;		/* [size] */
	uint64_t finalize_timeout_ns;
	uint64_t peer_timeout_ns;
	uint64_t connect_timeout_ns;	/* a connection being made */
	rdmach_stats_t ctx_stats;	/* context-wide: rcache figures */
	int demand;			/* RDMACH_CONNECT=demand */
	int host_procs;			/* the job's processes on this host
					 * (known from rdmach_connect's
					 * publish phase on) */
};

/* Mark conn failed (first failure wins), log the message once at error
 * level, and return err for the caller to pass on. */
int rdmach_conn_fail(struct rdmach_conn *conn, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* conn is up on tl (sets conn->tl); queued once for rdmach_conns_up. */
void rdmach_conn_up(struct rdmach_conn *conn, struct rdmach_tl *tl);
/* conn is not up any more, though not failed: a transport with
 * connect_peer closed it for being idle (everything put on either end
 * was got), or is closing it.  The core routes its calls through
 * connect_peer again, and the next put makes it anew; rdmach_conns_up
 * does not report it again.  tickets_done: every put_deferred ticket up
 * to it is done, which rdmach_put_done reports meanwhile (the transport
 * goes on from there: tickets of a connection keep increasing). */
void rdmach_conn_down(struct rdmach_conn *conn, uint64_t tickets_done);

/* A transport whose open returns -ENODEV says why here: when a pair of
 * ranks is then left without a transport, the error names that reason and
 * the host. */
void rdmach_tl_unavailable(struct rdmach_ctx *ctx, int tl, const char *fmt,
			   ...) __attribute__((format(printf, 3, 4)));

/* oob helpers with this project's key conventions and clear errors. */
int rdmach_oob_put(struct rdmach_ctx *ctx, const char *key, const char *value);
int rdmach_oob_get(struct rdmach_ctx *ctx, const char *key, char *value,
		   size_t len);

#endif /* RDMACH_CORE_TL_H */
