/*
 * ib_srq.h - rdma_ib's shared receive path for cold peers (rdma_ib
 * private, prefix ib_srq_): one shared receive queue per process, one
 * registered pool of receive buffers behind it and a small pool of send
 * buffers; the credit accounting that keeps the receive pool covering
 * every credit granted; the per-connection queue of received buffers not
 * read yet.  The endpoints (ib_ep.c) run the protocol over it: a cold
 * connection has no ring; its puts are SENDs into the peer's pool, each
 * spending a credit the peer granted, until the peer offers a ring
 * (promotion).  README.md, "The shared receive path".
 *
 * Below the endpoints, beside zero-copy: it uses only ib_dev.
 */
#ifndef RDMACH_IB_SRQ_H
#define RDMACH_IB_SRQ_H

#include <stdint.h>
#include <stdio.h>
#include <infiniband/verbs.h>

#include "ib_dev.h"

/* wr_id of a shared receive: this bit | buffer index */
#define IB_SRQ_WRID (1ull << 60)

/* A cold endpoint's address carries this bit in its ring field, with the
 * initial grant (credits) in the low 32 bits instead of a ring address
 * (user-space addresses never have bit 63 set). */
#define IB_ADDR_COLD (1ull << 63)
/* No peer may hold more credits from us than this, whatever it claims. */
#define IB_SRQ_GRANT_MAX 65536u

/* Message types on the shared path: the ring's packet types
 * (RDMACH_PKT_DATA, _RNDV, _SPIPE; proto/pkt.h), and the switch to the
 * ring (payload: u64, shared-path messages sent before it). */
#define IB_SRQ_SWITCH 0x40u

/* Every shared-path message starts with this header (wire format). */
struct ib_srq_hdr {
	uint32_t src;		/* sender's rank */
	uint16_t type;
	uint16_t pad;
	uint64_t grant;		/* credits the sender grants us on its own
				 * shared path, in total (0: none yet) */
};

_Static_assert(sizeof(struct ib_srq_hdr) == 16, "ib_srq_hdr is wire format");

struct ib_srq_cfg {
	unsigned int bufs;	/* receive buffers at most (0: no shared
				 * path) */
	uint32_t buf_size;	/* bytes each, header included */
	unsigned int credits;	/* a peer's grant, at most */
	int ask;		/* the pool is smaller than the peers: credits
				 * one at a time, to peers that ask */
};

/* Process-wide counters (rdmach_print_stats). */
struct ib_srq_stats {
	uint64_t msgs_out, msgs_in;	/* shared-path messages */
	uint64_t bytes_out, bytes_in;	/* their stream bytes */
	uint64_t no_credit;	/* puts cut short: no credit (or send buffer) */
	uint64_t grants_sent;	/* explicit credit writes */
	uint64_t promotions;	/* rings offered to peers */
	uint64_t at_cap;	/* promotions refused: RDMACH_IB_RINGS_MAX */
	uint64_t switches;	/* peers that moved onto the ring we offered */
	uint64_t rings, rings_max;	/* receive rings held, most at once */
};

/*
 * The pool grows with the peers: its address space is reserved whole at
 * open (cfg.bufs receive buffers, then IB_SRQ_TXBUFS send buffers), but
 * registered and posted in pieces, each its own MR: one peer's share at
 * open, one more share as each cold peer joins (ib_srq_rx_join), up to
 * cfg.bufs; the send buffers IB_SRQ_TX_PIECE at a time when none is free,
 * up to IB_SRQ_TXBUFS.  Nothing shrinks before ib_srq_close: a share a
 * peer leaves serves the next one.
 */
#define IB_SRQ_TXBUFS 64	/* send buffers at most */
#define IB_SRQ_TX_PIECE 8	/* send buffers a piece */

