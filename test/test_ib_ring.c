/*
 * test_ib_ring.c - unit tests of the rdma_ib ring protocol (proto/ring) on
 * plain memory: the "RDMA write" is a memcpy from the sender's staging
 * mirror into the receiver's ring, so partial and stale arrivals can be
 * staged byte by byte.  Needs no device; each case runs in a process of its
 * own (TST_UNIT, test/lib/tst.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tst.h"
#include "proto/ring.h"

struct pipe {
	uint8_t *stage, *ring;
	uint64_t size;
	uint64_t seed;		/* of the byte stream through the pipe */
	struct ring_tx tx;
	struct ring_rx rx;
};

static void pipe_init(struct tst *t, struct pipe *p, uint64_t size)
{
	p->size = size;
	p->seed = tst_stream_seed(t, 0, 1);
	p->stage = calloc(1, size);
	p->ring = calloc(1, size);
	if (!p->stage || !p->ring)
		abort();
	ring_tx_init(&p->tx, p->stage, size);
	ring_rx_init(&p->rx, p->ring, size);
}

static void pipe_free(struct pipe *p)
{
	free(p->stage);
	free(p->ring);
}

/* The wire: copy [from, to) of a slot from staging into the ring. */
static void wire(struct pipe *p, const struct ring_slot *s, uint64_t from,
		 uint64_t to)
{
	memcpy(p->ring + s->off + from, p->stage + s->off + from, to - from);
}

/* Build one packet of up to want bytes of the pattern from stream offset
 * *sent; 0 and the slot, or -EAGAIN when full. */
static int send_one(struct pipe *p, uint64_t want, uint64_t max,
		    uint64_t *sent, struct ring_slot *s)
{
	if (ring_tx_reserve(&p->tx, want, max, s))
		return -EAGAIN;
	tst_pat_fill(s->payload, s->len, p->seed, *sent);
	ring_tx_commit(&p->tx, s, p->rx.pos);
	*sent += s->len;
	return 0;
}

/* Receive every complete packet, check bytes, consume, return credit. */
static int recv_all(struct tst *t, struct pipe *p, uint64_t *got)
{
	struct ring_pkt pkt;
	size_t bad;
	int r;

	while ((r = ring_rx_peek(&p->rx, 1, &pkt)) == 1) {
		bad = tst_pat_check(pkt.payload, pkt.len, p->seed, *got);
		TST_CHECK(t, bad == pkt.len,
			  "byte %llu: got 0x%02x want 0x%02x",
			  (unsigned long long)(*got + bad), pkt.payload[bad],
			  tst_pat_byte(p->seed, *got + bad));
		*got += pkt.len;
		ring_rx_consume(&p->rx, &pkt);
	}
	TST_CHECK(t, r == 0, "peek returned %d", r);
	return 0;
}

/* The packet of slot s reaches the ring (up to its wire length); the
 * receiver takes every complete packet (checked) and returns its credit;
 * the sender's write completed. */
static int deliver(struct tst *t, struct pipe *p, const struct ring_slot *s,
		   uint64_t *got)
{
	wire(p, s, 0, s->wire);
	if (recv_all(t, p, got))
		return -1;
	TST_CHECK0(t, ring_tx_credit(&p->tx, p->rx.pos));
	ring_tx_acked(&p->tx, p->tx.head);
	return 0;
}

/* Many packets of random sizes through a small ring: wrap-around, the cut
 * at the ring's end, FIFO order, byte-exact. */
static int case_stream(struct tst *t)
{
	struct pipe p;
	struct ring_slot s;
	uint64_t sent = 0, got = 0, total = 3u << 20, rng = 12345, want;
	int laps;

	pipe_init(t, &p, 8192);
	while (got < total) {
		want = tst_rand_range(&rng, 1, 3000);
		if (want > total - sent)
			want = total - sent;
		if (want && !send_one(&p, want, 4096, &sent, &s))
			wire(&p, &s, 0, s.wire);
		if (recv_all(t, &p, &got))
			goto err;
		if (ring_tx_credit(&p.tx, p.rx.pos)) {
			tst_fail(t, "credit refused");
			goto err;
		}
		ring_tx_acked(&p.tx, p.tx.head);
	}
	laps = (int)(p.rx.pos / p.size);
	pipe_free(&p);
	TST_CHECK(t, got == total, "got %llu of %llu", (unsigned long long)got,
		  (unsigned long long)total);
	TST_CHECK(t, laps > 100, "only %d laps of the ring", laps);
	return 0;
err:
	pipe_free(&p);
	return -1;
}

