/*
 * ch3_isend.c - CH3 channel "rdma": the four send entry points.
 *
 * A send first tries rdmach_put directly when the VC's queue is empty; what
 * rdmach does not accept now is queued as a request and put by the progress
 * engine, in order.  Headers travel at the size CH3 gives, framed as
 * mpidi_ch3_impl.h describes; the channel encodes its own copy of each.
 */
#include "mpidi_ch3_impl.h"

#define HDR_SZ ((intptr_t) sizeof(MPIDI_CH3_Pkt_t))
/* send requests of at most this (header included) try send_small_request:
 * 1 KiB messages too (their send 1191 -> 1007 instructions; MPI_Isend
 * window 1.08x, both ways 1.05x, 15 alternating rounds), not 2 KiB
 * (one way 0.95x, though 184 instructions fewer as well) */
#define SMALL_REQUEST_MAX 2048u

/* Start loading the first line of each payload piece (iov[1..n)) while
 * the header is staged and the put set up: a send buffer not in cache
 * (an application walking its data) otherwise stalls the put's copy for
 * a whole memory access per message.  MPI_Isend window of 32-256 B from a
 * 256 MiB pool, both directions: 1.15-1.48x the bandwidth without it;
 * MPI_Send ping-pong of 32 B-2 KiB from such a pool: 0.69-0.90x the
 * latency. */
static inline void prefetch_payload(const struct iovec *iov, int n)
{
	for (int i = 1; i < n; i++)
		__builtin_prefetch(iov[i].iov_base);
}

/* Copy iov[0..n) into sreq's iovec minus the nb bytes already sent. */
static void set_request_iov(MPIR_Request *sreq, const struct iovec *iov, int n, size_t nb)
{
	int i = 0;

	while (i < n && nb >= iov[i].iov_len) {
		nb -= iov[i].iov_len;
		i++;
	}
	sreq->dev.iov_count = n - i;
	sreq->dev.iov_offset = 0;
	for (int j = 0; i < n; i++, j++) {
		sreq->dev.iov[j] = iov[i];
		if (j == 0) {
			sreq->dev.iov[0].iov_base = (char *) iov[i].iov_base + nb;
			sreq->dev.iov[0].iov_len -= nb;
		}
	}
}

/* A send request owned by the channel and by the caller (CH3 convention:
 * one reference is dropped on completion, one by the caller). */
static MPIR_Request *create_send_request(void)
{
	MPIR_Request *sreq = MPIR_Request_create(MPIR_REQUEST_KIND__SEND);

	if (!sreq)
		return NULL;
	MPIR_Object_set_ref(sreq, 2);
	sreq->dev.OnDataAvail = NULL;
	sreq->ch.put_ticket = 0;
	return sreq;
}

static int queue_rest(MPIDI_VC_t *vc, struct iovec *iov, int n, size_t nb,
		      MPIR_Request **sreq_ptr);

/* Send iov (iov[0] a header of iov[0].iov_len bytes) on vc without a
 * caller request: return a request only if something was left to queue. */
static int start_msg(MPIDI_VC_t *vc, struct iovec *iov, int n, MPIR_Request **sreq_ptr)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	size_t nb = 0;
	int mpi_errno = MPI_SUCCESS;

	*sreq_ptr = NULL;
	prefetch_payload(iov, n);
	if (unlikely(!vcch->polled)) {
		mpi_errno = MPIDI_CH3I_Vc_activate(vc);
		if (mpi_errno)
			return mpi_errno;
	}
	if (MPIDI_CH3I_SendQ_empty(vcch)) {
		/* stage the header where it stays while this send is queued */
		iov[0].iov_len = MPIDI_CH3I_Wire_stage(vcch->tx_pkt, iov[0].iov_base,
						       iov[0].iov_len);
		iov[0].iov_base = vcch->tx_pkt;
		mpi_errno = MPIDI_CH3I_Rdma_put(vc, iov, n, &nb);
		if (mpi_errno)
			return mpi_errno;
		if (nb == MPIDI_CH3I_Iov_bytes(iov, n))
			return MPI_SUCCESS;
	}

	return queue_rest(vc, iov, n, nb, sreq_ptr);
}

/* Queue what start_msg's put left of iov (nb bytes went): a request that
 * keeps the header (in place if it is the staged one). */
