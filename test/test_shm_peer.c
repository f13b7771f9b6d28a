/*
 * test_shm_peer - a hostile local peer (rdma_shm): rank 1 writes straight
 * into the rings and the copy area it has in rank 0's segment, the way a
 * second rank of the same job could, and rank 0 must report -EPROTO (or
 * ignore what changed after it was read) - never crash, copy past its
 * rings, or wait forever.  The unit cases map a segment whose header was
 * rewritten, and try to resize a segment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/tl.h"
#include "lib/tst.h"
#include "proto/pkt.h"
#include "rdma_shm/shm_conn.h"
#include "rdma_shm/shm_ring.h"
#include "rdma_shm/shm_seg.h"

#define HUGE_GET (64u << 20)	/* a get far larger than any segment */

/* Connect with env (name, value, ..., NULL): the shm connection to the
 * other rank, or NULL with *ret set. */
static rdmach_conn_t *connect_env(struct tst *t, const char *const *env,
				  int *ret)
{
	return tst_connect_env(t, env, "shm", ret);
}

/* The hostile writer: a packet of type and header len, payload plen bytes
 * of payload, numbered seq, at the head of its ring `ring` in the victim's
 * segment.  Returns where it lies. */
static uint8_t *raw_post(rdmach_conn_t *c, int ring, unsigned type,
			 uint32_t len, const void *payload, size_t plen,
			 uint32_t seq)
{
	struct shm_conn *sc = c->priv;
	struct shm_tx_ring *r = &sc->tx[ring];
	uint8_t *p = r->base + (r->head & r->mask);

	if (!(sc->tx_hello & 1u << ring)) {	/* hello, as a put says it */
		atomic_store_explicit(shm_ring_hello(sc->tx_ctrl, ring),
				      shm_hdr_make(seq, RDMACH_PKT_HELLO, 0),
				      memory_order_release);
		sc->tx_hello |= 1u << ring;
	}
	shm_tx_space_refresh(sc, r);
	memcpy(p + SHM_HDR, payload, plen);
	atomic_store_explicit((_Atomic uint64_t *)(void *)p,
			      shm_hdr_make(seq, type, len), memory_order_release);
	r->head += shm_pkt_span(plen);
	return p;
}

/* The next packet number of the hostile writer (it posts by hand). */
static uint32_t raw_seq(rdmach_conn_t *c)
{
	struct shm_conn *sc = c->priv;
	uint32_t s = sc->tx_seq;

	sc->tx_seq = shm_seq_next(s);
	return s;
}

/* Get into buf until something comes, an error, or ms pass. */
static ssize_t get_wait(rdmach_conn_t *c, void *buf, size_t len, unsigned ms)
{
	uint64_t end = rdmach_now_ns() + (uint64_t)ms * 1000000u;
	struct iovec iov = { buf, len };
	ssize_t n;

	do {
		n = rdmach_get(c, &iov, 1);
		if (n)
			return n;
	} while (rdmach_now_ns() < end);
	return 0;
}

static const char *const plain_env[] = { "RDMACH_SHM_CMA", "0",
	"RDMACH_SHM_PIPE", "0", NULL };
static const char *const pipe_env[] = { "RDMACH_SHM_CMA", "0", NULL };

/* The writer's copy area in the victim's segment: slot 0 gets len bytes
 * of pat and its flag len.  Returns the flag. */
static _Atomic uint64_t *raw_chunk(rdmach_conn_t *c, const uint8_t *pat,
				   uint64_t len)
{
	struct shm_conn *sc = c->priv;
	struct shm_pipe *pp = &sc->tx_pipe;
	struct shm_pipe_flag *f = &pp->flags[pp->next & pp->slot_mask];

	memcpy(pp->area + (pp->next & pp->slot_mask) * pp->slot, pat, len);
	atomic_store_explicit(&f->len, len, memory_order_release);
	return &f->len;
}

/* A copy-area message of total bytes announced by hand. */
static void raw_pipe_pkt(rdmach_conn_t *c, int ring, uint64_t total)
{
	struct shm_pipe_pkt pkt = { .total = total };

	raw_post(c, ring, RDMACH_PKT_PIPE, sizeof(pkt), &pkt, sizeof(pkt),
		 raw_seq(c));
}

