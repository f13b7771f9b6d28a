/*
 * rdmach.h - the five-function RDMA channel: init, connect, put, get, finalize.
 *
 * A context joins a group of `size` processes (ranks 0..size-1).  After the
 * collective rdmach_connect() every ordered pair of processes has a FIFO byte
 * pipe: rdmach_put() on my connection to peer P appends bytes to the pipe
 * that P reads with rdmach_get() on its connection to me.  A connection to
 * one's own rank is a pipe to oneself.  With RDMACH_CONNECT=demand a
 * transport that can (ib) makes a pair's connection at its first put
 * instead of in rdmach_connect (below).
 *
 * Contract
 * --------
 * FIFO:        bytes come out of a pipe exactly once, in the order they were
 *              put.  Message boundaries are NOT kept: one put may be read by
 *              several gets and one get may return the bytes of several puts.
 * Partial:     put and get never block.  Each returns how many bytes it
 *              completed now, 0..total of the iovec, or a negative error.
 *              The caller retries the rest later (an iovec advanced by the
 *              returned count).
 * Reuse:       bytes counted by put may be overwritten by the caller at once.
 *              Large puts may be served without a copy (by an RDMA read or a
 *              cross-memory read of the caller's buffer): such a put returns
 *              0 until the peer has taken the data, then the whole count.
 *              Until then the caller must retry with the same iovec (same
 *              bases and lengths; -EINVAL otherwise) and leave the buffer
 *              untouched.  The caller must also keep calling get on its
 *              connections (or rdmach_progress) so that both sides advance.
 *              rdmach_put_deferred lets such puts return at once instead
 *              and complete later (below), so that several can be in
 *              flight on one connection.
 * Errors:      negative errno values; rdmach_strerror() names them and
 *              rdmach_conn_error() gives the connection's detailed message
 *              (peer, transport, status).  Notable ones:
 *                -EINVAL     bad argument: NULL iovec with a count, negative
 *                            count, NULL base with a length, a total beyond
 *                            SSIZE_MAX, a rank outside the group;
 *                -EBADF      a handle that is not live (e.g. after finalize);
 *                -ECONNRESET the peer died or the link failed (detected in
 *                            bounded time: RDMACH_PEER_TIMEOUT_MS);
 *                -EPROTO     the peer broke the protocol (a corrupt packet
 *                            or descriptor: e.g. a local peer writing into
 *                            the shared segment); that connection only;
 *                -EPIPE      put to a peer that has finalized;
 *                -ESHUTDOWN  get after the peer finalized and every byte it
 *                            sent has been read;
 *                -ENODEV     the requested transport is not available.
 *              Bytes that had fully arrived before a peer failed or left are
 *              still delivered by get before the error is returned.
 * Finalize:    local, not collective.  It waits (at most
 *              RDMACH_FINALIZE_TIMEOUT_MS) until every byte put has left this
 *              process (in the peer's ring or read by the peer), tells the
 *              peers, and releases every resource.  Handles are dead after.
 * Threads:     a context and its connections are used by one thread at a
 *              time (the caller serialises); distinct contexts are
 *              independent.
 * Knobs:       thresholds and sizes come from RDMACH_* environment variables,
 *              read at rdmach_init(); `rdmach_info` lists them with defaults.
 */
#ifndef RDMACH_H
#define RDMACH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDMACH_API_VERSION 1

typedef struct rdmach_ctx rdmach_ctx_t;
typedef struct rdmach_conn rdmach_conn_t;

/*
 * Out-of-band key-value exchange, supplied by the caller: PMI under MPICH,
 * rdmach_pmi_init() (include/rdmach_pmi.h) for stand-alone programs.
 * put publishes a key of this process; fence is collective over the whole
 * group and makes every earlier put visible to every get.  Keys and values
 * are NUL-terminated strings of printable characters without spaces.
 * Each callback returns 0 or a negative errno value.  rdmach_connect may
 * call fence on a thread of its own while the calling thread answers the
 * peers' connection requests; no two callbacks ever run at once.
 */
typedef struct rdmach_oob {
    int rank;                   /* this process, 0..size-1 */
    int size;                   /* processes in the group */
    size_t value_max;           /* longest value the exchange carries */
    void *arg;                  /* passed to every callback */
    int (*put)(void *arg, const char *key, const char *value);
    int (*fence)(void *arg);
    int (*get)(void *arg, const char *key, char *value, size_t len);
} rdmach_oob_t;

