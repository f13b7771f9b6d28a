/*
 * test_spipe.c - unit tests of the superpipeline protocol (proto/spipe) and
 * of the large-message model and tuning file (proto/tune) on plain memory:
 * a sender and a receiver run over a fake adapter that copies each posted
 * chunk from the staging area to the landing area in increasing address
 * order, 8-byte words at a time, as slowly as a case asks (so that blocks
 * arrive one by one, and a chunk can stop half-way).  Acknowledgements and
 * the landing address can be delayed.  Needs no device; runs natively.
 * Cases run under the test kit (TST_UNIT, test/lib/tst.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/tst.h"
#include "proto/spipe.h"
#include "proto/tune.h"

static uint8_t pat(uint64_t off)
{
	uint64_t x = (off + 1) * 0x9e3779b97f4a7c15ull;

	return (uint8_t)(x >> 56 ^ x >> 23);
}

static uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* uniform in [lo, hi] */
static uint64_t rnd_in(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return hi <= lo ? lo : lo + rnd(s) % (hi - lo + 1);
}

static struct spipe_params params(uint32_t block, uint32_t nbufs,
				  uint64_t buf, uint64_t c0, double q)
{
	struct spipe_params p = { block, nbufs, buf, c0,
				  (uint32_t)(q * SPIPE_Q_ONE + 0.5) };

	return p;
}

/* ---- the simulation ---------------------------------------------------- */

struct sim_cfg {
	struct spipe_params p;
	const uint64_t *msgs;	/* message sizes, back to back */
	int nmsgs;
	int put_pieces, get_pieces;	/* iovec pieces per call, at most */
	uint64_t put_max, get_max;	/* bytes per call, at most (0: all) */
	uint64_t wire_step;	/* adapter bytes per step (0: whole writes) */
	int ack_delay;		/* steps an ack spends in flight */
	int landing_late;	/* steps before the landing address is known */
	uint64_t seed;
};

#define SIM_WQ 8
#define SIM_RING 512
#define SIM_ACKS 256
#define SIM_GAP 16		/* canary bytes between receive pieces */
#define SIM_CANARY 0xa5

struct sim {
	struct tst *t;
	const struct sim_cfg *c;
	struct spipe_tx tx;
	struct spipe_rx rx;
	uint8_t *stage, *land;
	uint64_t chunk_bytes[SPIPE_BUFS_MAX + 1];	/* by g mod N */
	struct { uint64_t g, off, bytes, done; } wq[SIM_WQ];
	int wq_n;
	struct rdmach_spipe_hdr ring[SIM_RING];
	int r_head, r_n;
	uint64_t ack_val[SIM_ACKS], ack_due[SIM_ACKS];
	int ack_n;
	uint64_t step, sent, got, total;
	int msg_i, landing_known;
	uint64_t landing_at;	/* step the landing address arrives */
	uint64_t rng;
	uint64_t max_chunks_out;	/* built, not copied out: at most N */
	uint8_t *src, *dst;	/* per-call buffers */
	uint64_t calls_put, calls_get, short_gets;
};

/* Post every built chunk (the landing address is known). */
static int sim_post(struct sim *s)
{
	uint32_t n = s->tx.p.nbufs;

	while (s->landing_known && spipe_tx_unposted(&s->tx)) {
		uint64_t g = s->tx.posted + 1;

		TST_CHECK(s->t, s->wq_n < SIM_WQ, "adapter queue overflow");
		/* folding: the landing buffer must be free */
		TST_CHECK(s->t, g <= s->rx.acked + n,
			  "chunk %llu written over chunk %llu, which the "
			  "receiver has not copied out (acked %llu)",
			  (unsigned long long)g, (unsigned long long)(g - n),
			  (unsigned long long)s->rx.acked);
		s->wq[s->wq_n].g = g;
		s->wq[s->wq_n].off = spipe_buf_off(&s->tx.p, g);
		s->wq[s->wq_n].bytes = s->chunk_bytes[g % n];
		s->wq[s->wq_n].done = 0;
		s->wq_n++;
		spipe_tx_posted(&s->tx, g);
	}
	return 0;
}

static int sim_send(struct sim *s)
{
	const struct sim_cfg *c = s->c;
	struct iovec iov[16];
	struct rdmach_iovc cur;
	uint64_t avail, off = 0;
	int n, i;

	if (!s->tx.left && s->msg_i < c->nmsgs) {
		TST_CHECK(s->t, s->r_n < SIM_RING, "ring queue overflow");
		TST_CHECK(s->t, !spipe_tx_open(&s->tx, c->msgs[s->msg_i],
				     &s->ring[(s->r_head + s->r_n) % SIM_RING]),
			  "spipe_tx_open failed");
		s->r_n++;
		s->msg_i++;
	}
	if (!s->tx.left || !spipe_tx_writable(&s->tx))
		return sim_post(s);
	avail = c->put_max ? rnd_in(&s->rng, 1, c->put_max) : s->tx.left;
	if (avail > s->tx.left)
		avail = s->tx.left;
	/* the put's bytes in up to put_pieces pieces */
	for (i = 0; (uint64_t)i < avail; i++)
		s->src[i] = pat(s->sent + (uint64_t)i);
	n = (int)rnd_in(&s->rng, 1, (uint64_t)c->put_pieces);
	if ((uint64_t)n > avail)
		n = (int)avail;
	for (i = 0; i < n; i++) {
		uint64_t len = i == n - 1 ? avail - off :
			       rnd_in(&s->rng, 0, avail - off);

		iov[i].iov_base = s->src + off;
		iov[i].iov_len = len;
		off += len;
	}
	rdmach_iovc_init(&cur, iov, n);
	s->calls_put++;
	while (avail && spipe_tx_writable(&s->tx)) {
		struct spipe_chunk ch;
		uint64_t out = s->tx.g - 1 - s->rx.acked;

		spipe_tx_build(&s->tx, s->stage, &cur, avail, &ch);
		TST_CHECK(s->t, ch.len && ch.len <= avail &&
			  ch.bytes % c->p.block == 0 &&
			  ch.bytes <= c->p.buf_size,
			  "chunk %llu: %llu bytes in %llu",
			  (unsigned long long)ch.g, (unsigned long long)ch.len,
			  (unsigned long long)ch.bytes);
		s->chunk_bytes[ch.g % c->p.nbufs] = ch.bytes;
		avail -= ch.len;
		s->sent += ch.len;
		if (out + 1 > s->max_chunks_out)
			s->max_chunks_out = out + 1;
	}
	return sim_post(s);
}

