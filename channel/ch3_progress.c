/*
 * ch3_progress.c - CH3 channel "rdma": the progress engine.
 *
 * One pass visits every VC of the job: it puts what its send queue holds
 * (rdmach_put accepts what fits and is retried later) and gets what has
 * arrived into the packet being assembled or the active receive request,
 * calling CH3's packet handlers and OnDataAvail functions as pieces
 * complete.  rdmach never blocks, so a blocking wait is a polling loop that
 * yields the CPU (and CH3's global lock when threads are on) while idle.
 */
#include "mpidi_ch3_impl.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define HDR_SZ sizeof(MPIDI_CH3_Pkt_t)

/*
 * How a blocking wait idles (environment, read at MPI_Init).  Defaults
 * depend on whether this host runs more processes of the job than it has
 * CPUs: then spinning starves the very peers we wait for, so an idle wait
 * sleeps almost at once (sendflood, 8 processes on 2 cores: >120 s with
 * sched_yield only, 32 s sleeping; ch3:sock's blocking poll: 36 s).
 *   RDMACH_CH3_YIELD_SPINS     idle passes between yields (64; 16 if
 *                              oversubscribed)
 *   RDMACH_CH3_SLEEP_US        sleep per yield instead of sched_yield once
 *                              idle long enough; 0 = never (0; 1 if
 *                              oversubscribed: gives the CPU away for one
 *                              timer slack, ~50 us)
 *   RDMACH_CH3_SLEEP_AFTER_US  idle time before sleeping starts (0)
 */
static struct {
	unsigned yield_spins;
	uint64_t sleep_after_ns;
	unsigned sleep_us;
} idle_policy;

static unsigned env_uint(const char *name, unsigned deflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;

	if (!v || !*v)
		return deflt;
	x = strtoul(v, &end, 10);
	if (*end || x > 100000000ul) {
		fprintf(stderr, "ch3:rdma: ignoring %s=%s (expected a number)\n", name, v);
		return deflt;
	}
	return (unsigned) x;
}

static void idle_policy_init(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int oversubscribed = cpus > 0 && MPIR_Process.local_size > cpus;

	idle_policy.yield_spins = env_uint("RDMACH_CH3_YIELD_SPINS", oversubscribed ? 16 : 64);
	if (!idle_policy.yield_spins)
		idle_policy.yield_spins = 1;
	idle_policy.sleep_after_ns = (uint64_t) env_uint("RDMACH_CH3_SLEEP_AFTER_US", 0) * 1000;
	idle_policy.sleep_us = env_uint("RDMACH_CH3_SLEEP_US", oversubscribed ? 1 : 0);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

volatile unsigned int MPIDI_CH3I_progress_completion_count = 0;
#ifdef MPICH_IS_THREADED
volatile int MPIDI_CH3I_progress_blocked = FALSE;
volatile int MPIDI_CH3I_progress_wakeup_signalled = FALSE;
#endif

static MPIDI_CH3_PktHandler_Fcn *pkt_handlers[MPIDI_CH3_PKT_END_CH3 + 1];

int MPIDI_CH3I_Rdma_error(MPIDI_VC_t *vc, const char *what, ssize_t err)
{
	const char *detail = vc->ch.conn ? rdmach_conn_error(vc->ch.conn) : "";
	int mpi_errno = MPI_SUCCESS;
	char msg[512];

	vc->ch.terminated = 1;
	snprintf(msg, sizeof(msg), "ch3:rdma: %s on the connection to rank %d failed: %s%s%s",
		 what, vc->pg_rank, rdmach_strerror((int) err), *detail ? ": " : "", detail);
	MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**fail", "**fail %s", msg);
	return mpi_errno;
}

/* Advance iov[*off..n) past nb bytes; returns 1 when everything is done. */
static int iov_advance(struct iovec *iov, int n, size_t *off, size_t nb)
{
	size_t i = *off;

	while (i < (size_t) n && nb >= iov[i].iov_len) {
		nb -= iov[i].iov_len;
		i++;
	}
	if (i < (size_t) n) {
		iov[i].iov_base = (char *) iov[i].iov_base + nb;
		iov[i].iov_len -= nb;
	}
	/* skip empty entries so that a finished iovec is seen as finished */
	while (i < (size_t) n && iov[i].iov_len == 0)
		i++;
	*off = i;
	return i == (size_t) n;
}

int MPIDI_CH3I_Rdma_put(MPIDI_VC_t *vc, struct iovec *iov, int n, size_t *nb)
{
	ssize_t rc;

	if (vc->ch.terminated)
		return MPIDI_CH3I_Rdma_error(vc, "put", -EPIPE);
	rc = rdmach_put(vc->ch.conn, iov, n);
	if (rc < 0)
		return MPIDI_CH3I_Rdma_error(vc, "put", rc);
	*nb = (size_t) rc;
	return MPI_SUCCESS;
}

int MPIDI_CH3I_Rdma_enqueue(MPIDI_VC_t *vc, MPIR_Request *sreq)
{
	MPIDI_CH3I_SendQ_enqueue(&vc->ch, sreq);
	return MPI_SUCCESS;
}

/* The request's iovec is done: let CH3 refill it or complete the request.
 * *more is set when the iovec was refilled. */
static int request_data_done(MPIDI_VC_t *vc, MPIR_Request *req, int *more)
{
	int complete = TRUE, mpi_errno;

	if (!req->dev.OnDataAvail) {
		mpi_errno = MPID_Request_complete(req);
	} else {
		mpi_errno = req->dev.OnDataAvail(vc, req, &complete);
		req->dev.iov_offset = 0;
	}
	*more = !complete;
	return mpi_errno;
}

static int drain_sendq(MPIDI_VC_t *vc, int *progressed)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	MPIR_Request *sreq;
	int mpi_errno = MPI_SUCCESS, more;
	size_t nb;

	while ((sreq = MPIDI_CH3I_SendQ_head(vcch)) != NULL) {
		size_t off = sreq->dev.iov_offset;

		if (off < (size_t) sreq->dev.iov_count) {
			mpi_errno = MPIDI_CH3I_Rdma_put(vc, sreq->dev.iov + off,
							sreq->dev.iov_count - (int) off, &nb);
			if (mpi_errno || nb == 0)
				break;
			*progressed = 1;
			if (!iov_advance(sreq->dev.iov, sreq->dev.iov_count, &off, nb)) {
				sreq->dev.iov_offset = off;
				break;	/* rdmach is full for now */
			}
			sreq->dev.iov_offset = off;
		}
		mpi_errno = request_data_done(vc, sreq, &more);
		if (mpi_errno)
			break;
		if (!more)
			MPIDI_CH3I_SendQ_dequeue(vcch);
	}
	if (!mpi_errno && vcch->terminate_pending && MPIDI_CH3I_SendQ_empty(vcch)) {
		vcch->terminate_pending = 0;
		vcch->terminated = 1;
		mpi_errno = MPIDI_CH3U_Handle_connection(vc, MPIDI_VC_EVENT_TERMINATED);
	}
	return mpi_errno;
}

