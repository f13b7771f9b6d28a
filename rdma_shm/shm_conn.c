/*
 * shm_conn.c - what the units of rdma_shm share and do not inline
 * (shm_conn.h): a fresh look at a ring's tail, the report of a corrupt
 * packet, the transport's memory of the last large puts' buffers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "shm_conn.h"

__attribute__((noinline)) uint64_t
shm_tx_space_refresh(struct shm_conn *sc, struct shm_tx_ring *r)
{
	uint64_t tail = shm_peer_probe64(r->tail);
	int i = (int)(r - sc->tx);

	if (!(sc->tx_hello & 1u << i)) {	/* the next packet goes here */
		atomic_store_explicit(shm_ring_hello(sc->tx_ctrl, i),
				      shm_hdr_make(sc->tx_seq,
						   RDMACH_PKT_HELLO, 0),
				      memory_order_release);
		sc->tx_hello |= 1u << i;
	}
	if (tail != r->tail_seen) {
		r->tail_seen = tail;
		sc->conn->stats.credit_updates_received++;
	}
	return r->size - (r->head - r->tail_seen);
}

int shm_tx_reserve(struct shm_conn *sc, struct shm_tx_ring *r, uint64_t need)
{
	uint64_t pos = r->head & r->mask, contig = r->size - pos;

	if (contig >= need)
		return shm_tx_space(sc, r, need) >= need;
	if (shm_tx_space(sc, r, contig + need) < contig + need)
		return 0;
	shm_tx_post(sc, r, r->base + pos, RDMACH_PKT_PAD, 0, contig);
	return 1;
}

struct shm_tx_ring *shm_tx_line_cold(struct shm_conn *sc, uint64_t need)
{
	struct shm_tx_ring *r = &sc->tx[SHM_LINES];

	return shm_tx_reserve(sc, r, need) ? r : NULL;
}

int shm_rx_corrupt(struct shm_conn *sc, const struct shm_rx_ring *r,
		   uint64_t h, const char *why)
{
	return rdmach_conn_fail(sc->conn, -EPROTO,
				"shm: corrupt packet from rank %d at %s ring "
				"offset %" PRIu64 " (header %#" PRIx64 "): %s",
				sc->conn->peer,
				r == &sc->rx[SHM_LINES] ? "line" :
				r == &sc->rx[SHM_BULK] ? "bulk" : "main",
				r->head & r->mask, h, why);
}

int shm_rx_corrupt_field(struct shm_conn *sc, const struct shm_rx_ring *r,
			 uint64_t h, const char *what, const char *field,
			 uint64_t val)
{
	char why[160];

	snprintf(why, sizeof(why), "%s field %s = %" PRIu64 " (%#" PRIx64 ")",
		 what, field, val, val);
	return shm_rx_corrupt(sc, r, h, why);
}

/* The piece of an iovec that holds most of its bytes: the buffer whose
 * place in the cache decides. */
uintptr_t shm_main_buf(const struct iovec *iov, int iovcnt)
{
	size_t best = 0;
	uintptr_t buf = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		if (iov[i].iov_len > best) {
			best = iov[i].iov_len;
			buf = (uintptr_t)iov[i].iov_base;
		}
	return buf;
}

/* Was buf the buffer of one of the last large puts? */
int shm_recent_buf(const struct shm_tl *tl, uintptr_t buf)
{
	unsigned i;

	for (i = 0; i < tl->recent; i++)
		if (tl->recent_buf[i] == buf)
			return 1;
	return 0;
}

/* A large put starts (by CMA or the copy area): note its buffer.  Only
 * then, not when the choice is made: a put retried for ring room would
 * otherwise find its own buffer recent. */
void shm_recent_note(struct shm_tl *tl, const struct iovec *iov, int iovcnt)
{
	uintptr_t buf;

	if (!tl->recent)
		return;
	buf = shm_main_buf(iov, iovcnt);
	if (shm_recent_buf(tl, buf))
		return;
	tl->recent_buf[tl->recent_pos] = buf;
	tl->recent_pos = (tl->recent_pos + 1) % tl->recent;
}