static int queue_rest(MPIDI_VC_t *vc, struct iovec *iov, int n, size_t nb,
		      MPIR_Request **sreq_ptr)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	MPIR_Request *sreq;
	int mpi_errno = MPI_SUCCESS;

	sreq = create_send_request();
	MPIR_ERR_CHKANDJUMP(sreq == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
	if (iov[0].iov_base != vcch->tx_pkt) {
		/* queued behind others: the request keeps its own header copy */
		iov[0].iov_len = MPIDI_CH3I_Wire_stage(&sreq->dev.pending_pkt, iov[0].iov_base,
						       iov[0].iov_len);
		iov[0].iov_base = &sreq->dev.pending_pkt;
	}
	set_request_iov(sreq, iov, n, nb);
	mpi_errno = MPIDI_CH3I_Rdma_enqueue(vc, sreq);
	if (mpi_errno)
		return mpi_errno;
	*sreq_ptr = sreq;
	return MPI_SUCCESS;
  fn_fail:
	return mpi_errno;
}

static void check_hdr_len(intptr_t hdr_sz)
{
	MPIR_Assert(hdr_sz >= (intptr_t) MPIDI_CH3I_WIRE_MIN_HDR && hdr_sz <= HDR_SZ);
}

int MPIDI_CH3_iStartMsg(MPIDI_VC_t *vc, void *hdr, intptr_t hdr_sz, MPIR_Request **sreq_ptr)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	struct iovec iov[1];

	check_hdr_len(hdr_sz);
	/* the common case in a few lines: a header alone, nothing queued,
	 * all of it taken (a header is too small for a zero-copy put) */
	if (MPIDI_CH3I_SendQ_empty(vcch) && vcch->polled && !vcch->terminated) {
		ssize_t rc;

		iov[0].iov_len = MPIDI_CH3I_Wire_stage(vcch->tx_pkt, hdr, (size_t) hdr_sz);
		iov[0].iov_base = vcch->tx_pkt;
		rc = rdmach_put(vcch->conn, iov, 1);
		if (rc == (ssize_t) iov[0].iov_len) {
			*sreq_ptr = NULL;
			return MPI_SUCCESS;
		}
		if (rc < 0)
			return MPIDI_CH3I_Rdma_error(vc, "put", rc);
		/* partly taken: the rest waits in the queue */
		return queue_rest(vc, iov, 1, (size_t) rc, sreq_ptr);
	}
	iov[0].iov_base = hdr;
	iov[0].iov_len = (size_t) hdr_sz;
	return start_msg(vc, iov, 1, sreq_ptr);
}

int MPIDI_CH3_iStartMsgv(MPIDI_VC_t *vc, struct iovec *iov, int n_iov, MPIR_Request **sreq_ptr)
{
	struct iovec local[MPL_IOV_LIMIT];

	MPIR_Assert(n_iov >= 1 && n_iov <= MPL_IOV_LIMIT);
	check_hdr_len((intptr_t) iov[0].iov_len);
	memcpy(local, iov, n_iov * sizeof(*iov));
	return start_msg(vc, local, n_iov, sreq_ptr);
}

/* A small send request (header and at most one payload piece, as
 * rdmach's fast put takes) on an idle VC, tried as one plain put with the
 * header staged in the VC: taken whole (the common case), the request
 * completes without its header and iovec ever being copied into it --
 * stores that would queue behind the put's own to lines the peer is
 * reading (MPI_Isend window of 8-128 B: 1.08-1.28x the bandwidth, 9
 * alternating rounds; both ways at once unchanged).  1: done (or failed:
 * *mpi_errno); 0: go the general way. */