static int rdma_get(MPIDI_VC_t *vc, struct iovec *iov, int n, size_t *nb)
{
	ssize_t rc = rdmach_get(vc->ch.conn, iov, n);

	if (rc < 0)
		return MPIDI_CH3I_Rdma_error(vc, "get", rc);
	*nb = (size_t) rc;
	return MPI_SUCCESS;
}

static int handle_packet(MPIDI_VC_t *vc)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	MPIDI_CH3_Pkt_t *pkt = (MPIDI_CH3_Pkt_t *) vcch->rx_pkt;
	MPIR_Request *rreq = NULL;
	intptr_t buflen = 0;
	int mpi_errno = MPI_SUCCESS;

	vcch->rx_pkt_got = 0;
	if ((unsigned) pkt->type >= MPIDI_CH3_PKT_END_CH3 || !pkt_handlers[pkt->type]) {
		MPIR_ERR_SET1(mpi_errno, MPI_ERR_INTERN, "**fail", "**fail %s",
			      "ch3:rdma: corrupt packet stream (unknown packet type)");
		return mpi_errno;
	}
	mpi_errno = pkt_handlers[pkt->type](vc, pkt, NULL, &buflen, &rreq);
	if (mpi_errno)
		return mpi_errno;
	if (rreq) {
		rreq->dev.iov_offset = 0;
		vcch->recv_active = rreq;
	}
	return MPI_SUCCESS;
}

static int poll_recv(MPIDI_VC_t *vc, int *progressed)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	int mpi_errno = MPI_SUCCESS, more;
	struct iovec iov;
	size_t nb;

	/* after CH3's close handshake nothing more comes from the peer */
	while (!vcch->terminated && !vcch->terminate_pending) {
		MPIR_Request *rreq = vcch->recv_active;

		if (!rreq) {
			iov.iov_base = (char *) vcch->rx_pkt + vcch->rx_pkt_got;
			iov.iov_len = HDR_SZ - vcch->rx_pkt_got;
			mpi_errno = rdma_get(vc, &iov, 1, &nb);
			if (mpi_errno || nb == 0)
				break;
			*progressed = 1;
			vcch->rx_pkt_got += nb;
			if (vcch->rx_pkt_got < HDR_SZ)
				break;
			mpi_errno = handle_packet(vc);
			if (mpi_errno)
				break;
			continue;
		}

		size_t off = rreq->dev.iov_offset;

		if (off < (size_t) rreq->dev.iov_count) {
			mpi_errno = rdma_get(vc, rreq->dev.iov + off,
					     rreq->dev.iov_count - (int) off, &nb);
			if (mpi_errno || nb == 0)
				break;
			*progressed = 1;
			if (!iov_advance(rreq->dev.iov, rreq->dev.iov_count, &off, nb)) {
				rreq->dev.iov_offset = off;
				break;
			}
			rreq->dev.iov_offset = off;
		}
		mpi_errno = request_data_done(vc, rreq, &more);
		if (mpi_errno)
			break;
		if (!more)
			vcch->recv_active = NULL;
	}
	return mpi_errno;
}

