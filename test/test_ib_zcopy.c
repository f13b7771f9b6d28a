/*
 * test_ib_zcopy.c - zero-copy large puts by RDMA read over rdma_ib and the
 * registration cache under them (Soft-RoCE VM or native; skips without a
 * device).  Every transfer is checked byte for byte; each case also checks
 * that the zero-copy path (or the cache event it is about) really happened.
 *
 * Memory cases: a stale registration would make the receiver read the old
 * physical pages, so "new contents arrive" is exactly what they assert.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "lib/tst.h"

#define ZT_CANARY 0xa5

/* ASan's allocator never hands a freed block out again at once. */
#if defined(__SANITIZE_ADDRESS__)
#define ZT_QUARANTINE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZT_QUARANTINE 1
#endif
#endif
#ifndef ZT_QUARANTINE
#define ZT_QUARANTINE 0
#endif

struct zt_case {
	const char *threshold;		/* RDMACH_ZCOPY_THRESHOLD */
	const char *max_entries;	/* RDMACH_RCACHE_MAX_ENTRIES, or NULL */
	const char *max_bytes;		/* RDMACH_RCACHE_MAX_BYTES, or NULL */
	int mode;			/* case-specific */
};

static int zt_connect(struct tst *t, const struct zt_case *zc)
{
	if (!tst_have_ib_device())
		return tst_skip(t, "no RDMA device");
	setenv("RDMACH_TRANSPORT", "ib", 1);
	/* this file tests the zero-copy path itself, not the choice */
	setenv("RDMACH_LARGE", "zcopy", 1);
	setenv("RDMACH_ZCOPY", "1", 1);
	setenv("RDMACH_ZCOPY_THRESHOLD", zc->threshold, 1);
	if (zc->max_entries)
		setenv("RDMACH_RCACHE_MAX_ENTRIES", zc->max_entries, 1);
	else
		unsetenv("RDMACH_RCACHE_MAX_ENTRIES");
	if (zc->max_bytes)
		setenv("RDMACH_RCACHE_MAX_BYTES", zc->max_bytes, 1);
	else
		unsetenv("RDMACH_RCACHE_MAX_BYTES");
	if (tst_connect(t, &t->ctx))
		return tst_fail(t, "init/connect over ib failed");
	return 0;
}

/* Move all of iov (put or get), retrying with the contract's rules: a put
 * retries the same iovec until it returns the count; both advance. */
static int zt_xfer(struct tst *t, rdmach_conn_t *c, int is_put,
		   const struct iovec *iov0, int n)
{
	struct iovec iov[64];

	if (n > 64)
		return tst_fail(t, "zt_xfer: too many pieces");
	memcpy(iov, iov0, (size_t)n * sizeof(*iov));
	return tst_xfer_iov(t, c, is_put, iov, n);
}

static int zt_send(struct tst *t, void *buf, size_t len)
{
	struct iovec v = { buf, len };

	return zt_xfer(t, tst_conn(t, 1), 1, &v, 1);
}

/* Receive len bytes into a canary-filled buffer and check them against
 * the pattern (seed, off); the bytes after them must stay canary. */
static int zt_recv_check(struct tst *t, uint8_t *buf, size_t len,
			 uint64_t seed, uint64_t off, const char *what)
{
	struct iovec v = { buf, len };
	size_t bad;

	memset(buf, ZT_CANARY, len + 64);
	if (zt_xfer(t, tst_conn(t, 0), 0, &v, 1))
		return -1;
	bad = tst_pat_check(buf, len, seed, off);
	TST_CHECK(t, bad == len, "%s: byte %zu of %zu differs (got %#x, want "
		  "%#x)", what, bad, len, buf[bad],
		  tst_pat_byte(seed, off + bad));
	for (bad = len; bad < len + 64; bad++)
		TST_CHECK(t, buf[bad] == ZT_CANARY, "%s: byte written past the "
			  "iovec at %zu", what, bad);
	return 0;
}

