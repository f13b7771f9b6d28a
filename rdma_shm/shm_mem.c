/*
 * shm_mem.c - giving back an idle pair's bulk ring and copy area
 * (shm_mem.h; the handshake and its ordering: shm_ring.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "core/log.h"
#include "shm_mem.h"

#define SHM_MEM_PAGE 4096u

/* ---- reader: the owner of the pages ----------------------------------- */

/* Free the whole pages of [lo, hi) but the one holding keep (the bulk
 * ring's head: the reader polls it, and a read of a freed page of a
 * memfd would take a page again at once). */
static void shm_mem_punch(uint8_t *lo, uint8_t *hi, const uint8_t *keep)
{
	uintptr_t a = ((uintptr_t)lo + SHM_MEM_PAGE - 1) & ~(uintptr_t)(SHM_MEM_PAGE - 1);
	uintptr_t b = (uintptr_t)hi & ~(uintptr_t)(SHM_MEM_PAGE - 1);
	uintptr_t k = (uintptr_t)keep & ~(uintptr_t)(SHM_MEM_PAGE - 1);

	if (b <= a)
		return;
	if (keep && k >= a && k < b) {
		shm_mem_punch(lo, (uint8_t *)k, NULL);
		shm_mem_punch((uint8_t *)(k + SHM_MEM_PAGE), hi, NULL);
		return;
	}
	if (madvise((void *)a, b - a, MADV_REMOVE))
		rdmach_debug("shm: madvise(MADV_REMOVE) of %zu bytes: %s",
			   (size_t)(b - a), strerror(errno));
}

/* My receive side holds nothing of the peer's: no packet half read, no
 * space not given back. */
static int shm_mem_rx_empty(const struct shm_conn *sc)
{
	return !sc->rx_hdr && !sc->rx_held;
}

static void shm_mem_rx_free(struct shm_conn *sc)
{
	const struct shm_rx_ring *b = &sc->rx[SHM_BULK];
	const struct shm_pipe *pp = &sc->rx_pipe;
	uint8_t *base = sc->rx_base[SHM_BULK];	/* (b->base: maybe its hello) */

	if (b->mask)
		shm_mem_punch(base, base + b->mask + 1, b->base == base ?
			      base + (b->head & b->mask) : NULL);
	if (pp->slot)
		shm_mem_punch((uint8_t *)pp->flags,
			      pp->area + (pp->slot_mask + 1) * pp->slot, NULL);
	sc->tl->releases++;
}

/* Did the bulk ring or the copy area carry anything since the last look? */
static int shm_mem_rx_moved(struct shm_conn *sc, uint64_t now)
{
	struct shm_mem_rx *m = &sc->mem_rx;

	if (sc->rx[SHM_BULK].head == m->bulk_seen &&
	    sc->rx_pipe.next == m->pipe_seen)
		return 0;
	m->bulk_seen = sc->rx[SHM_BULK].head;
	m->pipe_seen = sc->rx_pipe.next;
	m->active_ns = now;
	return 1;
}

/* Bytes read from the writer's main and line rings, which a cold writer
 * uses. */
static uint64_t shm_mem_rx_ring_bytes(const struct shm_conn *sc)
{
	return sc->rx[SHM_MAIN].head + sc->rx[SHM_LINES].head;
}

/* Over the cap on warm writers, a pair given back goes cold: the writer
 * stays out (release_done withheld) until it earns its way back
 * (shm_mem_rx_promote).  Its warm place is free at once. */
static void shm_mem_rx_demote(struct shm_conn *sc)
{
	struct shm_mem_rx *m = &sc->mem_rx;

	m->state = SHM_MEM_COLD;
	m->cold_main = shm_mem_rx_ring_bytes(sc);
	sc->tl->warm_now--;
	sc->tl->demotions++;
}

/* A cold writer that sent RDMACH_SHM_WARM_AFTER bytes through its main
 * and line rings since it went cold gets its bulk ring and copy area
 * back if a warm place is free: release_done = n, the release it acked
 * (or the one asked before it connected: shm_mem_cold_start).  They count as used
 * from now, so that a writer that does not use them gives its place
 * back after RDMACH_SHM_IDLE_RELEASE_MS too. */