/* The adapter: copy wire_step bytes of the oldest write, 8 at a time. */
static void sim_wire(struct sim *s)
{
	uint64_t budget = s->c->wire_step ? s->c->wire_step : UINT64_MAX;

	while (s->wq_n && budget) {
		__typeof__(s->wq[0]) *w = &s->wq[0];
		uint64_t k = w->bytes - w->done;

		if (k > budget)
			k = budget;
		for (uint64_t i = 0; i < k; i += 8)
			memcpy(s->land + w->off + w->done + i,
			       s->stage + w->off + w->done + i, 8);
		w->done += k;
		budget -= k;
		if (w->done < w->bytes)
			break;
		spipe_tx_completed(&s->tx, w->g);
		memmove(&s->wq[0], &s->wq[1], (size_t)(s->wq_n - 1) *
			sizeof(s->wq[0]));
		s->wq_n--;
	}
}

static int sim_recv(struct sim *s)
{
	const struct sim_cfg *c = s->c;
	struct iovec iov[16];
	struct rdmach_iovc cur;
	uint64_t room, ack, at = 0, sum = 0, b;
	int64_t got;
	int n, i, fresh;

	if (!s->r_n)
		return 0;
	TST_CHECK(s->t,
		  !spipe_rx_begin(&s->rx, &s->ring[s->r_head],
				  sizeof(s->ring[0]), &fresh),
		  "spipe_rx_begin refused a good header");
	if (fresh) {
		TST_CHECK(s->t,
			  s->rx.p.block == c->p.block &&
			  s->rx.p.nbufs == c->p.nbufs,
			  "geometry not taken over");
		s->landing_at = s->step + (uint64_t)c->landing_late;
	}
	if (!s->landing_known && s->step >= s->landing_at && s->landing_at)
		s->landing_known = 1;
	room = c->get_max ? rnd_in(&s->rng, 1, c->get_max) : s->total;
	n = (int)rnd_in(&s->rng, 1, (uint64_t)c->get_pieces);
	if ((uint64_t)n > room)
		n = (int)room;
	for (i = 0; i < n; i++) {
		uint64_t len = i == n - 1 ? room - sum :
			       rnd_in(&s->rng, 0, room - sum);

		iov[i].iov_base = s->dst + at;
		iov[i].iov_len = len;
		at += len + SIM_GAP;
		sum += len;
	}
	memset(s->dst, SIM_CANARY, at);
	rdmach_iovc_init(&cur, iov, n);
	s->calls_get++;
	got = spipe_rx_take(&s->rx, s->land, &cur, room, &ack);
	TST_CHECK(s->t, got >= 0, "spipe_rx_take: %lld", (long long)got);
	/* the bytes, in the pieces' order, and the gaps untouched */
	for (i = 0, b = 0; i < n; i++) {
		const uint8_t *p = iov[i].iov_base;
		uint64_t k;

		for (k = 0; k < iov[i].iov_len; k++, b++) {
			if (b < (uint64_t)got) {
				TST_CHECK(s->t, p[k] == pat(s->got + b),
					  "stream byte %llu: got 0x%02x want "
					  "0x%02x",
					  (unsigned long long)(s->got + b),
					  p[k], pat(s->got + b));
			} else {
				TST_CHECK(s->t, p[k] == SIM_CANARY,
					  "byte written past the count at %llu",
					  (unsigned long long)(s->got + b));
			}
		}
		for (k = 0; k < SIM_GAP; k++)
			TST_CHECK(s->t, p[iov[i].iov_len + k] == SIM_CANARY,
				  "byte written into a gap between pieces");
	}
	s->got += (uint64_t)got;
	/* a short take left nothing that had arrived */
	if ((uint64_t)got < room && !spipe_rx_msg_done(&s->rx)) {
		uint8_t one;
		struct iovec v = { &one, 1 };
		int64_t again;

		rdmach_iovc_init(&cur, &v, 1);
		again = spipe_rx_take(&s->rx, s->land, &cur, 1, &b);
		TST_CHECK(s->t, again == 0,
			  "a short take (%lld of %llu) left a block that had "
			  "arrived",
			  (long long)got, (unsigned long long)room);
		s->short_gets++;
	}
	if (ack) {
		TST_CHECK(s->t, s->ack_n < SIM_ACKS, "too many acks in flight");
		s->ack_val[s->ack_n] = ack;
		s->ack_due[s->ack_n++] = s->step + (uint64_t)c->ack_delay;
	}
	if (spipe_rx_msg_done(&s->rx)) {
		s->r_head = (s->r_head + 1) % SIM_RING;
		s->r_n--;
	}
	return 0;
}

