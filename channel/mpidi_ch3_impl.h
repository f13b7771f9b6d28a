/*
 * mpidi_ch3_impl.h - CH3 channel "rdma": internal interface between the
 * channel's files (init, send, progress, out-of-band exchange).
 *
 * Wire format on each rdmach pipe: CH3 packets back to back, each a header
 * of the size CH3 gives (the packet's own struct, at most
 * sizeof(MPIDI_CH3_Pkt_t)) followed by the payload its handler asks for.
 * rdmach keeps the bytes in FIFO order; the framing is in the header's
 * first word, CH3's packet type (an enum far below 2^16): on the wire its
 * upper 16 bits carry the header's length, restored to the plain type
 * before a handler sees the packet.  Sending each header at its own size
 * (40 bytes for an EAGERSHORT packet instead of the union's 80) keeps an
 * 8-byte MPI message in one cache line of the shared-memory ring.  The
 * send header of eager, ready and rendezvous-request packets (32 bytes,
 * 8 of them padding) travels packed into 24: type word, sender_req_id,
 * match, data_sz -- so that an MPI message of up to 32 bytes sent by the
 * eager path (MPI_Isend, MPI_Send above the eager-short size) is one
 * cache line too.
 */
#ifndef MPIDI_CH3_IMPL_H_INCLUDED
#define MPIDI_CH3_IMPL_H_INCLUDED

#include "mpidimpl.h"
#include "rdmach.h"
#include "ch3_compat.h"

_Static_assert(sizeof(MPIDI_CH3_Pkt_type_t) == 4 && MPIDI_CH3_PKT_END_ALL < 0x10000 &&
	       sizeof(MPIDI_CH3_Pkt_t) < 0x10000, "ch3:rdma wire framing");

/* Smallest header on the wire: the type word. */
#define MPIDI_CH3I_WIRE_MIN_HDR ((size_t) sizeof(MPIDI_CH3_Pkt_type_t))

/* Put the header length into the type word of a header about to be sent
 * (a copy owned by the channel, never CH3's own). */
static inline void MPIDI_CH3I_Wire_encode(void *hdr, size_t len)
{
	uint32_t w;

	memcpy(&w, hdr, sizeof(w));
	w = (w & 0xffffu) | (uint32_t) len << 16;
	memcpy(hdr, &w, sizeof(w));
}

/* The packed send header (see the top of this file). */
#define MPIDI_CH3I_WIRE_SEND_HDR 24u
#define MPIDI_CH3I_WIRE_SEND_REQ 4u	/* sender_req_id, in the type word's padding */
#define MPIDI_CH3I_WIRE_SEND_SZ 16u	/* data_sz */

/* The send header's layout as CH3 defines it without sequence numbers:
 * packing applies only then (a constant, folded by the compiler). */
#define MPIDI_CH3I_WIRE_PACKS_SEND \
	(sizeof(MPIDI_CH3_Pkt_send_t) == 32 && \
	 offsetof(MPIDI_CH3_Pkt_send_t, match) == 8 && \
	 offsetof(MPIDI_CH3_Pkt_send_t, sender_req_id) == 16 && \
	 sizeof(MPI_Request) == 4 && \
	 offsetof(MPIDI_CH3_Pkt_send_t, data_sz) == 24 && sizeof(intptr_t) == 8)

static inline int MPIDI_CH3I_Wire_is_send(unsigned type)
{
	return type == MPIDI_CH3_PKT_EAGER_SEND || type == MPIDI_CH3_PKT_EAGER_SYNC_SEND ||
	       type == MPIDI_CH3_PKT_READY_SEND || type == MPIDI_CH3_PKT_RNDV_REQ_TO_SEND;
}

/* Copy CH3's header (a whole MPIDI_CH3_Pkt_t, as every channel assumes:
 * a constant-size copy is a few moves) to dst, a buffer of the channel's,
 * pack a send header, and encode the length on the wire there; returns
 * that length. */
