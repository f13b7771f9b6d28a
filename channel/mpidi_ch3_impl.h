/*
 * mpidi_ch3_impl.h - CH3 channel "rdma": internal interface between the
 * channel's files (init, send, progress, out-of-band exchange).
 *
 * Wire format on each rdmach pipe: a sequence of CH3 packets, each a
 * fixed-size MPIDI_CH3_Pkt_t header followed by the payload its handler
 * asks for (the receive request's iovec).  rdmach keeps the bytes in FIFO
 * order, so no framing beyond that is needed.
 */
#ifndef MPIDI_CH3_IMPL_H_INCLUDED
#define MPIDI_CH3_IMPL_H_INCLUDED

#include "mpidimpl.h"
#include "rdmach.h"

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
int MPIDI_CH3I_Progress_finalize(void);
/* Put as much of iov[0..n) on vc as rdmach accepts now; *nb = bytes taken. */
int MPIDI_CH3I_Rdma_put(MPIDI_VC_t *vc, struct iovec *iov, int n, size_t *nb);
/* Queue sreq (its dev.iov already set up) behind vc's other sends. */
int MPIDI_CH3I_Rdma_enqueue(MPIDI_VC_t *vc, MPIR_Request *sreq);
/* An MPI error code for a failed rdmach call on vc. */
int MPIDI_CH3I_Rdma_error(MPIDI_VC_t *vc, const char *what, ssize_t err);
/* Put every queued byte (used at finalize). */
int MPIDI_CH3I_Rdma_flush(void);

/* ch3_oob.c: an rdmach_oob_t over MPICH's PMI key-value space. */
void MPIDI_CH3I_Rdma_oob(rdmach_oob_t *oob, int rank, int size);

/* RMA through the window defaults (no shared-memory windows). */
#define MPIDI_CH3I_SHM_MUTEX_LOCK(win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_UNLOCK(win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_INIT(win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_DESTROY(win_ptr)

#endif /* MPIDI_CH3_IMPL_H_INCLUDED */
