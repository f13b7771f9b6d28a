/*
 * shm_ep.c - the data path of rdma_shm (shm_ep.h): put, get, peek and
 * consume over a connection's rings (shm_ring.h: the format and the
 * memory-ordering contract).  A put of one packet and a get of what has
 * arrived in the ring make no system call, and no call out of this unit
 * but the two out-of-line ones they always had: a fresh read of a ring's
 * tail (shm_conn.c) and the peer's doorbell when it is on (shm_live.c).
 * Large messages go to the rendezvous (shm_rndv.c) or the copy area
 * (shm_pipe.c), idle polls to the liveness checks (shm_live.c).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "shm_conn.h"
#include "shm_ep.h"
#include "shm_live.h"
#include "shm_mem.h"
#include "shm_pipe.h"
#include "shm_rndv.h"

/* ---- receive ----------------------------------------------------------- */

/* The ring whose head holds packet rx_seq, its header in *h; NULL while
 * that packet has not arrived.  The line ring is looked at first: it has
 * the messages a waiter is waiting for.  The header found is kept
 * (sc->rx_hdr) until the packet is consumed: a packet read in several
 * gets is never looked at again in the ring (shm_peer.h). */
static inline struct shm_rx_ring *shm_rx_next(struct shm_conn *sc,
					      uint64_t *h)
{
	struct shm_rx_ring *r = &sc->rx[SHM_LINES];
	uint64_t x;

	if (sc->rx_hdr) {
		*h = sc->rx_hdr;
		return sc->rx_cur;
	}
	x = shm_rx_poll(sc, r);
	if (!x) {
		r = &sc->rx[SHM_MAIN];
		x = shm_rx_poll(sc, r);
		if (!x) {
			r = &sc->rx[SHM_BULK];
			x = shm_rx_poll(sc, r);
			if (!x)
				return NULL;
		}
	}
	sc->rx_hdr = x;
	sc->rx_cur = r;
	*h = x;
	return r;
}

/* Does the packet at ring r's head (header h) end within the ring? */
static inline int shm_rx_fits(const struct shm_rx_ring *r, uint64_t h)
{
	return shm_pkt_span(shm_hdr_len(h)) <= r->mask + 1 - (r->head & r->mask);
}

/* Consumed space not given back to the writer yet? */
static inline int shm_rx_holds(const struct shm_conn *sc)
{
	return sc->rx_held != 0;
}

/* Return consumed space to the writer: zero every line start in it (lap
 * guard, see shm_ring.h), then publish the tail.  Done when a get finds
 * nothing (the reader is idle: the stores cost nobody time) or when a
 * quarter of the ring is held back; never on the path from a packet's
 * arrival to the reader's next put, where a store to a line the writer
 * still shares would hold back the reader's own header store (x86 stores
 * become visible in order). */
static void shm_rx_release_ring(struct shm_conn *sc, struct shm_rx_ring *r)
{
	uint64_t off = r->released;

	while (off != r->head) {	/* at most twice: up to the end, then on */
		uint64_t pos = off & r->mask, n = r->head - off;
		uint8_t *p = r->base + pos, *end;

		if (n > r->mask + 1 - pos)
			n = r->mask + 1 - pos;
		for (end = p + n; p != end; p += SHM_LINE)
			atomic_store_explicit((_Atomic uint64_t *)(void *)p, 0,
					      memory_order_relaxed);
		off += n;
	}
	sc->rx_held -= r->head - r->released;
	r->released = r->head;
	atomic_store_explicit(r->tail, r->head, memory_order_release);
	sc->conn->stats.credit_updates_sent++;
}

static void shm_rx_release(struct shm_conn *sc)
{
	int i;

	for (i = 0; i < SHM_NRINGS; i++)
		if (sc->rx[i].released != sc->rx[i].head)
			shm_rx_release_ring(sc, &sc->rx[i]);
}

/* Give ring r's space back once a quarter of it is held (a reader that
 * never finds its rings empty would otherwise starve the writer); such
 * a reader also looks then whether a cold writer earned its bulk ring
 * and copy area (shm_mem.h). */
static inline void shm_rx_release_held_ring(struct shm_conn *sc,
					    struct shm_rx_ring *r)
{
	if (r->head - r->released > (r->mask + 1) / 4) {
		shm_rx_release_ring(sc, r);
		shm_mem_rx_busy(sc);
	}
}

static inline void shm_rx_release_held(struct shm_conn *sc)
{
	int i;

	for (i = 0; i < SHM_NRINGS; i++)
		shm_rx_release_held_ring(sc, &sc->rx[i]);
}

