/*
 * shm_pipe.h - large puts through the copy area (rdma_shm private, prefix
 * shm_): a PIPE packet in the ring announces a message, its bytes follow
 * in the slots of a copy area in the reader's segment, the writer copying
 * in while the reader copies out (shm_ring.h: the format and the
 * memory-ordering contract).
 */
#ifndef RDMACH_SHM_PIPE_H
#define RDMACH_SHM_PIPE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/iov.h"
#include "shm_conn.h"
#include "shm_seg.h"

void shm_pipe_init(struct shm_pipe *pp, const struct shm_seg *seg, int slot);

/* receive */
int shm_rx_pipe_take(struct shm_conn *sc, struct shm_rx_ring *ring,
		     const uint8_t *p, uint64_t h);
ssize_t shm_rx_pipe(struct shm_conn *sc, struct shm_rx_ring *ring,
		    uint32_t len, struct rdmach_iovc *c, size_t room, int *fin);
ssize_t shm_rx_pipe_idle(struct shm_conn *sc);

/* send */
ssize_t shm_tx_pipe(struct shm_conn *sc, const struct iovec *iov,
		    int iovcnt, size_t total);

#endif /* RDMACH_SHM_PIPE_H */
