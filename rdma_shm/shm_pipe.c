/*
 * shm_pipe.c - large puts through the copy area, both sides (shm_pipe.h;
 * shm_ring.h: the format and the contract).
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "shm_live.h"
#include "shm_pipe.h"

static inline void shm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* The flag f of the next slot, once it is (full ? non-zero : zero): at
 * once, or -- when this call has already moved a chunk, so the peer is at
 * the same message -- after up to RDMACH_SHM_PIPE_SPIN polls.  Returns
 * the flag's value; the caller checks it. */
static inline uint64_t shm_pipe_wait(const struct shm_tl *tl,
				     struct shm_pipe_flag *f, int full,
				     size_t moved)
{
	uint64_t v = atomic_load_explicit(&f->len, memory_order_acquire);
	uint32_t spins = moved ? tl->pipe_spin : 0;

	while ((v != 0) != full && spins--) {
		shm_cpu_relax();
		v = atomic_load_explicit(&f->len, memory_order_acquire);
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

/* Bytes of the chunk in the reader's next slot, 0 while it is empty. */
static inline uint64_t shm_rx_pipe_ready(const struct shm_conn *sc)
{
	return atomic_load_explicit(&shm_pipe_flag(&sc->rx_pipe)->len,
				    memory_order_acquire);
}

/* A PIPE packet at the head of the ring: copy out the chunks that have
 * come, into the iovec; a partial get keeps its place in the chunk.
 * Returns bytes delivered or a negative errno; *fin is set when the
 * message is complete (the packet is then consumed). */
ssize_t shm_rx_pipe(struct shm_conn *sc, struct shm_rx_ring *ring,
		    uint8_t *p, uint32_t len, struct rdmach_iovc *c,
		    size_t room, int *fin)
{
	struct shm_pipe *pp = &sc->rx_pipe;
	struct shm_pipe_pkt pkt;
	size_t done = 0;

	memcpy(&pkt, p + SHM_HDR, sizeof(pkt));
	if (len != sizeof(pkt) || !pp->slot || !pkt.total)
		return shm_rx_corrupt(sc, ring, shm_load_hdr(p),
				      "bad copy-area packet");
	*fin = 0;
	while (sc->rx_off < pkt.total && done < room) {
		struct shm_pipe_flag *f = shm_pipe_flag(pp);
		uint64_t n = shm_pipe_wait(sc->tl, f, 1, done);
		size_t k;

		if (!n)
			break;
		if (n > pp->slot || n > pkt.total - (sc->rx_off - pp->off))
			return shm_rx_corrupt(sc, ring, shm_load_hdr(p),
					      "copy-area chunk too long");
		k = n - pp->off < room - done ? n - pp->off : room - done;
		k = shm_scatter(c, shm_pipe_slot(pp) + pp->off, k);
		pp->off += k;
		sc->rx_off += k;
		done += k;
		if (pp->off == n) {	/* after the last load from the slot */
			atomic_store_explicit(&f->len, 0, memory_order_release);
			pp->next++;
			pp->off = 0;
		}
	}
	if (sc->rx_off == pkt.total) {
		shm_rx_consume(sc, ring, shm_pkt_span(len));
		sc->conn->stats.packets_received++;
		*fin = 1;
	}
	return (ssize_t)done;
}

/* A copy-area message is at the head but its next chunk has not come:
 * every SHM_IDLE_POLLS such polls, has the writer finalized or died?
 * The flags are read before the slot is looked at again, so a chunk
 * written before the close/death is still delivered. */
__attribute__((noinline)) ssize_t shm_rx_pipe_idle(struct shm_conn *sc)
{
	if (++sc->rx_idle_polls % SHM_IDLE_POLLS)
		return 0;
	if (atomic_load_explicit(&sc->rx_ctrl->writer_closed,
				 memory_order_acquire))
		return shm_rx_pipe_ready(sc) ? 0 : -ESHUTDOWN;
	if (shm_peer_check_due(sc) && shm_peer_dead(sc))
		return shm_rx_pipe_ready(sc) ? 0 :
		       shm_fail_dead(sc, "in the middle of a large message");
	return 0;
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

	if (atomic_load_explicit(&shm_pipe_flag(pp)->len, memory_order_acquire))
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

		if (shm_pipe_wait(sc->tl, f, 0, done))
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
	const struct shm_seg_hdr *h = shm_seg_hdr(seg);

	memset(pp, 0, sizeof(*pp));
	if (!h->pipe_size || !shm_pow2(h->pipe_slot) ||
	    !shm_pow2(h->pipe_size) || h->pipe_size / h->pipe_slot < 2 ||
	    h->pipe_size / h->pipe_slot > SHM_PIPE_MAX_SLOTS ||
	    h->pipe_stride < h->pipe_size + h->pipe_size / h->pipe_slot *
	    sizeof(struct shm_pipe_flag) ||
	    h->pipe_off + (uint64_t)(slot + 1) * h->pipe_stride > seg->size)
		return;
	pp->flags = shm_seg_pipe_flags(seg, slot);
	pp->area = shm_seg_pipe_area(seg, slot);
	pp->slot = h->pipe_slot;
	pp->slot_mask = h->pipe_size / h->pipe_slot - 1;
}