static int sim_acks(struct sim *s)
{
	int i = 0;

	while (i < s->ack_n) {
		if (s->ack_due[i] > s->step) {
			i++;
			continue;
		}
		TST_CHECK(s->t, !spipe_tx_ack(&s->tx, s->ack_val[i]),
			  "ack %llu refused",
			  (unsigned long long)s->ack_val[i]);
		s->ack_val[i] = s->ack_val[s->ack_n - 1];
		s->ack_due[i] = s->ack_due[s->ack_n - 1];
		s->ack_n--;
	}
	return 0;
}

static int sim_run(struct tst *t, const struct sim_cfg *c,
		   struct sim *out)
{
	struct sim s;
	uint64_t area = spipe_area_bytes(&c->p), last_got = 0, idle = 0,
		 biggest = 0;
	int i, ret = -1;

	memset(&s, 0, sizeof(s));
	s.t = t;
	s.c = c;
	s.rng = c->seed | 1;
	for (i = 0; i < c->nmsgs; i++) {
		s.total += c->msgs[i];
		if (c->msgs[i] > biggest)
			biggest = c->msgs[i];
	}
	TST_CHECK(t, !spipe_params_check(&c->p), "bad params in the case");
	spipe_tx_init(&s.tx, &c->p);
	spipe_rx_init(&s.rx);
	s.stage = calloc(1, area);
	s.land = calloc(1, area);
	s.src = malloc(biggest + 1);
	s.dst = malloc(s.total + 16 * SIM_GAP + 1);
	if (!s.stage || !s.land || !s.src || !s.dst) {
		tst_fail(t, "out of memory");
		goto out;
	}
	while (s.got < s.total) {
		s.step++;
		if (sim_send(&s) || (sim_wire(&s), 0) || sim_recv(&s) ||
		    sim_acks(&s))
			goto out;
		if (s.got != last_got) {
			last_got = s.got;
			idle = 0;
		} else if (++idle > 100000) {
			tst_fail(t,
				 "stalled at %llu of %llu bytes (g %llu, "
				 "posted %llu, acked %llu, done %llu, rx g "
				 "%llu)",
				 (unsigned long long)s.got,
				 (unsigned long long)s.total,
				 (unsigned long long)s.tx.g,
				 (unsigned long long)s.tx.posted,
				 (unsigned long long)s.tx.acked,
				 (unsigned long long)s.tx.done,
				 (unsigned long long)s.rx.g);
			goto out;
		}
	}
	if (s.sent != s.total || s.r_n || s.tx.left) {
		tst_fail(t, "sent %llu of %llu, %d headers left",
		     (unsigned long long)s.sent, (unsigned long long)s.total,
		     s.r_n);
		goto out;
	}
	if (s.max_chunks_out > c->p.nbufs) {
		tst_fail(t, "%llu chunks out at once with %u buffers",
		     (unsigned long long)s.max_chunks_out, c->p.nbufs);
		goto out;
	}
	ret = 0;
	if (out)
		*out = s;
out:
	free(s.stage);
	free(s.land);
	free(s.src);
	free(s.dst);
	return ret;
}

/* ---- cases: byte-exact streams ------------------------------------------ */

/* Message sizes at and around every block and chunk edge of p (whole puts
 * and gets), then the same with random shapes on both sides. */
static int case_edges_for(struct tst *t, struct spipe_params p,
			  int shapes)
{
	uint64_t pay = spipe_block_payload(&p), sizes[256], sum = 0, edge;
	struct sim_cfg c;
	int n = 0, i, k;
	uint64_t target = p.c0;

	/* block edges */
	for (k = 1; k <= 3; k++)
		for (i = -1; i <= 1; i++)
			sizes[n++] = (uint64_t)k * pay + (uint64_t)i;
	/* chunk edges: sums of the schedule's first chunks */
	for (k = 0; k < 8; k++) {
		edge = (target + pay - 1) / pay * pay;
		if (edge > spipe_buf_payload(&p))
			edge = spipe_buf_payload(&p);
		sum += edge;
		for (i = -1; i <= 1; i++)
			sizes[n++] = sum + (uint64_t)i;
		target = target * p.q256 / SPIPE_Q_ONE;
	}
	/* folded: several whole buffers */
	for (i = -1; i <= 1; i++)
		sizes[n++] = 5 * spipe_buf_payload(&p) + (uint64_t)i;
	sizes[n++] = 1;
	sizes[n++] = 100000;
	memset(&c, 0, sizeof(c));
	c.p = p;
	c.msgs = sizes;
	c.nmsgs = n;
	c.put_pieces = c.get_pieces = 1;
	c.seed = 7;
	if (sim_run(t, &c, NULL))
		return -1;
	if (!shapes)
		return 0;
	c.put_pieces = c.get_pieces = 8;
	c.put_max = 3 * pay;
	c.get_max = 2 * pay + 7;
	c.wire_step = 64;
	c.ack_delay = 3;
	c.landing_late = 5;
	for (k = 0; k < 8; k++) {
		c.seed = 1000 + (uint64_t)k;
		if (sim_run(t, &c, NULL))
			return -1;
	}
	return 0;
}

static int case_edges(struct tst *t)
{
	/* small blocks so that many edges are crossed */
	if (case_edges_for(t, params(256, 3, 2048, 300, 1.5), 0))
		return -1;
	return case_edges_for(t, params(4096, 3, 64u << 10, 12000, 1.5), 0);
}

