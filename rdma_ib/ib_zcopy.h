/*
 * ib_zcopy.h - zero-copy large puts by RDMA read (rdma_ib private, prefix
 * ib_zc_).  Paper mechanism 4 with the registration cache of mechanism 5.
 *
 * Protocol (per connection and direction):
 *  sender   put of total >= RDMACH_ZCOPY_THRESHOLD registers its source
 *           pieces through the cache (mem/rcache.h), sends one
 *           RDMACH_PKT_RNDV packet (proto/pkt.h: id, total, segments with
 *           addr/len/rkey) through the ring in FIFO order with the data
 *           packets, and returns 0.  Retries (same iovec, else -EINVAL)
 *           return 0 until the peer wrote id into our ctrl area's ack word,
 *           then the covered byte count; the registrations go back to the
 *           cache then.  rdmach_put_deferred returns the covered count at
 *           once with id as its ticket instead; up to IB_ZC_TX_MAX such
 *           rendezvous are in flight, their registrations held until the
 *           ack word passes their id (ids and acks are in ring order, so
 *           one word acknowledges them all), and the packets, small or
 *           not, that follow them go on meanwhile.  A small first piece
 *           (RDMACH_RNDV_HEAD_MAX) goes ahead of the RNDV packet as data.
 *  receiver get, meeting the RNDV packet at the ring head, registers the
 *           part of its iovec the packet fills now, RDMA-reads straight
 *           into it (split to the QP's max_send_sge, the port's max_msg_sz
 *           and RDMACH_ZCOPY_READ_SIZE; at most max_rd_atomic reads
 *           outstanding) and WAITS for those reads before returning: the
 *           get's iovec is only the caller's during the call.  The wait is
 *           bounded by RDMACH_PEER_TIMEOUT_MS (with RDMACH_ZCOPY_YIELD it
 *           yields the CPU every 1024 empty polls, so that an adapter
 *           emulated in the kernel, Soft-RoCE, or an oversubscribed core
 *           is not starved); an error completion or the
 *           timeout fails the connection (-ECONNRESET, QP moved to error so
 *           nothing lands in the buffer afterwards).  A partial get keeps
 *           an offset; once all `total` bytes are read the packet is
 *           consumed and the id acknowledged by an 8-byte RDMA write.
 *           A get with room for fewer than RDMACH_ZCOPY_BOUNCE bytes
 *           reads ahead that many into a registered bounce buffer and
 *           copies from it, so tiny gets of a large put cost one read per
 *           RDMACH_ZCOPY_BOUNCE bytes, not one each.
 *
 * Memory the application releases (mem/rcache.h, mem/memhooks.h):
 *  - after put returned the count, anything goes: munmap + mmap at the same
 *    address, madvise(MADV_DONTNEED), free + malloc: the cache drops the
 *    stale registration at its next use and the new contents are sent;
 *  - before (put still returning 0), the buffer must stay untouched
 *    (include/rdmach.h).  free()/munmap then is the caller's bug: the
 *    registration stays pinned while in use, so the peer reads the old
 *    pages' contents (no crash, no other memory touched) and the entry is
 *    deregistered when the put completes.
 * fork(): ib_fork_setup() at open.  On kernels >= 5.13 the child gets
 * copies of pinned pages; else registered ranges are MADV_DONTFORK (the
 * child must not touch the parent's zero-copy buffers; exec is fine).  A
 * child never uses the parent's cache (rdmach_rcache_get: -ECHILD, and
 * put falls back to the copy path).
 * Registration failure on the sender (read-only memory, memlock limit)
 * falls back to the copy path; on the receiver it fails the connection
 * with a message naming ulimit -l.
 *
 * The transport (ib.c) owns the QP, the CQ and the ring; this file owns
 * the cache, the control packet's contents, the reads and their limits.
 */
#ifndef RDMACH_IB_ZCOPY_H
#define RDMACH_IB_ZCOPY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "ib_dev.h"
#include "core/iov.h"
#include "mem/rcache.h"
#include "proto/pkt.h"
#include "core/tl.h"