/* The next packet at the receiver's head must be of type and len, its
 * payload the pattern from stream offset *got (unless a pad); consumed. */
static int expect_pkt(struct tst *t, struct pipe *p, unsigned int type,
		      uint32_t len, uint64_t *got)
{
	struct ring_pkt pkt;
	size_t bad;
	int r = ring_rx_peek(&p->rx, 1, &pkt);

	TST_CHECK(t, r == 1 && pkt.type == type && pkt.len == len,
		  "peek %d: type %u len %u, expected type %u len %u", r,
		  pkt.type, pkt.len, type, len);
	if (type != RDMACH_PKT_PAD) {
		bad = tst_pat_check(pkt.payload, len, p->seed, *got);
		TST_CHECK(t, bad == len, "packet of type %u: byte %zu differs",
			  type, bad);
		*got += len;
	}
	ring_rx_consume(&p->rx, &pkt);
	return 0;
}

/* Two packets reserved together (ring_tx_reserve_pair: a message head as
 * data, then the control packet for the rest, as rdma_ib sends a
 * rendezvous) through a small ring, many laps: they are adjacent (one
 * write carries both, here one memcpy), never cross the ring end (a pad
 * fills it first), arrive in order and byte-exact; a pair that does not
 * fit the free space is refused whole. */
static int case_pair(struct tst *t)
{
	struct pipe p;
	struct ring_slot pad, lead, s;
	uint64_t rng = 777, sent = 0, got = 0, pads = 0, i;
	uint32_t lead_len, len;
	int r;

	pipe_init(t, &p, 8192);
	for (i = 0; i < 20000; i++) {
		lead_len = (uint32_t)tst_rand_range(&rng, 0, 256);
		len = (uint32_t)tst_rand_range(&rng, 1, 1600);
		r = ring_tx_reserve_pair(&p.tx, lead_len, len, &pad, &lead, &s);
		TST_CHECK(t, r == 0, "pair %u + %u, empty ring: %d", lead_len,
			  len, r);
		TST_CHECK(t, lead.bytes == (lead_len ? ring_pkt_bytes(lead_len)
					    : 0) &&
			  s.off == lead.off + lead.bytes &&
			  s.bytes == ring_pkt_bytes(len) &&
			  s.off + s.bytes <= p.size &&
			  (!pad.bytes || (pad.off + pad.bytes == p.size &&
					  lead.off == 0)),
			  "pair %llu: pad %llu+%llu lead %llu+%llu slot "
			  "%llu+%llu", (unsigned long long)i,
			  (unsigned long long)pad.off,
			  (unsigned long long)pad.bytes,
			  (unsigned long long)lead.off,
			  (unsigned long long)lead.bytes,
			  (unsigned long long)s.off,
			  (unsigned long long)s.bytes);
		if (pad.bytes) {
			ring_tx_commit(&p.tx, &pad, 0);
			wire(&p, &pad, 0, pad.wire);
			pads++;
		}
		if (lead_len) {
			tst_pat_fill(lead.payload, lead_len, p.seed, sent);
			ring_tx_commit(&p.tx, &lead, 0);
			sent += lead_len;
		}
		tst_pat_fill(s.payload, len, p.seed, sent);
		s.type = RDMACH_PKT_RNDV;
		ring_tx_commit(&p.tx, &s, 0);
		sent += len;
		memcpy(p.ring + lead.off, p.stage + lead.off,
		       lead.bytes + s.wire);
		if ((pad.bytes && expect_pkt(t, &p, RDMACH_PKT_PAD, pad.len,
					     &got)) ||
		    (lead_len && expect_pkt(t, &p, RDMACH_PKT_DATA, lead_len,
					    &got)) ||
		    expect_pkt(t, &p, RDMACH_PKT_RNDV, len, &got))
			goto err;
		TST_CHECK0(t, ring_tx_credit(&p.tx, p.rx.pos));
		ring_tx_acked(&p.tx, p.tx.head);
	}
	pipe_free(&p);
	/* refused whole: 512 bytes free, at the ring end; a pair that takes
	 * 512 fits, one a byte longer (576) does not */
	pipe_init(t, &p, 8192);
	for (i = 0; i < 8; i++) {
		r = ring_tx_reserve(&p.tx, i < 7 ? 1000 : 488, p.size, &s);
		TST_CHECK(t, r == 0 && s.bytes == (i < 7 ? 1024u : 512u),
			  "filler %llu: %d, %llu bytes", (unsigned long long)i,
			  r, (unsigned long long)s.bytes);
		ring_tx_commit(&p.tx, &s, 0);
	}
	ring_tx_acked(&p.tx, p.tx.head);
	TST_CHECK(t, ring_tx_free(&p.tx) == 512, "free %llu",
		  (unsigned long long)ring_tx_free(&p.tx));
	r = ring_tx_reserve_pair(&p.tx, 100, 512 + 1 - ring_pkt_bytes(100) -
				 RING_OVERHEAD, &pad, &lead, &s);
	TST_CHECK(t, r == -EAGAIN, "a pair over the free space: %d", r);
	r = ring_tx_reserve_pair(&p.tx, 100, 512 - ring_pkt_bytes(100) -
				 RING_OVERHEAD, &pad, &lead, &s);
	TST_CHECK(t, r == 0 && !pad.bytes && s.off + s.bytes == p.size,
		  "a pair that fits the free space exactly: %d", r);
	pipe_free(&p);
	TST_CHECK(t, got == sent && pads > 100, "got %llu of %llu, %llu pads",
		  (unsigned long long)got, (unsigned long long)sent,
		  (unsigned long long)pads);
	return 0;
err:
	pipe_free(&p);
	return -1;
}

