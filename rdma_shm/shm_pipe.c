/*
 * shm_pipe.c - large puts through the copy area, both sides (shm_pipe.h;
 * shm_ring.h: the format and the contract).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "shm_live.h"
#include "shm_pipe.h"

static inline void shm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* The flag f of the writer's next slot, once it is zero (free): at once,
 * or -- when this call has already moved a chunk, so the peer is at the
 * same message -- after up to RDMACH_SHM_PIPE_SPIN polls.  Returns the
 * flag's value; the caller checks it. */
static inline uint64_t shm_pipe_wait(const struct shm_tl *tl,
				     struct shm_pipe_flag *f, size_t moved)
{
	uint64_t v = shm_peer_probe64(&f->len);
	uint32_t spins = moved ? tl->pipe_spin : 0;

	while (v && spins--) {
		shm_cpu_relax();
		v = shm_peer_probe64(&f->len);
	}
	return v;
}

/* The flag and the bytes of the slot of chunk pp->next. */
static inline struct shm_pipe_flag *shm_pipe_flag(const struct shm_pipe *pp)
{
	return &pp->flags[pp->next & pp->slot_mask];
}

static inline uint8_t *shm_pipe_slot(const struct shm_pipe *pp)
{
	return pp->area + (pp->next & pp->slot_mask) * pp->slot;
}

/* Bytes of the chunk in the reader's next slot, 0 while it is empty: its
 * flag, polled (shm_peer.h); once non-zero the caller keeps the value
 * (pp->cur) and does not load the flag again for that chunk. */
static inline uint64_t shm_rx_pipe_poll(const struct shm_tl *tl,
					struct shm_pipe_flag *f, size_t moved)
{
	uint64_t v = shm_peer_load64_acq(&f->len);
	uint32_t spins = moved ? tl->pipe_spin : 0;

	while (!v && spins--) {
		shm_peer_miss(&f->len);
		shm_cpu_relax();
		v = shm_peer_load64_acq(&f->len);
	}
	if (!v)
		shm_peer_miss(&f->len);
	return v;
}

/* Has the next chunk come?  (A probe: the get that follows loads it.) */
static int shm_rx_pipe_probe(const struct shm_conn *sc)
{
	return shm_peer_probe64(&shm_pipe_flag(&sc->rx_pipe)->len) != 0;
}

/* A PIPE packet has come to the head of ring r (at p, header h): load its
 * total once into sc->rx_ctl.  0, or -EPROTO. */
int shm_rx_pipe_take(struct shm_conn *sc, struct shm_rx_ring *ring,
		     const uint8_t *p, uint64_t h)
{
	struct shm_pipe_pkt pkt;

	if (shm_hdr_len(h) != sizeof(pkt) || !sc->rx_pipe.slot)
		return shm_rx_corrupt_field(sc, ring, h, "copy-area packet",
					    sc->rx_pipe.slot ? "len" :
					    "type (no copy area)",
					    shm_hdr_len(h));
	shm_peer_snap(&pkt, p + SHM_HDR, sizeof(pkt));
	if (!pkt.total)
		return shm_rx_corrupt_field(sc, ring, h, "copy-area packet",
					    "total", 0);
	sc->rx_ctl.total = pkt.total;
	sc->rx_ctl.taken = 1;
	sc->rx_pipe.stall_ns = 0;
	return 0;
}

/* The chunk in the next slot: its length, loaded once and checked (at
 * most a slot, at most what the message has left); 0 while it has not
 * come, -EPROTO if it cannot be. */
static int64_t shm_rx_chunk(struct shm_conn *sc, struct shm_rx_ring *ring,
			    size_t done)
{
	struct shm_pipe *pp = &sc->rx_pipe;
	uint64_t n;

	if (pp->cur)
		return (int64_t)pp->cur;
	n = shm_rx_pipe_poll(sc->tl, shm_pipe_flag(pp), done);
	if (n && (n > pp->slot || n > sc->rx_ctl.total - sc->rx_off))
		return shm_rx_corrupt_field(sc, ring, sc->rx_hdr,
					    "copy-area slot", "len", n);
	if (n) {
		pp->cur = n;
		pp->stall_ns = 0;	/* progress */
	}
	return (int64_t)n;
}