static int zt_stats(struct tst *t, int peer, rdmach_stats_t *conn_st,
		    rdmach_stats_t *ctx_st)
{
	if (conn_st && rdmach_conn_stats(tst_conn(t, peer), conn_st))
		return tst_fail(t, "rdmach_conn_stats failed");
	if (ctx_st && rdmach_ctx_stats(t->ctx, ctx_st))
		return tst_fail(t, "rdmach_ctx_stats failed");
	return 0;
}

/* ---- streams: shapes, partial gets, interleaving ------------------------ */

/* Both ways at once: sizes cross the threshold, 1..8 pieces with gaps on
 * both sides; the receiver's calls are cut independently (partial gets
 * of a rendezvous, several puts per get). */
static int zt_streams(struct tst *t)
{
	static const size_t sizes[] = { 1, 300000, 7, 65536, 65535, 4096,
					1 << 20, 100, 200001, 3 };
	const struct zt_case *zc = t->c->arg;
	struct tst_shape put = { .min_pieces = 1, .max_pieces = 8, .gaps = 1,
				 .zero_pct = 10, .sizes = sizes,
				 .nsizes = (int)(sizeof(sizes) /
						 sizeof(sizes[0])) };
	struct tst_shape get = { .min_call = 1, .max_call = 150000,
				 .min_pieces = 1, .max_pieces = 8,
				 .gaps = 1 };
	struct tst_stream s[2];
	rdmach_stats_t st;
	int peer = 1 - t->rank, ret = zt_connect(t, zc);

	if (ret)
		return ret;
	if (zc->mode)		/* whole gets: several puts in one get */
		get.min_call = 200000, get.max_call = 400000;
	tst_stream_init(&s[0], tst_conn(t, peer), peer, 1,
			tst_seed(31, t->rank, peer),
			tst_scaled(16u << 20, 4u << 20), &put);
	tst_stream_init(&s[1], tst_conn(t, peer), peer, 0,
			tst_seed(31, peer, t->rank),
			tst_scaled(16u << 20, 4u << 20), &get);
	ret = tst_run(t, s, 2);
	tst_stream_free(&s[0]);
	tst_stream_free(&s[1]);
	if (ret || zt_stats(t, peer, &st, NULL))
		return -1;
	tst_log(t, "%llu zero-copy puts (%llu bytes), %llu pipelined",
		(unsigned long long)st.zcopy_msgs,
		(unsigned long long)st.zcopy_bytes,
		(unsigned long long)st.pipelined_msgs);
	TST_CHECK(t, st.zcopy_msgs > 0, "no put went zero-copy");
	TST_CHECK(t, st.zcopy_bytes >= st.zcopy_msgs *
		     tst_knob("RDMACH_ZCOPY_THRESHOLD"),
		  "zero-copy puts under the threshold");
	return 0;
}

/* RDMACH_ZCOPY=0: the same traffic, all copied. */
static int zt_disabled(struct tst *t)
{
	static const struct zt_case zc = { "64K", NULL, NULL, 0 };
	rdmach_stats_t st;
	int ret;

	setenv("RDMACH_ZCOPY", "0", 1);
	if (!tst_have_ib_device())
		return tst_skip(t, "no RDMA device");
	setenv("RDMACH_TRANSPORT", "ib", 1);
	setenv("RDMACH_ZCOPY_THRESHOLD", zc.threshold, 1);
	if (tst_connect(t, &t->ctx))
		return tst_fail(t, "init/connect over ib failed");
	if (t->rank == 0)
		ret = tst_put_all(t, tst_conn(t, 1), 1, tst_seed(32, 0, 1),
				  4u << 20);
	else
		ret = tst_get_all(t, tst_conn(t, 0), 0, tst_seed(32, 0, 1),
				  4u << 20);
	if (ret || zt_stats(t, 1 - t->rank, &st, NULL))
		return -1;
	TST_CHECK(t, st.zcopy_msgs == 0, "RDMACH_ZCOPY=0 but %llu zero-copy "
		  "puts", (unsigned long long)st.zcopy_msgs);
	return 0;
}

