/* ring.c - ring protocol: packet reserve/commit, arrival, consume. */
#include <string.h>

#include "peer.h"
#include "ring.h"

int ring_size_check(uint64_t size)
{
	if (size < RING_MIN_SIZE || (size & (size - 1)))
		return -EINVAL;
	return 0;
}

static inline void ring_store(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

void ring_tx_init(struct ring_tx *tx, uint8_t *stage, uint64_t size)
{
	memset(tx, 0, sizeof(*tx));
	tx->stage = stage;
	tx->size = size;
	tx->seq = 1;
	tx->near = 1;
}

int ring_tx_reserve(const struct ring_tx *tx, uint64_t want,
		    uint64_t max_payload, struct ring_slot *slot)
{
	uint64_t off = tx->head & (tx->size - 1);
	uint64_t room = ring_tx_free(tx);
	uint64_t len;

	/* free space is always a multiple of RING_ALIGN */
	if (tx->size - off < room)
		room = tx->size - off;
	if (room < RING_ALIGN)
		return -EAGAIN;
	len = room - RING_OVERHEAD;
	if (len > want)
		len = want;
	if (len > max_payload)
		len = max_payload;
	if (len > RING_MAX_PAYLOAD)
		len = RING_MAX_PAYLOAD;
	slot->off = off;
	slot->payload = tx->stage + off + RING_HDR;
	slot->len = (uint32_t)len;
	slot->bytes = ring_pkt_bytes(len);
	slot->type = RDMACH_PKT_DATA;
	return 0;
}

int ring_tx_reserve_whole(const struct ring_tx *tx, uint32_t len,
			  struct ring_slot *pad, struct ring_slot *slot)
{
	struct ring_slot lead;

	return ring_tx_reserve_pair(tx, 0, len, pad, &lead, slot);
}

int ring_tx_reserve_pair(const struct ring_tx *tx, uint32_t lead_len,
			 uint32_t len, struct ring_slot *pad,
			 struct ring_slot *lead, struct ring_slot *slot)
{
	uint64_t off = tx->head & (tx->size - 1), end = tx->size - off;
	uint64_t lead_bytes = lead_len ? ring_pkt_bytes(lead_len) : 0;
	uint64_t bytes = lead_bytes + ring_pkt_bytes(len);

	if (bytes > tx->size / 2)
		return -EINVAL;
	memset(pad, 0, sizeof(*pad));
	if (end < bytes) {
		if (ring_tx_free(tx) < end + bytes)
			return -EAGAIN;
		pad->off = off;
		pad->payload = tx->stage + off + RING_HDR;
		pad->len = (uint32_t)(end - RING_OVERHEAD);
		pad->bytes = end;
		pad->type = RDMACH_PKT_PAD;
		off = 0;
	} else if (ring_tx_free(tx) < bytes) {
		return -EAGAIN;
	}
	lead->off = off;
	lead->payload = tx->stage + off + RING_HDR;
	lead->len = lead_len;
	lead->bytes = lead_bytes;
	lead->type = RDMACH_PKT_DATA;
	off += lead_bytes;
	slot->off = off;
	slot->payload = tx->stage + off + RING_HDR;
	slot->len = len;
	slot->bytes = ring_pkt_bytes(len);
	slot->type = RDMACH_PKT_DATA;
	return 0;
}

static inline uint64_t ring_load(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

void ring_tx_commit(struct ring_tx *tx, struct ring_slot *slot,
		    uint64_t credit)
{
	uint8_t *p = tx->stage + slot->off;
	uint64_t flag = ring_flag(tx->seq, slot->type, slot->len);
	uint64_t trl = slot->bytes - RING_TRL;
	uint64_t near = ring_flag_trailer(flag | RING_FLAG_NEAR);

	/* the near trailer, unless the old bytes there (the peer has the
	 * same: see the contract) would already pass for it */
	if (tx->near && near < trl &&
	    ring_load(p + near) != (flag | RING_FLAG_NEAR)) {
		flag |= RING_FLAG_NEAR;
		trl = near;
	}
	ring_store(p, flag);
	ring_store(p + 8, credit);
	ring_store(p + trl, flag);
	slot->wire = trl + RING_TRL;
	tx->head += slot->bytes;
	tx->seq = ring_seq_next(tx->seq);
}

int ring_tx_credit(struct ring_tx *tx, uint64_t consumed)
{
	if (consumed > tx->head)
		return -EPROTO;
	if (consumed > tx->tail)
		tx->tail = consumed;
	return 0;
}

void ring_rx_init(struct ring_rx *rx, uint8_t *ring, uint64_t size)
{
	memset(rx, 0, sizeof(*rx));
	rx->ring = ring;
	rx->size = size;
	rx->seq = 1;
}

static int ring_rx_peek_at(const struct ring_rx *rx, uint64_t pos,
			   uint32_t seq, int bottom_fill, struct ring_pkt *pkt)
{
	uint64_t off = pos & (rx->size - 1);
	const uint8_t *p = rx->ring + off;
	uint64_t flag = proto_peer_load64_acq(p);
	uint64_t bytes;

	if (ring_flag_seq(flag) != seq)
		return 0;
	bytes = ring_pkt_bytes(ring_flag_len(flag));
	if (bytes > rx->size - off || !ring_flag_type(flag) ||
	    ring_flag_type(flag) > RDMACH_PKT_TYPE_MAX)
		return -EPROTO;
	if (bottom_fill &&
	    proto_peer_load64_acq(p + ring_flag_trailer(flag)) != flag)
		return 0;
	pkt->payload = p + RING_HDR;
	pkt->len = ring_flag_len(flag);
	pkt->type = ring_flag_type(flag);
	pkt->credit = proto_peer_load64(p + 8);
	pkt->bytes = bytes;
	return 1;
}

int ring_rx_peek(struct ring_rx *rx, int bottom_fill, struct ring_pkt *pkt)
{
	int r;

	if (rx->off) {
		*pkt = rx->cur;
		return 1;
	}
	r = ring_rx_peek_at(rx, rx->pos, rx->seq, bottom_fill, pkt);
	if (r == 1 && rx->pos + pkt->bytes > rx->seen)
		rx->seen = rx->pos + pkt->bytes;
	return r;
}

int64_t ring_rx_scan(struct ring_rx *rx, struct ring_scan *sc, int bottom_fill,
		     uint64_t limit)
{
	struct ring_pkt pkt;
	uint64_t credit = 0;
	int r;

	if (sc->pos < rx->pos || (sc->pos == rx->pos && sc->seq != rx->seq)) {
		sc->pos = rx->pos;
		sc->seq = rx->seq;
	}
	/* never past the sender's head: at most one lap ahead */
	while (sc->pos < limit && sc->pos - rx->pos < rx->size) {
		r = ring_rx_peek_at(rx, sc->pos, sc->seq, bottom_fill, &pkt);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		if (pkt.credit > credit)
			credit = pkt.credit;
		sc->pos += pkt.bytes;
		sc->seq = ring_seq_next(sc->seq);
		if (sc->pos > rx->seen)
			rx->seen = sc->pos;
	}
	return (int64_t)credit;
}

void ring_rx_consume(struct ring_rx *rx, const struct ring_pkt *pkt)
{
	uint8_t *p = rx->ring + (rx->pos & (rx->size - 1));
	uint64_t i;

	/* every position a later flag or trailer may occupy */
	for (i = 0; i < pkt->bytes; i += RING_ALIGN) {
		ring_store(p + i, 0);
		ring_store(p + i + RING_ALIGN - RING_TRL, 0);
	}
	rx->pos += pkt->bytes;
	rx->seq = ring_seq_next(rx->seq);
	rx->off = 0;
	if (rx->seen < rx->pos)
		rx->seen = rx->pos;
}