/* The writer said hello (shm_ring.h): poll its rings from now on.  A
 * HELLO anywhere else (in a ring) is corrupt. */
static int shm_rx_hello(struct shm_conn *sc, struct shm_rx_ring *r,
			uint64_t h)
{
	int i = (int)(r - sc->rx);

	if (r->base != (uint8_t *)shm_ring_hello(sc->rx_ctrl, i))
		return shm_rx_corrupt(sc, r, h, "HELLO in a ring");
	r->base = sc->rx_base[i];
	if (sc->rx_quiet) {
		sc->rx_quiet = 0;
		sc->tl->rings_used++;
	}
	sc->rx_hdr = 0;
	shm_peer_epoch();
	return 0;
}

/* Deliver what has arrived; got: bytes this get delivered before.  A get
 * that has delivered something stops at a rendezvous it cannot take whole:
 * the caller's next get, for the rest, reads it in one cross-memory read
 * rather than two (a CH3 header's small buffer then the payload's).
 * Returns bytes (>= 0) or a negative errno. */
static ssize_t shm_rx_drain(struct shm_conn *sc, struct rdmach_iovc *c,
			    size_t total, size_t got)
{
	size_t done = 0;
	ssize_t ret = 0;

	while (done < total) {
		uint64_t h;
		struct shm_rx_ring *r = shm_rx_next(sc, &h);
		uint8_t *p;
		uint32_t len;
		uint64_t room;
		int fin;

		if (!r)
			break;
		len = shm_hdr_len(h);
		p = r->base + (r->head & r->mask);
		room = r->mask + 1 - (r->head & r->mask);
		if (shm_hdr_type(h) == RDMACH_PKT_PAD) {
			shm_rx_consume(sc, r, room);
			continue;
		}
		if (shm_hdr_type(h) == RDMACH_PKT_HELLO) {
			ret = shm_rx_hello(sc, r, h);
			if (ret < 0)
				break;
			continue;
		}
		if (shm_pkt_span(len) > room) {
			ret = shm_rx_corrupt(sc, r, h, "len past the ring end");
			break;
		}
		if (shm_hdr_type(h) == RDMACH_PKT_DATA) {
			size_t n = shm_scatter(c, p + SHM_HDR + sc->rx_off,
					       len - sc->rx_off);

			done += n;
			sc->rx_off += n;
			if (sc->rx_off < len)
				break;
			shm_rx_consume(sc, r, shm_pkt_span(len));
			sc->conn->stats.packets_received++;
		} else if (shm_hdr_type(h) == RDMACH_PKT_RNDV ||
			   shm_hdr_type(h) == RDMACH_PKT_PIPE) {
			if (!sc->rx_ctl.taken) {
				ret = shm_hdr_type(h) == RDMACH_PKT_PIPE ?
				      shm_rx_pipe_take(sc, r, p, h) :
				      shm_rx_rndv_take(sc, r, p, h);
				if (ret < 0)
					break;
				shm_rx_large_start(sc);	/* once a message */
			}
			if (!sc->rx_off && done + got &&
			    shm_hdr_type(h) == RDMACH_PKT_RNDV &&
			    sc->rx_ctl.total > total - done)
				break;
			ret = shm_hdr_type(h) == RDMACH_PKT_PIPE ?
			      shm_rx_pipe(sc, r, len, c, total - done, &fin) :
			      shm_rx_rndv(sc, r, len, c, total - done, &fin);
			if (ret < 0)
				break;
			done += (size_t)ret;
			ret = 0;
			if (fin)
				continue;
			if (!done && shm_hdr_type(h) == RDMACH_PKT_PIPE)
				ret = shm_rx_pipe_idle(sc);
			break;
		} else {
			ret = shm_rx_corrupt(sc, r, h, "unknown type");
			break;
		}
	}
	shm_rx_release_held(sc);
	if (ret < 0 && done == 0)
		return ret;
	return (ssize_t)done;
}

/* Packet rx_seq is at no ring's head: does another packet stand there?
 * The writer posts packets in order, and the ACQUIRE load of a later
 * packet's header makes every earlier header visible, so after that load
 * packet rx_seq must be at a head (shm_rx_next looks again); if it is
 * not, the packet there carries a wrong number, and waiting would wait
 * forever.  Only heads the lap guard has cleared are looked at. */