/* A pending zero-copy put retried with another iovec: -EINVAL, and the
 * right retry still completes. */
static int zt_retry_iov(struct tst *t)
{
	static const struct zt_case zc = { "64K", NULL, NULL, 0 };
	size_t len = 1u << 20;
	uint8_t *buf = malloc(len + 64);
	uint64_t seed = tst_seed(33, 0, 1);
	int ret = zt_connect(t, &zc);

	if (ret || !buf) {
		free(buf);
		return ret ? ret : tst_fail(t, "malloc");
	}
	if (t->rank == 0) {
		struct iovec v = { buf, len }, w = { buf, len - 1 };
		ssize_t r;

		tst_pat_fill(buf, len, seed, 0);
		r = rdmach_put(tst_conn(t, 1), &v, 1);
		if (r == 0) {	/* pending until rank 1 reads */
			r = rdmach_put(tst_conn(t, 1), &w, 1);
			if (r != -EINVAL)
				ret = tst_fail(t, "retry with another iovec "
					       "returned %zd, not -EINVAL", r);
		} else {
			ret = tst_fail(t, "1 MiB put returned %zd at once "
				       "(zero-copy must return 0 first)", r);
		}
		tst_barrier(t);
		if (!ret)
			ret = zt_send(t, buf, len);
	} else {
		tst_barrier(t);
		ret = zt_recv_check(t, buf, len, seed, 0, "after -EINVAL");
	}
	free(buf);
	return ret;
}

/* ---- memory events under the cache ------------------------------------- */

/* munmap + mmap at the same address with new contents, madvise(DONTNEED)
 * and rewrite, free + malloc: the receiver must get the new bytes. */
enum { ZT_MUNMAP, ZT_MADVISE, ZT_FREE };