/* A packet is not seen until its last byte (the trailer) is there. */
static int case_partial_arrival(struct tst *t)
{
	struct pipe p;
	struct ring_slot s;
	struct ring_pkt pkt;
	uint64_t sent = 0, got = 0, cut;
	int ret = -1;

	pipe_init(t, &p, 16384);
	if (send_one(&p, 5000, 8192, &sent, &s))
		goto out;
	if (s.wire != RING_HDR + 5000 + RING_TRL) {
		tst_fail(t, "5000-byte packet: %llu bytes on the wire, want "
			 "the near trailer's %u", (unsigned long long)s.wire,
			 RING_HDR + 5000 + RING_TRL);
		goto out;
	}
	for (cut = 0; cut < s.wire; cut += 61) {
		wire(&p, &s, 0, cut);
		if (ring_rx_peek(&p.rx, 1, &pkt) != 0) {
			tst_fail(t, "packet seen with %llu of %llu bytes",
				 (unsigned long long)cut,
				 (unsigned long long)s.wire);
			goto out;
		}
	}
	/* everything but the trailer (a u64 lands atomically) */
	wire(&p, &s, 0, s.wire - RING_TRL);
	if (ring_rx_peek(&p.rx, 1, &pkt) != 0) {
		tst_fail(t, "packet seen without its trailer");
		goto out;
	}
	wire(&p, &s, 0, s.wire);
	if (ring_rx_peek(&p.rx, 1, &pkt) != 1 || pkt.len != 5000) {
		tst_fail(t, "complete packet not seen");
		goto out;
	}
	ret = recv_all(t, &p, &got);
	if (!ret && got != 5000)
		ret = tst_fail(t, "got %llu bytes", (unsigned long long)got);
out:
	pipe_free(&p);
	return ret;
}

/*
 * Stale bytes equal to a flag: payloads made of exactly the flags the
 * receiver will expect next (for every length), so that after a wrap a
 * new header position lies on old payload.  Nothing may be seen before the
 * real packet is copied: consume must have cleared those positions.
 */