static inline size_t MPIDI_CH3I_Wire_stage(MPIDI_CH3_Pkt_t *dst, const void *hdr, size_t len)
{
	char *d = (char *) dst;

	if (dst != hdr)
		memcpy(dst, hdr, sizeof(*dst));
	if (MPIDI_CH3I_WIRE_PACKS_SEND && len == sizeof(MPIDI_CH3_Pkt_send_t) &&
	    MPIDI_CH3I_Wire_is_send(dst->type)) {
		memcpy(d + MPIDI_CH3I_WIRE_SEND_REQ, &dst->eager_send.sender_req_id,
		       sizeof(MPI_Request));
		memmove(d + MPIDI_CH3I_WIRE_SEND_SZ, &dst->eager_send.data_sz, sizeof(intptr_t));
		len = MPIDI_CH3I_WIRE_SEND_HDR;
	}
	MPIDI_CH3I_Wire_encode(dst, len);
	return len;
}

/* Header length from a received type word (0 if it is not a valid one). */
static inline size_t MPIDI_CH3I_Wire_hdr_len(const void *wire)
{
	uint32_t w;
	size_t len;

	memcpy(&w, wire, sizeof(w));
	len = w >> 16;
	if (len < MPIDI_CH3I_WIRE_MIN_HDR || len > sizeof(MPIDI_CH3_Pkt_t) ||
	    (w & 0xffffu) >= MPIDI_CH3_PKT_END_CH3)
		return 0;
	return len;
}

/* Restore the plain type in a received header. */
static inline void MPIDI_CH3I_Wire_decode(void *hdr)
{
	uint32_t w;

	memcpy(&w, hdr, sizeof(w));
	w &= 0xffffu;
	memcpy(hdr, &w, sizeof(w));
}

/* The received header at wire (hdr_len bytes, from MPIDI_CH3I_Wire_hdr_len)
 * as CH3's handlers take it: in place when it is aligned and not packed,
 * else rebuilt in aligned (a buffer of the channel's). */
static inline MPIDI_CH3_Pkt_t *MPIDI_CH3I_Wire_unpack(MPIDI_CH3_Pkt_t *aligned, void *wire,
						      size_t hdr_len)
{
	MPIDI_CH3_Pkt_t *pkt = wire;
	const char *w = wire;
	uint32_t type;

	memcpy(&type, w, sizeof(type));
	if (MPIDI_CH3I_WIRE_PACKS_SEND && hdr_len == MPIDI_CH3I_WIRE_SEND_HDR &&
	    MPIDI_CH3I_Wire_is_send(type & 0xffffu)) {
		memcpy(aligned, w, MPIDI_CH3I_WIRE_SEND_SZ);
		memcpy(&aligned->eager_send.data_sz, w + MPIDI_CH3I_WIRE_SEND_SZ, sizeof(intptr_t));
		memcpy(&aligned->eager_send.sender_req_id, w + MPIDI_CH3I_WIRE_SEND_REQ,
		       sizeof(MPI_Request));
		pkt = aligned;
	} else if ((uintptr_t) wire % _Alignof(MPIDI_CH3_Pkt_t)) {
		memcpy(aligned, wire, hdr_len);
		pkt = aligned;
	}
	MPIDI_CH3I_Wire_decode(pkt);
	return pkt;
}

/* Bytes in iov[0..n). */
static inline size_t MPIDI_CH3I_Iov_bytes(const struct iovec *iov, int n)
{
	size_t total = 0;

	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	return total;
}

/* The rdmach context of this process (one per MPI job). */
extern rdmach_ctx_t *MPIDI_CH3I_rdma_ctx;

/* Send queue of a VC: requests whose dev.iov[dev.iov_offset..iov_count)
 * is still to be put.  The queue holds a reference on each request. */
static inline void MPIDI_CH3I_SendQ_enqueue(MPIDI_CH3I_VC *vcch, MPIR_Request *req)
{
	MPIR_Request_add_ref(req);
	req->next = NULL;
	if (vcch->sendq_tail)
		vcch->sendq_tail->next = req;
	else
		vcch->sendq_head = req;
	vcch->sendq_tail = req;
}

