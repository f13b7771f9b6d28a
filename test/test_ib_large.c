/*
 * test_ib_large.c - the per-message protocol choice of rdma_ib
 * (rdma_ib/ib_large.h) without a device: every rule of RDMACH_LARGE=auto,
 * the forced modes, the learning per size class (reuse predicted, payoff,
 * decay) and the counters, over a registration cache with a fake
 * transport and real memory (mmap/munmap drive the ghosts).
 * Cases run under the test kit (TST_UNIT, test/lib/tst.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "lib/tst.h"

#ifdef RDMACH_HAVE_IB
#include "mem/rcache.h"
#include "rdma_ib/ib_large.h"
#include "rdma_ib/ib_zcopy.h"

#define K64 (64u << 10)
#define LEN (256u << 10)

static int fake_reg(void *arg, void *addr, size_t len, void **handle)
{
	*handle = addr;
	return 0;
}

static int fake_dereg(void *arg, void *handle)
{
	return 0;
}

static const struct rdmach_rcache_ops fake_ops = { fake_reg, fake_dereg };

struct fix {
	struct ib_large lg;
	struct rdmach_rcache *rc;
	rdmach_stats_t st;
};

/* Built-in figures (registering costs more than copying), zero-copy and
 * the superpipeline from 64K. */
static int fix_init(struct fix *f, enum ib_large_mode mode)
{
	struct rdmach_rcache_config cfg = { 1, 1000, 1ull << 32, "test", NULL };

	memset(f, 0, sizeof(*f));
	f->lg.mode = mode;
	tune_machine_default(&f->lg.tune.m);
	tune_derive(&f->lg.tune.m, 4096, 16384, &f->lg.derived);
	f->lg.sp = f->lg.derived.sp;
	f->lg.sp_threshold = K64;
	f->lg.zc_threshold = K64;
	f->lg.zc_enabled = 1;
	f->lg.min = K64;
	f->lg.ring_chunk = 16384;
	if (rdmach_rcache_ghosts_create(64, &f->lg.ghosts) ||
	    rdmach_rcache_create(&fake_ops, NULL, &cfg, &f->rc))
		return -1;
	return 0;
}

