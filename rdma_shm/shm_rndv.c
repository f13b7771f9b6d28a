/*
 * shm_rndv.c - large puts by cross-memory attach, both sides, and the
 * choice of a large put's way (shm_rndv.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/log.h"
#include "shm_live.h"
#include "shm_rndv.h"

/* ---- descriptors: the process's free list (shm_conn.h) ------------------ */

static void *shm_rndv_mem_get(struct shm_tl *tl)
{
	union shm_rndv_mem *m = tl->rndv_free;

	if (m) {
		tl->rndv_free = m->next;
		return m;
	}
	m = malloc(sizeof(*m));
	if (m)
		tl->rndv_mems++;
	return m;
}

static void shm_rndv_mem_put(struct shm_tl *tl, void *p)
{
	union shm_rndv_mem *m = p;

	m->next = tl->rndv_free;
	tl->rndv_free = m;
}

void shm_rndv_conn_close(struct shm_conn *sc)
{
	if (sc->rndv)
		shm_rndv_mem_put(sc->tl, sc->rndv);
	if (sc->rx_ctl.d)
		shm_rndv_mem_put(sc->tl, sc->rx_ctl.d);
	sc->rndv = NULL;
	sc->rx_ctl.d = NULL;
}

void shm_rndv_tl_close(struct shm_tl *tl)
{
	union shm_rndv_mem *m;

	while ((m = tl->rndv_free)) {
		tl->rndv_free = m->next;
		free(m);
	}
}

/* A large message of the peer starts (its control packet is taken: once
 * a message, not at each get that finds its first bytes not yet there,
 * which wore the hold down within one message): did it cross one of mine
 * (a copy area message being copied in, a rendezvous not yet read)?
 * Then large messages go both ways at once, and deferred puts may take
 * CMA even when hot (shm_tx_want_cma), until SHM_DUPLEX_HOLD of the
 * peer's large messages in a row have crossed none: with several reads
 * in flight some find mine all read, and a side that flips between CMA
 * and the copy area loses to both (MPI bibw 1 MiB 27 GB/s against 38).
 * The peer sees this side's state in the ring's crossing flag. */
#define SHM_DUPLEX_HOLD 16u

void shm_rx_large_start(struct shm_conn *sc)
{
	unsigned was = sc->duplex;

	if (sc->tx_pipe.left || !shm_rndv_all_read(sc))
		sc->duplex = SHM_DUPLEX_HOLD;
	else if (sc->duplex)
		sc->duplex--;
	if (!was != !sc->duplex)
		atomic_store_explicit(&sc->tx_ctrl->crossing, !!sc->duplex,
				      memory_order_relaxed);
}

/* Large messages go both ways: this side or the peer has seen them cross
 * (either one suffices, so that both choose alike). */
static int shm_duplex(const struct shm_conn *sc)
{
	return sc->duplex ||
	       shm_peer_probe32(&sc->rx_ctrl->crossing);
}

/* Remote pieces for bytes [off, off + len) of a rendezvous. */
static int shm_rndv_remote(const struct rdmach_rndv_hdr *r, uint64_t off,
			   size_t len, struct iovec *out)
{
	uint32_t i;
	int n = 0;

	for (i = 0; i < r->nsegs && len; i++) {
		uint64_t l = r->seg[i].len;

		if (off >= l) {
			off -= l;
			continue;
		}
		out[n].iov_base = (void *)(uintptr_t)(r->seg[i].addr + off);
		out[n].iov_len = l - off < len ? l - off : len;
		len -= out[n].iov_len;
		off = 0;
		n++;
	}
	return n;
}

/* Read what fits of a rendezvous into the caller's iovec.  Returns bytes
 * read (>= 0) or a negative errno. */
static ssize_t shm_rx_rndv_read(struct shm_conn *sc,
				const struct rdmach_rndv_hdr *r,
				struct rdmach_iovc *c, size_t room)
{
	struct iovec liov[RDMACH_RNDV_MAX_SEGS], riov[RDMACH_RNDV_MAX_SEGS];
	struct rdmach_iovc save = *c;
	size_t want = r->total - sc->rx_off, taken;
	ssize_t n;
	int nl, nr;

	if (want > room)
		want = room;
	nl = rdmach_iovc_slice(c, want, liov, RDMACH_RNDV_MAX_SEGS, &taken);
	nr = shm_rndv_remote(r, sc->rx_off, taken, riov);
	n = process_vm_readv(sc->pid, liov, (unsigned long)nl, riov,
			     (unsigned long)nr, 0);
	sc->conn->stats.zcopy_reads++;
	if (n < 0) {
		int e = errno;

		*c = save;
		if (e == ESRCH)
			return shm_fail_dead(sc, "during a zero-copy read");
		return rdmach_conn_fail(sc->conn, -e,
					"shm: cross-memory read of %zu bytes "
					"from rank %d (pid %d) failed: %s",
					taken, sc->conn->peer, (int)sc->pid,
					strerror(e));
	}
	if ((size_t)n < taken) {	/* a fault part-way: retry the rest */
		*c = save;
		rdmach_iovc_skip(c, (size_t)n);
	}
	sc->rx_off += (uint64_t)n;
	return n;
}

