/*
 * test_ib_spipe.c - the superpipeline and the per-message protocol choice
 * over rdma_ib on a real device (Soft-RoCE VM or native; skips without
 * one).  Byte-exact streams at every chunk and block edge, iovecs split on
 * both sides, partial gets, interleaving with small messages, 2/3/4
 * buffers, peers with different geometries, a receiver that offers the
 * superpipeline to one sender of three, the first message's
 * rendezvous, finalize with chunks pending or a message left open, a peer
 * killed mid-message (-ECONNRESET, no hang), and RDMACH_LARGE=auto's
 * choices for allocate-send-free, reuse and send-twice loops (counted).
 *
 * The geometry is set by knobs (RDMACH_TUNE=off: nothing measured), so
 * that the edges are known: 4 KiB blocks (4080 payload bytes), C0 = 2
 * blocks, q = 2, 64 KiB buffers (16 blocks, 65280 payload bytes).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"
#include "lib/tst.h"
#include "proto/tune.h"

#define SP_PAY 4080u			/* payload of a 4 KiB block */
#define SP_BUF_PAY (16u * SP_PAY)	/* of a 64 KiB buffer */
#define SP_KILL_BOUND_NS 5000000000ull

struct sp_case {
	const char *large;	/* RDMACH_LARGE */
	const char *threshold;	/* RDMACH_SPIPE_THRESHOLD */
	const char *bufs;	/* RDMACH_SPIPE_BUFS */
	int shape;		/* case-specific */
};

static void sp_env(const struct sp_case *sc)
{
	setenv("RDMACH_TRANSPORT", "ib", 1);
	setenv("RDMACH_TUNE", "off", 1);
	setenv("RDMACH_LARGE", sc->large, 1);
	setenv("RDMACH_SPIPE_THRESHOLD", sc->threshold, 1);
	setenv("RDMACH_SPIPE_BUFS", sc->bufs, 1);
	setenv("RDMACH_SPIPE_BLOCK", "4K", 1);
	setenv("RDMACH_SPIPE_BUF_SIZE", "64K", 1);
	setenv("RDMACH_SPIPE_C0", "8160", 1);
	setenv("RDMACH_SPIPE_Q", "2", 1);
}

/* A tuning file for this host's first device (port 1) in which
 * registering costs nothing; RDMACH_TUNE names it. */
static int sp_tune_file(struct tst *t)
{
	struct tune_machine m;
	struct tune_key k;
	char dev[64] = "", path[96], text[2048];
	FILE *f = popen("ls /sys/class/infiniband 2>/dev/null | head -n1", "r");
	int n;

	if (!f || !fgets(dev, sizeof(dev), f)) {
		if (f)
			pclose(f);
		return tst_fail(t, "no device name");
	}
	pclose(f);
	dev[strcspn(dev, "\n")] = '\0';
	tune_machine_default(&m);
	m.lat_reg = 1e-9;
	m.breg = 1e15;
	tune_key_local(&k, dev, 1);
	n = tune_format(&m, &k, text, sizeof(text));
	snprintf(path, sizeof(path), "/tmp/rdmach-test-tune-%d.conf",
		 (int)getpid());
	f = fopen(path, "w");
	if (n < 0 || !f || fwrite(text, 1, (size_t)n, f) != (size_t)n) {
		if (f)
			fclose(f);
		return tst_fail(t, "cannot write %s", path);
	}
	fclose(f);
	setenv("RDMACH_TUNE", path, 1);
	setenv("RDMACH_TEST_TUNE_FILE_WRITTEN", "1", 1);
	return 0;
}

static int sp_connect(struct tst *t, const struct sp_case *sc)
{
	if (!tst_have_ib_device())
		return tst_skip(t, "no RDMA device");
	sp_env(sc);
	if (sc->shape == 3 && !strcmp(sc->large, "auto") && sp_tune_file(t))
		return -1;
	if (tst_connect(t, &t->ctx))
		return tst_fail(t, "init/connect over ib failed");
	return 0;
}

static int sp_stats(struct tst *t, rdmach_stats_t *st)
{
	if (rdmach_conn_stats(tst_conn(t, 1 - t->rank), st))
		return tst_fail(t, "rdmach_conn_stats failed");
	return 0;
}

