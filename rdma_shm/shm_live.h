/*
 * shm_live.h - is the peer alive, and the doorbell (rdma_shm private,
 * prefix shm_).  Liveness by pidfd (poll: readable once the process has
 * exited), else kill(pid, 0) and /proc for a zombie; probed only by idle
 * polls, at most every RDMACH_SHM_LIVENESS_MS, so the data path makes no
 * system call.
 *
 * Doorbell contract
 * -----------------
 * struct shm_bell, one per process in its segment header (shm_ring.h),
 * is used only when its owner set `on`.  A process about to sleep adds
 * itself to `sleepers` (a locked RMW: a full barrier), reads `seq`,
 * polls every ring, and sleeps in FUTEX_WAIT on `seq` while it still
 * holds that value.  A peer that changed anything its owner may wait
 * for (a header, a tail, a copy-area flag, acked_id, a close flag)
 * issues a SEQ_CST fence and, if `sleepers` is non-zero, increments
 * `seq` (RELEASE) and calls FUTEX_WAKE.  Either the sleeper's poll sees
 * the change, or the peer sees the sleeper and moves `seq` past the
 * value it waits on (Dekker's pattern: both sides store, fence, load).
 */
#ifndef RDMACH_SHM_LIVE_H
#define RDMACH_SHM_LIVE_H

#include <stdint.h>
#include <sys/types.h>

#include "shm_conn.h"
#include "shm_ring.h"

int shm_pidfd_open(pid_t pid);
int shm_peer_dead(const struct shm_conn *sc);
int shm_peer_check_due(struct shm_conn *sc);
int shm_idle_peer_dead(struct shm_conn *sc);
int shm_fail_dead(struct shm_conn *sc, const char *when);
ssize_t shm_tx_stalled(struct shm_conn *sc);

uint32_t shm_bell_arm(struct shm_bell *b);
void shm_bell_sleep(struct shm_bell *b, uint32_t token, uint64_t timeout_ns);
void shm_bell_wake(struct shm_bell *b);
void shm_bell_ring_on(struct shm_bell *b);

/* I changed something the peer may be asleep waiting for. */
static inline void shm_bell_ring(const struct shm_conn *sc)
{
	if (sc->peer_bell)
		shm_bell_ring_on(sc->peer_bell);
}

#endif /* RDMACH_SHM_LIVE_H */
