/*
 * ib_cm.h - rdma_ib's connection manager (rdma_ib private, prefix
 * ib_cm_): one UD QP per process, whose address (with the port's) is the
 * one out-of-band record a rank publishes ("ib-<rank>"); the RC
 * endpoints (ib_ep.h) of a pair are wired by messages over it, at the
 * first put to a peer (RDMACH_CONNECT=demand) or for every peer at
 * rdmach_connect (all).  Below the interface (ib_iface.c), above the
 * endpoints; the endpoints hand it the UD QP's completions through
 * ib_tl.cm_wc.  The protocol: rdma_ib/README.md, "Connection manager".
 */
#ifndef RDMACH_IB_CM_H
#define RDMACH_IB_CM_H

#include <stdint.h>
#include <stdio.h>
#include <infiniband/verbs.h>

#include "ib_tl.h"

/* Create the UD QP on tl->cq (which must exist) and publish this rank's
 * record.  0 or a negative errno (logged). */
int ib_cm_open(struct ib_tl *tl);
void ib_cm_close(struct ib_tl *tl);

/* struct rdmach_tl_ops.connect_peer: start (start = 1) or advance the
 * connection to peer; 1 when up, 0 while under way, or a negative errno
 * (the connection failed: rdmach_conn_fail). */
int ib_cm_connect_peer(struct rdmach_tl *base, int peer, int start);
/* tl_ops listen: answer the requests that have arrived. */
void ib_cm_listen(struct rdmach_tl *base);

/* Connect every peer of peers[] now (RDMACH_CONNECT=all): 0 when all are
 * up, or the first failure. */
int ib_cm_connect_all(struct ib_tl *tl, const int *peers, int npeers);

/* Retransmissions and time-outs of the connections under way. */
void ib_cm_progress(struct ib_tl *tl);
/* How many are under way (RDMACH_STATS). */
unsigned int ib_cm_pending(const struct ib_tl *tl);

/* Finalize has begun: peers' requests to close a connection are
 * refused, ours are answered (until deadline_ns at most). */
void ib_cm_finalizing(struct ib_tl *tl, uint64_t deadline_ns);
/* Connections made, QPs held, idle ones closed (RDMACH_STATS). */
void ib_cm_print(const struct ib_tl *tl, FILE *out);

/* Send queue and receive entries the UD QP adds to the shared CQ. */
#define IB_CM_CQE 384

#endif /* RDMACH_IB_CM_H */
