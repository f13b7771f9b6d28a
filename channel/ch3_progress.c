/*
 * ch3_progress.c - CH3 channel "rdma": the progress engine.
 *
 * One pass visits every VC in use: it puts what its send queue holds
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
 * How a blocking wait idles (knobs read at MPI_Init; channel/ch3_knobs.c
 * lists them, `rdmach_info` shows them).  Defaults depend on whether this
 * host runs more processes of the job than it has CPUs: then spinning
 * starves the very peers we wait for, so an idle wait sleeps almost at
 * once (sendflood, 8 processes on 2 cores: >120 s with sched_yield only,
 * 32 s sleeping; ch3:sock's blocking poll: 36 s).  Otherwise a wait
 * spins: a sched_yield costs a system call, longer than a message takes
 * (on Soft-RoCE under emulation it added 2 us of 15 to the MPI latency at
 * one yield per 64 passes).  Other threads get CH3's lock every
 * MPIDI_CH3I_LOCK_YIELD_SPINS idle passes in any case.
 *   RDMACH_CH3_YIELD_SPINS     idle passes between sched_yields (auto:
 *                              1024; 16 if oversubscribed)
 *   RDMACH_CH3_SLEEP_US        sleep per yield instead of sched_yield once
 *                              idle long enough; 0 = never (auto: 0; 1 if
 *                              oversubscribed: gives the CPU away for one
 *                              timer slack, ~50 us)
 *   RDMACH_CH3_SLEEP_AFTER_US  idle time before sleeping starts (0)
 *   RDMACH_CH3_WAKE_SLEEP_US   how long a sleep lasts instead when every
 *                              peer's put ends it (rdmach_wait_arm says
 *                              so: shm peers with RDMACH_SHM_WAKE, on by
 *                              default when oversubscribed): the waiter
 *                              runs as soon as its message is there, as
 *                              ch3:sock's poll() does (1000)
 * and how much a VC reads ahead when it looks for the next header:
 *   RDMACH_CH3_RX_STAGING      staging buffer bytes (1K, at least
 *                              2 * sizeof(MPIDI_CH3_Pkt_t); one per
 *                              process and one per VC with bytes staged
 *                              between its turns): one get takes
 *                              several small packets at once; payload
 *                              beyond it is read straight into the
 *                              receive buffer
 *   RDMACH_CH3_RX_IN_PLACE     after a message of at least this many
 *                              bytes (512; 0: never), a VC whose last poll
 *                              found nothing hands the next header and its
 *                              payload to CH3's handler where rdmach holds
 *                              them (rdmach_peek), without the staging
 *                              buffer: the payload is copied once, and
 *                              the part beyond the staging buffer needs
 *                              no second get (1 KiB received in place:
 *                              1375 instructions instead of 1855;
 *                              ping-pong latency at 2-16 KiB 0.87-0.94x).
 *                              Small messages keep the staging buffer,
 *                              where one get takes several (8 B in place:
 *                              1141 instructions instead of 1124), and so
 *                              does a reader that finds messages queued
 *                              (in place, windows of 1-2 KiB messages
 *                              came out 0.83-0.85x)
 * After a packet whose payload left at least that much to read beyond the
 * staged bytes, the next get reads only two headers' worth
 * (RX_AHEAD_LARGE), so that a stream of large messages has its payloads
 * copied once, straight into the receive buffers, rather than a staging
 * buffer's worth of each twice (2 processes, 7 interleaved rounds:
 * cache-cold latency at 2-4 KiB 0.89-0.92x, cold bibw at 2-8 KiB
 * 1.04-1.17x, hot sizes even).  Small messages keep the full read-ahead:
 * reading only a header first made 256 B-1 KiB latency 1.13-1.25x.
 */
#define RX_AHEAD_LARGE (2 * HDR_SZ)
#define MPIDI_CH3I_LOCK_YIELD_SPINS 64u
#define MPIDI_CH3I_HOOK_PASSES 4u	/* progress hooks run every 4th pass */
/* Counts passes across waits (under CH3's lock): a wait that one pass
 * satisfies, as each of a window's requests in MPI_Waitall, would run the
 * hooks every time if the count started anew (~35 instructions of ~1300
 * per received message). */
static unsigned hook_pass;
static struct {
	unsigned yield_spins;
	uint64_t sleep_after_ns;
	unsigned sleep_us;
	uint64_t wake_sleep_us;
	size_t rx_staging;
	uint64_t rx_in_place;		/* RDMACH_CH3_RX_IN_PLACE, 0: never */
	uint64_t fail_grace_ms;		/* RDMACH_CH3_FAIL_GRACE_MS */
} idle_policy;