/* Counters of one connection (rdmach_conn_stats) or of a whole context
 * (rdmach_ctx_stats: the sum over its connections plus the context-wide
 * registration cache figures). */
typedef struct rdmach_stats {
    uint64_t bytes_put;           /* bytes accepted by put */
    uint64_t bytes_got;           /* bytes delivered by get */
    uint64_t msgs_put;            /* put calls that accepted > 0 bytes */
    uint64_t msgs_got;            /* get calls that delivered > 0 bytes */
    uint64_t packets_sent;        /* ring packets written (data + control) */
    uint64_t packets_received;
    uint64_t ring_full_stalls;    /* puts cut short: no ring space/credit */
    uint64_t credit_updates_sent; /* explicit tail (credit) updates */
    uint64_t credit_updates_received;
    uint64_t zcopy_msgs;          /* puts served by the peer reading our memory */
    uint64_t zcopy_bytes;
    uint64_t pipelined_msgs;      /* puts sent through the pipelined copy */
    uint64_t rcache_hits;         /* registration cache (context-wide) */
    uint64_t rcache_misses;
    uint64_t rcache_evictions;
    uint64_t rcache_invalidations;
    /* Large puts over ib (RDMACH_LARGE): the protocol of each message and
     * why it was chosen.  A message counts once, when its protocol starts
     * (zcopy_msgs/zcopy_bytes above count the zero-copy ones). */
    uint64_t spipe_msgs;          /* through the superpipeline */
    uint64_t spipe_bytes;
    uint64_t spipe_chunks;        /* its chunks (RDMA writes) */
    uint64_t large_ring_msgs;     /* large, through the ring's copy */
    uint64_t large_ring_bytes;
    uint64_t why_hit;             /* zero-copy: the buffer is registered */
    uint64_t why_reuse;           /* zero-copy: sent before, unchanged */
    uint64_t why_predicted;       /* zero-copy: new, its size class reuses */
    uint64_t why_model;           /* zero-copy: new, registering is cheaper */
    uint64_t why_new;             /* superpipeline: a new buffer */
    uint64_t why_no_payoff;       /* superpipeline: zero-copy was wanted (seen
                                   * before, or by the model) but
                                   * registrations of its size go unused */
    uint64_t why_forced;          /* RDMACH_LARGE forced the protocol */
    uint64_t why_below;           /* a copy protocol: under zero-copy's threshold
                                   * (or RDMACH_ZCOPY=0); the ring: under the
                                   * superpipeline's */
    uint64_t why_fallback;        /* ring: the chosen protocol could not run */
    uint64_t zcopy_reads;         /* reads this side issued for the peers'
                                   * zero-copy puts (RDMA reads, bounce
                                   * read-aheads included; process_vm_readv
                                   * calls): per message, 1 is the least */
} rdmach_stats_t;

/* What the library exports; everything else in it is hidden (built with
 * -fvisibility=hidden): no PLT between its own files, none of its
 * internals in the symbol table of a program or library linking it. */
#if defined(__GNUC__)
#define RDMACH_API __attribute__((visibility("default")))
#else
#define RDMACH_API
#endif

/* 1. init: open the transports this process may use and join the group
 * described by oob (copied; its arg must stay valid until finalize). */
RDMACH_API int rdmach_init(rdmach_ctx_t **ctxp, const rdmach_oob_t *oob);

