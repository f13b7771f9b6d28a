/*
 * shm_mem.h - memory per pair (rdma_shm private, prefix shm_mem_): an
 * idle pair's bulk ring and copy area go back to the system, by the
 * handshake of shm_ring.h (release_req / release_ack / release_done),
 * after RDMACH_SHM_IDLE_RELEASE_MS without traffic through them.  Both
 * roles run from idle polls (a get that found nothing, at the liveness
 * cadence) and, for the writer, from the general put path: nothing on
 * the path of a put or get of one packet.
 */
#ifndef RDMACH_SHM_MEM_H
#define RDMACH_SHM_MEM_H

#include "shm_conn.h"

/* The periodic look of both roles at the pair's release handshake. */
void shm_mem_idle(struct shm_conn *sc);

/* Writer kept out of the bulk ring and copy area: back in once the
 * reader has freed them (the general put path asks). */
void shm_mem_tx_resume(struct shm_conn *sc);

static inline void shm_mem_tx_check(struct shm_conn *sc)
{
	if (sc->mem_tx.kept_out)
		shm_mem_tx_resume(sc);
}

#endif /* RDMACH_SHM_MEM_H */
