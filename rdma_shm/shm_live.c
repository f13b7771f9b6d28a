/*
 * shm_live.c - liveness by pidfd and the doorbell (shm_live.h: the
 * contract).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "shm_live.h"

/* A pidfd for pid, readable once the process has exited; -1 without
 * pidfd_open (then kill and /proc serve). */
int shm_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

/* A zombie (dead, not yet reaped) still answers kill(pid, 0). */
static int shm_proc_is_zombie(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	int zombie = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 1;
	if (fgets(buf, sizeof(buf), f)) {
		p = strrchr(buf, ')');
		zombie = p && (p[2] == 'Z' || p[2] == 'X');
	}
	fclose(f);
	return zombie;
}

/* Has the peer exited?  One system call or two; never for myself. */
int shm_peer_dead(const struct shm_conn *sc)
{
	struct pollfd pfd;

	if (sc->self)
		return 0;
	if (sc->pidfd >= 0) {
		pfd.fd = sc->pidfd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		return poll(&pfd, 1, 0) > 0;
	}
	if (kill(sc->pid, 0) < 0 && errno == ESRCH)
		return 1;
	return shm_proc_is_zombie(sc->pid);
}

/* Time for a liveness probe?  Reads the clock; a probe every liveness_ns. */
int shm_peer_check_due(struct shm_conn *sc)
{
	uint64_t now = rdmach_now_ns();

	if (now < sc->next_check_ns)
		return 0;
	sc->next_check_ns = now + sc->tl->liveness_ns;
	return 1;
}

/* Rate-limited check, for idle polls: a clock read every SHM_IDLE_POLLS
 * calls, a liveness probe every liveness_ns. */
int shm_idle_peer_dead(struct shm_conn *sc)
{
	if (++sc->idle_polls % SHM_IDLE_POLLS)
		return 0;
	return shm_peer_check_due(sc) && shm_peer_dead(sc);
}

/* The peer died: fail the connection (-ECONNRESET), saying when. */
int shm_fail_dead(struct shm_conn *sc, const char *when)
{
	return rdmach_conn_fail(sc->conn, -ECONNRESET,
				"shm: peer rank %d (pid %d) died %s",
				sc->conn->peer, (int)sc->pid, when);
}

/* Nothing could be sent: report the reader's close or death. */
ssize_t shm_tx_stalled(struct shm_conn *sc)
{
	sc->conn->stats.ring_full_stalls++;
	if (shm_idle_peer_dead(sc))
		return shm_fail_dead(sc, "(its ring is full)");
	return 0;
}

/* ---- doorbell ---------------------------------------------------------- */

static long shm_futex(_Atomic uint32_t *word, int op, uint32_t val,
		      const struct timespec *timeout)
{
	/* not FUTEX_PRIVATE_FLAG: the word is shared between processes */
	return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0);
}

/* Wake whoever sleeps on doorbell b. */
void shm_bell_wake(struct shm_bell *b)
{
	atomic_fetch_add_explicit(&b->seq, 1, memory_order_release);
	shm_futex(&b->seq, FUTEX_WAKE, INT_MAX, NULL);
}

/* The peer's doorbell is on: wake it if it sleeps (out of line: the
 * data path pays one test while bells are off). */
__attribute__((noinline)) void shm_bell_ring_on(struct shm_bell *b)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (shm_peer_probe32(&b->sleepers))
		shm_bell_wake(b);
}

/* About to sleep on my doorbell: count myself in, then the value to sleep
 * on, read before the caller polls every ring. */
uint32_t shm_bell_arm(struct shm_bell *b)
{
	atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
	return shm_peer_probe32(&b->seq);
}

/* Sleep while the doorbell still holds token, at most timeout_ns (0: not
 * at all), then count myself out. */
void shm_bell_sleep(struct shm_bell *b, uint32_t token, uint64_t timeout_ns)
{
	struct timespec ts = rdmach_timespec_ns(timeout_ns);

	if (timeout_ns)
		shm_futex(&b->seq, FUTEX_WAIT, token, &ts);
	atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
}