static int case_stale_flags(struct tst *t)
{
	struct pipe p;
	struct ring_slot s;
	struct ring_pkt pkt;
	uint64_t i, round;
	int ret = -1;

	pipe_init(t, &p, 4096);
	for (round = 0; round < 400; round++) {
		uint64_t want = 40 + (round * 37) % 1500;

		if (ring_tx_reserve(&p.tx, want, 4096, &s))
			goto out_full;
		for (i = 0; i + 8 <= s.len; i += 8) {
			/* 64-byte blocks of one flag each: a later seq with a
			 * length whose trailer is in the same block */
			uint64_t blk = (s.off + RING_HDR + i) / RING_ALIGN;
			uint64_t f = ring_flag(p.tx.seq + 1 + (uint32_t)(blk % 16),
					       RDMACH_PKT_DATA, 40);
			memcpy(s.payload + i, &f, 8);
		}
		ring_tx_commit(&p.tx, &s, 0);
		if (ring_rx_peek(&p.rx, 1, &pkt) != 0) {
			tst_fail(t, "round %llu: stale bytes taken for a "
				 "packet", (unsigned long long)round);
			goto out;
		}
		wire(&p, &s, 0, s.wire);
		if (ring_rx_peek(&p.rx, 1, &pkt) != 1 || pkt.len != s.len) {
			tst_fail(t, "round %llu: packet not seen",
				 (unsigned long long)round);
			goto out;
		}
		ring_rx_consume(&p.rx, &pkt);
		if (ring_rx_peek(&p.rx, 1, &pkt) != 0) {
			tst_fail(t, "round %llu: stale bytes after consume "
				 "taken for a packet",
				 (unsigned long long)round);
			goto out;
		}
		ring_tx_credit(&p.tx, p.rx.pos);
		ring_tx_acked(&p.tx, p.tx.head);
	}
	ret = 0;
	goto out;
out_full:
	tst_fail(t, "ring full with everything consumed");
out:
	pipe_free(&p);
	return ret;
}

/* Where a near trailer goes, worked out here rather than by ring.h: after
 * the header and the payload rounded up to 8 bytes. */
static uint64_t near_trailer_off(uint32_t len)
{
	return RING_HDR + ((len + 7) & ~7u);
}

/*
 * Near trailers: a packet of len payload bytes writes 16 + len rounded up
 * to 8 + 8 bytes (32 for 1-8 bytes), and is not seen before its last one.
 */
static int case_near_trailer(struct tst *t)
{
	struct pipe p;
	struct ring_slot s;
	struct ring_pkt pkt;
	uint64_t sent = 0, got = 0, cut, want;
	uint32_t len;
	int ret = -1;

	pipe_init(t, &p, 4096);
	for (len = 1; len <= 200; len++) {
		if (send_one(&p, len, 4096, &sent, &s))
			goto out;
		want = near_trailer_off(len) + RING_TRL;
		if (want > s.bytes - RING_TRL)	/* near == far: no saving */
			want = s.bytes;
		if (s.wire != want) {
			tst_fail(t, "len %u: %llu bytes on the wire, want %llu",
				 len, (unsigned long long)s.wire,
				 (unsigned long long)want);
			goto out;
		}
		/* every byte before the trailer (a u64 lands atomically) */
		for (cut = 0; cut <= s.wire - RING_TRL; cut++) {
			wire(&p, &s, 0, cut);
			if (ring_rx_peek(&p.rx, 1, &pkt) != 0) {
				tst_fail(t, "len %u: seen with %llu of %llu "
					 "bytes", len, (unsigned long long)cut,
					 (unsigned long long)s.wire);
				goto out;
			}
		}
		if (deliver(t, &p, &s, &got))
			goto out;
	}
	ret = got == sent ? 0 : tst_fail(t, "got %llu of %llu",
					 (unsigned long long)got,
					 (unsigned long long)sent);
out:
	pipe_free(&p);
	return ret;
}

/*
 * Old payload equal to the next flag at its near trailer position (the
 * ring and staging hold the same old bytes, as after an earlier packet's
 * write): the sender must fall back to the far trailer, so that a packet
 * whose header has landed is not taken before its payload.  Every other
 * round plants a value that does not match: the near trailer is used.
 */