static int case_iovec_split(struct tst *t)
{
	return case_edges_for(t, params(256, 3, 2048, 300, 1.5), 1);
}

/* Partial gets: 1..100 bytes per get, so blocks are delivered in pieces
 * and a get often ends inside one. */
static int case_partial_gets(struct tst *t)
{
	static const uint64_t sizes[] = { 5000, 1, 239, 240, 241, 7777 };
	struct sim_cfg c = { .p = params(256, 3, 2048, 480, 2.0),
			     .msgs = sizes, .nmsgs = 6, .put_pieces = 3,
			     .get_pieces = 4, .get_max = 100, .seed = 3 };
	struct sim s;

	if (sim_run(t, &c, &s))
		return -1;
	TST_CHECK(t, s.short_gets > 0 && s.calls_get > 2 * s.calls_put,
		  "the case did not exercise partial gets (%llu short of %llu)",
		  (unsigned long long)s.short_gets,
		  (unsigned long long)s.calls_get);
	return 0;
}

/* Partial puts: each offers 1..50 bytes, so chunks are short (every
 * block says its length) and the schedule is cut by the caller. */
static int case_partial_puts(struct tst *t)
{
	static const uint64_t sizes[] = { 3000, 17, 4096 };
	struct sim_cfg c = { .p = params(256, 3, 2048, 480, 1.5),
			     .msgs = sizes, .nmsgs = 3, .put_pieces = 2,
			     .get_pieces = 2, .put_max = 50, .get_max = 700,
			     .wire_step = 24, .seed = 4 };

	return sim_run(t, &c, NULL);
}

/* 2, 3 and 4 buffers, with slow acks: never more chunks out than
 * buffers, never a landing buffer overwritten before it was copied out. */
static int case_buffers(struct tst *t)
{
	static const uint64_t sizes[] = { 200000, 3, 50000 };
	uint32_t n;

	for (n = 2; n <= 4; n++) {
		struct sim_cfg c = { .p = params(256, n, 1024, 240, 1.5),
				     .msgs = sizes, .nmsgs = 3,
				     .put_pieces = 2, .get_pieces = 3,
				     .get_max = 3000, .wire_step = 512,
				     .ack_delay = 20, .seed = n };
		struct sim s;

		tst_log(t, "%u buffers", n);
		if (sim_run(t, &c, &s))
			return -1;
		TST_CHECK(t, s.max_chunks_out == n,
			  "%u buffers: at most %llu chunks out (the pipeline "
			  "did not fill)",
			  n, (unsigned long long)s.max_chunks_out);
	}
	return 0;
}

/* The first message is a rendezvous: chunks are built (copied) while the
 * landing address is unknown, posted when it comes. */
static int case_landing_late(struct tst *t)
{
	static const uint64_t sizes[] = { 20000, 20000 };
	struct sim_cfg c = { .p = params(256, 3, 2048, 480, 1.5),
			     .msgs = sizes, .nmsgs = 2, .put_pieces = 1,
			     .get_pieces = 1, .landing_late = 50, .seed = 5 };

	return sim_run(t, &c, NULL);
}

/* ---- cases: block by block --------------------------------------------- */

struct two {
	struct spipe_params p;
	struct spipe_tx tx;
	struct spipe_rx rx;
	uint8_t *stage, *land, *src, *dst;
	struct rdmach_spipe_hdr h;
};

static int two_init(struct tst *t, struct two *w, struct spipe_params p,
		    uint64_t total)
{
	uint64_t i;
	int fresh;

	memset(t, 0, sizeof(*t));
	w->p = p;
	spipe_tx_init(&w->tx, &p);
	spipe_rx_init(&w->rx);
	w->stage = calloc(1, spipe_area_bytes(&p));
	w->land = calloc(1, spipe_area_bytes(&p));
	w->src = malloc(total);
	w->dst = calloc(1, total + 64);
	if (!w->stage || !w->land || !w->src || !w->dst)
		return tst_fail(t, "out of memory");
	for (i = 0; i < total; i++)
		w->src[i] = pat(i);
	TST_CHECK(t, !spipe_tx_open(&w->tx, total, &w->h), "open failed");
	TST_CHECK(t,
		  !spipe_rx_begin(&w->rx, &w->h, sizeof(w->h), &fresh) && fresh,
		  "begin failed");
	return 0;
}

static void two_free(struct two *w)
{
	free(w->stage);
	free(w->land);
	free(w->src);
	free(w->dst);
}

static void two_build(struct two *w, uint64_t from, uint64_t len,
		      struct spipe_chunk *ch)
{
	struct iovec v = { w->src + from, len };
	struct rdmach_iovc c;

	rdmach_iovc_init(&c, &v, 1);
	spipe_tx_build(&w->tx, w->stage, &c, len, ch);
	spipe_tx_posted(&w->tx, ch->g);
}

static int64_t two_take(struct two *w, uint64_t at, uint64_t room,
			uint64_t *ack)
{
	struct iovec v = { w->dst + at, room };
	struct rdmach_iovc c;

	rdmach_iovc_init(&c, &v, 1);
	return spipe_rx_take(&w->rx, w->land, &c, room, ack);
}

/* The adapter stops half-way through a chunk: the receiver takes exactly
 * the blocks whose flag word has landed, no byte more, and acks the chunk
 * only after its last block. */