static inline void MPIDI_CH3I_SendQ_dequeue(MPIDI_CH3I_VC *vcch)
{
	MPIR_Request *req = vcch->sendq_head;

	vcch->sendq_head = req->next;
	if (!vcch->sendq_head)
		vcch->sendq_tail = NULL;
	MPIR_Request_free(req);
}

#define MPIDI_CH3I_SendQ_head(vcch) ((vcch)->sendq_head)
#define MPIDI_CH3I_SendQ_empty(vcch) ((vcch)->sendq_head == NULL)

/* ch3_progress.c */
int MPIDI_CH3I_Progress_init(void);
/* Bytes of a VC's receive staging buffer (RDMACH_CH3_RX_STAGING). */
size_t MPIDI_CH3I_Rx_staging_size(void);
uint64_t MPIDI_CH3I_Rx_in_place_min(void);
/* rdmach_connect is done: poll the VCs whose connections are up. */
int MPIDI_CH3I_Progress_connected(void);
/* vc is in use (a send, or its connection came up): buffers, CH3's
 * ACTIVE state, the poll list. */
int MPIDI_CH3I_Vc_activate(MPIDI_VC_t *vc);
int MPIDI_CH3I_Progress_finalize(void);
/* Put as much of iov[0..n) on vc as rdmach accepts now; *nb = bytes taken. */
int MPIDI_CH3I_Rdma_put(MPIDI_VC_t *vc, struct iovec *iov, int n, size_t *nb);
int MPIDI_CH3I_Rdma_put_req(MPIDI_VC_t *vc, MPIR_Request *sreq, struct iovec *iov, int n,
			    size_t *nb);
int MPIDI_CH3I_Rdma_put_finish(MPIDI_VC_t *vc, MPIR_Request *sreq, int *more);
/* Queue sreq (its dev.iov already set up) behind vc's other sends. */
int MPIDI_CH3I_Rdma_enqueue(MPIDI_VC_t *vc, MPIR_Request *sreq);
/* An MPI error code for a failed rdmach call on vc. */
int MPIDI_CH3I_Rdma_error(MPIDI_VC_t *vc, const char *what, ssize_t err);
/* Put every queued byte (used at finalize). */
int MPIDI_CH3I_Rdma_flush(void);

/* ch3_node.c: check CH3's node ids against rdmach's host ids and install
 * the node-aware MPI_Comm_split_type. */
int MPIDI_CH3I_Node_init(MPIDI_PG_t *pg, int pg_rank);

/* ch3_oob.c: an rdmach_oob_t over MPICH's PMI key-value space. */
void MPIDI_CH3I_Rdma_oob(rdmach_oob_t *oob, int rank, int size);

/* The mutex of a shared-memory window (ch3_win.c), which CH3 takes
 * around accumulates applied straight to a node peer's memory. */
static inline void MPIDI_CH3I_Shm_mutex_lock(pthread_mutex_t *m)
{
	int err = pthread_mutex_lock(m);

	MPIR_Assert(err == 0);
	(void) err;
}

static inline void MPIDI_CH3I_Shm_mutex_unlock(pthread_mutex_t *m)
{
	int err = pthread_mutex_unlock(m);

	MPIR_Assert(err == 0);
	(void) err;
}

#define MPIDI_CH3I_SHM_MUTEX_LOCK(win_ptr) MPIDI_CH3I_Shm_mutex_lock((win_ptr)->shm_mutex)
#define MPIDI_CH3I_SHM_MUTEX_UNLOCK(win_ptr) MPIDI_CH3I_Shm_mutex_unlock((win_ptr)->shm_mutex)
/* created with the window's segment, gone with it (ch3_win.c) */
#define MPIDI_CH3I_SHM_MUTEX_INIT(win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_DESTROY(win_ptr)

#endif /* MPIDI_CH3_IMPL_H_INCLUDED */