static int case_stale_near(struct tst *t)
{
	struct pipe p;
	struct ring_slot s;
	struct ring_pkt pkt;
	uint64_t sent = 0, got = 0, rng = 777, off, pos, v, far = 0;
	uint32_t len;
	int round, planted, ret = -1;

	pipe_init(t, &p, 4096);
	for (round = 0; round < 600; round++) {
		len = (uint32_t)tst_rand_range(&rng, 1, 32);
		off = p.tx.head & (p.size - 1);
		pos = off + near_trailer_off(len);
		planted = round % 2 == 0;
		v = ring_flag(p.tx.seq, RDMACH_PKT_DATA, len) | RING_FLAG_NEAR;
		if (!planted)
			v ^= 1u << 20;
		memcpy(p.stage + pos, &v, 8);
		memcpy(p.ring + pos, &v, 8);
		if (send_one(&p, len, 4096, &sent, &s))
			goto out;
		/* the header and nothing more */
		wire(&p, &s, 0, RING_HDR);
		if (ring_rx_peek(&p.rx, 1, &pkt) != 0) {
			tst_fail(t, "round %d: packet of %u bytes taken with "
				 "its header only", round, len);
			goto out;
		}
		if (s.wire != (planted ? s.bytes : pos - off + RING_TRL)) {
			tst_fail(t, "round %d (old bytes %s the flag): %llu "
				 "bytes on the wire", round,
				 planted ? "equal to" : "unlike",
				 (unsigned long long)s.wire);
			goto out;
		}
		far += planted;
		if (deliver(t, &p, &s, &got))
			goto out;
	}
	ret = got == sent && far == 300 ? 0 :
	      tst_fail(t, "got %llu of %llu, %llu far trailers",
		       (unsigned long long)got, (unsigned long long)sent,
		       (unsigned long long)far);
out:
	pipe_free(&p);
	return ret;
}

/* Sender stalls exactly when the ring is full and resumes on credit;
 * staging is reused only after the local write completed; bogus credits
 * are refused. */
static int case_credit_stall(struct tst *t)
{
	struct pipe p;
	struct ring_slot s;
	uint64_t sent = 0, got = 0, n = 0;
	int ret = -1;

	pipe_init(t, &p, 4096);
	while (!send_one(&p, 100, 4096, &sent, &s)) {
		wire(&p, &s, 0, s.wire);
		n++;
	}
	/* 100 bytes -> 128-byte packets, the last one cut to fit */
	if (p.tx.head != 4096 || ring_tx_free(&p.tx) != 0) {
		tst_fail(t, "full ring: head %llu free %llu after %llu packets",
			 (unsigned long long)p.tx.head,
			 (unsigned long long)ring_tx_free(&p.tx),
			 (unsigned long long)n);
		goto out;
	}
	if (recv_all(t, &p, &got))
		goto out;
	if (ring_tx_credit(&p.tx, p.tx.head + 64) != -EPROTO) {
		tst_fail(t, "credit beyond head accepted");
		goto out;
	}
	ring_tx_credit(&p.tx, p.rx.pos);
	if (!send_one(&p, 100, 4096, &sent, &s)) {
		tst_fail(t, "staging reused before the write completed");
		goto out;
	}
	ring_tx_acked(&p.tx, p.tx.head);
	if (send_one(&p, 100, 4096, &sent, &s)) {
		tst_fail(t, "no space after credit and completion");
		goto out;
	}
	/* an older credit never moves the tail back */
	ring_tx_credit(&p.tx, 64);
	if (p.tx.tail != 4096) {
		tst_fail(t, "tail moved back to %llu",
			 (unsigned long long)p.tx.tail);
		goto out;
	}
	ret = 0;
out:
	pipe_free(&p);
	return ret;
}

/* Delayed tail updates: none while the sender's view of free space stays
 * over the threshold, one when it falls under; eager mode every time. */
static int case_credit_threshold(struct tst *t)
{
	struct pipe p;
	struct ring_slot s;
	uint64_t sent = 0, got = 0, thr = 2048, updates = 0, lastfree = 0;
	int i, ret = -1;

	pipe_init(t, &p, 8192);
	for (i = 0; i < 200; i++) {
		if (send_one(&p, 200, 8192, &sent, &s))
			break;
		wire(&p, &s, 0, s.wire);
		if (recv_all(t, &p, &got))
			goto out;
		ring_tx_acked(&p.tx, p.tx.head);
		if (!ring_rx_credit_due(&p.rx, 1, thr)) {
			tst_fail(t, "eager mode: no update due after a packet");
			goto out;
		}
		if (ring_rx_credit_due(&p.rx, 0, thr)) {
			lastfree = p.size - (p.rx.seen - p.rx.credit_sent);
			updates++;
			ring_tx_credit(&p.tx, p.rx.pos);
			ring_rx_credit_told(&p.rx, p.rx.pos);
			if (lastfree >= thr) {
				tst_fail(t, "update with %llu free >= "
					 "threshold",
					 (unsigned long long)lastfree);
				goto out;
			}
		}
		if (ring_tx_free(&p.tx) + 256 < thr) {
			tst_fail(t, "sender free %llu fell well under the "
				 "threshold",
				 (unsigned long long)ring_tx_free(&p.tx));
			goto out;
		}
	}
	/* 200 packets of 256 bytes, one update per (8192-2048)/256 or so */
	if (i != 200 || updates < 6 || updates > 10) {
		tst_fail(t, "%d packets, %llu updates", i,
			 (unsigned long long)updates);
		goto out;
	}
	ret = 0;
out:
	pipe_free(&p);
	return ret;
}