/* Has the hostile writer a copy area in the victim's segment? */
static int has_pipe(struct tst *t, rdmach_conn_t *c)
{
	struct shm_conn *sc = c->priv;

	return t->rank == 0 || sc->tx_pipe.slot >= 4096;
}

/* connect_env, with a copy area for the hostile writer */
static rdmach_conn_t *connect_pipe(struct tst *t, const char *const *env,
				   int *ret)
{
	rdmach_conn_t *c = connect_env(t, env, ret);

	if (c && !has_pipe(t, c)) {
		*ret = tst_fail(t, "no copy area");
		return NULL;
	}
	return c;
}

#define REFETCH_LEN 4000u

/* The hostile writer posts REFETCH_LEN bytes of pat: returns the word
 * that says how many, and in *shrunk that word saying 10. */
typedef _Atomic uint64_t *refetch_post_fn(rdmach_conn_t *c, const uint8_t *pat,
					  uint64_t *shrunk);

/* ... as one data packet */
static _Atomic uint64_t *post_packet(rdmach_conn_t *c, const uint8_t *pat,
				     uint64_t *shrunk)
{
	uint32_t seq = raw_seq(c);
	uint8_t *p = raw_post(c, SHM_MAIN, RDMACH_PKT_DATA, REFETCH_LEN, pat,
			      REFETCH_LEN, seq);

	*shrunk = shm_hdr_make(seq, RDMACH_PKT_DATA, 10);
	return (_Atomic uint64_t *)(void *)p;
}

/* ... as the first chunk of a copy-area message of twice that */
static _Atomic uint64_t *post_chunk(rdmach_conn_t *c, const uint8_t *pat,
				    uint64_t *shrunk)
{
	raw_pipe_pkt(c, SHM_MAIN, 2 * REFETCH_LEN);
	*shrunk = 10;
	return raw_chunk(c, pat, REFETCH_LEN);
}

/* ... as a rendezvous naming pat (the writer's memory) */
static _Atomic uint64_t *post_rndv(rdmach_conn_t *c, const uint8_t *pat,
				   uint64_t *shrunk)
{
	struct {
		struct rdmach_rndv_hdr h;
		struct rdmach_rndv_seg s[1];
	} d;
	uint8_t *p;

	memset(&d, 0, sizeof(d));
	d.h.id = 1;
	d.h.total = REFETCH_LEN;
	d.h.nsegs = 1;
	d.s[0].addr = (uint64_t)(uintptr_t)pat;
	d.s[0].len = REFETCH_LEN;
	p = raw_post(c, SHM_MAIN, RDMACH_PKT_RNDV, sizeof(d), &d, sizeof(d),
		     raw_seq(c));
	*shrunk = 10;
	return (_Atomic uint64_t *)(void *)(p + SHM_HDR +
					    offsetof(struct rdmach_rndv_hdr,
						     total));
}

/* The victim has read 100 of the REFETCH_LEN bytes when the writer
 * rewrites the word that announced them to say 10: the rest of the get
 * must still be the 3900 bytes announced (the word read once), not a copy
 * from far past the ring or the slot (10 - 100 wrapped). */
static int refetch_case(struct tst *t, const char *const *env,
			refetch_post_fn *post, const char *what)
{
	uint8_t pat[REFETCH_LEN], *buf;
	_Atomic uint64_t *word = NULL;
	uint64_t shrunk = 0;
	rdmach_conn_t *c;
	ssize_t n;
	int ret;

	c = connect_env(t, env, &ret);
	if (!c)
		return ret;
	if (post == post_chunk && !has_pipe(t, c))
		return tst_fail(t, "no copy area");
	tst_pat_fill(pat, sizeof(pat), 7, 0);
	if (t->rank == 1)
		word = post(c, pat, &shrunk);
	if (tst_barrier(t))
		return -1;
	if (t->rank == 0) {
		n = get_wait(c, pat, 100, 2000);	/* pat: the first 100 */
		TST_CHECK(t, n == 100, "first get: %zd", n);
	}
	if (tst_barrier(t))
		return -1;
	if (t->rank == 1)
		atomic_store_explicit(word, shrunk, memory_order_release);
	if (tst_barrier(t))
		return -1;
	if (t->rank == 0) {
		buf = malloc(HUGE_GET);
		if (!buf)
			return tst_fail(t, "out of memory");
		n = get_wait(c, buf, HUGE_GET, 500);
		tst_pat_fill(pat, sizeof(pat), 7, 0);
		if (n != REFETCH_LEN - 100 || memcmp(buf, pat + 100, (size_t)n))
			ret = tst_fail(t, "after the %s shrank: %zd bytes (want "
				       "the %u announced)", what, n,
				       REFETCH_LEN - 100);
		free(buf);
	}
	return ret ? ret : tst_barrier(t);
}