static void *zt_map(void *at, size_t len)
{
	void *p = mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
		       MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int zt_mem_send(struct tst *t, int mode, size_t len, int rounds)
{
	uint64_t seed = tst_seed(34, 0, 1);
	rdmach_stats_t before, after, cs;
	uint8_t *buf, *first = NULL;
	int i, ret = 0, same = 0;

	buf = mode == ZT_FREE ? malloc(len) : zt_map(NULL, len);
	if (!buf)
		return tst_fail(t, "allocation of %zu bytes failed", len);
	zt_stats(t, 1, NULL, &before);
	for (i = 0; i < rounds && !ret; i++) {
		if (i && mode == ZT_MUNMAP) {
			munmap(buf, len);
			if (zt_map(buf, len) != buf)
				return tst_fail(t, "mmap at %p failed",
						(void *)buf);
		} else if (i && mode == ZT_MADVISE) {
			if (madvise(buf, len, MADV_DONTNEED))
				return tst_fail(t, "madvise: %s",
						strerror(errno));
		} else if (i && mode == ZT_FREE) {
			free(buf);
			buf = malloc(len);
			if (!buf)
				return tst_fail(t, "malloc failed");
			same += buf == first;
		}
		if (!i)
			first = buf;
		/* MADV_DONTNEED gave zero pages: check before rewriting */
		if (i && mode == ZT_MADVISE && buf[len / 2])
			return tst_fail(t, "madvise(MADV_DONTNEED) kept data");
		tst_pat_fill(buf, len, seed, (uint64_t)i << 32);
		ret = zt_send(t, buf, len);
	}
	if (mode == ZT_FREE)
		free(buf);
	else
		munmap(buf, len);
	if (ret || zt_stats(t, 1, &cs, &after))
		return -1;
	tst_log(t, "rcache: %llu hits, %llu misses, %llu invalidations; "
		"%d of %d mallocs at the first address",
		(unsigned long long)(after.rcache_hits - before.rcache_hits),
		(unsigned long long)(after.rcache_misses - before.rcache_misses),
		(unsigned long long)(after.rcache_invalidations -
				     before.rcache_invalidations),
		same, rounds - 1);
	TST_CHECK(t, cs.zcopy_msgs >= (uint64_t)rounds, "only %llu of %d "
		  "sends went zero-copy", (unsigned long long)cs.zcopy_msgs,
		  rounds);
	if (mode != ZT_FREE)
		TST_CHECK(t, after.rcache_invalidations >
			     before.rcache_invalidations,
			  "the memory event invalidated no cache entry");
	else if (!ZT_QUARANTINE)
		TST_CHECK(t, same > 0, "malloc never returned the freed "
			  "address: the case tested nothing");
	return 0;
}

static int zt_mem(struct tst *t)
{
	const struct zt_case *zc = t->c->arg;
	size_t len = 1u << 20;
	int rounds = 4, ret = zt_connect(t, zc), i;
	uint8_t *buf;

	if (ret)
		return ret;
	if (t->rank == 0)
		return zt_mem_send(t, zc->mode, len, rounds);
	buf = malloc(len + 64);
	if (!buf)
		return tst_fail(t, "malloc");
	for (i = 0; i < rounds && !ret; i++)
		ret = zt_recv_check(t, buf, len, tst_seed(34, 0, 1),
				    (uint64_t)i << 32, "after the memory event");
	free(buf);
	return ret;
}

/* ---- fork during traffic ------------------------------------------------- */

/* Rank 0 forks every few puts; children scribble over their copy of the
 * buffer and _exit or exec; the parent rewrites and sends. */
static int zt_fork(struct tst *t)
{
	static const struct zt_case zc = { "64K", NULL, NULL, 0 };
	size_t len = 512u << 10;
	int rounds = 24, i, ret = zt_connect(t, &zc), kids = 0;
	uint64_t seed = tst_seed(35, 0, 1);
	uint8_t *buf;

	if (ret)
		return ret;
	buf = malloc(len + 64);
	if (!buf)
		return tst_fail(t, "malloc");
	for (i = 0; i < rounds && !ret; i++) {
		if (t->rank) {
			ret = zt_recv_check(t, buf, len, seed, (uint64_t)i << 32,
					    "with fork()s in the sender");
			continue;
		}
		if (i % 3 == 1) {
			pid_t pid = fork();

			if (pid == 0) {
				memset(buf, 0x5a, len);
				if (i % 2)
					execl("/bin/true", "true", (char *)NULL);
				_exit(0);
			}
			if (pid < 0) {
				ret = tst_fail(t, "fork: %s", strerror(errno));
				break;
			}
			kids++;
		}
		tst_pat_fill(buf, len, seed, (uint64_t)i << 32);
		ret = zt_send(t, buf, len);
	}
	while (t->rank == 0 && kids > 0) {
		int status;
		pid_t p = wait(&status);

		if (p < 0)
			break;
		kids--;
		if (!ret && (!WIFEXITED(status) || WEXITSTATUS(status)))
			ret = tst_fail(t, "a forked child ended with status "
				       "%#x", status);
	}
	free(buf);
	return ret;
}

/* ---- many distinct buffers: eviction ------------------------------------ */

static int zt_many(struct tst *t)
{
	const struct zt_case *zc = t->c->arg;
	size_t len = 8192, stride = 12288;
	uint64_t nbuf = 10000, i;
	uint64_t seed = tst_seed(36, 0, 1);
	uint64_t cap = strtoull(zc->max_entries, NULL, 10);
	rdmach_stats_t st, cs;
	uint8_t *area;
	int ret = zt_connect(t, zc);

	if (ret)
		return ret;
	area = zt_map(NULL, nbuf * stride + 64);
	if (!area)
		return tst_fail(t, "mmap of %llu buffers failed",
				(unsigned long long)nbuf);
	/* distinct buffers on both sides, each at a different page offset */
	for (i = 0; i < nbuf && !ret; i++) {
		uint8_t *b = area + i * stride + (i * 64) % 4096;

		if (t->rank == 0) {
			tst_pat_fill(b, len, seed, i << 32);
			ret = zt_send(t, b, len);
		} else {
			ret = zt_recv_check(t, b, len, seed, i << 32,
					    "distinct buffers");
		}
	}
	munmap(area, nbuf * stride + 64);
	if (ret || zt_stats(t, 1 - t->rank, &cs, &st))
		return -1;
	tst_log(t, "%llu buffers: rcache %llu hits, %llu misses, %llu "
		"evictions", (unsigned long long)nbuf,
		(unsigned long long)st.rcache_hits,
		(unsigned long long)st.rcache_misses,
		(unsigned long long)st.rcache_evictions);
	if (t->rank == 0)
		TST_CHECK(t, cs.zcopy_msgs == nbuf, "%llu of %llu sends went "
			  "zero-copy", (unsigned long long)cs.zcopy_msgs,
			  (unsigned long long)nbuf);
	TST_CHECK(t, st.rcache_misses >= nbuf, "%llu misses for %llu "
		  "distinct buffers", (unsigned long long)st.rcache_misses,
		  (unsigned long long)nbuf);
	TST_CHECK(t, st.rcache_evictions + cap + 8 >= st.rcache_misses,
		  "cache of %llu entries: %llu misses but only %llu "
		  "evictions", (unsigned long long)cap,
		  (unsigned long long)st.rcache_misses,
		  (unsigned long long)st.rcache_evictions);
	return 0;
}

/* ---- read-only source: registration fails, the copy path takes over ---- */

static int zt_readonly(struct tst *t)
{
	static const struct zt_case zc = { "64K", NULL, NULL, 0 };
	size_t len = 256u << 10;
	uint64_t seed = tst_seed(37, 0, 1);
	uint8_t *buf;
	int ret = zt_connect(t, &zc);

	if (ret)
		return ret;
	if (t->rank == 1) {
		buf = malloc(len + 64);
		if (!buf)
			return tst_fail(t, "malloc");
		ret = zt_recv_check(t, buf, len, seed, 0, "read-only source");
		free(buf);
		return ret;
	}
	buf = zt_map(NULL, len);
	if (!buf)
		return tst_fail(t, "mmap");
	tst_pat_fill(buf, len, seed, 0);
	if (mprotect(buf, len, PROT_READ))
		ret = tst_fail(t, "mprotect: %s", strerror(errno));
	if (!ret)
		ret = zt_send(t, buf, len);
	munmap(buf, len);
	return ret;
}

/* ---- deferred puts (rdmach_put_deferred) --------------------------------- */

#define ZT_DEF_LARGE 6		/* in flight before the reader starts */
#define ZT_DEF_PIECE (256u << 10)
#define ZT_DEF_SMALL 100u	/* bytes between them (copied: no ticket) */
#define ZT_DEF_MORE 40		/* then more than the transport keeps */

#define ZT_DEF_LEN (ZT_DEF_LARGE * (size_t)(ZT_DEF_PIECE + ZT_DEF_SMALL))
#define ZT_DEF_LEN2 (ZT_DEF_MORE * (size_t)ZT_DEF_PIECE)

/* Writer of zt_deferred, buffers filled: phase 1 (reader idle), then
 * phase 2. */
static int zt_deferred_phases(struct tst *t, rdmach_conn_t *c, uint8_t *buf,
			      uint8_t *buf2)
{
	int64_t tk, last = 0;
	uint64_t done = 0;
	rdmach_stats_t st;
	int i, ret;

	ret = tst_put_deferred_burst(t, c, buf, ZT_DEF_LARGE, ZT_DEF_PIECE,
				     ZT_DEF_SMALL, &last);
	if (ret || tst_barrier(t))
		return -1;
	ret = tst_put_done_wait(t, c, &done);
	memset(buf, 0xa5, ZT_DEF_LEN);	/* the caller's again: reused at once */
	TST_CHECK(t, ret == 0 && done >= (uint64_t)last, "put_done %d (%s), "
		  "done %llu, last ticket %lld", ret, rdmach_strerror(ret),
		  (unsigned long long)done, (long long)last);
	/* more than the transport keeps in flight: some wait for room */
	for (i = 0; i < ZT_DEF_MORE; i++) {
		tk = tst_put_deferred_whole(t, c, buf2 + (size_t)i *
					    ZT_DEF_PIECE, ZT_DEF_PIECE);
		TST_CHECK(t, tk > last, "put %d of phase 2: ticket %lld after "
			  "%lld", i, (long long)tk, (long long)last);
		last = tk;
	}
	ret = tst_put_done_wait(t, c, &done);
	TST_CHECK(t, ret == 0 && done >= (uint64_t)last, "phase 2: put_done "
		  "%d, done %llu, last ticket %lld", ret,
		  (unsigned long long)done, (long long)last);
	if (zt_stats(t, 1, &st, NULL))
		return -1;
	TST_CHECK(t, st.zcopy_msgs == ZT_DEF_LARGE + ZT_DEF_MORE, "%llu "
		  "zero-copy puts counted, %d made",
		  (unsigned long long)st.zcopy_msgs, ZT_DEF_LARGE + ZT_DEF_MORE);
	return tst_barrier(t);
}

static int zt_deferred_writer(struct tst *t, rdmach_conn_t *c, uint64_t seed,
			      uint64_t seed2)
{
	uint8_t *buf = malloc(ZT_DEF_LEN), *buf2 = malloc(ZT_DEF_LEN2);
	int ret;

	if (buf && buf2) {
		tst_pat_fill(buf, ZT_DEF_LEN, seed, 0);
		tst_pat_fill(buf2, ZT_DEF_LEN2, seed2, 0);
		ret = zt_deferred_phases(t, c, buf, buf2);
	} else {
		ret = tst_fail(t, "out of memory");
	}
	free(buf);
	free(buf2);
	return ret;
}

/* Deferred puts: each returns at once with a growing ticket, small ones
 * between them go through the ring meanwhile, none is done before the
 * reader reads and all are once put_done says so (the writer overwrites
 * its buffer right then: what the reader got must not show it); then a
 * stream of more than IB_ZC_TX_MAX while the reader reads. */
static int zt_deferred(struct tst *t)
{
	static const struct zt_case zc = { "64K", NULL, NULL, 0 };
	uint64_t seed = tst_seed(38, 0, 1), seed2 = tst_seed(39, 0, 1);
	rdmach_conn_t *c;
	int ret = zt_connect(t, &zc);

	if (ret)
		return ret;
	c = tst_conn(t, 1 - t->rank);
	if (t->rank == 0)
		return zt_deferred_writer(t, c, seed, seed2);
	if (tst_barrier(t) || tst_get_all(t, c, 0, seed, ZT_DEF_LEN) ||
	    tst_get_all(t, c, 0, seed2, ZT_DEF_LEN2))
		return -1;
	return tst_barrier(t);
}

/* A deferred put whose reader is killed: put_done fails with -ECONNRESET
 * within the peer timeout, not later than a test stall. */
static int zt_deferred_death(struct tst *t)
{
	static const struct zt_case zc = { "64K", NULL, NULL, 0 };
	uint8_t *buf;
	uint64_t done, t0;
	int64_t tk;
	int ret = zt_connect(t, &zc);

	if (ret)
		return ret;
	if (tst_barrier(t))
		return -1;
	if (t->rank == 1) {
		raise(SIGKILL);
		return tst_fail(t, "still alive after SIGKILL");
	}
	buf = calloc(1, ZT_DEF_PIECE);
	if (!buf)
		return tst_fail(t, "out of memory");
	t0 = rdmach_now_ns();
	tk = tst_put_deferred_whole(t, tst_conn(t, 1), buf, ZT_DEF_PIECE);
	ret = tk <= 0 ? (int)tk : tst_put_done_wait(t, tst_conn(t, 1), &done);
	free(buf);
	TST_CHECK(t, ret == -ECONNRESET, "deferred put to a dead peer ended "
		  "with %s (ticket %lld), expected -ECONNRESET",
		  rdmach_strerror(ret), (long long)tk);
	tst_log(t, "failed after %.2f ms: %s",
		(double)(rdmach_now_ns() - t0) / 1e6,
		rdmach_conn_error(tst_conn(t, 1)));
	return 0;
}

/* [8-byte header, 300000-byte payload] messages (tst_rndv_small_head):
 * the header goes through the ring ahead of the rendezvous, the payload
 * is read by the peer, and only the payload counts as zero-copy. */
static int zt_small_head(struct tst *t)
{
	static const struct zt_case zc = { "64K", NULL, NULL, 0 };
	const size_t head = 8, payload = 300000;
	rdmach_stats_t st;
	int ret = zt_connect(t, &zc);

	if (ret)
		return ret;
	if (tst_rndv_small_head(t, tst_conn(t, 1 - t->rank), head, payload))
		return -1;
	if (t->rank == 0) {
		if (zt_stats(t, 1, &st, NULL))
			return -1;
		TST_CHECK(t, st.zcopy_msgs == TST_RNDV_HEAD_MSGS &&
			  st.zcopy_bytes == TST_RNDV_HEAD_MSGS * payload,
			  "zero-copy: %llu messages, %llu bytes; expected %d of "
			  "%zu", (unsigned long long)st.zcopy_msgs,
			  (unsigned long long)st.zcopy_bytes,
			  TST_RNDV_HEAD_MSGS, payload);
	}
	return tst_barrier(t);
}

static const struct zt_case c_small = { "64K", NULL, NULL, 0 };
static const struct zt_case c_whole = { "64K", NULL, NULL, 1 };
static const struct zt_case c_low = { "1", NULL, NULL, 0 };
static const struct zt_case c_munmap = { "64K", NULL, NULL, ZT_MUNMAP };
static const struct zt_case c_madvise = { "64K", NULL, NULL, ZT_MADVISE };
static const struct zt_case c_free = { "64K", NULL, NULL, ZT_FREE };
static const struct zt_case c_many = { "4K", "64", "1M", 0 };

static const struct tst_case cases[] = {
	{ "zcopy_streams_partial_gets", 2, zt_streams, TST_NO_CTX, &c_small,
	  { 0 } },
	{ "zcopy_streams_whole_gets", 2, zt_streams, TST_NO_CTX, &c_whole,
	  { 0 } },
	{ "zcopy_streams_threshold_1", 2, zt_streams, TST_NO_CTX, &c_low,
	  { 0 } },
	{ "zcopy_disabled", 2, zt_disabled, TST_NO_CTX, NULL, { 0 } },
	{ "zcopy_retry_other_iov", 2, zt_retry_iov, TST_NO_CTX, NULL, { 0 } },
	{ "zcopy_munmap_mmap_same_address", 2, zt_mem, TST_NO_CTX, &c_munmap,
	  { 0 } },
	{ "zcopy_madvise_dontneed", 2, zt_mem, TST_NO_CTX, &c_madvise, { 0 } },
	{ "zcopy_free_malloc_same_address", 2, zt_mem, TST_NO_CTX, &c_free,
	  { 0 } },
	{ "zcopy_fork_during_traffic", 2, zt_fork, TST_NO_CTX, NULL, { 0 } },
	{ "rcache_10000_buffers_eviction", 2, zt_many, TST_NO_CTX, &c_many,
	  { 0 } },
	{ "zcopy_readonly_source", 2, zt_readonly, TST_NO_CTX, NULL, { 0 } },
	{ "zcopy_deferred_stream", 2, zt_deferred, TST_NO_CTX, NULL, { 0 } },
	{ "zcopy_small_head", 2, zt_small_head, TST_NO_CTX, NULL, { 0 } },
	{ "zcopy_deferred_death", 2, zt_deferred_death,
	  TST_NO_CTX | TST_LAUNCH_ONLY | TST_KEEP_GOING, NULL,
	  { 0, -SIGKILL } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, cases,
			(int)(sizeof(cases) / sizeof(cases[0])));
}