/* Chunk schedule and boundaries: pipeline packets are cut at the chunk
 * size, other modes at half the ring; a cut at the ring end continues at
 * offset 0; payload sizes around the alignment boundaries round-trip. */
static int case_chunks(struct tst *t)
{
	struct pipe p;
	struct ring_slot s;
	uint64_t sent = 0, got = 0, len;
	int ret = -1;

	if (ring_max_payload(RING_MODE_PIPELINE, 1024, 65536) != 1024 ||
	    ring_max_payload(RING_MODE_PIGGYBACK, 1024, 65536) !=
		    32768 - RING_OVERHEAD ||
	    ring_max_payload(RING_MODE_PIPELINE, 1 << 20, 65536) !=
		    32768 - RING_OVERHEAD)
		return tst_fail(t, "ring_max_payload schedule wrong");
	if (ring_pkt_bytes(1) != 64 || ring_pkt_bytes(40) != 64 ||
	    ring_pkt_bytes(41) != 128 || ring_pkt_bytes(104) != 128)
		return tst_fail(t, "ring_pkt_bytes wrong");
	if (ring_size_check(4096) || !ring_size_check(4095) ||
	    !ring_size_check(2048) || !ring_size_check(12288))
		return tst_fail(t, "ring_size_check wrong");

	pipe_init(t, &p, 4096);
	/* every length 1..300 crosses 40/41, 104/105 ... boundaries */
	for (len = 1; len <= 300; len++) {
		uint64_t want = len, before = sent;

		while (sent - before < want) {
			if (send_one(&p, want - (sent - before), 4096, &sent, &s))
				goto full;
			if (s.off + s.bytes > p.size) {
				tst_fail(t, "packet straddles the ring end");
				goto out;
			}
			if (deliver(t, &p, &s, &got))
				goto out;
		}
	}
	/* a large want at offset 4096-128: cut to 104 bytes, then offset 0 */
	while ((p.tx.head & 4095) != 4096 - 128) {
		if (send_one(&p, 1, 4096, &sent, &s))
			goto full;
		if (deliver(t, &p, &s, &got))
			goto out;
	}
	if (send_one(&p, 3000, 4096, &sent, &s) || s.len != 104) {
		tst_fail(t, "cut at the ring end: %u bytes", s.len);
		goto out;
	}
	wire(&p, &s, 0, s.wire);
	if (send_one(&p, 3000 - 104, 4096, &sent, &s) || s.off != 0) {
		tst_fail(t, "no continuation at offset 0 (off %llu)",
			 (unsigned long long)s.off);
		goto out;
	}
	wire(&p, &s, 0, s.wire);
	if (recv_all(t, &p, &got) || got != sent) {
		tst_fail(t, "got %llu of %llu", (unsigned long long)got,
			 (unsigned long long)sent);
		goto out;
	}
	ret = 0;
	goto out;
full:
	tst_fail(t, "ring full while everything was consumed");
out:
	pipe_free(&p);
	return ret;
}

