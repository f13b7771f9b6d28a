/*
 * shm_rndv.h - large puts by cross-memory attach (rdma_shm private, prefix
 * shm_): the writer posts a RNDV control packet naming its buffers
 * (proto/pkt.h), the reader reads them with process_vm_readv and
 * acknowledges in acked_id (shm_ring.h: the contract); and the choice of
 * a large put between this and the copy area (shm_pipe.h), which takes
 * the other large puts.
 */
#ifndef RDMACH_SHM_RNDV_H
#define RDMACH_SHM_RNDV_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/iov.h"
#include "core/tl.h"
#include "shm_conn.h"

/* Has the peer read every rendezvous posted so far (none: ids from 1)? */
static inline int shm_rndv_all_read(const struct shm_conn *sc)
{
	return sc->next_rndv_id <= 1 ||
	       shm_peer_probe64(&sc->tx_ctrl->acked_id) + 1 >= sc->next_rndv_id;
}

/* Has the peer read the rendezvous the pending put waits for? */
static inline int shm_rndv_acked(const struct shm_conn *sc)
{
	return shm_peer_probe64(&sc->tx_ctrl->acked_id) >= sc->rndv->id;
}

/* Descriptors back to the process's free list: a connection's at its
 * close, then the free list's memory at the transport's. */
void shm_rndv_conn_close(struct shm_conn *sc);
void shm_rndv_tl_close(struct shm_tl *tl);

/* receive */
void shm_rx_large_start(struct shm_conn *sc);
int shm_rx_rndv_take(struct shm_conn *sc, struct shm_rx_ring *ring,
		     const uint8_t *p, uint64_t h);
ssize_t shm_rx_rndv(struct shm_conn *sc, struct shm_rx_ring *ring,
		    uint32_t len, struct rdmach_iovc *c, size_t room, int *fin);

/* send */
int shm_tx_want_cma(struct shm_conn *sc, const struct iovec *iov,
		    int iovcnt, size_t total, int deferred);
ssize_t shm_tx_rndv_start(struct shm_conn *sc, const struct iovec *iov,
			  int iovcnt);
ssize_t shm_tx_rndv_poll(struct shm_conn *sc, const struct iovec *iov,
			 int iovcnt);
ssize_t shm_tx_rndv_defer(struct shm_conn *sc, const struct iovec *iov,
			  int iovcnt, uint64_t *ticket);
int shm_put_done(struct rdmach_conn *conn, uint64_t *done);

#endif /* RDMACH_SHM_RNDV_H */