/* Message sizes at and around the block and chunk edges of the geometry
 * above; n set; their sum returned. */
static uint64_t sp_edges(size_t *sizes, int *n)
{
	static const size_t chunk[] = { 8160, 16320, 32640, 65280, 65280 };
	uint64_t sum = 0, edge = 0;
	int i, k, m = 0;

	for (k = 1; k <= 3; k++)
		for (i = -1; i <= 1; i++)
			sizes[m++] = (size_t)(k * SP_PAY + (unsigned)i);
	for (k = 0; k < 5; k++) {
		edge += chunk[k];
		for (i = -1; i <= 1; i++)
			sizes[m++] = (size_t)(edge + (uint64_t)i);
	}
	/* folded over the three buffers and beyond */
	for (i = -1; i <= 1; i++)
		sizes[m++] = (size_t)(7 * SP_BUF_PAY + (unsigned)i);
	sizes[m++] = 1;
	sizes[m++] = 100000;
	for (i = 0; i < m; i++)
		sum += sizes[i];
	*n = m;
	return sum;
}

/* Both ways at once with the shapes of the case. */
static int sp_streams(struct tst *t, const struct tst_shape *put,
		      const struct tst_shape *get, uint64_t total)
{
	struct tst_stream s[2];
	int peer = 1 - t->rank, ret;

	tst_stream_init(&s[0], tst_conn(t, peer), peer, 1,
			tst_seed(41, t->rank, peer), total, put);
	tst_stream_init(&s[1], tst_conn(t, peer), peer, 0,
			tst_seed(41, peer, t->rank), total, get);
	ret = tst_run(t, s, 2);
	tst_stream_free(&s[0]);
	tst_stream_free(&s[1]);
	return ret;
}

/* ---- byte-exact streams -------------------------------------------------- */

/* shape 0: whole puts and gets of each edge size; 1: iovecs of 1..8
 * pieces with gaps and empty entries on both sides, gets cut at random
 * (partial gets, several messages per get); 2: gets of 1..100 bytes. */
static int sp_edges_case(struct tst *t)
{
	const struct sp_case *sc = t->c->arg;
	size_t sizes[64];
	int n, ret = sp_connect(t, sc);
	uint64_t total = sp_edges(sizes, &n);
	struct tst_shape put = { .sizes = sizes, .nsizes = n };
	struct tst_shape get = { .sizes = sizes, .nsizes = n };
	rdmach_stats_t st;

	if (ret)
		return ret;
	if (sc->shape >= 1) {
		put.min_pieces = get.min_pieces = 1;
		put.max_pieces = get.max_pieces = 8;
		put.gaps = get.gaps = 1;
		put.zero_pct = 10;
		get.sizes = NULL;
		get.nsizes = 0;
		get.min_call = 1;
		get.max_call = sc->shape == 2 ? 100 : 150000;
	}
	if (sc->shape == 2)	/* tiny gets: a shorter stream */
		total = tst_scaled(1u << 20, 300000);
	ret = sp_streams(t, &put, &get, total);
	if (ret || sp_stats(t, &st))
		return -1;
	tst_log(t, "%llu superpipeline messages, %llu chunks, %llu bytes",
		(unsigned long long)st.spipe_msgs,
		(unsigned long long)st.spipe_chunks,
		(unsigned long long)st.spipe_bytes);
	TST_CHECK(t, st.spipe_msgs > 0 && st.spipe_chunks >= st.spipe_msgs &&
		  st.why_forced == st.spipe_msgs, "%llu messages, %llu chunks, "
		  "%llu forced", (unsigned long long)st.spipe_msgs,
		  (unsigned long long)st.spipe_chunks,
		  (unsigned long long)st.why_forced);
	TST_CHECK(t, st.zcopy_msgs == 0 && st.large_ring_msgs == 0,
		  "other protocols ran under RDMACH_LARGE=superpipeline");
	return 0;
}

/* Small and large puts interleaved, both ways: ring packets and
 * superpipeline messages keep the stream's order. */