static int case_mid_chunk(struct tst *t)
{
	struct spipe_params p = params(256, 3, 2048, 4 * 240, 1.5);
	struct spipe_chunk ch;
	struct two w;
	uint64_t ack, i, cut;
	int64_t n;
	int ret = -1;

	if (two_init(t, &w, p, 4 * 240))
		goto out;
	two_build(&w, 0, 4 * 240, &ch);
	if (ch.bytes != 4 * 256) {
		tst_fail(t, "chunk of %llu bytes",
			 (unsigned long long)ch.bytes);
		goto out;
	}
	/* every 8-byte step of the write: blocks appear whole, in order */
	for (cut = 0; cut <= ch.bytes; cut += 8) {
		uint64_t whole = cut / 256, got = w.rx.delivered;

		if (cut)
			memcpy(w.land + ch.off + cut - 8,
			       w.stage + ch.off + cut - 8, 8);
		n = two_take(&w, got, 4 * 240 - got, &ack);
		if (n < 0 || w.rx.delivered != whole * 240) {
			tst_fail(t, "after %llu bytes landed: %lld taken, %llu "
			     "delivered, want %llu", (unsigned long long)cut,
			     (long long)n,
			     (unsigned long long)w.rx.delivered,
			     (unsigned long long)(whole * 240));
			goto out;
		}
		if ((ack != 0) != (cut == ch.bytes && n > 0)) {
			tst_fail(t, "ack %llu after %llu bytes",
				 (unsigned long long)ack,
				 (unsigned long long)cut);
			goto out;
		}
	}
	for (i = 0; i < 4 * 240; i++) {
		if (w.dst[i] != pat(i)) {
			tst_fail(t, "byte %llu differs", (unsigned long long)i);
			goto out;
		}
	}
	if (!spipe_rx_msg_done(&w.rx) || w.rx.acked != 1) {
		tst_fail(t, "message not done / chunk not acked");
		goto out;
	}
	ret = 0;
out:
	two_free(&w);
	return ret;
}

/* After N chunks, a buffer holds the previous user's flags and payload:
 * the receiver waiting for chunk g never takes chunk g - N's block, even
 * when that payload is full of g's value. */
static int case_stale_flags(struct tst *t)
{
	struct spipe_params p = params(256, 2, 512, 240, 1.0);
	uint64_t total = 3 * 240, ack, g3 = 3;
	struct spipe_chunk ch;
	struct two w;
	int64_t n;
	int ret = -1, i;

	if (two_init(t, &w, p, total))
		goto out;
	/* chunk 1's payload is the u64 value 3 everywhere: chunk 3, which
	 * reuses its buffer, must not see it as a flag */
	for (i = 0; i < 240; i += 8)
		memcpy(w.src + i, &g3, 8);
	for (i = 0; i < 2; i++) {
		two_build(&w, (uint64_t)i * 240, 240, &ch);
		memcpy(w.land + ch.off, w.stage + ch.off, ch.bytes);
		spipe_tx_completed(&w.tx, ch.g);
	}
	n = two_take(&w, 0, total, &ack);
	if (n != 480 || ack != 2 || spipe_tx_ack(&w.tx, ack)) {
		tst_fail(t, "first two chunks: %lld, ack %llu", (long long)n,
		     (unsigned long long)ack);
		goto out;
	}
	/* chunk 3 built but not landed: buffer 1 holds chunk 1 */
	if (!spipe_tx_writable(&w.tx)) {
		tst_fail(t, "chunk 3 not writable after chunk 1 was acked");
		goto out;
	}
	two_build(&w, 480, 240, &ch);
	n = two_take(&w, 480, total, &ack);
	if (n != 0 || ack) {
		tst_fail(t, "a stale block was taken (%lld bytes)",
			 (long long)n);
		goto out;
	}
	memcpy(w.land + ch.off, w.stage + ch.off, ch.bytes);
	n = two_take(&w, 480, total - 480, &ack);
	if (n != 240 || ack != 3 || memcmp(w.dst + 480, w.src + 480, 240)) {
		tst_fail(t, "chunk 3 after landing: %lld", (long long)n);
		goto out;
	}
	ret = 0;
out:
	two_free(&w);
	return ret;
}

/* The sender stops at N chunks without acks, and at N chunks without
 * local completions. */
static int case_folding_gate(struct tst *t)
{
	struct spipe_params p = params(256, 3, 512, 240, 1.0);
	struct spipe_chunk ch;
	struct two w;
	int ret = -1, i;

	if (two_init(t, &w, p, 10 * 240))
		goto out;
	for (i = 0; i < 3; i++) {
		if (!spipe_tx_writable(&w.tx)) {
			tst_fail(t, "chunk %d not writable", i + 1);
			goto out;
		}
		two_build(&w, (uint64_t)i * 240, 240, &ch);
	}
	if (spipe_tx_writable(&w.tx)) {
		tst_fail(t, "chunk 4 writable with nothing acked");
		goto out;
	}
	spipe_tx_ack(&w.tx, 1);
	if (spipe_tx_writable(&w.tx)) {
		tst_fail(t,
			 "chunk 4 writable before chunk 1's write completed");
		goto out;
	}
	spipe_tx_completed(&w.tx, 1);
	if (!spipe_tx_writable(&w.tx)) {
		tst_fail(t,
			 "chunk 4 not writable after chunk 1 was acked and "
			 "done");
		goto out;
	}
	if (spipe_tx_ack(&w.tx, 4) != -EPROTO || spipe_tx_ack(&w.tx, 0)) {
		tst_fail(t,
			 "acks beyond what was posted accepted / old ones "
			 "refused");
		goto out;
	}
	ret = 0;
out:
	two_free(&w);
	return ret;
}

/* The schedule: C0 q^i in whole blocks up to a buffer; chunks_for agrees
 * with what the sender builds. */