/* MPI_Init fails on a bad knob; the library logged which and why. */
static int knob_error(const char *name, const char *why)
{
	int mpi_errno = MPI_SUCCESS;
	char msg[256];

	snprintf(msg, sizeof(msg), "ch3:rdma: %s: %s (rdmach_info lists the knobs)", name, why);
	MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**fail", "**fail %s", msg);
	return mpi_errno;
}

/* A knob's value, auto_value when it is unset and its default is "auto". */
static int knob_value(const char *name, uint64_t auto_value, uint64_t *out)
{
	int ret = rdmach_knob_get(name, out);

	if (ret == -ENODATA) {
		*out = auto_value;
		return MPI_SUCCESS;
	}
	return ret ? knob_error(name, rdmach_strerror(ret)) : MPI_SUCCESS;
}

static int idle_policy_init(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int oversubscribed = cpus > 0 && MPIR_Process.local_size > cpus;
	uint64_t spins, sleep_us, sleep_after_us, staging;
	int mpi_errno;

	mpi_errno = knob_value("RDMACH_CH3_YIELD_SPINS", oversubscribed ? 16 : 1024, &spins);
	if (!mpi_errno)
		mpi_errno = knob_value("RDMACH_CH3_SLEEP_US", oversubscribed ? 1 : 0, &sleep_us);
	if (!mpi_errno)
		mpi_errno = knob_value("RDMACH_CH3_SLEEP_AFTER_US", 0, &sleep_after_us);
	if (!mpi_errno)
		mpi_errno = knob_value("RDMACH_CH3_WAKE_SLEEP_US", 1000,
				       &idle_policy.wake_sleep_us);
	if (!mpi_errno)
		mpi_errno = knob_value("RDMACH_CH3_RX_STAGING", 1024, &staging);
	if (!mpi_errno)
		mpi_errno = knob_value("RDMACH_CH3_RX_IN_PLACE", 512, &idle_policy.rx_in_place);
	if (!mpi_errno)
		mpi_errno = knob_value("RDMACH_CH3_FAIL_GRACE_MS", 1000,
				       &idle_policy.fail_grace_ms);
	if (mpi_errno)
		return mpi_errno;
	if (staging < 2 * HDR_SZ)
		return knob_error("RDMACH_CH3_RX_STAGING", "less than two CH3 packet headers");
	idle_policy.yield_spins = (unsigned) spins;
	idle_policy.sleep_us = (unsigned) sleep_us;
	idle_policy.sleep_after_ns = sleep_after_us * 1000;
	idle_policy.rx_staging = (size_t) staging;
	return MPI_SUCCESS;
}

size_t MPIDI_CH3I_Rx_staging_size(void)
{
	return idle_policy.rx_staging;
}

uint64_t MPIDI_CH3I_Rx_in_place_min(void)
{
	return idle_policy.rx_in_place ? idle_policy.rx_in_place : UINT64_MAX;
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

/* The VCs a pass polls: those in use.  A VC joins at its first send, or
 * when rdmach says its connection came up (a peer connected to us: under
 * RDMACH_CONNECT=demand only the pairs that talk have one), and only then
 * gets its buffers and CH3's ACTIVE state, so that MPI_Finalize's close
 * protocol (MPIDI_PG_Close_VCs) runs with those peers only and connects
 * no other pair.  This process's own VC joins only once something was
 * sent on it (CH3 keeps self-messages to itself, so normally never).  The
 * pass starts where the last one stopped, so a peer whose packets keep
 * completing requests cannot starve the others. */
static MPIDI_VC_t **poll_vcs;
/* A VC holds a staging buffer only while bytes are staged in it (a header
 * cut by the end of a get, a payload's first bytes): the others share
 * one spare per process, as VCs are polled one at a time under CH3's
 * lock.  So staging grows with the VCs caught mid-message, not with the
 * peers (64 ranks on a node: 63 KiB less per process).  Headers are
 * unpacked into one aligned copy per process too: handlers copy what
 * they keep of a header. */
static char *rx_spare;
static MPIDI_CH3_Pkt_t rx_pkt_aligned;
static int n_poll_vcs, next_poll_vc;
/* passes between looks for connections peers made (rdmach_conns_up) */
#define MPIDI_CH3I_CONN_PASSES 64u
static unsigned conn_pass;

int MPIDI_CH3I_Vc_activate(MPIDI_VC_t *vc)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;

	if (vcch->polled)
		return MPI_SUCCESS;
	if (!vcch->tx_pkt) {
		vcch->tx_pkt = MPL_malloc(sizeof(MPIDI_CH3_Pkt_t), MPL_MEM_BUFFER);
		if (!vcch->tx_pkt)
			return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
						    __LINE__, MPI_ERR_OTHER, "**nomem", NULL);
	}
	/* CH3 runs its close protocol with the VCs that are ACTIVE */
	if (vc->state == MPIDI_VC_STATE_INACTIVE && vc->pg_rank != MPIDI_Process.my_pg_rank)
		MPIDI_CHANGE_VC_STATE(vc, ACTIVE);
	vcch->polled = 1;
	poll_vcs[n_poll_vcs++] = vc;
	return MPI_SUCCESS;
}