static int sp_interleave(struct tst *t)
{
	static const size_t sizes[] = { 1, 70000, 100, 5000, 200001, 3,
					65535, 65536, 20000, 300000, 7 };
	const struct sp_case *sc = t->c->arg;
	struct tst_shape put = { .min_pieces = 1, .max_pieces = 3,
				 .gaps = 1, .sizes = sizes,
				 .nsizes = (int)(sizeof(sizes) /
						 sizeof(sizes[0])) };
	struct tst_shape get = { .min_call = 1, .max_call = 90000,
				 .min_pieces = 1, .max_pieces = 3 };
	rdmach_stats_t st;
	int ret = sp_connect(t, sc);

	if (ret)
		return ret;
	ret = sp_streams(t, &put, &get, tst_scaled(8u << 20, 1500000));
	if (ret || sp_stats(t, &st))
		return -1;
	TST_CHECK(t, st.spipe_msgs > 0 && st.packets_sent > st.spipe_msgs,
		  "no interleaving: %llu superpipeline messages, %llu ring "
		  "packets", (unsigned long long)st.spipe_msgs,
		  (unsigned long long)st.packets_sent);
	return 0;
}

/* Peers with different geometries: each receiver follows its sender's. */
static int sp_mixed(struct tst *t)
{
	static const size_t sizes[] = { 300000, 17, 1000000, 4097 };
	const struct sp_case *sc = t->c->arg;
	struct tst_shape put = { .sizes = sizes, .nsizes = 4 };
	struct tst_shape get = { .min_call = 1, .max_call = 200000 };
	int ret;

	if (!tst_have_ib_device())
		return tst_skip(t, "no RDMA device");
	sp_env(sc);
	if (t->rank == 0) {
		setenv("RDMACH_SPIPE_BLOCK", "1K", 1);
		setenv("RDMACH_SPIPE_BUF_SIZE", "16K", 1);
		setenv("RDMACH_SPIPE_BUFS", "2", 1);
		setenv("RDMACH_SPIPE_C0", "1000", 1);
		setenv("RDMACH_SPIPE_Q", "1.5", 1);
	} else {
		setenv("RDMACH_SPIPE_BUF_SIZE", "128K", 1);
		setenv("RDMACH_SPIPE_BUFS", "4", 1);
	}
	if (tst_connect(t, &t->ctx))
		return tst_fail(t, "init/connect over ib failed");
	ret = sp_streams(t, &put, &get, tst_scaled(6u << 20, 1321117));
	return ret;
}

/* 4 ranks; rank 0 offers the superpipeline to one peer
 * (RDMACH_SPIPE_PEERS=1).  Ranks 1-3 each stream large messages to it at
 * once: the one offered sends them through the superpipeline, the two
 * refused through the ring (RDMACH_LARGE=superpipeline falls back), all
 * byte-exact; rank 0 registers one landing area and says so. */
static int sp_peers_capped(struct tst *t)
{
	static const size_t sizes[] = { 300000, 17, 1000000, 4097 };
	const struct sp_case *sc = t->c->arg;
	struct tst_shape put = { .sizes = sizes, .nsizes = 4 };
	struct tst_shape get = { .min_call = 1, .max_call = 200000 };
	uint64_t total = tst_scaled(4u << 20, 1321117), used[4] = { 0 };
	struct tst_stream s[3];
	rdmach_stats_t st;
	char *buf;
	int p, n = 0, ret = 0;

	if (!tst_have_ib_device())
		return tst_skip(t, "no RDMA device");
	sp_env(sc);
	if (t->rank == 0)
		setenv("RDMACH_SPIPE_PEERS", "1", 1);
	if (tst_connect(t, &t->ctx))
		return tst_fail(t, "init/connect over ib failed");
	for (p = 1; p < t->size; p++)
		if (t->rank == 0 || p == t->rank)
			tst_stream_init(&s[n++], tst_conn(t, t->rank ? 0 : p),
					t->rank ? 0 : p, t->rank != 0,
					tst_seed(43, p, 0), total,
					t->rank ? &put : &get);
	ret = tst_run(t, s, n);
	for (p = 0; p < n; p++)
		tst_stream_free(&s[p]);
	if (ret)
		return ret;
	if (t->rank) {		/* the superpipeline messages it sent */
		struct iovec iov = { &st.spipe_msgs, 8 };

		if (rdmach_conn_stats(tst_conn(t, 0), &st))
			return tst_fail(t, "rdmach_conn_stats failed");
		return tst_xfer_iov(t, tst_conn(t, 0), 1, &iov, 1);
	}
	for (n = 0, p = 1; p < t->size; p++) {
		struct iovec iov = { &used[p], 8 };

		TST_CHECK0(t, tst_xfer_iov(t, tst_conn(t, p), 0, &iov, 1));
		n += used[p] > 0;
	}
	TST_CHECK(t, n == 1, "%d of the 3 peers sent superpipeline messages "
		  "(%" PRIu64 ", %" PRIu64 ", %" PRIu64 "), not 1", n, used[1],
		  used[2], used[3]);
	buf = tst_stats_text(t->ctx);
	TST_CHECK(t, buf && strstr(buf, "# ib superpipeline: 1 landing areas "
				   "(196608 bytes) registered, offered to 1 "
				   "peers of 1 at most (RDMACH_SPIPE_PEERS), "
				   "refused to 2"), "stats: %s", buf ? buf : "");
	free(buf);
	return 0;
}