static void shm_mem_rx_promote(struct shm_conn *sc, uint64_t now)
{
	struct shm_mem_rx *m = &sc->mem_rx;
	struct shm_tl *tl = sc->tl;

	if (shm_mem_rx_ring_bytes(sc) - m->cold_main < tl->warm_after ||
	    tl->warm_now >= tl->warm_max)
		return;
	if (++tl->warm_now > tl->warm_peak)
		tl->warm_peak = tl->warm_now;
	tl->promotions++;
	m->state = SHM_MEM_USED;
	m->active_ns = now;
	atomic_store_explicit(&sc->rx_ctrl->release_done, m->n,
			      memory_order_release);
}

static void shm_mem_rx_idle(struct shm_conn *sc, uint64_t now)
{
	struct shm_mem_rx *m = &sc->mem_rx;
	struct shm_ring_ctrl *ctl = sc->rx_ctrl;
	int idle;

	if (m->state == SHM_MEM_COLD) {
		shm_mem_rx_promote(sc, now);
		return;
	}
	if (!sc->tl->idle_release_ns)
		return;
	if (shm_mem_rx_moved(sc, now)) {
		if (m->state == SHM_MEM_RELEASED)
			sc->tl->repopulations++;
		if (m->state != SHM_MEM_ASKED)
			m->state = SHM_MEM_USED;
	}
	idle = now - m->active_ns >= sc->tl->idle_release_ns &&
	       shm_mem_rx_empty(sc);
	if (m->state == SHM_MEM_USED && idle) {
		m->n++;
		atomic_store_explicit(&ctl->release_req, m->n,
				      memory_order_release);
		m->state = SHM_MEM_ASKED;
	} else if (m->state == SHM_MEM_ASKED &&
		   shm_peer_probe32(&ctl->release_ack) == m->n) {
		/* the writer keeps out: free them, unless they moved since
		 * the request (then only let the writer back in) */
		if (idle)
			shm_mem_rx_free(sc);
		if (idle && sc->tl->warm_cap) {
			shm_mem_rx_demote(sc);
			return;
		}
		m->state = idle ? SHM_MEM_RELEASED : SHM_MEM_USED;
		atomic_store_explicit(&ctl->release_done, m->n,
				      memory_order_release);
	}
}

void shm_mem_rx_busy(struct shm_conn *sc)
{
	if (sc->mem_rx.state == SHM_MEM_COLD)
		shm_mem_rx_promote(sc, rdmach_now_ns());
}

/* ---- writer ------------------------------------------------------------ */

/* Has the reader consumed and freed everything I wrote to the bulk ring
 * and the copy area?  Only areas I used since the last ack are looked
 * at (a look at an unused page would take it). */
static int shm_mem_tx_quiet(struct shm_conn *sc)
{
	const struct shm_tx_ring *b = &sc->tx[SHM_BULK];
	const struct shm_pipe *pp = &sc->tx_pipe;
	uint64_t i;

	if (b->head != sc->mem_tx.bulk_head &&
	    shm_peer_probe64(b->tail) != b->head)
		return 0;
	if (pp->left)
		return 0;
	if (pp->next == sc->mem_tx.pipe_next)
		return 1;
	for (i = 0; i <= pp->slot_mask; i++)
		if (shm_peer_probe64(&pp->flags[i].len))
			return 0;
	return 1;
}

/* The largest packet a kept-out writer puts in a line ring of size
 * bytes: a quarter of it, or up to half of a small one so that 256-byte
 * packets (a rendezvous with its small head, an MPI message of a few
 * hundred bytes) still fit the 512-byte ring of a crowded host.  Half a
 * ring at most, so that a packet padded to the ring's end always fits an
 * empty ring. */
static uint64_t shm_cold_line_max(uint64_t size)
{
	uint64_t half = size / 2 < 256 ? size / 2 : 256;

	return size / 4 > half ? size / 4 : half;
}

/* Keep out of the bulk ring (a deferred put's packets go to the main
 * ring, a quarter of it at most) and of the copy area (large puts take
 * CMA or the ring); deferred puts from RDMACH_SHM_COLD_CMA take CMA, so
 * that a cold pair's messages of a few KiB take no ring pages either. */