/* The peers whose connections came up since the last look join the poll
 * list (this process's own VC only by a send). */
static int conns_up(void)
{
	MPIDI_PG_t *pg = MPIDI_Process.my_pg;
	int ranks[64], n, i, mpi_errno = MPI_SUCCESS;

	do {
		n = rdmach_conns_up(MPIDI_CH3I_rdma_ctx, ranks, 64);
		if (n < 0)
			return MPIDI_CH3I_Rdma_error(&pg->vct[MPIDI_Process.my_pg_rank],
						     "rdmach_conns_up", n);
		for (i = 0; i < n && !mpi_errno; i++)
			if (ranks[i] != MPIDI_Process.my_pg_rank)
				mpi_errno = MPIDI_CH3I_Vc_activate(&pg->vct[ranks[i]]);
	} while (n == 64 && !mpi_errno);
	return mpi_errno;
}

static int poll_list_init(void)
{
	MPIDI_PG_t *pg = MPIDI_Process.my_pg;

	poll_vcs = MPL_malloc(pg->size * sizeof(*poll_vcs), MPL_MEM_OTHER);
	if (!poll_vcs)
		return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
					    __LINE__, MPI_ERR_OTHER, "**nomem", NULL);
	n_poll_vcs = next_poll_vc = 0;
	return conns_up();
}

/*
 * A connection failed because the peer died or the link went down.  Under
 * Hydra the dead rank's proxy ends the job by itself, and mpiexec then
 * reports that rank's own exit status (its exit code, or the signal that
 * killed it, with Hydra's banner).  Raising the MPI error at once races
 * with that: this rank aborts through PMI first, Hydra treats the job as
 * aborted by us, and mpiexec reports MPI_ERR_OTHER (15) with the dead
 * rank's status lost.  So the first such failure waits up to
 * RDMACH_CH3_FAIL_GRACE_MS for the process manager; a rank still alive
 * after it (no process manager acting, MPI_ERRORS_RETURN) gets the error.
 */
static void fail_grace(void)
{
	static int waited;
	uint64_t end;

	if (waited || !idle_policy.fail_grace_ms)
		return;
	waited = 1;
	end = now_ns() + idle_policy.fail_grace_ms * 1000000u;
	while (now_ns() < end)
		usleep(10000);
}