static void fix_free(struct fix *f)
{
	rdmach_rcache_ghosts_destroy(f->lg.ghosts);
	rdmach_rcache_destroy(f->rc);
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* One put of buf: choose, "start" (zero-copy registers through the cache
 * as ib_zcopy does), count.  Returns the choice. */
static struct ib_large_choice put(struct fix *f, void *buf, size_t len,
				  int sp_room)
{
	struct iovec v = { buf, len };
	struct ib_large_choice ch;

	ib_large_choose(&f->lg, f->rc, sp_room, &v, 1, len, &ch);
	if (ch.proto == IB_PROTO_ZCOPY) {
		struct rdmach_rcache_region *r;

		if (!rdmach_rcache_get(f->rc, buf, len, &r))
			rdmach_rcache_put(f->rc, r);
	}
	ib_large_started(&f->lg, &ch, &v, 1, len, &f->st);
	return ch;
}

#define WANT(t, ch, p, w, what)                                         \
	TST_CHECK(t, (ch).proto == (p) && (ch).why == (w),              \
		  "%s: protocol %d why %d, want %d / %d", what, (ch).proto, \
		  (ch).why, p, w)

/* Rules 1, 2, 6 and release: new -> superpipeline, again -> zero-copy
 * (registering), then cache hits; unmapped and mapped again -> new. */
static int t_rules(struct tst *t)
{
	struct fix f;
	struct ib_large_choice ch;
	uint8_t *b;

	TST_CHECK(t, !fix_init(&f, IB_LARGE_AUTO) && (b = map(LEN)), "setup");
	ch = put(&f, b, LEN, 1);
	WANT(t, ch, IB_PROTO_SPIPE, IB_WHY_NEW, "first send");
	ch = put(&f, b, LEN, 1);
	WANT(t, ch, IB_PROTO_ZCOPY, IB_WHY_REUSE, "second send");
	ch = put(&f, b, LEN, 1);
	WANT(t, ch, IB_PROTO_ZCOPY, IB_WHY_HIT, "third send");
	ch = put(&f, b + 4096, 8192 + K64, 1);
	WANT(t, ch, IB_PROTO_ZCOPY, IB_WHY_HIT, "a part of it");
	munmap(b, LEN);
	b = map(LEN);	/* likely the same address: new memory either way */
	ch = put(&f, b, LEN, 1);
	WANT(t, ch, IB_PROTO_SPIPE, IB_WHY_NEW, "after munmap + mmap");
	/* no room for the superpipeline's buffers: the ring */
	munmap(b, LEN);
	b = map(LEN);
	ch = put(&f, b, LEN, 0);
	WANT(t, ch, IB_PROTO_RING, IB_WHY_BELOW, "no superpipeline memory");
	TST_CHECK(t, f.st.why_new == 2 && f.st.why_reuse == 1 &&
		  f.st.why_hit == 2 && f.st.why_below == 1 &&
		  f.st.large_ring_msgs == 1 && f.st.large_ring_bytes == LEN,
		  "counters");
	munmap(b, LEN);
	fix_free(&f);
	return 0;
}

/* A small header beside the payload does not decide. */
static int t_header(struct tst *t)
{
	struct fix f;
	struct ib_large_choice ch;
	struct rdmach_rcache_region *r;
	uint8_t hdr[48], *b;
	struct iovec v[2];

	TST_CHECK(t, !fix_init(&f, IB_LARGE_AUTO) && (b = map(LEN)), "setup");
	TST_CHECK(t, !rdmach_rcache_get(f.rc, b, LEN, &r), "get");
	rdmach_rcache_put(f.rc, r);
	v[0].iov_base = hdr;
	v[0].iov_len = sizeof(hdr);
	v[1].iov_base = b;
	v[1].iov_len = LEN;
	ib_large_choose(&f.lg, f.rc, 1, v, 2, LEN + sizeof(hdr), &ch);
	WANT(t, ch, IB_PROTO_ZCOPY, IB_WHY_HIT, "header + registered payload");
	/* pieces all small: all of them decide */
	v[1].iov_len = 40;
	ib_large_choose(&f.lg, f.rc, 1, v, 2, 88, &ch);
	TST_CHECK(t, ch.probe == RDMACH_RCACHE_NEW, "small pieces: probe %d",
		  ch.probe);
	munmap(b, LEN);
	fix_free(&f);
	return 0;
}

/* Thresholds and RDMACH_ZCOPY=0; the forced modes. */
static int t_thresholds_forced(struct tst *t)
{
	static const struct {
		enum ib_large_mode mode;
		size_t len;
		enum ib_large_proto proto;
		enum ib_large_why why;
	} want[] = {
		{ IB_LARGE_AUTO, 32u << 10, IB_PROTO_RING, IB_WHY_BELOW },
		{ IB_LARGE_ZCOPY, LEN, IB_PROTO_ZCOPY, IB_WHY_FORCED },
		{ IB_LARGE_ZCOPY, 32u << 10, IB_PROTO_RING, IB_WHY_FORCED },
		{ IB_LARGE_SPIPE, LEN, IB_PROTO_SPIPE, IB_WHY_FORCED },
		{ IB_LARGE_SPIPE, 32u << 10, IB_PROTO_RING, IB_WHY_FORCED },
		{ IB_LARGE_PIPELINE, LEN, IB_PROTO_RING, IB_WHY_FORCED },
	};
	struct ib_large_choice ch;
	struct fix f;
	uint8_t *b = map(LEN);
	size_t i;

	TST_CHECK(t, b, "mmap");
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		TST_CHECK(t, !fix_init(&f, want[i].mode), "setup");
		ch = put(&f, b, want[i].len, 1);
		fix_free(&f);
		TST_CHECK(t, ch.proto == want[i].proto && ch.why == want[i].why,
			  "mode %s, %zu bytes: protocol %d why %d",
			  ib_large_mode_names[want[i].mode], want[i].len,
			  ch.proto, ch.why);
	}
	/* zero-copy off: a reused buffer still goes by copy */
	TST_CHECK(t, !fix_init(&f, IB_LARGE_AUTO), "setup");
	f.lg.zc_enabled = 0;
	put(&f, b, LEN, 1);
	ch = put(&f, b, LEN, 1);
	WANT(t, ch, IB_PROTO_SPIPE, IB_WHY_BELOW, "RDMACH_ZCOPY=0, seen");
	fix_free(&f);
	munmap(b, LEN);
	return 0;
}

/* Rule 3: a size class whose sends mostly repeat buffers predicts reuse
 * for a new one. */