static int peer_data_len_refetch(struct tst *t)
{
	return refetch_case(t, plain_env, post_packet, "packet's len");
}

static int peer_pipe_len_refetch(struct tst *t)
{
	return refetch_case(t, pipe_env, post_chunk, "slot's flag");
}

static int peer_rndv_refetch(struct tst *t)
{
	static const char *const env[] = { "RDMACH_SHM_PIPE", "0", NULL };

	return refetch_case(t, env, post_rndv, "rendezvous total");
}

/* Rank 0 expects -EPROTO from its gets within ms, nothing delivered
 * before (rank 1 has done its harm). */
static int expect_eproto(struct tst *t, rdmach_conn_t *c, unsigned ms)
{
	uint8_t buf[4096];
	ssize_t n = get_wait(c, buf, sizeof(buf), ms);

	TST_CHECK(t, n == -EPROTO, "get: %zd (%s), want -EPROTO", n,
		  n < 0 ? rdmach_strerror((int)n) : "bytes or nothing");
	return 0;
}

/* Rank 1 does harm (in env, with a copy area if need_pipe), then rank 0
 * must get the `before` bytes posted ahead of it, then see -EPROTO within
 * 3 s. */
static int eproto_after(struct tst *t, const char *const *env, int need_pipe,
			void (*harm)(rdmach_conn_t *c), ssize_t before)
{
	uint8_t buf[64];
	rdmach_conn_t *c;
	ssize_t n;
	int ret;

	c = connect_env(t, env, &ret);
	if (!c)
		return ret;
	if (need_pipe && !has_pipe(t, c))
		return tst_fail(t, "no copy area");
	if (t->rank == 1)
		harm(c);
	if (tst_barrier(t))
		return -1;
	if (t->rank == 0 && before) {
		n = get_wait(c, buf, sizeof(buf), 3000);
		TST_CHECK(t, n == before, "first get: %zd, want the %zd bytes "
			  "before the harm", n, before);
	}
	if (t->rank == 0)
		ret = expect_eproto(t, c, 3000);
	return ret ? ret : tst_barrier(t);
}

/* ... and nothing delivered before. */
static int eproto_case(struct tst *t, const char *const *env, int need_pipe,
		       void (*harm)(rdmach_conn_t *c))
{
	return eproto_after(t, env, need_pipe, harm, 0);
}

/* A rendezvous whose total exceeds its one segment's 1000 bytes: the
 * bytes past them exist nowhere, and a reader that took the total would
 * wait for them forever. */
static void harm_rndv_total(rdmach_conn_t *c)
{
	static uint8_t src[1000];
	struct {
		struct rdmach_rndv_hdr h;
		struct rdmach_rndv_seg s[1];
	} d;

	memset(&d, 0, sizeof(d));
	d.h.id = 1;
	d.h.total = 2000;
	d.h.nsegs = 1;
	d.s[0].addr = (uint64_t)(uintptr_t)src;
	d.s[0].len = sizeof(src);
	raw_post(c, SHM_MAIN, RDMACH_PKT_RNDV, sizeof(d), &d, sizeof(d),
		 raw_seq(c));
}

static int peer_rndv_total(struct tst *t)
{
	static const char *const env[] = { "RDMACH_SHM_PIPE", "0", NULL };

	return eproto_case(t, env, 0, harm_rndv_total);
}

/* A packet numbered 7 ahead of the one expected: the expected one can
 * never come before it (packets are posted in order). */
static void harm_seq_wrong(rdmach_conn_t *c)
{
	uint8_t pat[64];

	tst_pat_fill(pat, sizeof(pat), 3, 0);
	raw_post(c, SHM_MAIN, RDMACH_PKT_DATA, 200, pat, sizeof(pat),
		 raw_seq(c) + 7);
}

static int peer_seq_wrong(struct tst *t)
{
	return eproto_case(t, plain_env, 0, harm_seq_wrong);
}

/* A HELLO inside a ring the reader already polls (the first packet said
 * hello to the main ring): only a hello word may hold one. */