static int case_schedule(struct tst *t)
{
	struct spipe_params p = params(256, 4, 4096, 1000, 1.5);
	uint64_t pay = 240, cap = 16 * 240, total = 50000, left = total, i;
	double target = 1000;
	struct spipe_chunk ch;
	struct two w;
	int ret = -1;

	if (two_init(t, &w, p, total))
		goto out;
	for (i = 0; left; i++) {
		uint64_t want = (uint64_t)ceil(target / pay) * pay;

		if (want > cap)
			want = cap;
		if (want > left)
			want = left;
		w.tx.acked = w.tx.done = w.tx.g;	/* never gated */
		two_build(&w, total - left, left, &ch);
		if (ch.len != want) {
			tst_fail(t, "chunk %llu: %llu bytes, want %llu",
			     (unsigned long long)i, (unsigned long long)ch.len,
			     (unsigned long long)want);
			goto out;
		}
		left -= ch.len;
		target *= 1.5;
	}
	if (spipe_chunks_for(&p, total) != i) {
		tst_fail(t, "chunks_for says %llu, the sender built %llu",
		     (unsigned long long)spipe_chunks_for(&p, total),
		     (unsigned long long)i);
		goto out;
	}
	/* O(log L) before the cap: 4080 bytes in 4 chunks of growth */
	if (spipe_chunks_for(&p, 1200 + 1680 + 2400 + 3600) != 4) {
		tst_fail(t, "chunks_for(growth) wrong");
		goto out;
	}
	ret = 0;
out:
	two_free(&w);
	return ret;
}

/* ---- cases: errors ---------------------------------------------------- */

/* A block's length rewritten under what was already read of it, in a
 * message announced over 4 GiB: -EPROTO (the difference wrapped to about
 * 4 GiB, under the bytes left, and the reader went on past the block). */
static int case_block_shrinks(struct tst *t)
{
	struct spipe_params p = params(256, 3, 2048, 480, 1.5);
	struct spipe_chunk ch;
	struct two w;
	uint64_t ack, info = 10;
	int64_t n1 = -1, n2 = -1;

	if (two_init(t, &w, p, 1000))
		goto out;
	two_build(&w, 0, 1000, &ch);
	memcpy(w.land + ch.off, w.stage + ch.off, ch.bytes);
	w.rx.total = 1ull << 33;	/* as an 8 GiB message's header says */
	n1 = two_take(&w, 0, 50, &ack);
	memcpy(w.land + ch.off + 256 - 16, &info, 8);
	n2 = two_take(&w, 50, 100, &ack);
out:
	two_free(&w);
	TST_CHECK(t, n1 == 50, "first part: %lld", (long long)n1);
	TST_CHECK(t, n2 == -EPROTO, "length 10 under 50 read: take returned "
		  "%lld", (long long)n2);
	return 0;
}

static int case_errors(struct tst *t)
{
	struct spipe_params p = params(256, 3, 2048, 480, 1.5);
	struct rdmach_spipe_hdr h2;
	struct spipe_chunk ch;
	struct two w;
	uint64_t ack, bad;
	int64_t n;
	int fresh, ret = -1;

	/* geometry checks */
	if (!spipe_params_check(&(struct spipe_params){ 100, 3, 2000, 1, 256 }) ||
	    !spipe_params_check(&(struct spipe_params){ 256, 1, 2048, 1, 256 }) ||
	    !spipe_params_check(&(struct spipe_params){ 256, 5, 2048, 1, 256 }) ||
	    !spipe_params_check(&(struct spipe_params){ 256, 3, 2000, 1, 256 }) ||
	    !spipe_params_check(&(struct spipe_params){ 256, 3, 2048, 1, 255 }) ||
	    !spipe_params_check(&(struct spipe_params){ 256, 3, 2048, 0, 256 }))
		return tst_fail(t, "a bad geometry passed spipe_params_check");
	if (two_init(t, &w, p, 1000))
		goto out;
	/* a corrupt info word (len beyond the block) mid-way */
	two_build(&w, 0, 1000, &ch);
	memcpy(w.land + ch.off, w.stage + ch.off, ch.bytes);
	bad = 241;
	memcpy(w.land + ch.off + 256 + 256 - 16, &bad, 8);
	n = two_take(&w, 0, 1000, &ack);
	if (n != 240) {	/* the first block is fine */
		tst_fail(t, "before the corrupt block: %lld", (long long)n);
		goto out;
	}
	n = two_take(&w, 240, 760, &ack);
	if (n != -EPROTO) {
		tst_fail(t, "corrupt length 241: take returned %lld",
			 (long long)n);
		goto out;
	}
	bad = 0;
	memcpy(w.land + ch.off + 256 + 256 - 16, &bad, 8);
	if (two_take(&w, 240, 760, &ack) != -EPROTO) {
		tst_fail(t, "corrupt length 0 accepted");
		goto out;
	}
	/* a header for the wrong chunk, another geometry, an old id */
	h2 = w.h;
	h2.id = 2;
	h2.first_chunk = 7;
	if (spipe_rx_begin(&w.rx, &h2, sizeof(h2), &fresh) != -EPROTO) {
		tst_fail(t, "header with the wrong first chunk accepted");
		goto out;
	}
	if (spipe_rx_begin(&w.rx, &w.h, sizeof(w.h), &fresh) || fresh) {
		tst_fail(t, "the same header again refused or fresh");
		goto out;
	}
	if (spipe_rx_begin(&w.rx, &w.h, 8, &fresh) != -EPROTO) {
		tst_fail(t, "short header accepted");
		goto out;
	}
	ret = 0;
out:
	two_free(&w);
	if (ret)
		return ret;
	/* a chunk with more bytes than its message */
	if (two_init(t, &w, p, 240))
		return -1;
	w.h.total = 100;	/* as the receiver will be told */
	spipe_rx_init(&w.rx);
	if (spipe_rx_begin(&w.rx, &w.h, sizeof(w.h), &fresh)) {
		two_free(&w);
		return tst_fail(t, "begin failed");
	}
	two_build(&w, 0, 240, &ch);
	memcpy(w.land + ch.off, w.stage + ch.off, ch.bytes);
	n = two_take(&w, 0, 240, &ack);
	two_free(&w);
	TST_CHECK(t, n == -EPROTO,
		  "a block beyond its message: take returned %lld",
		  (long long)n);
	/* a geometry change on a later message */
	if (two_init(t, &w, p, 240))
		return -1;
	two_build(&w, 0, 240, &ch);
	memcpy(w.land + ch.off, w.stage + ch.off, ch.bytes);
	n = two_take(&w, 0, 240, &ack);
	h2 = w.h;
	h2.id = 2;
	h2.first_chunk = 2;
	h2.buf_size = 4096;
	ret = spipe_rx_begin(&w.rx, &h2, sizeof(h2), &fresh);
	two_free(&w);
	TST_CHECK(t, n == 240 && ret == -EPROTO, "geometry change accepted");
	return 0;
}