/* wr_id of a connection's send work requests: the peer's rank in bits
 * 0-31, a sequence number of the transport's writes and sends in bits
 * 32-59 (ib_ep.c: a read carries the next write's), and this bit on the
 * reads this file posts. */
#define IB_ZC_WRID	(1ull << 62)
#define IB_WR_SEQ_SHIFT 32
#define IB_WR_SEQ_MASK	((1u << 28) - 1)

struct ib_zc_cfg {
	int enabled;		/* RDMACH_ZCOPY */
	uint64_t threshold;	/* RDMACH_ZCOPY_THRESHOLD */
	uint64_t read_max;	/* RDMACH_ZCOPY_READ_SIZE */
	uint64_t bounce;	/* RDMACH_ZCOPY_BOUNCE */
	int yield;		/* RDMACH_ZCOPY_YIELD */
};

/* Per transport: the registration cache and the device's read limits. */
struct ib_zc {
	struct ib_dev *dev;
	/* sources of our puts: their keys go to the peer, which reads them
	 * (remote read); destinations of our gets: read into (local write
	 * only: their keys go nowhere, and no peer can read them) */
	struct rdmach_rcache *rc, *rc_dst;
	uint64_t threshold, read_max, bounce;
	unsigned int rd_atom, max_sge;
	uint64_t wait_ns;
	int enabled;
	int yield;		/* sched_yield every 1024 empty polls */
};

/* Rendezvous posted and not yet acknowledged, per connection, at most. */
#define IB_ZC_TX_MAX 8

/* A posted rendezvous: its registrations, held until its ack. */
struct ib_zc_tx {
	size_t bytes;		/* read by the peer */
	size_t head;		/* sent ahead of it as data */
	int nreg;
	struct rdmach_rcache_region *reg[RDMACH_RNDV_MAX_SEGS];
};

/* Per connection, embedded in the transport's connection. */
/* A control packet: as built by the sender, as copied by the receiver. */
struct ib_zc_ctl {
	struct rdmach_rndv_hdr h;
	struct rdmach_rndv_seg s[RDMACH_RNDV_MAX_SEGS];
};

/* A connection's rendezvous records, allocated at its first zero-copy
 * message either way: a process keeps an ib_zc_conn per peer connected,
 * and most peers never send it one (6.8 KiB each). */
struct ib_zc_mem {
	struct iovec tx_iov[RDMACH_RNDV_MAX_SEGS];
	struct ib_zc_tx tx[IB_ZC_TX_MAX];
	struct ib_zc_ctl rx_pkt;
};

/* The connection's send queue, which its reads share with the
 * transport's writes (ib_ep.h owns it). */
struct ib_zc_sq {
	unsigned int *free;	/* free slots */
	unsigned int keep;	/* slots reads leave to the transport */
	const uint32_t *wr_seq;	/* the transport's next write: a read's
				 * wr_id carries it (ib_tl.h) */
};

struct ib_zc_conn {
	struct ib_zc *zc;
	struct rdmach_conn *conn;
	struct ibv_qp *qp;
	struct ib_zc_sq sq;
	int (*poll)(void *arg);	/* the transport's CQ poll */
	void *poll_arg;
	/* sender: rendezvous tx_first .. next_id - 1 are posted and not
	 * acknowledged (tx[id % IB_ZC_TX_MAX]); wait_id (0: none) is the
	 * newest of them when it is a waiting put's, retried with tx_iov
	 * (in m, which exists while any is posted) */
	uint64_t next_id, tx_first, wait_id;
	int tx_iovcnt;
	struct ib_zc_mem *m;	/* NULL until the first zero-copy message */
	/* receiver: progress in the rendezvous at the ring head, and the
	 * packet itself, copied out of the ring and checked once (rx_have):
	 * the peer can rewrite it there while we read */
	uint64_t rx_off;
	int rx_have;		/* m->rx_pkt holds it */
	unsigned int reads_out;
	int read_status;	/* first error completion of a read, or 0 */
	/* read-ahead for gets smaller than the bounce size: bytes
	 * [b_start, b_start + b_len) of rendezvous b_id */
	uint8_t *b_buf;
	struct ibv_mr *b_mr;
	uint64_t b_id, b_start, b_len;
};

