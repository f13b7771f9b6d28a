/*
 * ib_spipe.h - the superpipeline over verbs (rdma_ib private, prefix
 * ib_sp_): the registered buffers of one connection and the RDMA writes;
 * the schedule, block format and folding are proto/spipe.h's.
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

struct ib_conn;

struct ib_sp_conn {
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

void ib_sp_conn_init(struct ib_sp_conn *sp, const struct spipe_params *p);
/* Deregister and free both areas (the process's staging count too). */
void ib_sp_conn_release(struct ib_conn *ic);

/* A message is open: every put goes here until its bytes are in. */
static inline int ib_sp_tx_open(const struct ib_sp_conn *sp)
{
	return sp->tx.left != 0;
}

/* Could a message start on this connection (the peer handles the
 * superpipeline, and its staging exists or fits under
 * RDMACH_SPIPE_MEM_MAX)? */
int ib_sp_room(const struct ib_conn *ic);

/*
 * Put through the superpipeline: start a message of total bytes (start,
 * none open) or continue the open one.  Bytes accepted (copied into
 * staging) >= 0; -EAGAIN: could not start (no memory or registration:
 * take another protocol); another negative errno: the connection failed.
 * *started is set when this call opened the message.
 */
ssize_t ib_sp_put(struct ib_conn *ic, const struct iovec *iov, int iovcnt,
		  size_t total, int start, int *started);

/* Acks, the landing address, posting built chunks.  0 or -EPROTO. */
int ib_sp_tx_progress(struct ib_conn *ic);

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
ssize_t ib_sp_get(struct ib_conn *ic, const void *pkt, uint32_t len,
		  struct rdmach_iovc *c, size_t room, int *finished);

#endif /* RDMACH_IB_SPIPE_H */