/* One pass over every VC.  *progressed: some byte moved. */
static int progress_pass(int *progressed)
{
	MPIDI_PG_t *pg = MPIDI_Process.my_pg;
	int mpi_errno = MPI_SUCCESS;

	for (int i = 0; i < pg->size; i++) {
		MPIDI_VC_t *vc = &pg->vct[i];

		if (vc->ch.terminated || !vc->ch.conn)
			continue;
		if (!MPIDI_CH3I_SendQ_empty(&vc->ch) || vc->ch.terminate_pending) {
			mpi_errno = drain_sendq(vc, progressed);
			if (mpi_errno)
				break;
		}
		mpi_errno = poll_recv(vc, progressed);
		if (mpi_errno)
			break;
	}
	return mpi_errno;
}

static int progress_test(void)
{
	int made_progress = 0, progressed = 0, mpi_errno;

	mpi_errno = MPIR_Progress_hook_exec_all(&made_progress);
	if (mpi_errno)
		return mpi_errno;
	return progress_pass(&progressed);
}

static int progress_wait(MPID_Progress_state *state)
{
	int mpi_errno = MPI_SUCCESS;
	unsigned idle = 0;
	uint64_t idle_since = 0;

	while (state->ch.completion_count == MPIDI_CH3I_progress_completion_count) {
		int made_progress = 0, progressed = 0;

		mpi_errno = MPIR_Progress_hook_exec_all(&made_progress);
		if (mpi_errno)
			break;
		if (made_progress) {
			MPIDI_CH3_Progress_signal_completion();
			break;
		}
		mpi_errno = progress_pass(&progressed);
		if (mpi_errno)
			break;
		if (progressed) {
			idle = 0;
			continue;
		}
		if (++idle % idle_policy.yield_spins)
			continue;
		/* let other threads in (they may post what we wait for) */
		MPID_THREAD_CS_YIELD(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
		if (!idle_policy.sleep_us) {
			sched_yield();
		} else if (idle == idle_policy.yield_spins) {
			idle_since = now_ns();
			sched_yield();
		} else if (now_ns() - idle_since >= idle_policy.sleep_after_ns) {
			usleep(idle_policy.sleep_us);
		} else {
			sched_yield();
		}
	}
	state->ch.completion_count = MPIDI_CH3I_progress_completion_count;
	return mpi_errno;
}

int MPIDI_CH3I_Progress(int blocking, MPID_Progress_state *state)
{
	return blocking ? progress_wait(state) : progress_test();
}

#ifdef MPICH_IS_THREADED
void MPIDI_CH3I_Progress_wakeup(void)
{
	/* waiting threads poll; nothing to wake */
}
#endif

int MPIDI_CH3I_Rdma_flush(void)
{
	MPIDI_PG_t *pg = MPIDI_Process.my_pg;
	int mpi_errno = MPI_SUCCESS, pending;

	do {
		int progressed = 0;

		pending = 0;
		for (int i = 0; i < pg->size && !mpi_errno; i++) {
			MPIDI_VC_t *vc = &pg->vct[i];

			if (vc->ch.conn && !MPIDI_CH3I_SendQ_empty(&vc->ch)) {
				mpi_errno = drain_sendq(vc, &progressed);
				pending |= !MPIDI_CH3I_SendQ_empty(&vc->ch);
			}
		}
		if (pending && !progressed)
			rdmach_progress(MPIDI_CH3I_rdma_ctx);
	} while (pending && !mpi_errno);
	return mpi_errno;
}

int MPIDI_CH3_Connection_terminate(MPIDI_VC_t *vc)
{
	/* CH3's close handshake is over for vc; report it once every byte
	 * queued to the peer (the last CLOSE ack) is out. */
	if (!MPIDI_CH3I_SendQ_empty(&vc->ch)) {
		vc->ch.terminate_pending = 1;
		return MPI_SUCCESS;
	}
	vc->ch.terminated = 1;
	return MPIDI_CH3U_Handle_connection(vc, MPIDI_VC_EVENT_TERMINATED);
}

int MPIDI_CH3I_Progress_init(void)
{
	idle_policy_init();
	return MPIDI_CH3_PktHandler_Init(pkt_handlers, MPIDI_CH3_PKT_END_CH3 + 1);
}

int MPIDI_CH3I_Progress_finalize(void)
{
	return MPI_SUCCESS;
}