/* The first message is a rendezvous: with the receiver not reading yet,
 * put still takes the first chunks (copied while the landing address is
 * on its way), and returns. */
static int sp_rendezvous(struct tst *t)
{
	const struct sp_case *sc = t->c->arg;
	rdmach_conn_t *c;
	uint64_t seed = tst_stream_seed(t, 0, 1), t0;
	size_t len = 200000;
	uint8_t *buf = malloc(len);
	struct iovec iov = { buf, len };
	ssize_t r;
	int ret = sp_connect(t, sc);

	if (ret || !buf) {
		free(buf);
		return ret ? ret : tst_fail(t, "out of memory");
	}
	c = tst_conn(t, 1 - t->rank);
	if (t->rank == 1) {
		usleep(300000);	/* not reading: no landing address yet */
		ret = tst_get_all(t, c, 0, seed, len);
		free(buf);
		return ret;
	}
	tst_pat_fill(buf, len, seed, 0);
	t0 = rdmach_now_ns();
	do
		r = rdmach_put(c, &iov, 1);
	while (r == 0 && rdmach_now_ns() - t0 < 100000000ull);
	free(buf);
	TST_CHECK(t, r > 0 && r < (ssize_t)len, "the first put returned %zd "
		  "while the receiver was not reading (want the first "
		  "chunks, %u + %u + %u bytes)", r, 8160, 16320, 32640);
	TST_CHECK(t, r == 8160 + 16320 + 32640, "the first put took %zd "
		  "bytes, not the first three chunks", r);
	/* the rest through the ordinary engine */
	{
		uint8_t *rest = malloc(len - (size_t)r);
		struct iovec v = { rest, len - (size_t)r };
		size_t off = (size_t)r;

		if (!rest)
			return tst_fail(t, "out of memory");
		tst_pat_fill(rest, len - off, seed, off);
		ret = tst_xfer_iov(t, c, 1, &v, 1);
		free(rest);
	}
	return ret;
}

/* Finalize right after a put whose chunks wait for the landing address
 * (shape 0), or with a message left open by a partial put that is never
 * retried (shape 1): the reader gets every byte put took, then
 * -ESHUTDOWN, never a hang. */
static int sp_finalize(struct tst *t)
{
	const struct sp_case *sc = t->c->arg;
	uint64_t seed = tst_stream_seed(t, 0, 1), took = 0, got = 0;
	size_t len = sc->shape ? 1000000 : 57120;
	uint8_t *buf = malloc(len);
	rdmach_conn_t *c;
	ssize_t r;
	int ret = sp_connect(t, sc);

	if (ret || !buf) {
		free(buf);
		return ret ? ret : tst_fail(t, "out of memory");
	}
	c = tst_conn(t, 1 - t->rank);
	if (t->rank == 0) {
		struct iovec iov = { buf, len };

		tst_pat_fill(buf, len, seed, 0);
		do
			r = rdmach_put(c, &iov, 1);
		while (r == 0);
		took = r > 0 ? (uint64_t)r : 0;
		t->shared[0] = took;
		free(buf);
		TST_CHECK(t, r > 0 && (sc->shape ? took < len : took == len),
			  "put returned %zd of %zu", r, len);
		ret = rdmach_finalize(&t->ctx);
		TST_CHECK(t, ret == 0, "finalize: %s", rdmach_strerror(ret));
		return 0;
	}
	usleep(200000);	/* the writer is finalizing meanwhile */
	for (uint64_t deadline = rdmach_now_ns() + tst_stall_ns();;) {
		struct iovec iov = { buf, len };
		size_t bad;

		r = rdmach_get(c, &iov, 1);
		if (r < 0)
			break;
		bad = tst_pat_check(buf, (size_t)r, seed, got);
		if (bad < (size_t)r) {
			free(buf);
			return tst_fail(t, "byte %llu wrong",
					(unsigned long long)(got + bad));
		}
		got += (uint64_t)r;
		if (rdmach_now_ns() > deadline) {
			free(buf);
			return tst_fail(t, "no -ESHUTDOWN after %llu bytes",
					(unsigned long long)got);
		}
	}
	free(buf);
	took = t->shared[0];
	tst_log(t, "got %llu of %llu bytes, then %s", (unsigned long long)got,
		(unsigned long long)took, rdmach_strerror((int)r));
	TST_CHECK(t, r == -ESHUTDOWN, "got %s, want -ESHUTDOWN",
		  rdmach_strerror((int)r));
	TST_CHECK(t, got == took, "got %llu bytes, the writer's put took "
		  "%llu", (unsigned long long)got, (unsigned long long)took);
	return 0;
}

