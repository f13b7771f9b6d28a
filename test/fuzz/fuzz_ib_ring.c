/*
 * fuzz_ib_ring - rdma_ib's ring reader (proto/ring.c) over a ring the peer
 * writes: a sender builds real packets (lengths from the input), then the
 * "peer" overwrites words of the ring at input-chosen offsets, also
 * between two parts of one packet's read, while the reader peeks, scans
 * for credits, reads each packet in input-sized parts and consumes it.
 * The ring is a heap block of its exact size (ASan: any read outside it is
 * caught); every packet the reader accepts must lie inside the ring, and
 * its parts must add up to the length it first saw.  Loads of the ring's
 * words are counted per use (peer_count.h): a peek or a scan that loads a
 * word twice fails, a peek that finds a packet loads its flag, trailer
 * and credit, and a peek at a packet read in part loads nothing (its
 * header is the copy taken at the first part).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test/fuzz/fuzz_in.h"
#include "test/fuzz/peer_count.h"
#include "proto/ring.h"

#define FUZZ_RING 4096u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The peer rewrites one aligned word: offset and value from the input. */
static void fuzz_poke(struct fuzz_in *in, uint8_t *ring, uint32_t seq)
{
	uint64_t off = ((uint64_t)fuzz_byte(in) << 4 |
			(fuzz_byte(in) & 0xf)) * 8 % FUZZ_RING;
	unsigned int kind = fuzz_byte(in);
	uint64_t v = (uint64_t)fuzz_byte(in) << 8 | fuzz_byte(in);

	/* a flag-like word of the expected sequence, or raw bits */
	if (kind & 1)
		v = ring_flag(seq, kind >> 1 & 7, (uint32_t)v) |
		    (kind & 0x80 ? RING_FLAG_NEAR : 0);
	else
		v |= (uint64_t)fuzz_byte(in) << 56;
	memcpy(ring + off, &v, 8);
}

static void fuzz_send(struct fuzz_in *in, struct ring_tx *tx, uint8_t *ring,
		      uint64_t credit)
{
	struct ring_slot s;
	uint64_t want = (uint64_t)fuzz_byte(in) * 8 + 1;

	if (ring_tx_reserve(tx, want, FUZZ_RING / 2, &s))
		return;
	memset(s.payload, 0xa5, s.len);
	ring_tx_commit(tx, &s, credit);
	memcpy(ring + s.off, tx->stage + s.off, s.wire);
}

static int fuzz_check(const struct ring_rx *rx, const struct ring_pkt *pkt)
{
	const uint8_t *end = rx->ring + rx->size;

	return pkt->payload >= rx->ring + 16 && pkt->bytes <= rx->size &&
	       pkt->len + 24 <= pkt->bytes &&
	       pkt->payload + pkt->len <= end;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	uint8_t *ring = calloc(1, FUZZ_RING), *stage = calloc(1, FUZZ_RING);
	uint8_t out[FUZZ_RING];
	struct ring_tx tx;
	struct ring_rx rx;
	struct ring_scan sc = { 0, 0 };
	struct ring_pkt pkt;
	int steps;

	if (!ring || !stage)
		abort();
	ring_tx_init(&tx, stage, FUZZ_RING);
	ring_rx_init(&rx, ring, FUZZ_RING);
	for (steps = 0; steps < 256 && in.left; steps++) {
		unsigned int op = fuzz_byte(&in) % 5;
		uint32_t n;
		int in_part;

		if (op == 0) {
			fuzz_send(&in, &tx, ring, rx.pos);
			continue;
		}
		if (op == 1) {
			fuzz_poke(&in, ring, rx.seq);
			continue;
		}
		if (op == 2) {
			peer_count_begin();
			if (ring_rx_scan(&rx, &sc, 1, tx.head) < 0)
				break;
			continue;
		}
		if (!ring_rx_head_arrived(&rx) && op == 3)
			continue;
		in_part = rx.off != 0;
		peer_count_begin();
		if (ring_rx_peek(&rx, 1, &pkt) != 1)
			continue;
		if (!fuzz_check(&rx, &pkt) || rx.off > pkt.len ||
		    peer_count_loads() != (in_part ? 0u : 3u))
			abort();
		n = pkt.len - rx.off;
		if (n > 1 && (fuzz_byte(&in) & 1))
			n = 1 + fuzz_byte(&in) % n;
		memcpy(out, pkt.payload + rx.off, n);
		if (pkt.len)
			ring_rx_advance(&rx, &pkt, n);
		else
			ring_rx_consume(&rx, &pkt);
		if (rx.pos > tx.head && tx.head)
			ring_tx_credit(&tx, tx.head);
		else if (rx.pos <= tx.head)
			ring_tx_credit(&tx, rx.pos);
		ring_tx_acked(&tx, tx.head);
	}
	free(ring);
	free(stage);
	return 0;
}