static int t_predicted(struct tst *t)
{
	struct fix f;
	struct ib_large_choice ch;
	uint8_t *b[2], *c;
	int i;

	TST_CHECK(t, !fix_init(&f, IB_LARGE_AUTO) && (b[0] = map(LEN)) &&
		  (b[1] = map(LEN)) && (c = map(LEN)), "setup");
	for (i = 0; i < 10; i++)
		put(&f, b[i & 1], LEN, 1);	/* 2 new, 8 repeats */
	ch = put(&f, c, LEN, 1);
	WANT(t, ch, IB_PROTO_ZCOPY, IB_WHY_PREDICTED, "a new buffer in a "
	     "reusing class");
	/* another size class knows nothing of it */
	munmap(c, LEN);
	c = map(4 * LEN);
	ch = put(&f, c, 4 * LEN, 1);
	WANT(t, ch, IB_PROTO_SPIPE, IB_WHY_NEW, "another size class");
	munmap(b[0], LEN);
	munmap(b[1], LEN);
	munmap(c, 4 * LEN);
	fix_free(&f);
	return 0;
}

/* Rules 2 and 5: buffers sent exactly twice; the second sends register,
 * nothing reuses the registrations: after 8, a seen buffer goes by copy. */
static int t_payoff(struct tst *t)
{
	struct fix f;
	struct ib_large_choice ch;
	int i;

	TST_CHECK(t, !fix_init(&f, IB_LARGE_AUTO), "setup");
	for (i = 0; i < 12; i++) {
		uint8_t *b = map(LEN);

		TST_CHECK(t, b, "mmap");
		ch = put(&f, b, LEN, 1);
		WANT(t, ch, IB_PROTO_SPIPE, IB_WHY_NEW, "first of two");
		ch = put(&f, b, LEN, 1);
		if (i < 8)
			WANT(t, ch, IB_PROTO_ZCOPY, IB_WHY_REUSE,
			     "second, early");
		else
			WANT(t, ch, IB_PROTO_SPIPE, IB_WHY_NO_PAYOFF,
			     "second, after 8 unpaid registrations");
		munmap(b, LEN);
	}
	TST_CHECK(t, f.st.why_no_payoff == 4 && f.st.why_reuse == 8,
		  "counters");
	fix_free(&f);
	return 0;
}

/* Rule 4 on a machine where registering is free, stopped by the payoff;
 * and the counts decay, so the class learns again. */
static int t_model_decay(struct tst *t)
{
	struct fix f;
	struct ib_large_choice ch;
	uint8_t *b, *k;
	int i;

	TST_CHECK(t, !fix_init(&f, IB_LARGE_AUTO), "setup");
	f.lg.tune.m.lat_reg = 1e-9;
	f.lg.tune.m.breg = 1e15;
	for (i = 0; i < 10; i++) {
		b = map(LEN);
		TST_CHECK(t, b, "mmap");
		ch = put(&f, b, LEN, 1);
		if (i < 8)
			WANT(t, ch, IB_PROTO_ZCOPY, IB_WHY_MODEL, "free "
			     "registration, new buffer");
		else
			WANT(t, ch, IB_PROTO_SPIPE, IB_WHY_NO_PAYOFF, "free "
			     "registration, no payoff");
		munmap(b, LEN);
	}
	/* the application starts reusing one buffer: hits pile up, the
	 * class's payoff comes back, new buffers go by the model again */
	k = map(LEN);
	TST_CHECK(t, k, "mmap");
	put(&f, k, LEN, 1);	/* new: no payoff -> superpipeline */
	put(&f, k, LEN, 1);	/* seen: no payoff -> superpipeline */
	{	/* register it (a receive into it would) */
		struct rdmach_rcache_region *r;

		TST_CHECK(t, !rdmach_rcache_get(f.rc, k, LEN, &r), "get");
		rdmach_rcache_put(f.rc, r);
	}
	for (i = 0; i < 300; i++) {
		ch = put(&f, k, LEN, 1);
		WANT(t, ch, IB_PROTO_ZCOPY, IB_WHY_HIT, "registered buffer");
	}
	b = map(LEN);
	TST_CHECK(t, b, "mmap");
	ch = put(&f, b, LEN, 1);
	TST_CHECK(t, ch.proto == IB_PROTO_ZCOPY, "after 300 hits a new "
		  "buffer does not go zero-copy (why %d)", ch.why);
	munmap(b, LEN);
	munmap(k, LEN);
	fix_free(&f);
	return 0;
}