/* 2. connect: collective over the group; sets up every connection.  Peers on
 * the same host use shared memory, others InfiniBand/RoCE, unless
 * RDMACH_TRANSPORT=shm|ib forces one.  Which ranks share a host comes from
 * the process manager's PMI_process_mapping where it serves one (checked
 * against the host ids of the ranks it calls local), else from every
 * rank's host id.  When every rank's host id is read (RDMACH_CONNECT=all,
 * or auto in small jobs) the mapping is a hint: one that disagrees with
 * the host ids (Slurm's, for some task distributions) is warned about and
 * the host ids decide; under demand it must be right (connect fails).
 * RDMACH_CONNECT=demand (what the default, auto, does in jobs of more
 * than RDMACH_CONNECT_ALL_MAX ranks): connect only chooses each
 * pair's transport and sets up shm; an ib connection is made by the first
 * put on it (which returns 0 until it is up: retry, as for a full ring),
 * or by the peer's first put, answered by any call of this process that
 * polls (a put or get on any ib connection, rdmach_progress).  A get or
 * peek on a connection not up returns 0; a peer that cannot make its end
 * (registration failed there: `ulimit -l`) fails the connection with
 * -ECONNRESET at its answer; a peer that does not answer
 * fails the connection with -ECONNRESET within RDMACH_CONNECT_TIMEOUT_MS
 * (the peer answers from its rdmach calls: one that makes none for that
 * long counts as dead; so does one that finalized before the pair ever
 * connected: its put gives
 * -ECONNRESET, not -EPIPE, and a get on a pair never connected returns
 * 0, not -ESHUTDOWN).  Under demand an ib connection that both ends
 * have left idle may also be closed again, to bound the QPs a process
 * keeps (RDMACH_IB_QPS_MAX, or the adapter's max_qp): it closes only when
 * each end has read all the other put, and is then as before its first
 * put (the next put makes it again, returning 0 until it is up; a get
 * returns 0, and the peer's finalize is not seen on it), except that its
 * put_deferred tickets go on increasing and rdmach_put_done reports the
 * last one done.  Puts to a peer asked to close wait for its answer,
 * given from its rdmach calls; the connection fails (-ECONNRESET) only
 * when its adapter stops answering too (RDMACH_PEER_TIMEOUT_MS). */
RDMACH_API int rdmach_connect(rdmach_ctx_t *ctx);

/* The connection to `peer` (0..size-1), valid from connect to finalize. */
RDMACH_API int rdmach_conn(rdmach_ctx_t *ctx, int peer, rdmach_conn_t **connp);

/* Connections that came up since the last call, for a caller that polls
 * only the connections in use (an MPI progress engine with many peers):
 * under RDMACH_CONNECT=demand it first answers the connection requests
 * that have arrived (as any polling call does), then stores in peers[]
 * up to max ranks whose connection is now up, made by either side, and
 * returns how many (0: none new).  Each rank is reported once in the
 * context's life, this process's own included; the connections
 * rdmach_connect made (all of them under RDMACH_CONNECT=all, the shm
 * ones under demand) come first.  -EINVAL, -EBADF, or -ENOTCONN before
 * rdmach_connect. */
RDMACH_API int rdmach_conns_up(rdmach_ctx_t *ctx, int *peers, int max);

/* 3. put / 4. get: see the contract above. */
RDMACH_API ssize_t rdmach_put(rdmach_conn_t *conn, const struct iovec *iov, int iovcnt);
RDMACH_API ssize_t rdmach_get(rdmach_conn_t *conn, const struct iovec *iov, int iovcnt);

/* Deferred completion, for a caller that can wait for its buffers apart
 * from its puts (an MPI send request): rdmach_put_deferred is rdmach_put
 * except that a put the transport serves without a copy (the peer reads
 * the caller's memory) returns its whole count at once with *ticket set
 * (> 0), and those bytes must stay untouched until rdmach_put_done
 * reports a value >= *ticket.  Any other put sets *ticket to 0: its bytes
 * may be reused at once.  Tickets of a connection increase and complete
 * in order, so one rdmach_put_done answers for all of them.
 * rdmach_put_done: 1 while some ticket of conn is not done, 0 when all
 * are; *done set either way to the highest done ticket (every lower one
 * is done too); or a negative errno: the peer died (-ECONNRESET) or
 * finalized (-EPIPE) before taking the bytes.  Call it (or put/get) until
 * it returns 0: it is what notices a dead peer.  Finalize waits for
 * deferred puts like for any other. */
RDMACH_API ssize_t rdmach_put_deferred(rdmach_conn_t *conn, const struct iovec *iov,
                                       int iovcnt, uint64_t *ticket);
RDMACH_API int rdmach_put_done(rdmach_conn_t *conn, uint64_t *done);

/* Reading in place, for a caller that can use the bytes where they lie
 * (an MPI channel handing a packet header and the payload after it to
 * its handler, which copies the payload once, into the receive buffer):
 * rdmach_peek returns how many of the next bytes of conn's stream lie
 * contiguous in the transport's memory (> 0) with *buf pointing at them;
 * 0 when nothing has arrived; -ENOMSG when what comes next must be read
 * with rdmach_get (a large message's protocol, or the connection's idle
 * work: a get then does it); -EOPNOTSUPP when the transport has no such
 * bytes (ib in its basic ring mode); or a negative errno as get.  The
 * bytes stay there, unread and unchanged (their space does not go back
 * to the writer), until rdmach_consume(conn, n) reads the first n of them
 * (1 .. the count peek returned; it counts as a get of n bytes) or a get
 * reads them; puts and progress in between (a handler's reply) leave
 * them alone. */