int MPIDI_CH3I_Rdma_error(MPIDI_VC_t *vc, const char *what, ssize_t err)
{
	const char *detail = vc->ch.conn ? rdmach_conn_error(vc->ch.conn) : "";
	int mpi_errno = MPI_SUCCESS;
	char msg[512];

	if (err == -ECONNRESET)
		fail_grace();
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

/* rdmach_put, or rdmach_put_deferred when ticket is given (*ticket: 0,
 * or the ticket of bytes taken by reference). */
static int rdma_put(MPIDI_VC_t *vc, struct iovec *iov, int n, size_t *nb, uint64_t *ticket)
{
	ssize_t rc;

	if (vc->ch.terminated)
		return MPIDI_CH3I_Rdma_error(vc, "put", -EPIPE);
	if (unlikely(!vc->ch.polled)) {
		int mpi_errno = MPIDI_CH3I_Vc_activate(vc);

		if (mpi_errno)
			return mpi_errno;
	}
	rc = ticket ? rdmach_put_deferred(vc->ch.conn, iov, n, ticket) :
		rdmach_put(vc->ch.conn, iov, n);
	if (rc < 0)
		return MPIDI_CH3I_Rdma_error(vc, "put", rc);
	*nb = (size_t) rc;
	return MPI_SUCCESS;
}

int MPIDI_CH3I_Rdma_put(MPIDI_VC_t *vc, struct iovec *iov, int n, size_t *nb)
{
	return rdma_put(vc, iov, n, nb, NULL);
}

int MPIDI_CH3I_Rdma_enqueue(MPIDI_VC_t *vc, MPIR_Request *sreq)
{
	if (unlikely(!vc->ch.polled)) {
		int mpi_errno = MPIDI_CH3I_Vc_activate(vc);

		if (mpi_errno)
			return mpi_errno;
	}
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

/* MPIDI_CH3I_Rdma_put for sreq's own iovec, letting rdmach take the
 * bytes by reference (rdmach_put_deferred) when sreq owns all of them
 * until it completes: nothing follows them (no OnDataAvail) and no piece
 * is the VC's staged header, which the next send overwrites.  A ticket is
 * kept in sreq (tickets only grow); see MPIDI_CH3I_Rdma_put_finish. */
int MPIDI_CH3I_Rdma_put_req(MPIDI_VC_t *vc, MPIR_Request *sreq, struct iovec *iov, int n,
			    size_t *nb)
{
	uintptr_t staged = (uintptr_t) vc->ch.tx_pkt;
	uint64_t ticket = 0;
	int mpi_errno;

	if (sreq->dev.OnDataAvail || (uintptr_t) iov[0].iov_base - staged < HDR_SZ)
		return rdma_put(vc, iov, n, nb, NULL);
	mpi_errno = rdma_put(vc, iov, n, nb, &ticket);
	if (ticket)
		sreq->ch.put_ticket = ticket;
	return mpi_errno;
}

/* Every byte of sreq is put: complete it, or -- when the peer still reads
 * some from its buffer -- move it to the VC's zero-copy list, completed
 * by complete_zcopy.  *more: CH3 refilled the iovec (more to put). */
int MPIDI_CH3I_Rdma_put_finish(MPIDI_VC_t *vc, MPIR_Request *sreq, int *more)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;

	if (!sreq->ch.put_ticket)
		return request_data_done(vc, sreq, more);
	*more = 0;
	MPIR_Request_add_ref(sreq);
	sreq->ch.zc_next = NULL;
	if (vcch->zc_tail)
		vcch->zc_tail->ch.zc_next = sreq;
	else
		vcch->zc_head = sreq;
	vcch->zc_tail = sreq;
	return MPI_SUCCESS;
}

/* Complete the sends of vc's zero-copy list whose bytes the peer has
 * read (rdmach_put_done also notices a peer that died first). */
static __attribute__((noinline)) int complete_zcopy(MPIDI_VC_t *vc, int *progressed)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	MPIR_Request *sreq;
	uint64_t done;
	int rc, mpi_errno = MPI_SUCCESS;

	rc = rdmach_put_done(vcch->conn, &done);
	if (rc < 0)
		return MPIDI_CH3I_Rdma_error(vc, "zero-copy put", rc);
	while ((sreq = vcch->zc_head) != NULL && sreq->ch.put_ticket <= done) {
		vcch->zc_head = sreq->ch.zc_next;
		if (!vcch->zc_head)
			vcch->zc_tail = NULL;
		*progressed = 1;
		mpi_errno = MPID_Request_complete(sreq);
		MPIR_Request_free(sreq);
		if (mpi_errno)
			break;
	}
	return mpi_errno;
}

