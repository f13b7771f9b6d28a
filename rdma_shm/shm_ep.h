/*
 * shm_ep.h - the data path of rdma_shm (private, prefix shm_): the
 * transport operations (core/tl.h) that move bytes over a connection's
 * rings, for the operations table in shm_iface.c.
 */
#ifndef RDMACH_SHM_EP_H
#define RDMACH_SHM_EP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/tl.h"

ssize_t shm_put(struct rdmach_conn *conn, const struct iovec *iov, int iovcnt,
		size_t total);
ssize_t shm_put_deferred(struct rdmach_conn *conn, const struct iovec *iov,
			 int iovcnt, size_t total, uint64_t *ticket);
ssize_t shm_get(struct rdmach_conn *conn, const struct iovec *iov, int iovcnt,
		size_t total);
ssize_t shm_peek(struct rdmach_conn *conn, const void **buf);
int shm_consume(struct rdmach_conn *conn, size_t n);

#endif /* RDMACH_SHM_EP_H */