/* ---- a peer killed mid-message ------------------------------------------ */

enum { SPK_DEATH_NS = 1, SPK_TOOK };

static void sp_die(struct tst *t)
{
	__atomic_store_n(&t->shared[SPK_DEATH_NS], rdmach_now_ns(),
			 __ATOMIC_SEQ_CST);
	raise(SIGKILL);
}

/* The survivor's error: -ECONNRESET within the bound after the death. */
static int sp_survived(struct tst *t, ssize_t err)
{
	uint64_t now = rdmach_now_ns(), death;

	death = __atomic_load_n(&t->shared[SPK_DEATH_NS], __ATOMIC_SEQ_CST);
	TST_CHECK(t, err == -ECONNRESET, "expected -ECONNRESET, got %s",
		  rdmach_strerror((int)err));
	TST_CHECK(t, death && now - death < SP_KILL_BOUND_NS, "detected "
		  "%.2f s after the death", death ? (double)(now - death) /
		  1e9 : -1.0);
	tst_log(t, "detected after %.0f ms: %s", (double)(now - death) / 1e6,
		rdmach_conn_error(tst_conn(t, 1 - t->rank)));
	rdmach_finalize(&t->ctx);
	return 0;
}

/* shape 0: the writer dies with a message open (the reader waits for
 * blocks); shape 1: the reader dies (the writer waits for acks). */
static int sp_kill(struct tst *t)
{
	const struct sp_case *sc = t->c->arg;
	uint64_t seed = tst_stream_seed(t, 0, 1), done = 0;
	size_t len = 4u << 20, cap = 100000;
	uint8_t *buf = malloc(len);
	rdmach_conn_t *c;
	int writer_dies = sc->shape == 0, ret = sp_connect(t, sc);
	ssize_t r = 0;

	if (ret || !buf) {
		free(buf);
		return ret ? ret : tst_fail(t, "out of memory");
	}
	c = tst_conn(t, 1 - t->rank);
	tst_pat_fill(buf, len, seed, 0);
	if (t->rank == 0) {	/* the writer */
		struct iovec iov = { buf, len };

		while (iov.iov_len) {
			r = rdmach_put(c, &iov, 1);
			if (r < 0)
				break;
			done += (uint64_t)r;
			iov.iov_base = (uint8_t *)iov.iov_base + r;
			iov.iov_len -= (size_t)r;
			if (writer_dies && done > 300000)
				sp_die(t);	/* mid-message */
			if (!r)
				sched_yield();
		}
		free(buf);
		if (writer_dies)
			return tst_fail(t, "the writer lived");
		return sp_survived(t, r);
	}
	/* the reader */
	for (;;) {
		struct iovec iov = { buf, cap };
		size_t bad;

		r = rdmach_get(c, &iov, 1);
		if (r < 0)
			break;
		bad = tst_pat_check(buf, (size_t)r, seed, done);
		if (bad < (size_t)r) {
			free(buf);
			return tst_fail(t, "byte %llu wrong",
					(unsigned long long)(done + bad));
		}
		done += (uint64_t)r;
		if (!writer_dies && done > 200000)
			sp_die(t);
		if (r)
			usleep(1000);	/* a slow reader: messages stay open */
	}
	free(buf);
	return sp_survived(t, r);
}