/* Sequence numbers wrap from 2^32-1 to 1, never 0, on both sides. */
static int case_seq_wrap(struct tst *t)
{
	struct pipe p;
	struct ring_slot s;
	uint64_t sent = 0, got = 0;
	int i, ret = -1;

	if (ring_seq_next(0xffffffffu) != 1 || ring_seq_next(7) != 8)
		return tst_fail(t, "ring_seq_next wrong");
	pipe_init(t, &p, 4096);
	p.tx.seq = p.rx.seq = 0xfffffffdu;
	for (i = 0; i < 10; i++) {
		if (send_one(&p, 10, 4096, &sent, &s))
			goto out;
		wire(&p, &s, 0, s.wire);
		if (recv_all(t, &p, &got))
			goto out;
	}
	if (got != sent || p.rx.seq != 8) {
		tst_fail(t, "after wrap: got %llu of %llu, seq %u",
			 (unsigned long long)got, (unsigned long long)sent,
			 p.rx.seq);
		goto out;
	}
	ret = 0;
out:
	pipe_free(&p);
	return ret;
}

/* A header with a length beyond the ring end is refused, not followed. */
static int case_corrupt(struct tst *t)
{
	struct pipe p;
	struct ring_pkt pkt;
	uint64_t f = ring_flag(1, RDMACH_PKT_DATA, 8000);
	int r;

	pipe_init(t, &p, 4096);
	memcpy(p.ring, &f, 8);
	r = ring_rx_peek(&p.rx, 1, &pkt);
	pipe_free(&p);
	TST_CHECK(t, r == -EPROTO, "corrupt length: peek returned %d", r);
	return 0;
}

/* A sender that rewrites a packet's header while the receiver reads it in
 * parts (a shorter length, another type) changes nothing: the header is
 * loaded once, and the parts and the consume follow that copy (a shorter
 * length under a reader's offset sent it past the packet). */
static int case_hdr_rewrite(struct tst *t)
{
	struct pipe p;
	struct ring_slot s;
	struct ring_pkt a, b;
	uint64_t sent = 0, f = ring_flag(1, RDMACH_PKT_RNDV, 8);
	int r;

	pipe_init(t, &p, 4096);
	if (send_one(&p, 100, 100, &sent, &s))
		abort();
	wire(&p, &s, 0, s.wire);
	r = ring_rx_peek(&p.rx, 1, &a);
	if (r == 1)
		ring_rx_advance(&p.rx, &a, 40);		/* a first part */
	/* the peer rewrites flag and far trailer of the same sequence */
	memcpy(p.ring, &f, 8);
	memcpy(p.ring + ring_flag_trailer(f), &f, 8);
	r = r == 1 ? ring_rx_peek(&p.rx, 1, &b) : r;
	if (r == 1)
		ring_rx_advance(&p.rx, &b, b.len - p.rx.off);
	pipe_free(&p);
	TST_CHECK(t, r == 1, "peek returned %d", r);
	TST_CHECK(t, b.len == 100 && b.type == RDMACH_PKT_DATA &&
		  b.payload == a.payload && b.bytes == a.bytes,
		  "second peek: len %u type %u (first: %u %u)", b.len, b.type,
		  a.len, a.type);
	TST_CHECK(t, p.rx.pos == ring_pkt_bytes(100), "consumed to %llu",
		  (unsigned long long)p.rx.pos);
	return 0;
}

static const struct tst_case cases[] = {
	{ "ring_stream", 1, case_stream, TST_UNIT, NULL, { 0 } },
	{ "ring_partial_arrival", 1, case_partial_arrival, TST_UNIT, NULL,
	  { 0 } },
	{ "ring_stale_flags", 1, case_stale_flags, TST_UNIT, NULL, { 0 } },
	{ "ring_near_trailer", 1, case_near_trailer, TST_UNIT, NULL, { 0 } },
	{ "ring_stale_near", 1, case_stale_near, TST_UNIT, NULL, { 0 } },
	{ "ring_credit_stall", 1, case_credit_stall, TST_UNIT, NULL, { 0 } },
	{ "ring_credit_threshold", 1, case_credit_threshold, TST_UNIT, NULL,
	  { 0 } },
	{ "ring_chunks", 1, case_chunks, TST_UNIT, NULL, { 0 } },
	{ "ring_seq_wrap", 1, case_seq_wrap, TST_UNIT, NULL, { 0 } },
	{ "ring_corrupt_header", 1, case_corrupt, TST_UNIT, NULL, { 0 } },
	{ "ring_reserve_pair", 1, case_pair, TST_UNIT, NULL, { 0 } },
	{ "ring_hdr_rewrite", 1, case_hdr_rewrite, TST_UNIT, NULL, { 0 } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, cases,
			(int)(sizeof(cases) / sizeof(cases[0])));
}