static void harm_hello_in_ring(rdmach_conn_t *c)
{
	uint8_t pat[16] = { 0 };

	raw_post(c, SHM_MAIN, RDMACH_PKT_DATA, sizeof(pat), pat, sizeof(pat),
		 raw_seq(c));
	raw_post(c, SHM_MAIN, RDMACH_PKT_HELLO, 0, pat, 0, raw_seq(c));
}

static int peer_hello_in_ring(struct tst *t)
{
	return eproto_after(t, plain_env, 0, harm_hello_in_ring, 16);
}

/* The bulk ring's hello word numbered 5 ahead, no packet anywhere else:
 * the packet expected can never come. */
static void harm_hello_ahead(rdmach_conn_t *c)
{
	struct shm_conn *sc = c->priv;

	atomic_store_explicit(&sc->tx_ctrl->bulk_hello,
			      shm_hdr_make(raw_seq(c) + 5, RDMACH_PKT_HELLO, 0),
			      memory_order_release);
}

static int peer_hello_ahead(struct tst *t)
{
	return eproto_case(t, plain_env, 0, harm_hello_ahead);
}

/* A copy-area message whose writer posts its next packet without sending
 * a chunk: the chunks will never come. */
static void harm_pipe_abandoned(rdmach_conn_t *c)
{
	uint8_t pat[32] = { 0 };

	raw_pipe_pkt(c, SHM_MAIN, 8000);
	raw_post(c, SHM_MAIN, RDMACH_PKT_DATA, sizeof(pat), pat, sizeof(pat),
		 raw_seq(c));
}

static int peer_pipe_abandoned(struct tst *t)
{
	return eproto_case(t, pipe_env, 1, harm_pipe_abandoned);
}

#define STALL_MS 3000u

/* A copy-area message whose writer sends no chunk for longer than
 * RDMACH_PEER_TIMEOUT_MS (400) while it keeps reading the victim's
 * packets: -EPROTO within the STALL_MS the writer keeps at it. */
static int peer_pipe_stalled(struct tst *t)
{
	static const char *const env[] = { "RDMACH_SHM_CMA", "0",
		"RDMACH_PEER_TIMEOUT_MS", "400", NULL };
	uint8_t buf[4096] = { 0 };
	struct iovec iov = { buf, 64 };
	rdmach_conn_t *c;
	uint64_t end;
	ssize_t n = 0;
	int ret;

	c = connect_pipe(t, env, &ret);
	if (!c)
		return ret;
	if (t->rank == 1)
		raw_pipe_pkt(c, SHM_MAIN, 8000);
	if (tst_barrier(t))
		return -1;
	end = rdmach_now_ns() + STALL_MS * 1000000ull;
	while (rdmach_now_ns() < end) {
		if (t->rank == 0) {
			rdmach_put(c, &iov, 1);	/* traffic the writer reads */
			usleep(1000);
		} else {
			iov.iov_len = sizeof(buf);
			rdmach_get(c, &iov, 1);
			continue;
		}
		iov.iov_len = sizeof(buf);
		n = rdmach_get(c, &iov, 1);
		iov.iov_len = 64;
		if (n < 0)
			break;
	}
	if (t->rank == 0)
		TST_CHECK(t, n == -EPROTO, "get: %zd, want -EPROTO", n);
	return tst_barrier(t);
}

/* A writer that is merely slow (no chunk for three times the peer timeout,
 * doing nothing meanwhile) is waited for: its message arrives whole. */
static int peer_pipe_slow(struct tst *t)
{
	static const char *const env[] = { "RDMACH_SHM_CMA", "0",
		"RDMACH_PEER_TIMEOUT_MS", "300", NULL };
	uint8_t pat[4000], got[4000];
	rdmach_conn_t *c;
	size_t have = 0;
	ssize_t n;
	int ret;

	c = connect_pipe(t, env, &ret);
	if (!c)
		return ret;
	tst_pat_fill(pat, sizeof(pat), 5, 0);
	if (t->rank == 1) {
		raw_pipe_pkt(c, SHM_MAIN, sizeof(pat));
		usleep(900000);
		raw_chunk(c, pat, sizeof(pat));
		return tst_barrier(t);
	}
	while (have < sizeof(got)) {
		n = get_wait(c, got + have, sizeof(got) - have, 3000);
		if (n <= 0)
			return tst_fail(t, "get: %zd after %zu bytes", n, have);
		have += (size_t)n;
	}
	TST_CHECK(t, !memcmp(got, pat, sizeof(pat)), "bytes differ");
	return tst_barrier(t);
}