static __attribute__((noinline)) int drain_sendq(MPIDI_VC_t *vc, int *progressed)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	MPIR_Request *sreq;
	int mpi_errno = MPI_SUCCESS, more;
	size_t nb;

	while ((sreq = MPIDI_CH3I_SendQ_head(vcch)) != NULL) {
		size_t off = sreq->dev.iov_offset;

		if (off < (size_t) sreq->dev.iov_count) {
			mpi_errno = MPIDI_CH3I_Rdma_put_req(vc, sreq, sreq->dev.iov + off,
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
		mpi_errno = MPIDI_CH3I_Rdma_put_finish(vc, sreq, &more);
		if (mpi_errno)
			break;
		if (!more)
			MPIDI_CH3I_SendQ_dequeue(vcch);
	}
	if (!mpi_errno && vcch->terminate_pending && MPIDI_CH3I_SendQ_empty(vcch) &&
	    !vcch->zc_head) {
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

static int corrupt_stream(MPIDI_VC_t *vc)
{
	int mpi_errno = MPI_SUCCESS;
	char msg[160];

	vc->ch.terminated = 1;
	snprintf(msg, sizeof(msg), "ch3:rdma: corrupt packet stream from rank %d "
		 "(invalid packet header)", vc->pg_rank);
	MPIR_ERR_SET1(mpi_errno, MPI_ERR_INTERN, "**fail", "**fail %s", msg);
	return mpi_errno;
}

/* A spare staging buffer where there is none (every VC's holds staged
 * bytes). */
static __attribute__((noinline)) int staging_alloc(void)
{
	rx_spare = MPL_malloc(idle_policy.rx_staging, MPL_MEM_BUFFER);
	if (!rx_spare)
		return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
					    __LINE__, MPI_ERR_OTHER, "**nomem", NULL);
	return MPI_SUCCESS;
}

/* vc, which holds no staging buffer (rx_pos = rx_len = 0), takes the
 * spare: on every get of a VC with nothing staged, so in line. */
static inline int staging_take(MPIDI_CH3I_VC *vcch)
{
	if (unlikely(!rx_spare)) {
		int mpi_errno = staging_alloc();

		if (mpi_errno)
			return mpi_errno;
	}
	vcch->rx_buf = rx_spare;
	rx_spare = NULL;
	return MPI_SUCCESS;
}

/* After vc's turn: a staging buffer with nothing left in it becomes the
 * spare (or is freed when there is one already). */
static inline void staging_give_back(MPIDI_CH3I_VC *vcch)
{
	if (!vcch->rx_buf || vcch->rx_pos != vcch->rx_len)
		return;
	if (rx_spare)
		MPL_free(vcch->rx_buf);
	else
		rx_spare = vcch->rx_buf;
	vcch->rx_buf = NULL;
	vcch->rx_pos = vcch->rx_len = 0;
}

/* Read ahead into the staging buffer (its unread bytes moved to the
 * front first).  *nb = bytes got (now staged). */
static int staging_refill(MPIDI_VC_t *vc, size_t *nb)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	size_t unread = vcch->rx_len - vcch->rx_pos;
	struct iovec iov;
	int mpi_errno;

	if (unlikely(!vcch->rx_buf)) {
		mpi_errno = staging_take(vcch);
		if (mpi_errno)
			return mpi_errno;
	}
	if (vcch->rx_pos) {
		memmove(vcch->rx_buf, vcch->rx_buf + vcch->rx_pos, unread);
		vcch->rx_pos = 0;
		vcch->rx_len = unread;
	}
	iov.iov_base = vcch->rx_buf + unread;
	iov.iov_len = (vcch->rx_ahead > unread ? vcch->rx_ahead : idle_policy.rx_staging) - unread;
	mpi_errno = rdma_get(vc, &iov, 1, nb);
	if (!mpi_errno)
		vcch->rx_len += *nb;
	return mpi_errno;
}

/* Length of the header at the front of the staged bytes: 0 while it is
 * not all there yet; -1 (the stream is corrupt) if it is not a header. */
static ssize_t staged_header(const MPIDI_CH3I_VC *vcch)
{
	size_t unread = vcch->rx_len - vcch->rx_pos, hdr_len;

	if (unread < MPIDI_CH3I_WIRE_MIN_HDR)
		return 0;
	hdr_len = MPIDI_CH3I_Wire_hdr_len(vcch->rx_buf + vcch->rx_pos);
	if (!hdr_len)
		return -1;
	return unread < hdr_len ? 0 : (ssize_t) hdr_len;
}

/* Hand the header at buf (hdr_len bytes, avail with what follows it) to
 * CH3's handler with the bytes after it; the handler takes what it can
 * use (handlers copy what they keep of a header, as nemesis's cells are
 * reused too).  *taken: header and payload bytes the handler took. */
static inline __attribute__((always_inline)) int
run_handler(MPIDI_VC_t *vc, const char *buf, size_t hdr_len, size_t avail, size_t *taken)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	MPIDI_CH3_Pkt_t *pkt;
	MPIR_Request *rreq = NULL;
	intptr_t buflen;
	int mpi_errno;

	pkt = MPIDI_CH3I_Wire_unpack(&rx_pkt_aligned, buf, hdr_len);
	if (!pkt_handlers[pkt->type])
		return corrupt_stream(vc);
	buflen = (intptr_t) (avail - hdr_len);
	mpi_errno = pkt_handlers[pkt->type](vc, pkt, (void *) (buf + hdr_len), &buflen, &rreq);
	if (mpi_errno)
		return mpi_errno;
	*taken = hdr_len + (size_t) buflen;
	vcch->rx_ahead = idle_policy.rx_staging;
	/* a request means more payload than was there: a large message */
	vcch->rx_peek = (rreq ? UINT64_MAX - 1 : (uint64_t) buflen) >= vcch->rx_in_place_min;
	vcch->rx_waited = 0;
	if (rreq) {
		rreq->dev.iov_offset = 0;
		vcch->recv_active = rreq;
		/* the bytes left after it go to rreq first; then the rest */
		if (MPIDI_CH3I_Iov_bytes(rreq->dev.iov, rreq->dev.iov_count) >=
		    avail - *taken + idle_policy.rx_staging)
			vcch->rx_ahead = RX_AHEAD_LARGE;
	}
	return MPI_SUCCESS;
}