static void shm_mem_tx_keep_out(struct shm_conn *sc)
{
	struct shm_mem_tx *m = &sc->mem_tx;
	uint64_t cap = sc->tx[SHM_MAIN].size / 4 - SHM_HDR;

	m->bulk_min = sc->bulk_min;
	m->chunk_deferred = sc->chunk_deferred;
	m->pipe_slot = sc->tx_pipe.slot;
	m->one_pkt_max = sc->one_pkt_max;
	m->large_min = sc->large_min;
	sc->bulk_min = UINT64_MAX;
	if (sc->chunk_deferred > cap)
		sc->chunk_deferred = cap > sc->chunk ? cap : sc->chunk;
	sc->tx_pipe.slot = 0;
	if (sc->tx[SHM_LINES].size >= 4 * SHM_LINE)
		sc->cold_line_max = shm_cold_line_max(sc->tx[SHM_LINES].size);
	if (sc->tl->cma && sc->tl->cold_cma &&
	    sc->tl->cold_cma < sc->large_min) {
		sc->large_min = sc->tl->cold_cma;
		if (sc->one_pkt_max >= sc->large_min)
			sc->one_pkt_max = sc->large_min - 1;
	}
	m->kept_out = 1;
}

void shm_mem_tx_resume(struct shm_conn *sc)
{
	struct shm_mem_tx *m = &sc->mem_tx;

	if (shm_peer_probe32(&sc->tx_ctrl->release_done) != m->acked)
		return;
	sc->bulk_min = m->bulk_min;
	sc->chunk_deferred = m->chunk_deferred;
	sc->tx_pipe.slot = m->pipe_slot;
	sc->one_pkt_max = m->one_pkt_max;
	sc->large_min = m->large_min;
	sc->cold_line_max = 0;
	m->bulk_head = sc->tx[SHM_BULK].head;
	m->pipe_next = sc->tx_pipe.next;
	m->kept_out = 0;
}

/* Release req: everything I wrote there is consumed; keep out and say
 * so. */
static void shm_mem_tx_ack(struct shm_conn *sc, uint32_t req)
{
	shm_mem_tx_keep_out(sc);
	sc->mem_tx.acked = req;
	atomic_store_explicit(&sc->tx_ctrl->release_ack, req,
			      memory_order_release);
}

static void shm_mem_tx_idle(struct shm_conn *sc)
{
	struct shm_mem_tx *m = &sc->mem_tx;
	uint32_t req;

	if (m->kept_out) {
		shm_mem_tx_resume(sc);
		return;
	}
	req = shm_peer_probe32(&sc->tx_ctrl->release_req);
	if (req == m->acked || !shm_mem_tx_quiet(sc))
		return;
	shm_mem_tx_ack(sc, req);
}

void shm_mem_idle(struct shm_conn *sc)
{
	if (sc->self)
		return;
	if (!sc->rx_quiet)
		shm_mem_rx_idle(sc, rdmach_now_ns());
	if (sc->tx_hello)
		shm_mem_tx_idle(sc);
}

/* ---- the cap on warm writers ------------------------------------------ */

void shm_mem_cold_start(struct shm_tl *tl)
{
	const struct shm_seg *seg = &tl->seg;
	uint32_t i;

	if (!tl->warm_cap)
		return;
	for (i = 0; i < seg->g.nslots; i++)
		if (seg->slot_rank[i] != tl->base.ctx->rank)
			atomic_store_explicit(&shm_seg_ctrl(seg, i)->release_req,
					      1, memory_order_relaxed);
}

void shm_mem_conn_start(struct shm_conn *sc)
{
	uint32_t req;

	if (sc->self)
		return;
	if (sc->tl->warm_cap) {
		sc->mem_rx.n = 1;
		sc->mem_rx.state = SHM_MEM_COLD;
	}
	req = shm_peer_probe32(&sc->tx_ctrl->release_req);
	if (req)	/* nothing written yet: quiet */
		shm_mem_tx_ack(sc, req);
}