/* ---- segments (one process) --------------------------------------------- */

static const int seg_writers[] = { 0, 1 };

static int seg_make(struct tst *t, struct shm_seg *seg)
{
	struct shm_seg_geom g = { .ring_size = 4096, .line_ring_size = 1024,
				  .bulk_ring_size = 0, .pipe_size = 0,
				  .pipe_slot = 0 };
	int err;

	memset(seg, 0, sizeof(*seg));
	seg->fd = -1;
	err = shm_seg_create(seg, 0, seg_writers, 2, &g);
	return err ? tst_fail(t, "create: %s", rdmach_strerror(err)) : 0;
}

/* A peer that shrinks or grows a segment would make every process that
 * maps it die of SIGBUS: the memfd is sealed against both. */
static int seg_sealed(struct tst *t)
{
	struct shm_seg seg;
	int shrink, grow;

	if (seg_make(t, &seg))
		return -1;
	if (seg.name[0]) {
		shm_seg_detach(&seg);
		return tst_skip(t, "named segment (cannot be sealed)");
	}
	shrink = ftruncate(seg.fd, 4096);
	grow = ftruncate(seg.fd, (off_t)seg.size * 2);
	shm_seg_detach(&seg);
	TST_CHECK(t, shrink < 0 && grow < 0, "resized: shrink %d grow %d",
		  shrink, grow);
	return 0;
}

struct seg_forge {
	const char *what;
	size_t off;		/* of the field in struct shm_seg_hdr */
	int wide;		/* 8 bytes, else 4 */
	uint64_t val;		/* UINT64_MAX: the segment's size */
};

#define FORGE(f, w, v) { #f, offsetof(struct shm_seg_hdr, f), w, v }

static const struct seg_forge seg_forges[] = {
	FORGE(ring_off, 1, UINT64_MAX),
	FORGE(ring_size, 1, 1ull << 40),
	FORGE(ring_size, 1, 3000),
	FORGE(ctrl_off, 1, UINT64_MAX),
	FORGE(ctrl_off, 1, 8),
	FORGE(line_off, 1, UINT64_MAX - 4095),
	FORGE(line_ring_size, 1, 1ull << 62),
	FORGE(nslots, 0, 1u << 30),
	/* no slot for the writer (rank 1): the two disagree on the peers */
	{ "slot_rank[1]", offsetof(struct shm_seg_hdr, slot_rank) + 4, 0, 7 },
};

/* Make a segment, forge one field of its header (f, or none), and map
 * it as writer rank 1 would: shm_seg_attach's result (and *slot). */
static int seg_map_as_writer(struct tst *t, const struct seg_forge *f,
			     int *slot)
{
	struct shm_seg seg, peer;
	char desc[128];
	int err;

	if (seg_make(t, &seg))
		return -1;
	if (f) {
		uint64_t v = f->val == UINT64_MAX ? seg.size : f->val;

		if (f->wide)
			memcpy((char *)seg.base + f->off, &v, 8);
		else
			memcpy((char *)seg.base + f->off,
			       &(uint32_t){ (uint32_t)v }, 4);
	}
	shm_seg_describe(&seg, desc, sizeof(desc));
	memset(&peer, 0, sizeof(peer));
	err = shm_seg_attach(&peer, desc, 0, 1, slot);
	if (!err)
		shm_seg_detach(&peer);
	shm_seg_detach(&seg);
	return err;
}

/* A segment whose header puts rings, control blocks or the slot table
 * outside the mapping, or has no slot for the writer, is refused when
 * mapped (-EPROTO); as made, it maps with the writer's slot. */
static int seg_header_checked(struct tst *t)
{
	unsigned i;
	int slot = -1, err;

	err = seg_map_as_writer(t, NULL, &slot);
	TST_CHECK(t, !err && slot == 1, "attach %s, slot %d",
		  rdmach_strerror(err), slot);
	for (i = 0; i < sizeof(seg_forges) / sizeof(seg_forges[0]); i++) {
		const struct seg_forge *f = &seg_forges[i];
		uint64_t v;

		err = seg_map_as_writer(t, f, &slot);
		v = f->val;
		TST_CHECK(t, err == -EPROTO, "%s = %#llx%s: attach %s", f->what,
			  (unsigned long long)v, v == UINT64_MAX ?
			  " (the size)" : "", err ? rdmach_strerror(err) :
			  "succeeded");
	}
	return 0;
}