static int shm_rx_stray(struct shm_conn *sc)
{
	char field[48];
	uint64_t h, x;
	int i;

	for (i = 0; i < SHM_NRINGS; i++) {
		struct shm_rx_ring *r = &sc->rx[i];
		const uint8_t *p = r->base + (r->head & r->mask);

		if (r->head - r->released >= r->mask + 1)
			continue;
		h = shm_peer_load64_acq(p);
		if (!h) {
			shm_peer_miss(p);
			continue;
		}
		if (shm_hdr_seq(h) == sc->rx_seq) {	/* just came */
			sc->rx_hdr = h;
			sc->rx_cur = r;
			return 0;
		}
		shm_peer_miss(p);	/* looked at again: */
		if (shm_rx_next(sc, &x))
			return 0;
		snprintf(field, sizeof(field), "seq (expected %u)", sc->rx_seq);
		return shm_rx_corrupt_field(sc, r, h, "header", field,
					    shm_hdr_seq(h));
	}
	return 0;
}

/* Nothing at the head of the ring: give consumed space back, and every
 * SHM_IDLE_POLLS such polls (shm_get counts them) ask: has the stream
 * ended?  The flags are read before a final drain, so bytes
 * sent before the close/death are never lost. */
static __attribute__((noinline)) ssize_t
shm_rx_idle(struct shm_conn *sc, const struct iovec *iov, int iovcnt,
	    size_t total)
{
	struct rdmach_iovc c;
	ssize_t n;

	if (shm_rx_holds(sc)) {
		shm_rx_release(sc);
		shm_bell_ring(sc);
		if (sc->rx_idle_polls % SHM_IDLE_POLLS)
			return 0;
	}
	rdmach_iovc_init(&c, iov, iovcnt);
	if (shm_peer_probe32(&sc->rx_ctrl->writer_closed)) {
		n = shm_rx_drain(sc, &c, total, 0);
		return n ? n : -ESHUTDOWN;
	}
	if (!shm_peer_check_due(sc))
		return 0;
	n = shm_rx_stray(sc);	/* as often as liveness: it costs loads */
	if (n < 0 || sc->rx_hdr)	/* (one just came: the next get) */
		return n;
	if (shm_peer_dead(sc)) {
		n = shm_rx_drain(sc, &c, total, 0);
		return n ? n : shm_fail_dead(sc, "(nothing left to read)");
	}
	shm_mem_idle(sc);	/* at the same cadence: a few loads */
	return 0;
}

/* Packet rx_seq is at the head of ring r (header h). */
static __attribute__((noinline)) ssize_t
shm_rx_arrived(struct shm_conn *sc, struct shm_rx_ring *r, uint64_t h,
	       const struct iovec *iov, int iovcnt, size_t total)
{
	uint32_t len = shm_hdr_len(h);
	uint64_t off = r->head & r->mask, span = shm_pkt_span(len);
	size_t left = len - sc->rx_off;
	struct rdmach_iovc c;
	ssize_t n;

	/* the rest of a data packet that fits the first piece (most
	 * messages), or the part of it a one-piece get takes (the CH3
	 * channel's header buffer meeting a longer message, then the
	 * payload's get) */
	if (shm_hdr_type(h) == RDMACH_PKT_DATA && span <= r->mask + 1 - off &&
	    (left <= iov[0].iov_len || iovcnt == 1)) {
		if (left > iov[0].iov_len) {
			shm_copy(iov[0].iov_base,
				 r->base + off + SHM_HDR + sc->rx_off,
				 iov[0].iov_len);
			sc->rx_off += iov[0].iov_len;
			return (ssize_t)iov[0].iov_len;
		}
		shm_copy(iov[0].iov_base, r->base + off + SHM_HDR + sc->rx_off,
			 left);
		shm_rx_consume(sc, r, span);
		sc->conn->stats.packets_received++;
		if (left == total || !shm_rx_next(sc, &h)) {
			shm_rx_release_held_ring(sc, r);
			return (ssize_t)left;
		}
		rdmach_iovc_init(&c, iov, iovcnt);
		c.off = left;	/* more has come: the general loop goes on */
		n = shm_rx_drain(sc, &c, total - left, left);
		return n < 0 ? (ssize_t)left : (ssize_t)left + n;
	}
	rdmach_iovc_init(&c, iov, iovcnt);
	return shm_rx_drain(sc, &c, total, 0);
}

/* Kept small (no register saves): the empty poll is the hot loop of every
 * waiter, a load and a compare per ring. */