RDMACH_API ssize_t rdmach_peek(rdmach_conn_t *conn, const void **buf);
RDMACH_API int rdmach_consume(rdmach_conn_t *conn, size_t n);

/* Advance every connection (completions, credit returns, acknowledgements)
 * without moving user data.  Returns 0, or the error of the first
 * connection found failed, at this call and every later one (the other
 * connections still advance; a peer that finalized is not a failure). */
RDMACH_API int rdmach_progress(rdmach_ctx_t *ctx);

/* Idle waits, for a caller with nothing to do (an MPI progress engine
 * that found no work): arm, poll every connection it waits on, and sleep
 * unless that poll moved something:
 *     int wakeable = rdmach_wait_arm(ctx);
 *     ... rdmach_put / rdmach_get on every connection ...
 *     rdmach_wait(ctx, moved_something ? 0 : timeout_us);
 * rdmach_wait_arm returns 1 when every peer's put or get ends the sleep
 * at once (shm peers with RDMACH_SHM_WAKE on), 0 when the sleep may last
 * its whole timeout (ib peers, or the doorbell off), or a negative errno.
 * rdmach_wait(ctx, 0) only disarms.  rdmach_wake ends the sleep of
 * another thread of this process. */
RDMACH_API int rdmach_wait_arm(rdmach_ctx_t *ctx);
RDMACH_API int rdmach_wait(rdmach_ctx_t *ctx, uint64_t timeout_us);
RDMACH_API int rdmach_wake(rdmach_ctx_t *ctx);

/* 5. finalize: drain, disconnect, release.  *ctxp is set to NULL. */
RDMACH_API int rdmach_finalize(rdmach_ctx_t **ctxp);

/* Helpers. */
RDMACH_API const char *rdmach_strerror(int err);
RDMACH_API const char *rdmach_conn_error(const rdmach_conn_t *conn); /* "" if healthy */
RDMACH_API const char *rdmach_conn_transport(const rdmach_conn_t *conn); /* "shm", "ib" */
/* 1 if rank peer runs on this process's host (equal host ids: hostname
 * and boot id, whichever transport connects the pair), 0 if not; -ENOTCONN
 * before rdmach_connect, -EINVAL for a bad rank.  An MPI library checks
 * its own idea of nodes against it. */
RDMACH_API int rdmach_peer_local(const rdmach_ctx_t *ctx, int peer);
/* The host of rank peer as a number (librdmach 1.5.0): ranks with equal
 * host ids have equal numbers; the hosts are numbered 0, 1, ... in the
 * order of their lowest rank, alike in every process of the group.  An
 * MPI library takes its node ids from it rather than from the process
 * manager's PMI_process_mapping, a hint that can be wrong (Slurm's for
 * an arbitrary distribution puts every rank on a node of its own).
 * -ENODATA when this process has not read every rank's host id
 * (RDMACH_CONNECT=demand with a mapping: the ranks on other nodes are
 * read at first contact); -ENOTCONN before rdmach_connect, -EINVAL for a
 * bad rank. */
RDMACH_API int rdmach_peer_host(const rdmach_ctx_t *ctx, int peer);
RDMACH_API int rdmach_rank(const rdmach_ctx_t *ctx);
RDMACH_API int rdmach_size(const rdmach_ctx_t *ctx);
RDMACH_API int rdmach_conn_stats(const rdmach_conn_t *conn, rdmach_stats_t *st);
RDMACH_API int rdmach_ctx_stats(const rdmach_ctx_t *ctx, rdmach_stats_t *st);
RDMACH_API void rdmach_print_stats(const rdmach_ctx_t *ctx, FILE *out);

/* The value of a numeric or boolean knob that `rdmach_info` lists (those
 * of the library and of the CH3 channel, RDMACH_CH3_*): 0 and *value set;
 * -EINVAL for a bad value (logged, naming the knob); -ENODATA when it is
 * unset and its default is "auto" (the caller decides); -ENOENT for an
 * unknown or string knob. */
RDMACH_API int rdmach_knob_get(const char *name, uint64_t *value);

#ifdef __cplusplus
}
#endif
#endif /* RDMACH_H */
