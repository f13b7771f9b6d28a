/*
 * ib_spipe.h - the superpipeline over verbs (rdma_ib private, prefix
 * ib_sp_): the registered buffers of one connection and the RDMA writes;
 * the schedule, block format and folding are proto/spipe.h's.  Below the
 * endpoint (ib_ep.h): it posts and polls through the calls the endpoint
 * gives it at set-up (struct ib_sp_ep_ops) and reads the control words
 * through pointers, never through the endpoint's struct.
 *
 * Per connection, allocated at its first superpipeline message (most
 * connections never carry one):
 *   staging  N x buf_size, registered for local access: the sender
 *            builds chunks here (RDMACH_SPIPE_MEM_MAX bounds the
 *            process's staging);
 *   landing  N x buf_size, registered for remote write: the peer's
 *            chunks arrive here, allocated when the receiver meets the
 *            first RDMACH_PKT_SPIPE packet, with the geometry it names.
 * So a connection used both ways registers 2 x N x buf_size (1.5 MiB with
 * 3 x 256 KiB).
 *
 * Protocol:
 *  sender   a put of a message (ib_large.h chose the superpipeline) sends
 *           one RDMACH_PKT_SPIPE packet in the ring (whole; FIFO with the
 *           data packets) and routes the next `total` bytes of the stream,
 *           whatever puts bring them, into chunks.  A put builds (copies)
 *           every chunk whose buffer is free (spipe_tx_writable) and
 *           posts it as one signalled RDMA write to the landing buffer,
 *           and returns the bytes copied: they may be reused at once.
 *           The first message of a connection is a rendezvous: the
 *           landing area's address is not known yet, so its first chunks
 *           are built (copied: the overlap of C0 with the round trip) and
 *           posted when the address arrives in our ctrl area -- by a
 *           later put, a get or progress.
 *  receiver get, meeting the packet at its ring head, allocates and
 *           registers the landing area the first time and writes its
 *           {rkey, address} into the sender's ctrl area (one 16-byte
 *           write); then copies blocks out as their flags arrive, one
 *           block behind the adapter, and acknowledges every chunk it
 *           finished with an 8-byte write of its number into the
 *           sender's ctrl area.  The packet is consumed when all `total`
 *           bytes were delivered.
 *  ending   finalize posts every built chunk before `fin` (waiting for
 *           the landing address until the deadline); a receiver that
 *           sees `fin` with the next block not there returns -ESHUTDOWN
 *           (writes of one QP land in order, as the ring's bottom fill
 *           already assumes).  A dead peer: keepalive, -ECONNRESET.
 */
#ifndef RDMACH_IB_SPIPE_H
#define RDMACH_IB_SPIPE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "core/iov.h"
#include "proto/spipe.h"

struct ib_large;
struct rdmach_conn;

/* The words of our ctrl area (struct ib_ctrl, ib_ep.h) the peer's
 * superpipeline writes. */
struct ib_sp_ctrl {
	uint64_t ack;		/* last chunk it copied out */
	uint64_t rkey;		/* its landing area: key, then address | */
	uint64_t addr;		/*   IB_PEER_WHOLE, in one write */
};

/* What the superpipeline asks of its endpoint, which owns the QP, the
 * ring and the ctrl area (ib_ep.c); the first argument is
 * ib_sp_ep.arg.  Calls, not a header of the endpoint's: the
 * superpipeline stays below it, and an indirect call per chunk is
 * nothing beside the chunk's copy. */
struct ib_sp_ep_ops {
	/* Reap the completions of the shared CQ.  0 or -EIO. */
	int (*poll)(void *arg);
	/* One signalled RDMA write of chunk g: len bytes at src (lkey) to
	 * the peer's raddr (rkey); its completion calls ib_sp_completed.
	 * The caller checked for a send queue slot.  0 or -ECONNRESET. */
	int (*post_chunk)(void *arg, void *src, uint32_t lkey, uint32_t len,
			  uint64_t raddr, uint32_t rkey, uint64_t g);
	/* n (1 or 2) words into the peer's struct ib_sp_ctrl at byte
	 * offset field, one write.  0 or a negative errno. */
	int (*post_ctrl)(void *arg, size_t field, const uint64_t *words,
			 unsigned int n);
	/* Fail the connection (logged once): err. */
	int (*fail)(void *arg, int err, const char *what);
};