ssize_t shm_get(struct rdmach_conn *conn, const struct iovec *iov, int iovcnt,
		size_t total)
{
	struct shm_conn *sc = conn->priv;
	uint64_t h;
	struct shm_rx_ring *r = shm_rx_next(sc, &h);
	ssize_t n;

	if (r) {
		n = shm_rx_arrived(sc, r, h, iov, iovcnt, total);
		shm_bell_ring(sc);	/* space, a slot or an ack for the writer */
		return n;
	}
	if (shm_rx_holds(sc) || ++sc->rx_idle_polls % SHM_IDLE_POLLS == 0)
		return shm_rx_idle(sc, iov, iovcnt, total);
	return 0;
}

/* rdmach_peek: the rest of the data packet at the head, where it lies.
 * Idle work (space to give back, the periodic close and liveness check)
 * is left to a get, -ENOMSG; so are control packets (large messages). */
ssize_t shm_peek(struct rdmach_conn *conn, const void **buf)
{
	struct shm_conn *sc = conn->priv;
	uint64_t h;
	struct shm_rx_ring *r = shm_rx_next(sc, &h);

	if (r) {
		if (shm_hdr_type(h) != RDMACH_PKT_DATA || !shm_rx_fits(r, h))
			return -ENOMSG;	/* a get reports it */
		*buf = r->base + (r->head & r->mask) + SHM_HDR + sc->rx_off;
		return (ssize_t)(shm_hdr_len(h) - sc->rx_off);
	}
	/* the get that follows counts this poll */
	if (shm_rx_holds(sc) || (sc->rx_idle_polls + 1) % SHM_IDLE_POLLS == 0)
		return -ENOMSG;
	sc->rx_idle_polls++;
	return 0;
}

/* rdmach_consume: n bytes of the packet shm_peek showed are read. */
int shm_consume(struct rdmach_conn *conn, size_t n)
{
	struct shm_conn *sc = conn->priv;
	uint64_t h;
	struct shm_rx_ring *r = shm_rx_next(sc, &h);
	uint32_t len;

	if (!r || shm_hdr_type(h) != RDMACH_PKT_DATA || !shm_rx_fits(r, h))
		return -EINVAL;
	len = shm_hdr_len(h);
	if (n > len - sc->rx_off)
		return -EINVAL;
	sc->rx_off += n;
	if (sc->rx_off == len) {
		shm_rx_consume(sc, r, shm_pkt_span(len));
		sc->conn->stats.packets_received++;
		shm_rx_release_held_ring(sc, r);
	}
	shm_bell_ring(sc);	/* space for the writer */
	return 0;
}

/* ---- send -------------------------------------------------------------- */

/* The payload of a one-packet put into the ring at dst: one piece, or
 * the common pair (CH3's header and a small payload) by direct copies,
 * anything else by the cursor walk (MPI_Isend of 8 B: ~80 fewer
 * instructions than the walk, bench/host/run-msgcost.sh). */
static inline void shm_gather_pkt(uint8_t *dst, const struct iovec *iov,
				  int iovcnt, size_t total)
{
	struct rdmach_iovc c;

	if (iovcnt == 1) {
		shm_copy(dst, iov[0].iov_base, total);
	} else if (iovcnt == 2) {
		size_t first = iov[0].iov_len;

		shm_copy(dst, iov[0].iov_base, first);
		shm_copy(dst + first, iov[1].iov_base, total - first);
	} else {
		rdmach_iovc_init(&c, iov, iovcnt);
		rdmach_iovc_gather(&c, dst, total);
	}
}

/* Copy through the main ring (and the bulk ring for a deferred put), in
 * packets of at most chunk bytes. */
static ssize_t shm_tx_copy(struct shm_conn *sc, const struct iovec *iov,
			   int iovcnt, size_t total, uint64_t chunk,
			   int deferred)
{
	struct rdmach_iovc c;
	size_t done = 0;

	rdmach_iovc_init(&c, iov, iovcnt);
	while (done < total) {
		uint64_t want = total - done < chunk ? total - done : chunk;
		struct shm_tx_ring *r = shm_tx_data_ring(sc, want, deferred);
		uint64_t need = shm_pkt_span(want);
		uint64_t pos = r->head & r->mask;
		uint64_t contig = r->size - pos;
		uint64_t room = shm_tx_space(sc, r, need < contig ?
						     need : contig);
		uint8_t *p = r->base + pos;

		if (room > contig)
			room = contig;
		if (room < need) {
			/* Cut the packet at the ring end, or when the ring
			 * is nearly full if a useful amount fits. */
			if (room < contig &&
			    room < (need < SHM_MIN_PARTIAL ? need : SHM_MIN_PARTIAL))
				break;
			want = room - SHM_HDR;
		}
		shm_gather(&c, p + SHM_HDR, want);
		shm_tx_post(sc, r, p, RDMACH_PKT_DATA, (uint32_t)want,
			    shm_pkt_span(want));
		sc->conn->stats.packets_sent++;
		done += want;
	}
	if (done == 0)
		return shm_tx_stalled(sc);
	if (done < total)
		sc->conn->stats.ring_full_stalls++;
	return (ssize_t)done;
}