/* A PIPE packet at the head of the ring (its total in sc->rx_ctl): copy
 * out the chunks that have come, into the iovec; a partial get keeps its
 * place in the chunk.  Returns bytes delivered or a negative errno; *fin
 * is set when the message is complete (the packet is then consumed). */
ssize_t shm_rx_pipe(struct shm_conn *sc, struct shm_rx_ring *ring,
		    uint32_t len, struct rdmach_iovc *c, size_t room, int *fin)
{
	struct shm_pipe *pp = &sc->rx_pipe;
	uint64_t total = sc->rx_ctl.total;
	size_t done = 0;

	*fin = 0;
	while (sc->rx_off < total && done < room) {
		int64_t n = shm_rx_chunk(sc, ring, done);
		size_t k;

		if (n <= 0) {
			if (n < 0)
				return n;
			break;
		}
		k = (uint64_t)n - pp->off < room - done ?
		    (uint64_t)n - pp->off : room - done;
		k = shm_scatter(c, shm_pipe_slot(pp) + pp->off, k);
		pp->off += k;
		sc->rx_off += k;
		done += k;
		if (pp->off == (uint64_t)n) {	/* after the last load from it */
			atomic_store_explicit(&shm_pipe_flag(pp)->len, 0,
					      memory_order_release);
			/* the slot is the writer's again: a later load of
			 * its flag is a new chunk's */
			shm_peer_miss(&shm_pipe_flag(pp)->len);
			pp->next++;
			pp->off = 0;
			pp->cur = 0;
		}
	}
	if (sc->rx_off == total) {
		sc->rx_ctl.taken = 0;
		shm_rx_consume(sc, ring, shm_pkt_span(len));
		sc->conn->stats.packets_received++;
		*fin = 1;
	}
	return (ssize_t)done;
}

static int shm_rx_pipe_orphan(struct shm_conn *sc, uint64_t next)
{
	char why[160];

	snprintf(why, sizeof(why), "copy-area message of %" PRIu64 " bytes "
		 "(%" PRIu64 " read): its writer posted another packet (header "
		 "%#" PRIx64 ") before the next chunk", sc->rx_ctl.total,
		 sc->rx_off, next);
	return shm_rx_corrupt(sc, sc->rx_cur, sc->rx_hdr, why);
}

/* Has the writer moved on past a copy-area message whose next chunk has
 * not come?  It never posts its next packet before the message's last
 * chunk (shm_put_general): a packet at any ring's head, or after the PIPE
 * packet in its ring, means the chunk will never come. */
static int shm_rx_pipe_abandoned(struct shm_conn *sc)
{
	int i;

	for (i = 0; i < SHM_NRINGS; i++) {
		const struct shm_rx_ring *r = &sc->rx[i];
		uint64_t at = r->head + (r == sc->rx_cur ? SHM_LINE : 0);
		const uint8_t *p = r->base + (at & r->mask);
		uint64_t h;

		if (at - r->released >= r->mask + 1)
			continue;	/* a word not zeroed yet (lap guard) */
		h = shm_peer_probe64(p);
		if (h)
			return shm_rx_pipe_probe(sc) ? 0 :
			       shm_rx_pipe_orphan(sc, h);
	}
	return 0;
}

/* The peer's reads of this side's rings so far (their tails): a peer that
 * moves them is at work on this connection. */
static uint64_t shm_peer_reads(const struct shm_conn *sc)
{
	uint64_t sum = 0;
	int i;

	for (i = 0; i < SHM_NRINGS; i++)
		if (sc->tx[i].size)
			sum += shm_peer_probe64(sc->tx[i].tail);
	return sum + shm_peer_probe64(&sc->tx_ctrl->acked_id);
}