/* The endpoint's side, given at set-up. */
struct ib_sp_ep {
	const struct ib_sp_ep_ops *ops;
	void *arg;
	struct rdmach_conn *conn;	/* counters; the rank in messages */
	struct ibv_pd *pd;
	const struct ib_sp_ctrl *in;	/* written by the peer */
	const uint64_t *fin;		/* the peer finalized (ctrl) */
	const int *broken;		/* the connection failed */
	const unsigned int *sq_free;	/* free send queue slots */
	unsigned int sq_keep;		/* slots a chunk leaves free */
};

struct ib_sp_conn {
	struct ib_sp_ep ep;
	struct ib_large *lg;	/* geometry; the process's staging count */
	/* sender */
	struct spipe_tx tx;
	uint8_t *stage;
	struct ibv_mr *stage_mr;
	uint64_t chunk_bytes[SPIPE_BUFS_MAX];	/* of the chunk in buffer i */
	uint64_t r_land;	/* the peer's landing area (0: not known) */
	uint32_t r_rkey;
	/* receiver */
	struct spipe_rx rx;
	uint8_t *land;
	struct ibv_mr *land_mr;
	size_t land_len;
};

/* The settings are lg's (lg->sp). */
void ib_sp_conn_init(struct ib_sp_conn *sp, const struct ib_sp_ep *ep,
		     struct ib_large *lg);
/* Deregister and free both areas (the process's staging count too). */
void ib_sp_conn_release(struct ib_sp_conn *sp);

/* A message is open: every put goes here until its bytes are in. */
static inline int ib_sp_tx_open(const struct ib_sp_conn *sp)
{
	return sp->tx.left != 0;
}

/* Could a message start on this connection as far as memory goes (its
 * staging exists or fits under RDMACH_SPIPE_MEM_MAX)? */
int ib_sp_room(const struct ib_sp_conn *sp);

/* Staging for a message about to open: there, or allocated and
 * registered now.  0, or -EAGAIN (no memory or registration: take
 * another protocol).  The endpoint then sends the RDMACH_PKT_SPIPE
 * packet spipe_tx_open writes (the ring is the endpoint's). */
int ib_sp_stage(struct ib_sp_conn *sp);

/*
 * Put into the open message: copy into chunks and post them.  Bytes
 * accepted (copied into staging, >= 0), or a negative errno: the
 * connection failed.
 */
ssize_t ib_sp_put(struct ib_sp_conn *sp, const struct iovec *iov, int iovcnt,
		  size_t total);

/* Acks, the landing address, posting built chunks.  0 or -EPROTO. */
int ib_sp_tx_progress(struct ib_sp_conn *sp);

/* Chunks built but not posted (waiting for the landing address). */
static inline uint64_t ib_sp_unposted(const struct ib_sp_conn *sp)
{
	return spipe_tx_unposted(&sp->tx);
}

/* The local write of chunk g completed. */
static inline void ib_sp_completed(struct ib_sp_conn *sp, uint64_t g)
{
	spipe_tx_completed(&sp->tx, g);
}

/*
 * A RDMACH_PKT_SPIPE packet (len bytes at pkt) is at the ring head: copy
 * what has arrived into c, room bytes at most.  Bytes delivered, or a
 * negative errno (-ESHUTDOWN: the peer finalized without sending the
 * rest; others fail the connection).  *finished: the message is
 * complete, the packet is to be consumed.
 */
ssize_t ib_sp_get(struct ib_sp_conn *sp, const void *pkt, uint32_t len,
		  struct rdmach_iovc *c, size_t room, int *finished);

#endif /* RDMACH_IB_SPIPE_H */