struct ib_srq {
	struct ibv_srq *srq;
	uint8_t *buf;		/* cfg.bufs receive buffers, then the send
				 * buffers (reserved, registered in pieces) */
	size_t buf_len;
	struct ib_srq_cfg cfg;
	unsigned int share;	/* buffers each cold peer brings */
	struct ibv_mr **mrs;	/* the pieces */
	unsigned int npieces, tx_pieces;
	uint32_t *lkey;		/* [cfg.bufs + IB_SRQ_TXBUFS] its piece's */
	uint32_t *len;		/* [cfg.bufs] bytes received */
	int32_t *next;		/* [cfg.bufs] a connection's queue */
	unsigned int nbufs;	/* receive buffers registered */
	unsigned int posted;	/* of which in the SRQ */
	unsigned int peers;	/* cold peers holding a share */
	uint64_t outstanding;	/* credits granted and not used, all peers */
	unsigned int txbufs;	/* send buffers registered */
	int rx_stuck, tx_stuck;	/* registering more failed: no more
				 * tries */
	struct ib_dev *dev;
	int32_t *tx_free;	/* stack of free send buffers */
	unsigned int tx_nfree;
	void *ctrl_free;	/* free ctrl slots, linked through their
				 * first word */
	void **ctrl_pages;	/* the pages they come from */
	unsigned int ctrl_npages, ctrl_cap;
};

/* A connection's receive side of the shared path. */
struct ib_srq_rx {
	int32_t head, tail;	/* received buffers not read, or -1 */
	uint32_t off;		/* bytes of head's payload read */
	uint64_t granted;	/* credits granted to the peer, in total */
	uint64_t told;		/* of which the peer has been told */
	uint64_t rcvd;		/* messages received (credits used) */
	uint64_t popped;	/* messages read whole */
	uint64_t grant0;	/* the grant in our address */
};

/* Credits and buffers a peer may hold at once when they go by asking. */
#define IB_SRQ_ASK_HOLD 2

/* Its send side. */
struct ib_srq_tx {
	uint64_t grant;		/* highest grant the peer sent us */
	uint64_t sent;		/* messages sent */
	uint64_t asked;		/* the grant we asked beyond, + 1 */
};

/* A peer's grant and the pool's mode for a job of npeers peers besides
 * this rank (cfg->bufs and cfg->credits as set): every peer's full grant
 * fits the largest pool (none can starve another), else credits go one
 * at a time to those asking (cfg->ask). */
void ib_srq_cfg_peers(struct ib_srq_cfg *cfg, uint64_t npeers);

/* Create the pool (cfg->bufs > 0, cfg as ib_srq_cfg_peers left it) on
 * dev, its first piece registered and posted.  0 or a negative errno
 * (logged). */
int ib_srq_open(struct ib_srq **srqp, struct ib_dev *dev,
		const struct ib_srq_cfg *cfg);
void ib_srq_close(struct ib_srq *s);

/* The ctrl words of cold connections, IB_SRQ_CTRL_SLOT bytes apiece,
 * packed into shared pages instead of a page each.  Each connection
 * registers its own slot (an MR's bounds are bytes, not pages), so that a
 * peer's key reaches no other connection's words.  get: a zeroed slot,
 * or NULL; the pages go back at ib_srq_close. */
#define IB_SRQ_CTRL_SLOT 128
void *ib_srq_ctrl_get(struct ib_srq *s);
void ib_srq_ctrl_put(struct ib_srq *s, void *slot);

static inline uint8_t *ib_srq_buf(const struct ib_srq *s, uint32_t i)
{
	return s->buf + (size_t)i * s->cfg.buf_size;
}

/* The pool's part of the stats line: receive buffers registered (each
 * posted unless it holds a message not read) of the most, pieces, send
 * buffers. */
void ib_srq_print(const struct ib_srq *s, FILE *out);

/* Payload bytes one message carries. */
static inline uint32_t ib_srq_payload_max(const struct ib_srq *s)
{
	return s->cfg.buf_size - (uint32_t)sizeof(struct ib_srq_hdr);
}

/* Receive buffer i back into the SRQ.  0 or -EIO. */
int ib_srq_repost(struct ib_srq *s, uint32_t i);