/* A class that stopped registering (allocate-send-free) learns that its
 * buffers now come back (a reuse phase) and goes zero-copy again. */
static int t_recover(struct tst *t)
{
	struct fix f;
	struct ib_large_choice ch;
	uint8_t *b;
	int i, zc_at = -1;

	TST_CHECK(t, !fix_init(&f, IB_LARGE_AUTO), "setup");
	f.lg.tune.m.lat_reg = 1e-9;	/* the model registers new buffers */
	f.lg.tune.m.breg = 1e15;
	for (i = 0; i < 12; i++) {
		b = map(LEN);
		TST_CHECK(t, b, "mmap");
		put(&f, b, LEN, 1);
		munmap(b, LEN);
	}
	ch = put(&f, (b = map(LEN)), LEN, 1);
	WANT(t, ch, IB_PROTO_SPIPE, IB_WHY_NO_PAYOFF, "after the allocate-send-"
	     "free phase");
	for (i = 0; i < 20 && zc_at < 0; i++) {
		ch = put(&f, b, LEN, 1);
		if (ch.proto == IB_PROTO_ZCOPY)
			zc_at = i;
	}
	TST_CHECK(t, zc_at >= 0 && zc_at <= 8, "reuse phase: zero-copy again "
		  "after %d sends", zc_at);
	ch = put(&f, b, LEN, 1);
	WANT(t, ch, IB_PROTO_ZCOPY, IB_WHY_HIT, "then cache hits");
	munmap(b, LEN);
	fix_free(&f);
	return 0;
}

/* A rendezvous packet is read from the ring once: the peer rewriting its
 * total (and segment) after the receiver met it changes nothing, neither
 * whether a get stops at it nor what is read (the packet was checked in
 * the ring, then its fields loaded there again). */
static int t_zc_rndv_once(struct tst *t)
{
	struct ib_zc_conn zcc;
	struct ib_zc_ctl pkt;
	uint32_t len = (uint32_t)rdmach_rndv_size(1);
	int a, b;

	memset(&zcc, 0, sizeof(zcc));
	memset(&pkt, 0, sizeof(pkt));
	pkt.h.id = 1;
	pkt.h.total = 100;
	pkt.h.nsegs = 1;
	pkt.s[0].addr = 4096;
	pkt.s[0].len = 100;
	/* the records come with the first zero-copy message */
	TST_CHECK(t, !zcc.m, "records before any zero-copy message");
	a = ib_zc_get_stops(&zcc, &pkt, len, 50);
	pkt.h.total = pkt.s[0].len = 10;	/* the peer rewrites it */
	b = ib_zc_get_stops(&zcc, &pkt, len, 50);
	TST_CHECK(t, a == 1 && b == 1, "a get with room for 50 of 100 "
		  "bytes: stops %d, then %d after the total became 10", a, b);
	TST_CHECK(t, zcc.m && zcc.m->rx_pkt.h.total == 100 &&
		  zcc.m->rx_pkt.s[0].len == 100, "the copy changed: total %llu",
		  zcc.m ? (unsigned long long)zcc.m->rx_pkt.h.total : 0ull);
	ib_zc_conn_release(&zcc);
	return 0;
}

static const struct tst_case cases[] = {
	{ "large_recover_after_no_payoff", 1, t_recover, TST_UNIT, NULL,
	  { 0 } },
	{ "large_rules", 1, t_rules, TST_UNIT, NULL, { 0 } },
	{ "zcopy_rndv_read_once", 1, t_zc_rndv_once, TST_UNIT, NULL, { 0 } },
	{ "large_header_piece", 1, t_header, TST_UNIT, NULL, { 0 } },
	{ "large_thresholds_forced", 1, t_thresholds_forced, TST_UNIT, NULL,
	  { 0 } },
	{ "large_predicted", 1, t_predicted, TST_UNIT, NULL, { 0 } },
	{ "large_payoff", 1, t_payoff, TST_UNIT, NULL, { 0 } },
	{ "large_model_decay", 1, t_model_decay, TST_UNIT, NULL, { 0 } },
};
#else
static int t_no_ib(struct tst *t)
{
	return tst_skip(t, "built without ib");
}

static const struct tst_case cases[] = {
	{ "large", 1, t_no_ib, TST_UNIT, NULL, { 0 } },
};
#endif

int main(int argc, char **argv)
{
	return tst_main(argc, argv, cases,
			(int)(sizeof(cases) / sizeof(cases[0])));
}
