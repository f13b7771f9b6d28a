/* ib.h - rdma_ib private: device/port/GID choice and QP wiring (ib_dev.c),
 * used by the transport (ib.c).  Prefix ib_. */
#ifndef RDMACH_IB_H
#define RDMACH_IB_H

#include <stdint.h>
#include <infiniband/verbs.h>

struct ib_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	char name[IBV_SYSFS_NAME_MAX];
	uint8_t port;
	uint8_t is_roce;		/* Ethernet link layer: GID addressing */
	enum ibv_mtu active_mtu;
	uint16_t lid;
	int gid_index;			/* -1: none (IB without GRH) */
	union ibv_gid gid;
	int max_qp_rd_atom;
	int max_cqe;
	int max_sge;			/* device limit */
	int max_qp;			/* QPs the device holds, all
					 * processes of the host together */
	unsigned int qps;		/* RC QPs of this process open */
	int qp_errno;			/* why ib_qp_create failed last */
	int async_ok;			/* its async events can be read
					 * without waiting */
	uint32_t max_msg_sz;		/* port limit on one message */
	char why[160];			/* ib_dev_open failed: why */
};

/* Send scatter/gather entries of every QP (zero-copy reads use them). */
#define IB_SEND_SGE_WANT 4

static inline int ib_dev_send_sge(const struct ib_dev *d)
{
	if (d->max_sge < 1)
		return 1;
	return d->max_sge < IB_SEND_SGE_WANT ? d->max_sge : IB_SEND_SGE_WANT;
}

/* Outstanding RDMA reads per QP, both as initiator (max_rd_atomic) and as
 * responder (max_dest_rd_atomic): the device's limit, at most 16. */
static inline int ib_dev_rd_atom(const struct ib_dev *d)
{
	int n = d->max_qp_rd_atom < 16 ? d->max_qp_rd_atom : 16;

	return n > 0 ? n : 1;
}

/* What a peer needs to reach one of our QPs and write into our ring, and
 * what both ends must agree on; it travels in the connection manager's
 * messages (ib_cm.c), each field checked against its range on arrival. */
struct ib_addr {
	uint16_t lid;
	union ibv_gid gid;
	uint32_t qpn, psn;
	uint64_t ring, ctrl, ring_size;
	uint32_t rkey;
	uint32_t wire;			/* IB_WIRE_VERSION of the sender */
	uint32_t mtu;			/* its largest path MTU: active MTU
					 * capped by its RDMACH_IB_MTU */
	uint32_t mode;			/* its ring mode + 1 (0: unknown) */
	uint32_t caps;			/* IB_CAP_* it handles */
};

/* Optional packets a peer announces it handles; a rank sends them only to
 * peers that do (older builds interoperate without them). */
#define IB_CAP_SPIPE 0x1u		/* superpipeline (ib_spipe.h) */
#define IB_CAP_NEAR 0x2u		/* near trailers (proto/ring.h) */
#define IB_CAP_SRQ 0x4u		/* the shared receive path (ib_srq.h) */
#define IB_CAPS (IB_CAP_SPIPE | IB_CAP_NEAR | IB_CAP_SRQ) /* this build's */

/* The ring protocol and address format; raise it on any change that a
 * peer of the previous version cannot follow.  (Defined from outside only
 * to test the refusal: test/run-cluster.sh builds a "future" peer.) */
#ifndef IB_WIRE_VERSION
#define IB_WIRE_VERSION 2
#endif

struct ib_qp_params {
	enum ibv_mtu mtu;		/* path MTU, <= active MTU */
	uint8_t timeout;		/* local ack timeout exponent */
	uint8_t retry_cnt;
};

/* Open device `want` ("" = first with an active port), port `port`
 * (0 = first active), GID index gid ("auto" or a number).  0 or -ENODEV. */
int ib_dev_open(struct ib_dev *d, const char *want, unsigned int port,
		const char *gid);
void ib_dev_close(struct ib_dev *d);

/* Reads the device's async events, never waiting: 1 after one that makes
 * every connection of the device unusable (an overrun of cq, the device
 * failed), why saying so; else 0 (a port going down is logged). */
int ib_dev_async(struct ib_dev *d, const struct ibv_cq *cq, char *why,
		 size_t len);

/* An RC QP in INIT; *inline_max gets the inline size obtained.  srq:
 * its receives come from that shared receive queue (NULL: a queue of its
 * own of one entry, never posted: it takes RDMA writes only). */
struct ibv_qp *ib_qp_create(struct ib_dev *d, struct ibv_cq *cq,
			    struct ibv_srq *srq, unsigned int sq_depth,
			    unsigned int inline_want, unsigned int *inline_max);
/* Why ib_qp_create failed last (d->qp_errno, the QPs held), logged as
 * an error: the caller could not do without the QP. */
void ib_dev_qp_refused(const struct ib_dev *d);
/* Destroys a QP of ib_qp_create (d->qps counts them). */
void ib_qp_destroy(struct ib_dev *d, struct ibv_qp *qp);
/* Path MTU towards remote: the smaller of the two ports' active MTUs and
 * the wanted one (RDMACH_IB_MTU). */
enum ibv_mtu ib_path_mtu(const struct ib_dev *d, const struct ib_addr *remote,
			 const struct ib_qp_params *p);
/* INIT -> RTR -> RTS towards remote.  0 or a negative errno (logged). */
int ib_qp_connect(struct ib_dev *d, struct ibv_qp *qp, uint32_t my_psn,
		  const struct ib_addr *remote, const struct ib_qp_params *p);

/* Can our port reach the peer's (rank peer) at all?  0, or
 * -ENETUNREACH with a message naming what differs. */
int ib_dev_check_reach(const struct ib_dev *d, int peer,
		       const struct ib_addr *r);

const char *ib_mtu_str(enum ibv_mtu mtu);
/* A RoCE GID that carries an IPv4 address (::ffff:a.b.c.d)? */
int ib_gid_is_v4mapped(const union ibv_gid *g);
/* The GID as an IPv6 address (INET6_ADDRSTRLEN bytes are enough). */
const char *ib_gid_str(const union ibv_gid *g, char *buf, size_t len);

/* How long a probe of the peer's adapter may go unanswered (a write of
 * the keepalive, the writes that fill a send queue, a zero-copy read):
 * 1.5 x RDMACH_PEER_TIMEOUT_MS, the keepalive's half of silence and its
 * wait (1 x failed healthy peers of guests starved by their host). */
static inline uint64_t ib_dev_probe_wait_ns(uint64_t peer_timeout_ns)
{
	return peer_timeout_ns + peer_timeout_ns / 2;
}

#endif /* RDMACH_IB_H */