/* Why the rendezvous d (len payload bytes) cannot be, or NULL: 1 to 64
 * segments, exactly as many as len holds, none empty, and a total that is
 * their sum (a larger one would wait forever for bytes that no segment
 * holds).  *field and *val name what is wrong. */
static const char *shm_rndv_bad(const struct rdmach_rndv_hdr *d, uint32_t len,
				uint64_t *val)
{
	uint64_t sum = 0;
	uint32_t i;

	*val = d->nsegs;
	if (!d->nsegs || d->nsegs > RDMACH_RNDV_MAX_SEGS)
		return "nsegs";
	if (len != rdmach_rndv_size(d->nsegs))
		return "nsegs (for its len)";
	for (i = 0; i < d->nsegs; i++) {
		*val = d->seg[i].len;
		if (!d->seg[i].len || d->seg[i].len > UINT64_MAX - sum)
			return "seg len";
		sum += d->seg[i].len;
	}
	*val = d->total;
	return d->total != sum ? "total (not the sum of its segments)" : NULL;
}

/* A rendezvous has come to the head of ring r (at p, header h): load it
 * once into a descriptor of sc->rx_ctl and check it there; the reads use
 * that copy only.  0, or -EPROTO / -ENOMEM (the connection failed). */
int shm_rx_rndv_take(struct shm_conn *sc, struct shm_rx_ring *ring,
		     const uint8_t *p, uint64_t h)
{
	struct rdmach_rndv_hdr *d;
	uint32_t len = shm_hdr_len(h);
	const char *bad = "len";
	uint64_t val = len;

	if (!sc->rx_ctl.d) {
		sc->rx_ctl.d = shm_rndv_mem_get(sc->tl);
		if (!sc->rx_ctl.d)
			return rdmach_conn_fail(sc->conn, -ENOMEM, "shm: no "
						"memory for a zero-copy message "
						"from rank %d", sc->conn->peer);
	}
	d = &sc->rx_ctl.d->h;
	if (len >= sizeof(*d)) {
		shm_peer_snap(d, p + SHM_HDR, sizeof(*d));
		if (d->nsegs && d->nsegs <= RDMACH_RNDV_MAX_SEGS &&
		    len == rdmach_rndv_size(d->nsegs))
			shm_peer_snap(d->seg, p + SHM_HDR + sizeof(*d),
				      d->nsegs * sizeof(d->seg[0]));
		bad = shm_rndv_bad(d, len, &val);
	}
	if (bad)
		return shm_rx_corrupt_field(sc, ring, h, "rendezvous", bad, val);
	sc->rx_ctl.total = d->total;
	sc->rx_ctl.taken = 1;
	return 0;
}

/* The rendezvous at the head of the ring (sc->rx_ctl, shm_rx_rndv_take):
 * read into the iovec, acknowledge once all of it is read.  Returns bytes
 * delivered or a negative errno; *fin is set when the packet is
 * consumed. */