/* The owner's own layout is its own: a writer that rewrites the owner's
 * header (slot table, ring offset) moves nothing for the owner. */
static int seg_own_layout(struct tst *t)
{
	struct shm_seg seg;
	struct shm_seg_hdr *h;
	uint8_t *ring;
	int slot, slot2;

	if (seg_make(t, &seg))
		return -1;
	ring = shm_seg_ring(&seg, 1);
	slot = shm_seg_slot(&seg, 1);
	h = shm_seg_hdr(&seg);
	h->ring_off = 1ull << 40;
	h->slot_rank[0] = 1;
	h->slot_rank[1] = 7;
	slot2 = shm_seg_slot(&seg, 1);
	TST_CHECK(t, shm_seg_ring(&seg, 1) == ring && slot2 == slot,
		  "layout moved: ring %p -> %p, slot %d -> %d", (void *)ring,
		  (void *)shm_seg_ring(&seg, 1), slot, slot2);
	shm_seg_detach(&seg);
	return 0;
}

/* A peer's published segment address is parsed strictly: what sscanf
 * took (a negative pid or fd, a sign, trailing bytes, a path for a name)
 * is refused, and the well-formed ones come out whole. */
static int seg_desc_strict(struct tst *t)
{
	static const char *const bad[] = {
		"-1:3:4096:-", "0:3:4096:-", "12:-3:4096:-", "12:+3:4096:-",
		"12:3:4096", "12:3::-", "12: 3:4096:-", "12:3:4096:",
		"12:3:4096:/../../etc/passwd", "12:3:4096:/a/b",
		"12:3:4096:name", "12:3:4096:-x", "99999999999:3:4096:-",
		"12:3:4096:/ab\x1b[2J", "12:3:99999999999999999999:-",
	};
	struct shm_seg_desc d;
	const char *rest;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		TST_CHECK(t, shm_seg_parse_desc(bad[i], 1, &d, &rest) ==
			  -EPROTO, "accepted \"%s\"", bad[i]);
	TST_CHECK0(t, shm_seg_parse_desc("12:3:4096:-:7f00:abc", 1, &d,
					 &rest));
	TST_CHECK(t, d.pid == 12 && d.fd == 3 && d.size == 4096 &&
		  !strcmp(d.name, "-") && !strcmp(rest, ":7f00:abc"),
		  "parsed %d %d %zu %s, rest %s", d.pid, d.fd, d.size, d.name,
		  rest);
	TST_CHECK0(t, shm_seg_parse_desc("7:0:65536:/rdmach-7-1a2b", 1, &d,
					 &rest));
	TST_CHECK(t, !strcmp(d.name, "/rdmach-7-1a2b") && !*rest,
		  "parsed name %s, rest %s", d.name, rest);
	return 0;
}

static const struct tst_case peer_cases[] = {
	{ "peer_data_len_refetch", 2, peer_data_len_refetch,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "peer_pipe_len_refetch", 2, peer_pipe_len_refetch,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "peer_rndv_refetch", 2, peer_rndv_refetch,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "peer_rndv_total", 2, peer_rndv_total,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "peer_seq_wrong", 2, peer_seq_wrong,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "peer_hello_in_ring", 2, peer_hello_in_ring,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "peer_hello_ahead", 2, peer_hello_ahead,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "peer_pipe_abandoned", 2, peer_pipe_abandoned,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "peer_pipe_stalled", 2, peer_pipe_stalled,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "peer_pipe_slow", 2, peer_pipe_slow,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "seg_sealed", 1, seg_sealed, TST_UNIT, NULL, { 0 } },
	{ "seg_desc_strict", 1, seg_desc_strict, TST_UNIT, NULL, { 0 } },
	{ "seg_header_checked", 1, seg_header_checked, TST_UNIT, NULL, { 0 } },
	{ "seg_own_layout", 1, seg_own_layout, TST_UNIT, NULL, { 0 } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, peer_cases,
			(int)(sizeof(peer_cases) / sizeof(peer_cases[0])));
}