/* A whole header is in the staging buffer: to its handler, with the
 * staged bytes after it. */
static __attribute__((noinline)) int handle_packet(MPIDI_VC_t *vc, size_t hdr_len)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	size_t taken;
	int mpi_errno;

	mpi_errno = run_handler(vc, vcch->rx_buf + vcch->rx_pos, hdr_len,
				vcch->rx_len - vcch->rx_pos, &taken);
	if (!mpi_errno)
		vcch->rx_pos += taken;
	return mpi_errno;
}

/* The next bytes lie in rdmach's memory (rdmach_peek: n at buf): a whole
 * header there goes to its handler in place, which copies its payload
 * once, into the receive buffer, instead of through the staging buffer.
 * *handled = 0: not a whole header (cut by a packet's end): staging. */
static __attribute__((noinline)) int handle_in_place(MPIDI_VC_t *vc, const char *buf,
						     size_t n, int *handled)
{
	size_t hdr_len, taken;
	int mpi_errno, rc;

	*handled = 0;
	if (n < MPIDI_CH3I_WIRE_MIN_HDR)
		return MPI_SUCCESS;
	hdr_len = MPIDI_CH3I_Wire_hdr_len(buf);
	if (!hdr_len)
		return corrupt_stream(vc);
	if (hdr_len > n)
		return MPI_SUCCESS;
	mpi_errno = run_handler(vc, buf, hdr_len, n, &taken);
	if (mpi_errno)
		return mpi_errno;
	rc = rdmach_consume(vc->ch.conn, taken);
	if (rc < 0)
		return MPIDI_CH3I_Rdma_error(vc, "consume", rc);
	*handled = 1;
	return MPI_SUCCESS;
}

/* Fill the active request's iovec: staged bytes first, then straight from
 * rdmach.  *nb = bytes placed; *done = the iovec is full. */
static int recv_payload(MPIDI_VC_t *vc, MPIR_Request *rreq, size_t *nb, int *done)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	size_t off = rreq->dev.iov_offset, got = 0;
	int mpi_errno;

	if (vcch->rx_pos < vcch->rx_len) {
		for (size_t i = off; i < (size_t) rreq->dev.iov_count &&
		     vcch->rx_pos + got < vcch->rx_len; i++) {
			size_t n = MPL_MIN(rreq->dev.iov[i].iov_len, vcch->rx_len - vcch->rx_pos - got);

			memcpy(rreq->dev.iov[i].iov_base, vcch->rx_buf + vcch->rx_pos + got, n);
			got += n;
		}
		vcch->rx_pos += got;
	} else if (off < (size_t) rreq->dev.iov_count) {
		mpi_errno = rdma_get(vc, rreq->dev.iov + off, rreq->dev.iov_count - (int) off, &got);
		if (mpi_errno)
			return mpi_errno;
	}
	*done = iov_advance(rreq->dev.iov, rreq->dev.iov_count, &off, got);
	rreq->dev.iov_offset = off;
	*nb = got;
	return MPI_SUCCESS;
}

/* Receive from vc until nothing more is there or a request completed. */
static __attribute__((noinline)) int poll_recv_stream(MPIDI_VC_t *vc, int *progressed,
						      unsigned start_count)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	int mpi_errno = MPI_SUCCESS, more, done;
	size_t nb;

	/* after CH3's close handshake nothing more comes from the peer; after
	 * a completion the caller may be satisfied: let it look first */
	while (!vcch->terminated && !vcch->terminate_pending &&
	       start_count == MPIDI_CH3I_progress_completion_count) {
		MPIR_Request *rreq = vcch->recv_active;

		if (!rreq) {
			ssize_t hdr_len = staged_header(vcch);

			if (hdr_len < 0)
				return corrupt_stream(vc);
			if (!hdr_len) {
				mpi_errno = staging_refill(vc, &nb);
				if (mpi_errno || nb == 0)
					break;
				*progressed = 1;
				continue;
			}
			mpi_errno = handle_packet(vc, (size_t) hdr_len);
			if (mpi_errno)
				break;
			continue;
		}

		int staged = vcch->rx_pos < vcch->rx_len;

		mpi_errno = recv_payload(vc, rreq, &nb, &done);
		if (mpi_errno)
			break;
		*progressed |= nb > 0;
		if (!done) {
			if (staged)
				continue;	/* now straight from rdmach */
			break;			/* rdmach has no more for now */
		}
		mpi_errno = request_data_done(vc, rreq, &more);
		if (mpi_errno)
			break;
		if (!more)
			vcch->recv_active = NULL;
	}
	return mpi_errno;
}