/* Everything but a one-packet put.  ticket: NULL for rdmach_put (a
 * rendezvous waits for its reader), else rdmach_put_deferred's. */
static __attribute__((noinline)) ssize_t
shm_put_general(struct shm_conn *sc, const struct iovec *iov, int iovcnt,
		size_t total, uint64_t *ticket)
{
	ssize_t n;

	shm_mem_tx_check(sc);
	if (shm_peer_probe32(&sc->tx_ctrl->reader_closed)) {
		if (sc->rndv && shm_rndv_acked(sc))
			return shm_tx_rndv_poll(sc, iov, iovcnt);
		return -EPIPE;
	}
	if (sc->rndv)
		return shm_tx_rndv_poll(sc, iov, iovcnt);
	if (sc->tx_pipe.left)
		return shm_tx_pipe(sc, iov, iovcnt, total);
	if (total >= sc->large_min) {
		if (shm_tx_want_cma(sc, iov, iovcnt, total, ticket != NULL)) {
			n = ticket ? shm_tx_rndv_defer(sc, iov, iovcnt, ticket) :
				     shm_tx_rndv_start(sc, iov, iovcnt);
			if (n != -EAGAIN)
				return n;
		}
		if (sc->tx_pipe.slot && total >= sc->tl->pipe_threshold)
			return shm_tx_pipe(sc, iov, iovcnt, total);
	}
	if (shm_pkt_span(total) <= sc->cold_line_max)
		return shm_tx_stalled(sc);	/* kept out: the line ring is full */
	return shm_tx_copy(sc, iov, iovcnt, total,
			   ticket ? sc->chunk_deferred : sc->chunk,
			   ticket != NULL);
}

/* Most messages: one packet (no rendezvous) into the ring
 * shm_tx_ring_for picks; everything else, and a closed reader, go the
 * general way (ticket: as for shm_put_general). */
static inline __attribute__((always_inline)) ssize_t
shm_put_one(struct rdmach_conn *conn, const struct iovec *iov, int iovcnt,
	    size_t total, uint64_t *ticket)
{
	struct shm_conn *sc = conn->priv;
	uint64_t need = shm_pkt_span(total);
	struct shm_tx_ring *r;
	uint8_t *p;
	ssize_t n;

	if (total > sc->one_pkt_max || sc->rndv || sc->tx_pipe.left ||
	    !(r = shm_tx_ring_for(sc, total, need, ticket != NULL)) ||
	    shm_peer_probe32(&sc->tx_ctrl->reader_closed)) {
		n = shm_put_general(sc, iov, iovcnt, total, ticket);
		shm_bell_ring(sc);
		return n;
	}
	p = r->base + (r->head & r->mask);
	shm_gather_pkt(p + SHM_HDR, iov, iovcnt, total);
	shm_tx_post(sc, r, p, RDMACH_PKT_DATA, (uint32_t)total, need);
	sc->conn->stats.packets_sent++;
	shm_bell_ring(sc);
	return (ssize_t)total;
}

ssize_t shm_put(struct rdmach_conn *conn, const struct iovec *iov, int iovcnt,
		size_t total)
{
	return shm_put_one(conn, iov, iovcnt, total, NULL);
}

/* rdmach_put_deferred: shm_put, except that a rendezvous returns at once
 * with its id as the ticket, ring packets may be larger
 * (RDMACH_SHM_DEFERRED_CHUNK) and those from RDMACH_SHM_BULK_MIN go to
 * the bulk ring: MPI send requests come in windows, where the copies of
 * successive messages overlap anyway, fewer packets cost less (MPI_Isend
 * window of 16 KiB: 1.03-1.12x the bandwidth, 1.09-1.14x both ways) and
 * a larger ring keeps more messages in flight. */
ssize_t shm_put_deferred(struct rdmach_conn *conn, const struct iovec *iov,
			 int iovcnt, size_t total, uint64_t *ticket)
{
	struct shm_conn *sc = conn->priv;
	ssize_t n;

	if (total <= sc->one_pkt_max)
		return shm_put_one(conn, iov, iovcnt, total, ticket);
	n = shm_put_general(sc, iov, iovcnt, total, ticket);
	shm_bell_ring(sc);
	return n;
}