/* Credits that can be granted now without the pool falling short. */
static inline uint64_t ib_srq_free(const struct ib_srq *s)
{
	return s->posted > s->outstanding ? s->posted - s->outstanding : 0;
}

/*
 * Credits and the pool's growth, in this order:
 * - a cold peer joins (ib_srq_rx_join, as its endpoint is made): the pool
 *   first grows by the peer's share (registered, every buffer posted),
 *   then the peer is granted up to cfg.credits, never more than
 *   ib_srq_free: a grant is only ever made of buffers already posted, so
 *   the credits granted and not used never exceed the buffers posted.
 *   Registering the share failed: the pool stays as it is and goes by
 *   asking from then on (cfg.ask, warned once): credits one at a time
 *   out of what is free, which is at least the share the pool holds
 *   beyond its peers' grants, so the peer joins all the same.  Only a
 *   failed post fails the join (-EIO, logged).
 * - later grants (ib_srq_grant) top a peer up to cfg.credits from what
 *   is free; the pool holds a share for every peer joined, so each
 *   peer's full grant fits at once.  In asking mode (cfg.ask) grants go
 *   one credit at a time from ib_ep.c, from what is free.
 * - a peer leaves (ib_srq_rx_release: the connection goes, or it moved
 *   onto a ring): its unused credits and unread buffers return, and its
 *   share stays in the pool for the next peer.
 */
/* rx set up for rank peer joining, its first grant in rx->grant0 (and
 * told: it travels in our address).  0 or -EIO. */
int ib_srq_rx_join(struct ib_srq *s, struct ib_srq_rx *rx, int peer);
/* Up to cfg.credits more credits for rx (fewer if the pool is short):
 * the number granted. */
uint64_t ib_srq_grant(struct ib_srq *s, struct ib_srq_rx *rx);
/* The connection goes away or leaves the shared path: its credits and
 * queued buffers return. */
void ib_srq_rx_release(struct ib_srq *s, struct ib_srq_rx *rx);

/* A received buffer into rx's queue; the next one out of it. */
void ib_srq_push(struct ib_srq *s, struct ib_srq_rx *rx, uint32_t i,
		 uint32_t len);
void ib_srq_pop(struct ib_srq *s, struct ib_srq_rx *rx);

/* n send buffers free now, registering a piece more when fewer are (up
 * to IB_SRQ_TXBUFS; a piece that cannot be registered is warned about
 * once, and the sends wait for the buffers there are). */
int ib_srq_tx_room(struct ib_srq *s, unsigned int n);
/* A send buffer (index into the tx part), or -1 when none is free. */
int32_t ib_srq_tx_get(struct ib_srq *s);
void ib_srq_tx_put(struct ib_srq *s, int32_t t);
static inline uint8_t *ib_srq_tx_buf(const struct ib_srq *s, int32_t t)
{
	return ib_srq_buf(s, s->cfg.bufs + (uint32_t)t);
}
static inline uint32_t ib_srq_tx_lkey(const struct ib_srq *s, int32_t t)
{
	return s->lkey[s->cfg.bufs + (uint32_t)t];
}

/* Processes per node of the model's QP column (and of the superpipeline's
 * memory beside it). */
#define IB_MODEL_PER_NODE 128u

/* Registered bytes per process for npeers connected peers of which
 * nrings hold a ring, with these settings (rdmach_info): the pool as it
 * grows, a share per cold peer; jobs of more
 * than demand_above ranks connect on demand (RDMACH_CONNECT: all is
 * UINT64_MAX, demand 0, auto RDMACH_CONNECT_ALL_MAX), keeping qps_max
 * connections (RDMACH_IB_QPS_MAX; 0: every peer's). */
void ib_srq_mem_report(FILE *out, const struct ib_srq_cfg *cfg,
		       uint64_t ring_size, unsigned int rings_max,
		       unsigned int qps_max, uint64_t demand_above);

#endif /* RDMACH_IB_SRQ_H */