/* ---- RDMACH_LARGE=auto ---------------------------------------------------- */

/*
 * shape 0: allocate-send-free (a fresh mapping per message): every one
 *          through the superpipeline, no registration on the sender;
 * shape 1: one buffer reused: superpipeline, then zero-copy (registering
 *          it), then cache hits;
 * shape 2: every buffer sent twice and never again: the registrations of
 *          the second sends are not reused, so after a few the auto
 *          choice stops making them (no payoff);
 * shape 3: allocate-send-free on a machine where registering is free (a
 *          tuning file says so): the model sends new buffers zero-copy,
 *          until 8 registrations that nothing reused stop it (no payoff).
 */
static int sp_auto(struct tst *t)
{
	const struct sp_case *sc = t->c->arg;
	const size_t len = 256u << 10;
	const int n = 24;
	uint64_t seed = tst_stream_seed(t, 0, 1), off = 0;
	rdmach_stats_t st, cs;
	uint8_t *keep = NULL;
	int i, ret = sp_connect(t, sc);

	if (ret)
		return ret;
	if (t->rank == 1)
		return tst_get_all(t, tst_conn(t, 0), 0, seed,
				   (uint64_t)len * (sc->shape == 2 ? 2 * n : n));
	if (sc->shape == 3 && !getenv("RDMACH_TEST_TUNE_FILE_WRITTEN"))
		return tst_fail(t, "the tuning file was not set up");
	for (i = 0; i < n; i++) {
		uint8_t *b = keep;
		int k, times = sc->shape == 2 ? 2 : 1;

		if (!b) {
			b = mmap(NULL, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (b == MAP_FAILED)
				return tst_fail(t, "mmap failed");
		}
		for (k = 0; k < times; k++) {
			struct iovec iov = { b, len };

			tst_pat_fill(b, len, seed, off);
			if (tst_xfer_iov(t, tst_conn(t, 1), 1, &iov, 1))
				return -1;
			off += len;
		}
		if (sc->shape == 1)
			keep = b;
		else
			munmap(b, len);
	}
	if (keep)
		munmap(keep, len);
	if (sp_stats(t, &st) || rdmach_ctx_stats(t->ctx, &cs))
		return -1;
	tst_log(t, "zero-copy %llu (hit %llu, reuse %llu, predicted %llu, "
		"model %llu), superpipeline %llu (new %llu, no payoff %llu), "
		"rcache %llu misses", (unsigned long long)st.zcopy_msgs,
		(unsigned long long)st.why_hit,
		(unsigned long long)st.why_reuse,
		(unsigned long long)st.why_predicted,
		(unsigned long long)st.why_model,
		(unsigned long long)st.spipe_msgs,
		(unsigned long long)st.why_new,
		(unsigned long long)st.why_no_payoff,
		(unsigned long long)cs.rcache_misses);
	switch (sc->shape) {
	case 0:
		TST_CHECK(t, st.spipe_msgs == (uint64_t)n &&
			  st.why_new == (uint64_t)n && st.zcopy_msgs == 0,
			  "allocate-send-free: not all through the "
			  "superpipeline as new buffers");
		TST_CHECK(t, cs.rcache_misses == 0, "allocate-send-free: %llu "
			  "registrations", (unsigned long long)cs.rcache_misses);
		break;
	case 1:
		TST_CHECK(t, st.why_new == 1 && st.why_reuse == 1 &&
			  st.why_hit == (uint64_t)n - 2 &&
			  st.zcopy_msgs == (uint64_t)n - 1, "reuse: want 1 "
			  "new, 1 reuse, %d hits", n - 2);
		break;
	case 2:
		TST_CHECK(t, st.why_no_payoff > 0 && st.why_reuse >= 8 &&
			  st.why_hit == 0, "send-twice: the unpaid "
			  "registrations did not stop (%llu reuse, %llu no "
			  "payoff)", (unsigned long long)st.why_reuse,
			  (unsigned long long)st.why_no_payoff);
		break;
	default:
		TST_CHECK(t, st.why_model == 8 && st.zcopy_msgs == 8 &&
			  st.why_no_payoff == (uint64_t)n - 8 &&
			  st.spipe_msgs == (uint64_t)n - 8, "free registration: "
			  "want 8 by the model, then %d without payoff", n - 8);
		break;
	}
	return 0;
}

static const struct sp_case c_edges = { "superpipeline", "1", "3", 0 };
static const struct sp_case c_split = { "superpipeline", "1", "3", 1 };
static const struct sp_case c_tiny = { "superpipeline", "1", "3", 2 };
static const struct sp_case c_bufs2 = { "superpipeline", "1", "2", 1 };
static const struct sp_case c_bufs4 = { "superpipeline", "1", "4", 1 };
static const struct sp_case c_inter = { "superpipeline", "64K", "3", 0 };
static const struct sp_case c_mixed = { "superpipeline", "32K", "3", 0 };
static const struct sp_case c_rndv = { "superpipeline", "64K", "3", 0 };
static const struct sp_case c_fin = { "superpipeline", "32K", "3", 0 };
static const struct sp_case c_fin_open = { "superpipeline", "32K", "3", 1 };
static const struct sp_case c_kill_w = { "superpipeline", "64K", "3", 0 };
static const struct sp_case c_kill_r = { "superpipeline", "64K", "3", 1 };
static const struct sp_case c_auto_asf = { "auto", "64K", "3", 0 };
static const struct sp_case c_auto_reuse = { "auto", "64K", "3", 1 };
static const struct sp_case c_auto_twice = { "auto", "64K", "3", 2 };
static const struct sp_case c_auto_model = { "auto", "64K", "3", 3 };

#define SP_VICTIM(r) { r == 0 ? -SIGKILL : 0, r == 1 ? -SIGKILL : 0 }

static const struct tst_case cases[] = {
	{ "spipe_edges", 2, sp_edges_case, TST_NO_CTX, &c_edges, { 0 } },
	{ "spipe_iovec_split_partial_gets", 2, sp_edges_case, TST_NO_CTX,
	  &c_split, { 0 } },
	{ "spipe_tiny_gets", 2, sp_edges_case, TST_NO_CTX, &c_tiny, { 0 } },
	{ "spipe_bufs_2", 2, sp_edges_case, TST_NO_CTX, &c_bufs2, { 0 } },
	{ "spipe_bufs_4", 2, sp_edges_case, TST_NO_CTX, &c_bufs4, { 0 } },
	{ "spipe_interleave_small", 2, sp_interleave, TST_NO_CTX, &c_inter,
	  { 0 } },
	{ "spipe_peers_differ", 2, sp_mixed, TST_NO_CTX, &c_mixed, { 0 } },
	{ "spipe_peers_capped", 4, sp_peers_capped, TST_NO_CTX, &c_mixed,
	  { 0 } },
	{ "spipe_first_message_rendezvous", 2, sp_rendezvous, TST_NO_CTX,
	  &c_rndv, { 0 } },
	{ "spipe_finalize_pending_chunks", 2, sp_finalize,
	  TST_NO_CTX | TST_LAUNCH_ONLY, &c_fin, { 0 } },
	{ "spipe_finalize_open_message", 2, sp_finalize,
	  TST_NO_CTX | TST_LAUNCH_ONLY, &c_fin_open, { 0 } },
	{ "spipe_writer_killed", 2, sp_kill,
	  TST_NO_CTX | TST_LAUNCH_ONLY | TST_KEEP_GOING, &c_kill_w,
	  SP_VICTIM(0) },
	{ "spipe_reader_killed", 2, sp_kill,
	  TST_NO_CTX | TST_LAUNCH_ONLY | TST_KEEP_GOING, &c_kill_r,
	  SP_VICTIM(1) },
	{ "auto_allocate_send_free", 2, sp_auto, TST_NO_CTX, &c_auto_asf,
	  { 0 } },
	{ "auto_reuse", 2, sp_auto, TST_NO_CTX, &c_auto_reuse, { 0 } },
	{ "auto_send_twice_no_payoff", 2, sp_auto, TST_NO_CTX, &c_auto_twice,
	  { 0 } },
	{ "auto_free_registration_model", 2, sp_auto, TST_NO_CTX,
	  &c_auto_model, { 0 } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, cases,
			(int)(sizeof(cases) / sizeof(cases[0])));
}