/* Nothing staged, no payload expected: a header where rdmach holds it
 * goes to its handler in place.  *done: nothing more to do for now. */
static inline int recv_in_place(MPIDI_VC_t *vc, int *progressed, int *done)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	const void *buf;
	ssize_t n = rdmach_peek(vcch->conn, &buf);
	int mpi_errno, handled;

	*done = 0;
	if (n <= 0) {
		if (n == -EOPNOTSUPP) {
			vcch->rx_in_place_min = UINT64_MAX;
			vcch->rx_peek = 0;
		} else if (n == 0)
			*done = 1;
		else if (n != -ENOMSG)
			return MPIDI_CH3I_Rdma_error(vc, "peek", n);
		return MPI_SUCCESS;
	}
	mpi_errno = handle_in_place(vc, buf, (size_t) n, &handled);
	if (mpi_errno || !handled)
		return mpi_errno;
	*progressed = 1;
	/* out if that was all the message: the waiter may be satisfied */
	*done = !vcch->recv_active;
	return MPI_SUCCESS;
}

/* The waiter's loop comes here for every peer: with nothing staged and no
 * payload expected, a header in place or one get into the staging buffer,
 * and out. */
static inline int poll_recv(MPIDI_VC_t *vc, int *progressed)
{
	MPIDI_CH3I_VC *vcch = &vc->ch;
	unsigned start_count = MPIDI_CH3I_progress_completion_count;

	if (!vcch->recv_active && vcch->rx_pos == vcch->rx_len && !vcch->terminate_pending) {
		ssize_t hdr_len;
		size_t nb;
		int mpi_errno;

		if (vcch->rx_peek && vcch->rx_waited) {
			int done;

			mpi_errno = recv_in_place(vc, progressed, &done);
			if (mpi_errno || done)
				return mpi_errno;
			if (vcch->recv_active)
				return poll_recv_stream(vc, progressed, start_count);
		}
		mpi_errno = staging_refill(vc, &nb);
		if (mpi_errno || nb == 0) {
			vcch->rx_waited = 1;
			return mpi_errno;
		}
		*progressed = 1;
		/* the common arrival, a header alone (an 8-byte message): its
		 * handler right here, and out if that was all */
		hdr_len = staged_header(vcch);
		if (hdr_len > 0) {
			mpi_errno = handle_packet(vc, (size_t) hdr_len);
			if (mpi_errno || (vcch->rx_pos == vcch->rx_len && !vcch->recv_active))
				return mpi_errno;
		}
	}
	return poll_recv_stream(vc, progressed, start_count);
}

/* One pass over the polled VCs, cut short once a request completes (the
 * waiter may be done: return to it at once).  *progressed: a byte moved. */
static int progress_pass(int *progressed)
{
	unsigned start_count = MPIDI_CH3I_progress_completion_count;
	int mpi_errno = MPI_SUCCESS;

	if (conn_pass++ % MPIDI_CH3I_CONN_PASSES == 0) {
		mpi_errno = conns_up();
		if (mpi_errno)
			return mpi_errno;
	}
	for (int k = 0; k < n_poll_vcs; k++) {
		MPIDI_VC_t *vc = poll_vcs[next_poll_vc];

		if (++next_poll_vc == n_poll_vcs)
			next_poll_vc = 0;
		if (vc->ch.terminated)
			continue;
		if (vc->ch.zc_head) {
			mpi_errno = complete_zcopy(vc, progressed);
			if (mpi_errno)
				break;
		}
		if (!MPIDI_CH3I_SendQ_empty(&vc->ch) || vc->ch.terminate_pending) {
			mpi_errno = drain_sendq(vc, progressed);
			if (mpi_errno)
				break;
		}
		mpi_errno = poll_recv(vc, progressed);
		staging_give_back(&vc->ch);
		if (mpi_errno || start_count != MPIDI_CH3I_progress_completion_count)
			break;
	}
	return mpi_errno;
}

static int progress_test(void)
{
	int made_progress = 0, progressed = 0, mpi_errno;

	mpi_errno = MPIDI_CH3I_Progress_hooks(&made_progress);
	if (mpi_errno)
		return mpi_errno;
	return progress_pass(&progressed);
}

/* Sleep until a peer rings, or for sleep_us where not every peer can:
 * armed first, then one more pass, so that a put landing meanwhile is
 * either seen by that pass or ends the sleep.  CH3's lock is released
 * while asleep (another thread's send ends the sleep: Progress_wakeup). */