static int send_small_request(MPIDI_VC_t *vc, MPIR_Request *sreq, const struct iovec *iov,
			      int n, int *mpi_errno)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	struct iovec local[2];
	size_t total;
	ssize_t rc;

	if (n > 2 || sreq->dev.OnDataAvail || !MPIDI_CH3I_SendQ_empty(vcch) || !vcch->polled ||
	    vcch->terminated)
		return 0;
	total = n == 2 ? iov[0].iov_len + iov[1].iov_len : iov[0].iov_len;
	if (total > SMALL_REQUEST_MAX)
		return 0;
	local[0].iov_len = MPIDI_CH3I_Wire_stage(vcch->tx_pkt, iov[0].iov_base, iov[0].iov_len);
	local[0].iov_base = vcch->tx_pkt;
	total -= iov[0].iov_len - local[0].iov_len;
	if (n == 2)
		local[1] = iov[1];
	/* a plain put (no ticket) of a request without OnDataAvail: taken
	 * whole, the request is complete */
	rc = rdmach_put(vcch->conn, local, n);
	if (rc < 0) {
		*mpi_errno = MPIDI_CH3I_Rdma_error(vc, "put", rc);
		return 1;
	}
	sreq->ch.put_ticket = 0;
	if ((size_t) rc == total) {
		*mpi_errno = MPID_Request_complete(sreq);
		return 1;
	}
	/* partly taken: the rest waits in the queue, the header staying in
	 * the VC while it is queued (as start_msg leaves one) */
	set_request_iov(sreq, local, n, (size_t) rc);
	*mpi_errno = MPIDI_CH3I_Rdma_enqueue(vc, sreq);
	return 1;
}

/* Send on behalf of an existing request: the header is copied into the
 * request first so that every put of this send sees the same iovec. */
static int send_with_request(MPIDI_VC_t *vc, MPIR_Request *sreq, struct iovec *iov, int n)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	size_t nb = 0;
	int mpi_errno, more;

	iov[0].iov_len = MPIDI_CH3I_Wire_stage(&sreq->dev.pending_pkt, iov[0].iov_base,
					       iov[0].iov_len);
	iov[0].iov_base = &sreq->dev.pending_pkt;
	set_request_iov(sreq, iov, n, 0);
	sreq->ch.put_ticket = 0;

	if (!MPIDI_CH3I_SendQ_empty(vcch))
		return MPIDI_CH3I_Rdma_enqueue(vc, sreq);

	mpi_errno = MPIDI_CH3I_Rdma_put_req(vc, sreq, sreq->dev.iov, sreq->dev.iov_count, &nb);
	if (mpi_errno)
		return mpi_errno;
	if (nb < MPIDI_CH3I_Iov_bytes(sreq->dev.iov, sreq->dev.iov_count)) {
		set_request_iov(sreq, sreq->dev.iov, sreq->dev.iov_count, nb);
		return MPIDI_CH3I_Rdma_enqueue(vc, sreq);
	}

	/* all sent: complete (now, or once the peer has read it), or let CH3
	 * load more (non-contiguous data) */
	mpi_errno = MPIDI_CH3I_Rdma_put_finish(vc, sreq, &more);
	if (mpi_errno || !more)
		return mpi_errno;
	return MPIDI_CH3I_Rdma_enqueue(vc, sreq);
}

int MPIDI_CH3_iSend(MPIDI_VC_t *vc, MPIR_Request *sreq, void *hdr, intptr_t hdr_sz)
{
	struct iovec iov[1];
	int mpi_errno;

	check_hdr_len(hdr_sz);
	iov[0].iov_base = hdr;
	iov[0].iov_len = (size_t) hdr_sz;
	if (send_small_request(vc, sreq, iov, 1, &mpi_errno))
		return mpi_errno;
	return send_with_request(vc, sreq, iov, 1);
}

/* iSendv's general way, on a copy of CH3's iovec (which it changes); kept
 * out of line so that the small send's frame has no 16-entry iovec */
static int __attribute__((noinline)) send_iov_with_request(MPIDI_VC_t *vc, MPIR_Request *sreq,
							   const struct iovec *iov, int n)
{
	struct iovec local[MPL_IOV_LIMIT];

	memcpy(local, iov, n * sizeof(*iov));
	return send_with_request(vc, sreq, local, n);
}

int MPIDI_CH3_iSendv(MPIDI_VC_t *vc, MPIR_Request *sreq, struct iovec *iov, int n_iov)
{
	int mpi_errno;

	MPIR_Assert(n_iov >= 1 && n_iov <= MPL_IOV_LIMIT);
	check_hdr_len((intptr_t) iov[0].iov_len);
	prefetch_payload(iov, n_iov);
	/* CH3's iovec as it is (a small send copies what it needs) */
	if (send_small_request(vc, sreq, iov, n_iov, &mpi_errno))
		return mpi_errno;
	return send_iov_with_request(vc, sreq, iov, n_iov);
}