/* No chunk for the peer timeout, while the peer read this side's packets
 * in that time: it is alive and at work on this connection, yet does not
 * write the chunks it owes.  A peer that moved nothing here for the whole
 * time (busy elsewhere, or slow) is waited for: the clock starts again. */
static int shm_rx_pipe_stalled(struct shm_conn *sc)
{
	struct shm_pipe *pp = &sc->rx_pipe;
	uint64_t now = rdmach_now_ns(), reads = shm_peer_reads(sc);
	uint64_t limit = sc->conn->ctx->peer_timeout_ns;

	if (pp->stall_ns && limit && now - pp->stall_ns >= limit &&
	    reads != pp->stall_tails)
		return rdmach_conn_fail(sc->conn, -EPROTO, "shm: rank %d (pid "
					"%d) sent no chunk of its %" PRIu64
					"-byte copy-area message for %" PRIu64
					" ms (%" PRIu64 " bytes read) while it "
					"read this side's packets",
					sc->conn->peer, (int)sc->pid,
					sc->rx_ctl.total,
					(now - pp->stall_ns) / 1000000u,
					sc->rx_off);
	if (!pp->stall_ns || (limit && now - pp->stall_ns >= limit)) {
		pp->stall_ns = now;
		pp->stall_tails = reads;
	}
	return 0;
}

/* A copy-area message is at the head but its next chunk has not come:
 * every SHM_IDLE_POLLS such polls, has the writer finalized or died, or
 * moved on without it?  The flags are read before the slot is looked at
 * again, so a chunk written before the close/death is still delivered. */
__attribute__((noinline)) ssize_t shm_rx_pipe_idle(struct shm_conn *sc)
{
	int err;

	if (++sc->rx_idle_polls % SHM_IDLE_POLLS)
		return 0;
	if (shm_peer_probe32(&sc->rx_ctrl->writer_closed))
		return shm_rx_pipe_probe(sc) ? 0 : -ESHUTDOWN;
	err = shm_rx_pipe_abandoned(sc);
	if (err)
		return err;
	if (!shm_peer_check_due(sc))
		return 0;
	if (shm_peer_dead(sc))
		return shm_rx_pipe_probe(sc) ? 0 :
		       shm_fail_dead(sc, "in the middle of a large message");
	return shm_rx_pipe_stalled(sc);
}

/* Start a message of total bytes through the copy area: its PIPE packet
 * (in the line ring when there is room: it is one line).  Only once the
 * next slot is free, so that a put that commits bytes also takes some.
 * 0, or -EAGAIN when there is no room yet. */
static int shm_tx_pipe_start(struct shm_conn *sc, uint64_t total)
{
	struct shm_pipe *pp = &sc->tx_pipe;
	struct shm_pipe_pkt pkt = { .total = total };
	struct shm_tx_ring *r;
	uint8_t *p;

	if (shm_peer_probe64(&shm_pipe_flag(pp)->len))
		return -EAGAIN;
	r = shm_tx_ring_for(sc, sizeof(pkt), SHM_LINE, 0);
	if (!r)
		return -EAGAIN;
	p = r->base + (r->head & r->mask);
	memcpy(p + SHM_HDR, &pkt, sizeof(pkt));
	shm_tx_post(sc, r, p, RDMACH_PKT_PIPE, sizeof(pkt), SHM_LINE);
	sc->conn->stats.packets_sent++;
	sc->conn->stats.pipelined_msgs++;
	pp->left = total;
	pp->first = 1;
	pp->chunk = sc->tl->pipe_first < pp->slot ? sc->tl->pipe_first : pp->slot;
	return 0;
}

