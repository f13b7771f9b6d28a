/*
 * shm_mem.h - memory per pair (rdma_shm private, prefix shm_mem_): an
 * idle pair's bulk ring and copy area go back to the system, by the
 * handshake of shm_ring.h (release_req / release_ack / release_done),
 * after RDMACH_SHM_IDLE_RELEASE_MS without traffic through them.  Both
 * roles run from idle polls (a get that found nothing, at the liveness
 * cadence) and, for the writer, from the general put path: nothing on
 * the path of a put or get of one packet.
 *
 * The cap on warm writers (RDMACH_SHM_WARM_MAX): with more local writers
 * than that, a writer starts cold, kept out of its bulk ring and copy
 * area by a release asked in my segment before anyone connects
 * (release_req = 1, acked at its connect), and a pair given back idle
 * goes cold again.  A cold writer's deferred puts take the main ring, its
 * large puts CMA or the main ring; it is let back in (release_done = n)
 * once it has sent RDMACH_SHM_WARM_AFTER bytes through the main ring
 * since it went cold and fewer than the cap are warm.  So the big areas
 * of at most RDMACH_SHM_WARM_MAX writers hold pages at once, and with
 * two processes (or a few) nothing changes.
 */
#ifndef RDMACH_SHM_MEM_H
#define RDMACH_SHM_MEM_H

#include "shm_conn.h"

/* The periodic look of both roles at the pair's release handshake. */
void shm_mem_idle(struct shm_conn *sc);

/* Writer kept out of the bulk ring and copy area: back in once the
 * reader has freed them (the general put path asks). */
void shm_mem_tx_resume(struct shm_conn *sc);

/* A quarter of the peer's main ring read without a pause (the idle polls
 * that look at the handshake do not come while the writers keep the
 * reader busy): may a cold writer be let in? */
void shm_mem_rx_busy(struct shm_conn *sc);

/* Before my segment is published: with more local writers than
 * RDMACH_SHM_WARM_MAX (tl->warm_cap), ask every other writer's release 1. */
void shm_mem_cold_start(struct shm_tl *tl);

/* At connect, both roles: the pair starts cold on my side if my writers
 * are capped, and I start kept out if the peer asked a release of me
 * before we met. */
void shm_mem_conn_start(struct shm_conn *sc);

static inline void shm_mem_tx_check(struct shm_conn *sc)
{
	if (sc->mem_tx.kept_out)
		shm_mem_tx_resume(sc);
}

#endif /* RDMACH_SHM_MEM_H */