static int idle_sleep(void)
{
	unsigned start_count = MPIDI_CH3I_progress_completion_count;
	int wakeable = rdmach_wait_arm(MPIDI_CH3I_rdma_ctx), progressed = 0;
	int mpi_errno = progress_pass(&progressed);
	uint64_t us = wakeable > 0 ? idle_policy.wake_sleep_us : idle_policy.sleep_us;

	if (mpi_errno || progressed || start_count != MPIDI_CH3I_progress_completion_count) {
		rdmach_wait(MPIDI_CH3I_rdma_ctx, 0);
		return mpi_errno;
	}
	MPID_THREAD_CS_EXIT(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
	rdmach_wait(MPIDI_CH3I_rdma_ctx, us);
	MPID_THREAD_CS_ENTER(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
	return MPI_SUCCESS;
}

static int progress_wait(MPID_Progress_state *state)
{
	int mpi_errno = MPI_SUCCESS, yielded = 0;
	unsigned spins = idle_policy.yield_spins;
	uint64_t idle_since = 0;

	while (state->ch.completion_count == MPIDI_CH3I_progress_completion_count) {
		int made_progress = 0, progressed = 0;

		/* CH3's hooks (collective schedules...) every few passes: a
		 * message arriving meanwhile is seen sooner */
		if (hook_pass++ % MPIDI_CH3I_HOOK_PASSES == 0) {
			mpi_errno = MPIDI_CH3I_Progress_hooks(&made_progress);
			if (mpi_errno)
				break;
			if (made_progress) {
				MPIDI_CH3_Progress_signal_completion();
				break;
			}
		}
		mpi_errno = progress_pass(&progressed);
		if (mpi_errno)
			break;
		if (progressed) {
			spins = idle_policy.yield_spins;
			yielded = 0;
			continue;
		}
		if (--spins) {
			/* let other threads in (they may post what we wait for) */
			if (spins % MPIDI_CH3I_LOCK_YIELD_SPINS == 0)
				MPID_THREAD_CS_YIELD(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
			continue;
		}
		spins = idle_policy.yield_spins;
		MPID_THREAD_CS_YIELD(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
		if (!idle_policy.sleep_us) {
			sched_yield();
		} else if (!yielded++) {
			idle_since = now_ns();
			sched_yield();
		} else if (now_ns() - idle_since >= idle_policy.sleep_after_ns) {
			mpi_errno = idle_sleep();
			if (mpi_errno)
				break;
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
	/* a waiting thread may be asleep in rdmach_wait */
	rdmach_wake(MPIDI_CH3I_rdma_ctx);
}
#endif

int MPIDI_CH3I_Rdma_flush(void)
{
	MPIDI_PG_t *pg = MPIDI_Process.my_pg;
	int mpi_errno = MPI_SUCCESS, pending;

	do {
		int progressed = 0;

		pending = 0;
		for (int i = 0; i < n_poll_vcs && !mpi_errno; i++) {
			MPIDI_VC_t *vc = poll_vcs[i];

			if (vc->ch.conn && !MPIDI_CH3I_SendQ_empty(&vc->ch))
				mpi_errno = drain_sendq(vc, &progressed);
			if (vc->ch.conn && vc->ch.zc_head && !mpi_errno)
				mpi_errno = complete_zcopy(vc, &progressed);
			pending |= !MPIDI_CH3I_SendQ_empty(&vc->ch) || vc->ch.zc_head;
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
	if (!MPIDI_CH3I_SendQ_empty(&vc->ch) || vc->ch.zc_head) {
		vc->ch.terminate_pending = 1;
		return MPI_SUCCESS;
	}
	vc->ch.terminated = 1;
	return MPIDI_CH3U_Handle_connection(vc, MPIDI_VC_EVENT_TERMINATED);
}

int MPIDI_CH3I_Progress_init(void)
{
	int mpi_errno = idle_policy_init();

	if (mpi_errno)
		return mpi_errno;
	return MPIDI_CH3_PktHandler_Init(pkt_handlers, MPIDI_CH3_PKT_END_CH3 + 1);
}

int MPIDI_CH3I_Progress_connected(void)
{
	return poll_list_init();
}

int MPIDI_CH3I_Progress_finalize(void)
{
	MPL_free(poll_vcs);
	poll_vcs = NULL;
	MPL_free(rx_spare);
	rx_spare = NULL;
	n_poll_vcs = next_poll_vc = 0;
	return MPI_SUCCESS;
}