int ib_zc_open(struct ib_zc **zp, struct ib_dev *dev,
	       const struct ib_zc_cfg *cfg, struct rdmach_ctx *ctx);
void ib_zc_close(struct ib_zc *z);

void ib_zc_conn_init(struct ib_zc_conn *zcc, struct ib_zc *z,
		     struct rdmach_conn *conn, struct ibv_qp *qp,
		     const struct ib_zc_sq *sq, int (*poll)(void *arg),
		     void *poll_arg);
/* Release the posted rendezvous' registrations (at close). */
void ib_zc_conn_release(struct ib_zc_conn *zcc);

/* A waiting put's rendezvous is posted: the next put must be its retry. */
static inline int ib_zc_tx_waiting(const struct ib_zc_conn *zcc)
{
	return zcc->wait_id != 0;
}

/* Some rendezvous is posted and not acknowledged. */
static inline int ib_zc_tx_unacked(const struct ib_zc_conn *zcc)
{
	return zcc->tx_first != zcc->next_id;
}

/* Another rendezvous may be posted. */
static inline int ib_zc_tx_room(const struct ib_zc_conn *zcc)
{
	return zcc->next_id - zcc->tx_first < IB_ZC_TX_MAX;
}

/* Payload bytes of the control packet for iov after a head of head bytes
 * (rdmach_rndv_head_len, proto/pkt.h: it goes ahead as data, in the same
 * write; the payload's get then reads the rest whole, straight into place,
 * instead of a read ahead into the bounce buffer and a second read);
 * *bytes the bytes it covers.  0 bytes covered means: not worth it. */
uint32_t ib_zc_ctl_len(const struct ib_zc_conn *zcc, const struct iovec *iov,
		       int iovcnt, size_t head, size_t *bytes);
/* Register the covered pieces after the head and write the control packet
 * into ctl (len bytes from ib_zc_ctl_len); the caller checked
 * ib_zc_tx_room.  wait: a waiting put's (its retries are checked against
 * iov, head included).  The new id (> 0), or -EAGAIN: take the copy path
 * (registration impossible: read-only memory, a forked child, memlock
 * limit). */
int64_t ib_zc_put_start(struct ib_zc_conn *zcc, const struct iovec *iov,
			int iovcnt, size_t head, void *ctl, int wait);
/* The ack word says acked_id: release what it acknowledges (counted as
 * zero-copy puts). */
void ib_zc_tx_reap(struct ib_zc_conn *zcc, uint64_t acked_id);
/* Retry of the waiting put: -EINVAL for another iovec, 0 while not acked,
 * else the covered bytes, head included (and it waits no more). */
ssize_t ib_zc_put_poll(struct ib_zc_conn *zcc, const struct iovec *iov,
		       int iovcnt, uint64_t acked_id);

/* A RDMACH_PKT_RNDV packet at the ring head: read what fits into the iovec
 * cursor (room bytes at most).  Bytes delivered or a negative errno (the
 * connection failed).  *ack is set to the id to acknowledge when the
 * whole rendezvous was read (the packet is then to be consumed), else 0. */
ssize_t ib_zc_get(struct ib_zc_conn *zcc, const void *pkt, uint32_t len,
		  struct rdmach_iovc *c, size_t room, uint64_t *ack);
/* Should a get that has delivered something stop at this RNDV packet?
 * Yes when it cannot take the rendezvous whole (room bytes left): the
 * caller's next get, for the rest, reads it in one go.  1, 0, or a
 * negative errno for a bad packet (the connection failed). */
int ib_zc_get_stops(struct ib_zc_conn *zcc, const void *pkt, uint32_t len,
		    size_t room);

/* A completion of a read posted here (wr_id has IB_ZC_WRID). */
void ib_zc_completion(struct ib_zc_conn *zcc, const struct ibv_wc *wc);

#endif /* RDMACH_IB_ZCOPY_H */