/* ---- cases: the model and the tuning file ------------------------------- */

static int case_derive(struct tst *t)
{
	struct tune_machine m;
	struct tune_settings s;

	tune_machine_default(&m);
	TST_CHECK(t, !tune_machine_check(&m), "defaults fail the check");
	tune_derive(&m, 4096, 16384, &s);
	TST_CHECK(t, !spipe_params_check(&s.sp), "derived params invalid");
	TST_CHECK(t, s.sp.block == 4096 && s.sp.nbufs == 3, "block %u, N %u",
		  s.sp.block, s.sp.nbufs);
	/* C0 = 8e9 x 2 x 1.5e-6 = 24000 -> 6 blocks of 4080 */
	TST_CHECK(t, s.sp.c0 == 6 * 4080, "c0 %llu",
		  (unsigned long long)s.sp.c0);
	/* q = 3e9 / 1.5e9 = 2 */
	TST_CHECK(t, s.sp.q256 == 512, "q256 %u", s.sp.q256);
	TST_CHECK(t, s.sp.buf_size == 256u << 10, "buf %llu",
		  (unsigned long long)s.sp.buf_size);
	TST_CHECK(t, s.sp_threshold >= 65536 && s.sp_threshold <= (1u << 20),
		  "threshold %llu", (unsigned long long)s.sp_threshold);
	/* clamps */
	m.bnet = 1e6;
	tune_derive(&m, 1024, 16384, &s);
	TST_CHECK(t, s.sp.q256 == 4 * 256 && s.sp.block == 4096,
		  "q not clamped to 4 (%u) or block not 4K with a 1K MTU",
		  s.sp.q256);
	m.bnet = 1e11;
	tune_derive(&m, 4096, 16384, &s);
	TST_CHECK(t,
		  s.sp.q256 == (uint32_t)(1.2 * 256 + 0.5) &&
		  s.sp.buf_size == 1u << 20,
		  "q not clamped to 1.2 (%u) or buffer not capped (%llu)",
		  s.sp.q256, (unsigned long long)s.sp.buf_size);
	m.bcopy[TUNE_COPY_SMALL] = 1e13;	/* C0 beyond a buffer */
	tune_derive(&m, 4096, 16384, &s);
	TST_CHECK(t, s.sp.c0 <= spipe_buf_payload(&s.sp), "c0 beyond a buffer");
	return 0;
}

static int case_model(struct tst *t)
{
	struct tune_machine m;
	struct tune_settings s;
	uint64_t len;

	tune_machine_default(&m);
	tune_derive(&m, 4096, 16384, &s);
	for (len = 64u << 10; len <= (16u << 20); len *= 4) {
		double sp = tune_t_spipe(&m, &s.sp, len);
		double hit = tune_t_zcopy(&m, len, 0);
		double miss = tune_t_zcopy(&m, len, 2);
		double ring = tune_t_ring(&m, len, 16384);

		TST_CHECK(t,
			  sp > (double)len / m.bnet && sp < miss &&
			  hit < miss && sp < ring,
			  "%llu B: spipe %.1f us, zcopy hit %.1f, miss %.1f, "
			  "ring %.1f",
			  (unsigned long long)len, sp * 1e6, hit * 1e6,
			  miss * 1e6, ring * 1e6);
		/* Denis: within a few % of the wire above 64K */
		TST_CHECK(t, sp < 1.08 * hit,
			  "%llu B: spipe %.1f us vs zero-copy hit %.1f us",
			  (unsigned long long)len, sp * 1e6, hit * 1e6);
	}
	TST_CHECK(t, fabs(tune_t_reg(&m, 4096) - (68e-6 + 4096 / 20e9)) < 1e-12,
		  "t_reg wrong");
	return 0;
}