/* Copying into a slot (page-aligned) runs at a quarter of its speed on
 * this EPYC when the slot is 16-512 bytes ahead of the source modulo 4 KiB
 * (loads wait on aliased stores still in flight): MPI's 1 MiB messages, a
 * 40-byte header in front of a page-aligned buffer, moved 7 GB/s instead
 * of 27-29.  So a message's first chunk ends where a short leading piece
 * (a header) ends, and a chunk is trimmed so that the next one's source
 * is clear of that window.  n: the chunk's planned length. */
#define SHM_ALIAS_LO 16u
#define SHM_ALIAS_HI 512u
#define SHM_LEADING_MAX 4096u

static uint64_t shm_pipe_cut(const struct shm_pipe *pp,
			     const struct rdmach_iovc *c, uint64_t n)
{
	const void *base = NULL;
	int more = 0;
	uint64_t rem = rdmach_iovc_piece(c, &base, &more), dist;

	if (pp->first && rem < n && rem < SHM_LEADING_MAX && more)
		return rem;
	if (rem <= n)
		return n;
	dist = (0 - ((uintptr_t)base + n)) & 4095u;
	if (dist > SHM_ALIAS_LO && dist < SHM_ALIAS_HI &&
	    n > 2 * SHM_ALIAS_HI)
		n -= SHM_ALIAS_HI - dist;
	return n;
}

/* Copy the next bytes of the current copy-area message (starting one if
 * none is under way) into every free slot, in chunks that double from
 * RDMACH_SHM_PIPE_FIRST to the slot size.  Returns the bytes taken. */
ssize_t shm_tx_pipe(struct shm_conn *sc, const struct iovec *iov,
		    int iovcnt, size_t total)
{
	struct shm_pipe *pp = &sc->tx_pipe;
	struct rdmach_iovc c;
	size_t done = 0, take;

	if (!pp->left) {
		if (shm_tx_pipe_start(sc, total))
			return shm_tx_stalled(sc);
		shm_recent_note(sc->tl, iov, iovcnt);
	}
	take = total < pp->left ? total : pp->left;
	rdmach_iovc_init(&c, iov, iovcnt);
	while (done < take) {
		struct shm_pipe_flag *f = shm_pipe_flag(pp);
		uint64_t n = take - done < pp->chunk ? take - done : pp->chunk;

		if (shm_pipe_wait(sc->tl, f, done))
			break;
		n = shm_pipe_cut(pp, &c, n);
		pp->first = 0;
		shm_gather(&c, shm_pipe_slot(pp), n);
		atomic_store_explicit(&f->len, n, memory_order_release);
		pp->next++;
		done += n;
		pp->chunk = 2 * pp->chunk < pp->slot ? 2 * pp->chunk : pp->slot;
	}
	pp->left -= done;
	if (done == 0)
		return shm_tx_stalled(sc);
	return (ssize_t)done;
}

/* The copy area of writer slot in seg; none if seg has none or its
 * header does not describe one that fits. */
void shm_pipe_init(struct shm_pipe *pp, const struct shm_seg *seg, int slot)
{
	const struct shm_seg_geo *h = &seg->g;

	memset(pp, 0, sizeof(*pp));
	if (!h->pipe_size || !shm_pow2(h->pipe_slot) ||
	    !shm_pow2(h->pipe_size) || h->pipe_size / h->pipe_slot < 2 ||
	    h->pipe_size / h->pipe_slot > SHM_PIPE_MAX_SLOTS ||
	    h->pipe_stride < h->pipe_size + h->pipe_size / h->pipe_slot *
	    sizeof(struct shm_pipe_flag) || h->pipe_off % SHM_LINE ||
	    h->pipe_stride % SHM_LINE || h->pipe_stride > seg->size ||
	    h->pipe_off > seg->size ||
	    (uint64_t)(slot + 1) > (seg->size - h->pipe_off) / h->pipe_stride)
		return;
	pp->flags = shm_seg_pipe_flags(seg, slot);
	pp->area = shm_seg_pipe_area(seg, slot);
	pp->slot = h->pipe_slot;
	pp->slot_mask = h->pipe_size / h->pipe_slot - 1;
}