ssize_t shm_rx_rndv(struct shm_conn *sc, struct shm_rx_ring *ring,
		    uint32_t len, struct rdmach_iovc *c, size_t room, int *fin)
{
	const struct rdmach_rndv_hdr *r = &sc->rx_ctl.d->h;
	size_t done = 0;
	ssize_t n;

	*fin = 0;
	while (sc->rx_off < r->total && done < room) {
		n = shm_rx_rndv_read(sc, r, c, room - done);
		if (n < 0)
			return n;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	if (sc->rx_off == r->total) {
		uint64_t id = r->id;

		shm_rndv_mem_put(sc->tl, sc->rx_ctl.d);
		sc->rx_ctl.d = NULL;
		sc->rx_ctl.taken = 0;
		shm_rx_consume(sc, ring, shm_pkt_span(len));
		atomic_store_explicit(&sc->rx_ctrl->acked_id, id,
				      memory_order_release);
		sc->conn->stats.packets_received++;
		*fin = 1;
	}
	return (ssize_t)done;
}

/* Fill a rendezvous' segments from the n pieces of iov it covers (empty
 * ones skipped; n from rdmach_rndv_pieces). */
static void shm_rndv_cover(const struct iovec *iov, int n,
			   struct rdmach_rndv_hdr *r, size_t *bytes)
{
	size_t sum = 0;
	int i;

	r->nsegs = 0;
	for (i = 0; i < n; i++) {
		if (!iov[i].iov_len)
			continue;
		r->seg[r->nsegs].addr = (uint64_t)(uintptr_t)iov[i].iov_base;
		r->seg[r->nsegs].len = iov[i].iov_len;
		r->seg[r->nsegs].key = 0;
		r->nsegs++;
		sum += iov[i].iov_len;
	}
	*bytes = sum;
}

/* The smallest rendezvous: RDMACH_SHM_COLD_CMA while the writer keeps
 * out of its bulk ring and copy area (shm_mem.h), if lower. */
static uint64_t shm_rndv_floor(const struct shm_conn *sc)
{
	const struct shm_tl *tl = sc->tl;

	if (sc->mem_tx.kept_out && tl->cold_cma && tl->cold_cma < tl->rndv_min)
		return tl->cold_cma;
	return tl->rndv_min;
}

/* Post a rendezvous control packet for what iov's first pieces cover
 * (a small first piece as data before it: RDMACH_RNDV_HEAD_MAX): returns those
 * bytes (> 0; the rendezvous is sc->next_rndv_id - 1 and *covered the
 * pieces), 0 when the ring has no room yet (retry), -EAGAIN if they are
 * too few to be worth it, or a negative errno. */
static ssize_t shm_tx_rndv_post(struct shm_conn *sc, const struct iovec *iov,
				int iovcnt, int *covered)
{
	union shm_rndv_buf ctl;
	struct shm_tx_ring *r = &sc->tx[SHM_MAIN];
	size_t head = rdmach_rndv_head_len(iov, iovcnt), bytes;
	uint64_t pos, need, len, hspan = head ? shm_pkt_span(head) : 0;
	int cnt = rdmach_rndv_pieces(iovcnt, head);

	shm_rndv_cover(iov + !!head, cnt, &ctl.h, &bytes);
	cnt += !!head;
	if (bytes < shm_rndv_floor(sc))
		return -EAGAIN;
	len = rdmach_rndv_size(ctl.h.nsegs);
	need = hspan + shm_pkt_span(len);
	if (need <= sc->cold_line_max)	/* kept out: no main ring page */
		r = &sc->tx[SHM_LINES];
	if (!shm_tx_reserve(sc, r, need))
		return shm_tx_stalled(sc);
	pos = r->head & r->mask;
	if (head) {
		memcpy(r->base + pos + SHM_HDR, iov[0].iov_base, head);
		shm_tx_post(sc, r, r->base + pos, RDMACH_PKT_DATA,
			    (uint32_t)head, hspan);
		sc->conn->stats.packets_sent++;
		pos += hspan;
	}
	ctl.h.id = sc->next_rndv_id++;
	ctl.h.total = bytes;
	ctl.h.flags = 0;
	memcpy(r->base + pos + SHM_HDR, ctl.bytes, len);
	shm_tx_post(sc, r, r->base + pos, RDMACH_PKT_RNDV, (uint32_t)len,
		    need - hspan);
	sc->conn->stats.packets_sent++;
	shm_recent_note(sc->tl, iov, cnt);
	*covered = cnt;
	return (ssize_t)(head + bytes);
}

/* A put that waits for its rendezvous: returns 0 once it is posted (the
 * put is retried until the peer has read it), -EAGAIN if too small or
 * without memory for its descriptor (the put copies instead). */
ssize_t shm_tx_rndv_start(struct shm_conn *sc, const struct iovec *iov,
			  int iovcnt)
{
	struct shm_rndv_tx *t = shm_rndv_mem_get(sc->tl);
	ssize_t n;
	int cnt;

	if (!t)
		return -EAGAIN;
	n = shm_tx_rndv_post(sc, iov, iovcnt, &cnt);
	if (n <= 0) {
		shm_rndv_mem_put(sc->tl, t);
		return n;
	}
	t->id = sc->next_rndv_id - 1;
	t->bytes = (size_t)n;
	t->iovcnt = cnt;
	memcpy(t->iov, iov, (size_t)cnt * sizeof(*iov));
	sc->rndv = t;
	return 0;
}

/* Retry of a put with a rendezvous outstanding. */
ssize_t shm_tx_rndv_poll(struct shm_conn *sc, const struct iovec *iov,
			 int iovcnt)
{
	struct shm_rndv_tx *t = sc->rndv;
	size_t bytes = t->bytes;

	if (iovcnt < t->iovcnt ||
	    memcmp(iov, t->iov, (size_t)t->iovcnt * sizeof(*iov))) {
		rdmach_err("shm: put to rank %d retried with a different "
			   "iovec while a zero-copy put of %zu bytes is pending",
			   sc->conn->peer, bytes);
		return -EINVAL;
	}
	if (!shm_rndv_acked(sc)) {
		if (shm_idle_peer_dead(sc))
			return shm_fail_dead(sc, "before reading a zero-copy put");
		return 0;
	}
	shm_rndv_mem_put(sc->tl, t);
	sc->rndv = NULL;
	sc->conn->stats.zcopy_msgs++;
	sc->conn->stats.zcopy_bytes += bytes;
	return (ssize_t)bytes;
}

/*
 * A large put: cross-memory attach (one copy, by the reader, after the
 * kernel has pinned the writer's pages) or the copy area (two copies,
 * overlapped, through memory that stays in cache)?  Which is faster
 * depends on where the bytes are: a put is hot (likely in the writer's
 * cache) when it is not larger than the cache limit and, with
 * RDMACH_SHM_RECENT, its buffer was put recently (a reused buffer), cold
 * otherwise; for each of the two, RDMACH_SHM_CMA_USE=auto takes the way
 * the start-up measurement found faster (shm_choice_setup).  A
 * deferred put while large messages go both ways takes CMA
 * (RDMACH_SHM_CMA_DUPLEX): one copy per side, several reads in flight,
 * where the copy area makes each core copy twice.  From a reused buffer
 * that pays from RDMACH_SHM_CMA_DUPLEX_REUSED, below the CMA threshold
 * (MPI bibw with one buffer, 128 KiB: 1.23x the copy area, 9 interleaved
 * rounds, 64 KiB 0.81x; 256 KiB-4 MiB: 1.02-1.58x, 7 rounds) up to
 * RDMACH_SHM_CMA_DUPLEX_REUSED_MAX (8-64 MiB: median 1.13x the copy area
 * while the host ran fast, 0.68-1.00x while it ran slow; the default lies
 * under 8 MiB and above 4 MiB with MPI's header); from
 * a new buffer only from RDMACH_SHM_CMA_DUPLEX up (cache-cold MPI bibw by
 * CMA at 256 KiB/512 KiB/1 MiB: 0.48/0.69/0.55x the copy area, the last
 * in three 5-7-round runs; from 2 MiB even or ahead up to 16 MiB).
 */
int shm_tx_want_cma(struct shm_conn *sc, const struct iovec *iov,
		    int iovcnt, size_t total, int deferred)
{
	struct shm_tl *tl = sc->tl;
	int reused = -1;		/* unknown without RDMACH_SHM_RECENT */

	if (!tl->cma || total < shm_rndv_floor(sc) ||
	    !shm_peer_probe32(&sc->tx_ctrl->cma_ok))
		return 0;
	if (deferred && sc->mem_tx.kept_out && tl->cold_cma &&
	    total >= tl->cold_cma)
		return 1;	/* cold: no ring pages for it (shm_mem.h) */
	if (tl->recent)
		reused = shm_recent_buf(tl, shm_main_buf(iov, iovcnt));
	if (deferred && tl->cma_duplex && shm_duplex(sc) &&
	    (reused == 1 ? total >= tl->cma_duplex_reused &&
			   total < tl->cma_duplex_reused_max :
			   total >= tl->cma_duplex))
		return 1;
	if (total < tl->cma_threshold)
		return 0;
	if (!sc->tx_pipe.slot || total < tl->pipe_threshold)
		return 1;
	if (tl->cma_hot == tl->cma_cold)
		return tl->cma_hot;
	return total <= tl->cache_limit && reused ? tl->cma_hot : tl->cma_cold;
}

/* The rendezvous of a deferred put: posted, its id the ticket; returns
 * like shm_tx_rndv_post. */
ssize_t shm_tx_rndv_defer(struct shm_conn *sc, const struct iovec *iov,
			  int iovcnt, uint64_t *ticket)
{
	ssize_t n;
	int cnt;

	n = shm_tx_rndv_post(sc, iov, iovcnt, &cnt);
	if (n > 0) {
		*ticket = sc->next_rndv_id - 1;
		sc->conn->stats.zcopy_msgs++;
		sc->conn->stats.zcopy_bytes += (uint64_t)n;
	}
	return n;
}

/* rdmach_put_done (core/tl.h): the last deferred rendezvous the peer has
 * read; while one is not, check that the peer lives and reads. */
int shm_put_done(struct rdmach_conn *conn, uint64_t *done)
{
	struct shm_conn *sc = conn->priv;

	*done = shm_peer_probe64(&sc->tx_ctrl->acked_id);
	if (*done + 1 >= sc->next_rndv_id)
		return 0;
	if (conn->err)
		return conn->err;
	if (shm_idle_peer_dead(sc))
		return shm_fail_dead(sc, "before reading a zero-copy put");
	if (shm_peer_probe32(&sc->tx_ctrl->reader_closed))
		return rdmach_conn_fail(conn, -EPIPE, "shm: rank %d finalized "
					"before reading a zero-copy put",
					conn->peer);
	return 1;
}