static int case_cache_file(struct tst *t)
{
	struct tune_machine m, r;
	struct tune_key k, k2;
	char buf[1024], bad[2048], ver[32];
	const char *p;
	int n;

	tune_machine_default(&m);
	m.measure_s = 0.0123;
	m.bcopy[TUNE_COPY_MID] = 1.23456789e9;
	tune_key_local(&k, "rxe0", 1);
	TST_CHECK(t, k.kernel[0] && k.cpu[0] && k.host[0], "empty key fields");
	n = tune_format(&m, &k, buf, sizeof(buf));
	TST_CHECK(t, n > 0, "format failed");
	TST_CHECK(t, tune_parse(buf, &k, &r) == 0,
		  "parse of its own output failed");
	TST_CHECK(t,
		  r.bcopy[TUNE_COPY_MID] == m.bcopy[TUNE_COPY_MID] &&
		  r.lat_reg == m.lat_reg && r.gap == m.gap &&
		  r.measure_s == m.measure_s,
		  "values changed in the round trip");
	k2 = k;
	snprintf(k2.kernel, sizeof(k2.kernel), "other");
	TST_CHECK(t, tune_parse(buf, &k2, &r) == -ESTALE,
		  "another kernel accepted");
	k2 = k;
	k2.port = 2;
	TST_CHECK(t, tune_parse(buf, &k2, &r) == -ESTALE,
		  "another port accepted");
	snprintf(k2.device, sizeof(k2.device), "mlx5_0");
	TST_CHECK(t, tune_parse(buf, &k2, &r) == -ESTALE,
		  "another device accepted");
	snprintf(ver, sizeof(ver), "version=%d\n", TUNE_VERSION);
	p = strstr(buf, ver);
	TST_CHECK(t, p, "no %s in the file", ver);
	snprintf(bad, sizeof(bad), "%.*sversion=%d\n%s", (int)(p - buf), buf,
		 TUNE_VERSION + 1, p + strlen(ver));
	TST_CHECK(t, tune_parse(bad, &k, &r) == -ESTALE,
		  "another version accepted");
	snprintf(bad, sizeof(bad), "%sgarbage line\n", buf);
	TST_CHECK(t, tune_parse(bad, &k, &r) == -EINVAL,
		  "a garbage line accepted");
	snprintf(bad, sizeof(bad), "%s", buf);
	memcpy(strstr(bad, "bnet="), "bnex=", 5);
	TST_CHECK(t, tune_parse(bad, &k, &r) == -EINVAL,
		  "a missing figure accepted");
	snprintf(bad, sizeof(bad), "%sbnet=-5\n", buf);
	TST_CHECK(t, tune_parse(bad, &k, &r) == -EINVAL,
		  "a negative figure accepted");
	TST_CHECK(t, tune_format(&m, &k, buf, 64) == -ENOSPC, "short buffer");
	return 0;
}

static int case_measure_copy(struct tst *t)
{
	struct tune_machine m;
	struct timespec a, b;
	void *region;
	double dt;
	int i;

	memset(&m, 0, sizeof(m));
	clock_gettime(CLOCK_MONOTONIC, &a);
	region = tune_region_alloc();
	TST_CHECK(t, region, "no memory for the region");
	tune_measure_copy(&m, region, 0.05);
	tune_region_free(region);
	clock_gettime(CLOCK_MONOTONIC, &b);
	dt = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) /
	     1e9;
	for (i = 0; i < TUNE_COPY_NUM; i++)
		TST_CHECK(t, m.bcopy[i] > 1e7, "B_copy at %llu: %.3g B/s",
			  (unsigned long long)tune_copy_sizes[i], m.bcopy[i]);
	printf("  B_copy 64K %.2f GB/s, 1M %.2f GB/s, 1M from memory %.2f "
	       "GB/s, measured in %.1f ms (region included)\n",
	       m.bcopy[0] / 1e9, m.bcopy[1] / 1e9, m.bcopy[2] / 1e9, dt * 1e3);
	TST_CHECK(t, dt < 2.0, "the copy measurement took %.2f s", dt);
	return 0;
}

static const struct tst_case cases[] = {
	{ "spipe_edges", 1, case_edges, TST_UNIT, NULL, { 0 } },
	{ "spipe_iovec_split", 1, case_iovec_split, TST_UNIT, NULL, { 0 } },
	{ "spipe_partial_gets", 1, case_partial_gets, TST_UNIT, NULL, { 0 } },
	{ "spipe_partial_puts", 1, case_partial_puts, TST_UNIT, NULL, { 0 } },
	{ "spipe_buffers_2_3_4", 1, case_buffers, TST_UNIT, NULL, { 0 } },
	{ "spipe_landing_late", 1, case_landing_late, TST_UNIT, NULL, { 0 } },
	{ "spipe_mid_chunk", 1, case_mid_chunk, TST_UNIT, NULL, { 0 } },
	{ "spipe_stale_flags", 1, case_stale_flags, TST_UNIT, NULL, { 0 } },
	{ "spipe_folding_gate", 1, case_folding_gate, TST_UNIT, NULL, { 0 } },
	{ "spipe_schedule", 1, case_schedule, TST_UNIT, NULL, { 0 } },
	{ "spipe_errors", 1, case_errors, TST_UNIT, NULL, { 0 } },
	{ "spipe_block_shrinks", 1, case_block_shrinks, TST_UNIT, NULL, { 0 } },
	{ "tune_derive", 1, case_derive, TST_UNIT, NULL, { 0 } },
	{ "tune_model", 1, case_model, TST_UNIT, NULL, { 0 } },
	{ "tune_cache_file", 1, case_cache_file, TST_UNIT, NULL, { 0 } },
	{ "tune_measure_copy", 1, case_measure_copy, TST_UNIT, NULL, { 0 } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, cases,
			(int)(sizeof(cases) / sizeof(cases[0])));
}
