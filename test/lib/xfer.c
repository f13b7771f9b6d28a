/* xfer.c - the transfer engine: put and get streams of the pattern, cut
 * into calls and iovecs of random shapes, polled together until done. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "tst.h"

#define XFER_GAP_MAX 15
#define XFER_CANARY 0x5a	/* get: bytes around the iovec pieces */
#define XFER_JUNK 0xa5		/* put: bytes around the iovec pieces */
#define XFER_SCRIBBLE 0xee	/* put: accepted bytes, reused at once */

static size_t xfer_max_call(const struct tst_shape *sh)
{
	size_t m = sh->max_call;
	int i;

	for (i = 0; sh->sizes && i < sh->nsizes; i++)
		if (sh->sizes[i] > m)
			m = sh->sizes[i];
	return m;
}

void tst_stream_init(struct tst_stream *s, rdmach_conn_t *conn, int peer,
		     int is_put, uint64_t seed, uint64_t total,
		     const struct tst_shape *shape)
{
	struct tst_shape *sh;
	int zeros;

	memset(s, 0, sizeof(*s));
	s->conn = conn;
	s->peer = peer;
	s->is_put = is_put;
	s->seed = seed;
	s->total = total;
	s->shape = *shape;
	sh = &s->shape;
	if (sh->min_pieces < 1)
		sh->min_pieces = 1;
	if (sh->max_pieces < sh->min_pieces)
		sh->max_pieces = sh->min_pieces;
	if (!sh->max_call && !sh->sizes)
		sh->max_call = 65536;
	if (sh->min_call > sh->max_call)
		sh->min_call = sh->max_call;
	zeros = sh->zero_pct ? sh->max_pieces : 0;
	s->iovmax = sh->max_pieces + zeros + 1;
	s->bufsz = xfer_max_call(sh) + (size_t)s->iovmax * (XFER_GAP_MAX + 1) +
		   64;
	s->buf = malloc(s->bufsz);
	s->iov = calloc((size_t)s->iovmax, sizeof(*s->iov));
	s->rng = seed ^ 0x5deece66dull;
	if (!s->buf || !s->iov) {
		fprintf(stderr, "tst: out of memory for a stream buffer\n");
		exit(2);
	}
}

void tst_stream_free(struct tst_stream *s)
{
	free(s->buf);
	free(s->iov);
	s->buf = NULL;
	s->iov = NULL;
}

static size_t xfer_call_len(struct tst_stream *s)
{
	const struct tst_shape *sh = &s->shape;
	uint64_t left = s->total - s->done;
	size_t len;

	if (sh->sizes)
		len = sh->sizes[s->ncall % (uint64_t)sh->nsizes];
	else
		len = (size_t)tst_rand_range(&s->rng, sh->min_call,
					     sh->max_call);
	s->ncall++;
	return len < left ? len : (size_t)left;
}

/* Lay a call of len bytes out as an iovec over s->buf: random cut points,
 * zero-length entries, random gaps.  Returns the bytes of s->buf used. */
static size_t xfer_build(struct tst_stream *s, size_t len)
{
	const struct tst_shape *sh = &s->shape;
	int k = (int)tst_rand_range(&s->rng, (uint64_t)sh->min_pieces,
				    (uint64_t)sh->max_pieces);
	size_t cut_prev = 0, pos = 0;
	int i, n = 0;

	if ((size_t)k > len && len > 0)
		k = (int)len;
	for (i = 0; i < k; i++) {
		size_t cut, plen;

		if (i == k - 1)
			cut = len;
		else
			cut = cut_prev + (size_t)tst_rand_range(&s->rng, 0,
				(len - cut_prev) * 2 / (size_t)(k - i));
		if (cut > len)
			cut = len;
		plen = cut - cut_prev;
		cut_prev = cut;
		if (sh->zero_pct && n < s->iovmax - 1 &&
		    (int)tst_rand_range(&s->rng, 0, 99) < sh->zero_pct) {
			s->iov[n].iov_len = 0;
			s->iov[n].iov_base = sh->null_zero &&
					     (tst_rand(&s->rng) & 1) ?
					     NULL : s->buf + pos;
			n++;
		}
		if (sh->gaps)
			pos += (size_t)tst_rand_range(&s->rng, 0, XFER_GAP_MAX);
		s->iov[n].iov_base = s->buf + pos;
		s->iov[n].iov_len = plen;
		pos += plen;
		n++;
	}
	s->iovcnt = n;
	return pos + (sh->gaps ? XFER_GAP_MAX : 0);
}

void tst_iov_advance(struct iovec *iov, int *iovcnt, size_t r)
{
	int i = 0;

	while (i < *iovcnt && r >= iov[i].iov_len) {
		r -= iov[i].iov_len;
		i++;
	}
	if (i < *iovcnt) {
		iov[i].iov_base = (uint8_t *)iov[i].iov_base + r;
		iov[i].iov_len -= r;
	}
	memmove(iov, iov + i, (size_t)(*iovcnt - i) * sizeof(*iov));
	*iovcnt -= i;
}

static int xfer_error(struct tst *t, struct tst_stream *s, ssize_t r)
{
	return tst_fail(t, "%s rank %d failed at stream offset %llu of %llu "
			"(call %llu): %s [%s]",
			s->is_put ? "put to" : "get from", s->peer,
			(unsigned long long)s->done,
			(unsigned long long)s->total,
			(unsigned long long)s->calls, rdmach_strerror((int)r),
			rdmach_conn_error(s->conn));
}

/* RDMACH_TEST_CORRUPT: the stream offset whose byte puts flip, to prove
 * that the checks catch a corrupt byte (UINT64_MAX: off). */
static uint64_t xfer_corrupt_off(void)
{
	static uint64_t off;
	static int init;

	if (!init) {
		const char *s = getenv("RDMACH_TEST_CORRUPT");

		off = s && *s ? strtoull(s, NULL, 0) : UINT64_MAX;
		init = 1;
	}
	return off;
}

static void xfer_corrupt(struct tst_stream *s, uint64_t off)
{
	uint64_t bad = xfer_corrupt_off();
	int i;

	for (i = 0; i < s->iovcnt; i++) {
		size_t n = s->iov[i].iov_len;

		if (bad >= off && bad < off + n) {
			((uint8_t *)s->iov[i].iov_base)[bad - off] ^= 0x10;
			return;
		}
		off += n;
	}
}

/* One put call.  Returns bytes accepted, or -1 after tst_fail. */
static ssize_t xfer_put(struct tst *t, struct tst_stream *s)
{
	ssize_t r;
	int i;

	if (!s->pend_len) {
		size_t len = xfer_call_len(s), used;
		uint64_t off = s->done;

		used = xfer_build(s, len);
		memset(s->buf, XFER_JUNK, used);
		for (i = 0; i < s->iovcnt; i++) {
			if (!s->iov[i].iov_len)
				continue;
			tst_pat_fill(s->iov[i].iov_base, s->iov[i].iov_len,
				     s->seed, off);
			off += s->iov[i].iov_len;
		}
		xfer_corrupt(s, s->done);
		s->pend_len = len;
	}
	r = rdmach_put(s->conn, s->iov, s->iovcnt);
	s->calls++;
	if (r < 0)
		return xfer_error(t, s, r);
	if ((size_t)r > s->pend_len)
		return tst_fail(t, "put to rank %d returned %zd for an iovec "
				"of %zu bytes", s->peer, r, s->pend_len);
	if (!r) {
		s->zero_returns++;
		return 0;
	}
	/* The contract lets the caller reuse accepted bytes at once. */
	{
		size_t left = (size_t)r;

		for (i = 0; i < s->iovcnt && left; i++) {
			size_t n = s->iov[i].iov_len < left ?
				   s->iov[i].iov_len : left;

			if (n)
				memset(s->iov[i].iov_base, XFER_SCRIBBLE, n);
			left -= n;
		}
	}
	tst_iov_advance(s->iov, &s->iovcnt, (size_t)r);
	s->pend_len -= (size_t)r;
	s->done += (uint64_t)r;
	return r;
}

static int xfer_check_get(struct tst *t, struct tst_stream *s, size_t r,
			  size_t used)
{
	uint8_t *p = s->buf, *end = s->buf + used;
	uint64_t off = s->done;
	size_t left = r;
	int i;

	for (i = 0; i < s->iovcnt; i++) {
		uint8_t *base = s->iov[i].iov_base;
		size_t n = s->iov[i].iov_len < left ? s->iov[i].iov_len : left;
		size_t bad;

		if (!s->iov[i].iov_len)
			continue;
		for (; p < base; p++)
			if (*p != XFER_CANARY)
				goto err_canary;
		bad = tst_pat_check(base, n, s->seed, off);
		if (bad < n)
			return tst_fail(t, "data from rank %d wrong at stream "
				"offset %llu (get call %llu, iov[%d]+%zu): "
				"expected 0x%02x got 0x%02x", s->peer,
				(unsigned long long)(off + bad),
				(unsigned long long)s->calls, i, bad,
				tst_pat_byte(s->seed, off + bad), base[bad]);
		off += n;
		left -= n;
		p = base + s->iov[i].iov_len;
	}
	for (; p < end; p++)
		if (*p != XFER_CANARY)
			goto err_canary;
	return 0;
err_canary:
	return tst_fail(t, "get from rank %d (call %llu, %zu bytes) wrote "
			"0x%02x outside its iovec, %td bytes into the buffer",
			s->peer, (unsigned long long)s->calls, r, *p,
			p - s->buf);
}

static ssize_t xfer_get(struct tst *t, struct tst_stream *s)
{
	size_t len = xfer_call_len(s), used;
	ssize_t r;

	used = xfer_build(s, len);
	memset(s->buf, XFER_CANARY, used);
	r = rdmach_get(s->conn, s->iov, s->iovcnt);
	s->calls++;
	if (r < 0)
		return xfer_error(t, s, r);
	if ((size_t)r > len)
		return tst_fail(t, "get from rank %d returned %zd for an iovec "
				"of %zu bytes", s->peer, r, len);
	if (!r) {
		s->zero_returns++;
		return 0;
	}
	if (xfer_check_get(t, s, (size_t)r, used))
		return -1;
	s->done += (uint64_t)r;
	return r;
}

/* After the last byte: the next gets give 0 until -ESHUTDOWN. */
static ssize_t xfer_wait_shutdown(struct tst *t, struct tst_stream *s)
{
	uint8_t byte = XFER_CANARY;
	struct iovec iov = { &byte, 1 };
	ssize_t r = rdmach_get(s->conn, &iov, 1);

	if (r == -ESHUTDOWN) {
		s->finished = 1;
		return 1;
	}
	if (r < 0)
		return tst_fail(t, "get from rank %d after the stream end: "
				"%s, expected -ESHUTDOWN [%s]", s->peer,
				rdmach_strerror((int)r),
				rdmach_conn_error(s->conn));
	if (r > 0)
		return tst_fail(t, "get from rank %d delivered a byte 0x%02x "
				"beyond the %llu bytes sent", s->peer, byte,
				(unsigned long long)s->total);
	return 0;
}

static ssize_t xfer_step(struct tst *t, struct tst_stream *s)
{
	ssize_t r;

	if (s->done == s->total) {
		if (s->is_put || !s->expect_shutdown) {
			s->finished = 1;
			return 0;
		}
		return xfer_wait_shutdown(t, s);
	}
	r = s->is_put ? xfer_put(t, s) : xfer_get(t, s);
	if (s->shape.sleep_us && r >= 0)
		usleep((useconds_t)s->shape.sleep_us);
	return r;
}

static int xfer_stalled(struct tst *t, struct tst_stream *s, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		if (s[i].finished)
			continue;
		return tst_fail(t, "no progress for %llu s: %s rank %d stuck at "
				"stream offset %llu of %llu after %llu calls "
				"(%llu returned 0)%s",
				(unsigned long long)(tst_stall_ns() / 1000000000u),
				s[i].is_put ? "put to" : "get from",
				s[i].peer, (unsigned long long)s[i].done,
				(unsigned long long)s[i].total,
				(unsigned long long)s[i].calls,
				(unsigned long long)s[i].zero_returns,
				s[i].done == s[i].total ?
				" waiting for -ESHUTDOWN" : "");
	}
	return tst_fail(t, "stalled");
}

int tst_run(struct tst *t, struct tst_stream *s, int n)
{
	uint64_t last = rdmach_now_ns(), stall = tst_stall_ns();
	int i, left;

	for (;;) {
		int moved = 0;

		left = 0;
		for (i = 0; i < n; i++) {
			ssize_t r;

			if (s[i].finished)
				continue;
			r = xfer_step(t, &s[i]);
			if (r < 0)
				return -1;
			moved |= r > 0;
			left += !s[i].finished;
		}
		if (!left)
			return 0;
		if (moved) {
			last = rdmach_now_ns();
			continue;
		}
		if (t->ctx) {
			int err = rdmach_progress(t->ctx);

			if (err && err != -ESHUTDOWN && err != -EPIPE)
				return tst_fail(t, "rdmach_progress: %s",
						rdmach_strerror(err));
		}
		if (rdmach_now_ns() - last > stall)
			return xfer_stalled(t, s, n);
		sched_yield();
	}
}

static int xfer_one(struct tst *t, rdmach_conn_t *conn, int peer,
		    int is_put, uint64_t seed, uint64_t len)
{
	struct tst_shape sh = { .min_call = 1, .max_call = 1 << 20,
				.min_pieces = 1, .max_pieces = 1 };
	struct tst_stream s;
	int ret;

	sh.min_call = sh.max_call = len < (1u << 20) ? len : (1u << 20);
	tst_stream_init(&s, conn, peer, is_put, seed, len, &sh);
	ret = tst_run(t, &s, 1);
	tst_stream_free(&s);
	return ret;
}

int tst_put_all(struct tst *t, rdmach_conn_t *conn, int peer, uint64_t seed,
		uint64_t len)
{
	return xfer_one(t, conn, peer, 1, seed, len);
}

int tst_get_all(struct tst *t, rdmach_conn_t *conn, int peer, uint64_t seed,
		uint64_t len)
{
	return xfer_one(t, conn, peer, 0, seed, len);
}

int tst_xfer_iov(struct tst *t, rdmach_conn_t *conn, int is_put,
		 struct iovec *iov, int iovcnt)
{
	const char *what = is_put ? "put" : "get";
	uint64_t last = rdmach_now_ns();

	while (iovcnt) {
		ssize_t r = is_put ? rdmach_put(conn, iov, iovcnt) :
				     rdmach_get(conn, iov, iovcnt);

		if (r < 0)
			return tst_fail(t, "%s: %s [%s]", what, tst_errname(r),
					rdmach_conn_error(conn));
		if (r > 0) {
			tst_iov_advance(iov, &iovcnt, (size_t)r);
			last = rdmach_now_ns();
			continue;
		}
		if (rdmach_now_ns() - last > tst_stall_ns()) {
			size_t left = 0;
			int i;

			for (i = 0; i < iovcnt; i++)
				left += iov[i].iov_len;
			return tst_fail(t, "%s stalled with %zu bytes left",
					what, left);
		}
		rdmach_progress(t->ctx);
	}
	return 0;
}

int64_t tst_put_deferred_whole(struct tst *t, rdmach_conn_t *c, uint8_t *p,
			       size_t len)
{
	struct iovec iov = { p, len };
	uint64_t t0 = rdmach_now_ns(), ticket;

	while (iov.iov_len) {
		ssize_t n = rdmach_put_deferred(c, &iov, 1, &ticket);

		if (n < 0)
			return n;
		if (ticket)
			return (size_t)n == iov.iov_len ? (int64_t)ticket :
			       tst_fail(t, "deferred put of %zu took %zd",
					iov.iov_len, n);
		iov.iov_base = (uint8_t *)iov.iov_base + n;
		iov.iov_len -= (size_t)n;
		if (rdmach_now_ns() - t0 > tst_stall_ns())
			return tst_fail(t, "deferred put stalled");
	}
	return 0;
}

int tst_put_done_wait(struct tst *t, rdmach_conn_t *c, uint64_t *done)
{
	uint64_t t0 = rdmach_now_ns();
	int r;

	while ((r = rdmach_put_done(c, done)) == 1)
		if (rdmach_now_ns() - t0 > tst_stall_ns())
			return tst_fail(t, "deferred puts not read");
	return r;
}

int tst_put_deferred_burst(struct tst *t, rdmach_conn_t *c, uint8_t *buf,
			   int n, size_t large, size_t small, int64_t *last)
{
	uint64_t done = 0;
	int64_t tk;
	int i, ret;

	for (i = 0; i < n; i++, buf += large + small) {
		tk = tst_put_deferred_whole(t, c, buf, large);
		TST_CHECK(t, tk > *last, "large put %d: ticket %lld after %lld",
			  i, (long long)tk, (long long)*last);
		*last = tk;
		tk = tst_put_deferred_whole(t, c, buf + large, small);
		TST_CHECK(t, tk == 0, "small put %d: ticket %lld, expected "
			  "none", i, (long long)tk);
	}
	ret = rdmach_put_done(c, &done);
	TST_CHECK(t, ret == 1 && done < (uint64_t)*last - (uint64_t)n + 1,
		  "before the reader read: put_done %d, done %llu (first "
		  "ticket %lld)", ret, (unsigned long long)done,
		  (long long)*last - n + 1);
	return 0;
}

/* Rank 0: one message, a waiting put on even i, else deferred (whole at
 * once, with a ticket). */
static int head_put(struct tst *t, rdmach_conn_t *c, struct iovec *iov,
		    int i)
{
	uint64_t ticket = 0, t0 = rdmach_now_ns();
	size_t len = iov[0].iov_len + iov[1].iov_len;
	ssize_t n;

	if (!(i % 2))
		return tst_xfer_iov(t, c, 1, iov, 2);
	while (!(n = rdmach_put_deferred(c, iov, 2, &ticket)) &&
	       rdmach_now_ns() - t0 < tst_stall_ns())
		;
	TST_CHECK(t, (size_t)n == len && ticket, "deferred put %d: %zd, "
		  "ticket %llu", i, n, (unsigned long long)ticket);
	return 0;
}

/* Rank 1: a get into room for more than the header must return just the
 * header, then one for the payload. */
static int head_get(struct tst *t, rdmach_conn_t *c, struct iovec *iov,
		    int i)
{
	size_t head = iov[0].iov_len;
	uint64_t t0 = rdmach_now_ns();
	ssize_t n;

	iov[0].iov_len = 1024;
	while (!(n = rdmach_get(c, iov, 1)) &&
	       rdmach_now_ns() - t0 < tst_stall_ns())
		;
	TST_CHECK(t, n >= 0 && (size_t)n == head, "message %d: a get of 1024 "
		  "returned %zd, expected the %zu-byte header", i, n, head);
	return tst_xfer_iov(t, c, 0, &iov[1], 1);
}

int tst_rndv_small_head(struct tst *t, rdmach_conn_t *c, size_t head,
			size_t payload)
{
	const size_t msg = head + payload;
	uint64_t seed = tst_stream_seed(t, 0, 1), done;
	uint8_t *buf = malloc(TST_RNDV_HEAD_MSGS * msg);
	rdmach_stats_t st0, st;
	int i, ret = 0;

	if (!buf || rdmach_conn_stats(c, &st0)) {
		free(buf);
		return tst_fail(t, "out of memory or no counters");
	}
	if (t->rank == 0)
		tst_pat_fill(buf, TST_RNDV_HEAD_MSGS * msg, seed, 0);
	for (i = 0; i < TST_RNDV_HEAD_MSGS && !ret; i++) {
		uint8_t *m = buf + (size_t)i * msg;
		struct iovec iov[2] = { { m, head }, { m + head, payload } };

		ret = t->rank == 0 ? head_put(t, c, iov, i) :
				     head_get(t, c, iov, i);
	}
	if (!ret && t->rank == 0)
		ret = tst_put_done_wait(t, c, &done);
	if (!ret && t->rank == 1) {
		size_t bad = tst_pat_check(buf, TST_RNDV_HEAD_MSGS * msg,
					   seed, 0);

		if (bad != TST_RNDV_HEAD_MSGS * msg)
			ret = tst_fail(t, "byte %zu of %zu differs", bad,
				       TST_RNDV_HEAD_MSGS * msg);
		else if (rdmach_conn_stats(c, &st) ||
			 st.zcopy_reads - st0.zcopy_reads != TST_RNDV_HEAD_MSGS)
			ret = tst_fail(t, "%llu zero-copy reads for %d "
				       "messages, expected one each",
				       (unsigned long long)(st.zcopy_reads -
							    st0.zcopy_reads),
				       TST_RNDV_HEAD_MSGS);
	}
	free(buf);
	return ret;
}

/* ---- reading in place ----------------------------------------------------- */

#define PEEK_GET 5000		/* largest get of tst_peek_reader */
#define PEEK_REPLY_EVERY 4	/* a reply put between every 4th peek and
				 * its consume */

/* One read in place of a random part of what peek shows at buf[got],
 * with a put of the reply stream (if any, every PEEK_REPLY_EVERY reads)
 * between peek and consume: *n set to the bytes read, 0, or peek's
 * negative errno (-ENOMSG, -EOPNOTSUPP: the caller gets instead); the
 * first read also tries consume beyond the peek.  0 or -1 (failed). */
static int peek_read(struct tst *t, rdmach_conn_t *c, uint8_t *buf,
		     size_t got, size_t total, uint64_t *rng, long *in_place,
		     struct tst_stream *reply, ssize_t *n)
{
	const void *p;
	size_t k;

	*n = rdmach_peek(c, &p);
	if (*n <= 0)
		return 0;
	if (got + (size_t)*n > total)
		return tst_fail(t, "peek shows %zd bytes at %zu of %zu", *n,
				got, total);
	k = (size_t)tst_rand_range(rng, 1, (uint64_t)*n);
	if (!(*in_place)++ && rdmach_consume(c, (size_t)*n + 1) != -EINVAL)
		return tst_fail(t, "consume beyond the peeked bytes");
	memcpy(buf + got, p, k);
	if (reply && reply->done < reply->total &&
	    *in_place % PEEK_REPLY_EVERY == 0 && xfer_put(t, reply) < 0)
		return -1;
	/* the bytes must not have moved under the put */
	if (memcmp(buf + got, p, k))
		return tst_fail(t, "peeked bytes at %zu changed before "
				"consume", got);
	if (rdmach_consume(c, k))
		return tst_fail(t, "consume of %zu", k);
	*n = (ssize_t)k;
	return 0;
}

int tst_peek_reader(struct tst *t, rdmach_conn_t *c, uint64_t seed,
		    size_t total, struct tst_stream *reply, long *in_place,
		    long *nomsg)
{
	uint8_t *buf = malloc(total);
	uint64_t rng = seed, t0 = rdmach_now_ns();
	int unsupported = 0, ret = 0;
	size_t got = 0, bad;

	*in_place = *nomsg = 0;
	if (!buf)
		return tst_fail(t, "out of memory");
	if (rdmach_peek(c, NULL) != -EINVAL || rdmach_consume(c, 0) != -EINVAL)
		ret = tst_fail(t, "peek without buf or consume of 0 bytes "
			       "accepted");
	while (got < total && !ret) {
		size_t room = total - got;
		ssize_t n = -ENOMSG;

		if (rdmach_now_ns() - t0 > tst_stall_ns()) {
			ret = tst_fail(t, "stalled at %zu of %zu", got, total);
			break;
		}
		if (!unsupported && tst_rand(&rng) % 4) {
			ret = peek_read(t, c, buf, got, total, &rng, in_place,
					reply, &n);
			if (ret)
				break;
			unsupported = n == -EOPNOTSUPP;
			*nomsg += n == -ENOMSG;
		}
		if (n == -ENOMSG || n == -EOPNOTSUPP) {
			/* small gets leave packets for peek to show */
			struct iovec iov = { buf + got, (size_t)tst_rand_range(
				&rng, 1, room < PEEK_GET ? room : PEEK_GET) };

			n = rdmach_get(c, &iov, 1);
		}
		if (n < 0)
			ret = tst_fail(t, "read at %zu: %s", got,
				       rdmach_strerror((int)n));
		else
			got += (size_t)n;
	}
	if (!ret) {
		bad = tst_pat_check(buf, total, seed, 0);
		if (bad != total)
			ret = tst_fail(t, "byte %zu of %zu differs", bad, total);
	}
	free(buf);
	if (!ret && reply)
		ret = tst_run(t, reply, 1);	/* the rest of the reply */
	if (unsupported)
		*in_place = -1;
	tst_log(t, "%ld reads in place, %ld -ENOMSG", *in_place, *nomsg);
	return ret;
}

int tst_peek_pair(struct tst *t, const size_t *sizes, int nsizes,
		  uint64_t total, uint64_t reply_total, long *in_place)
{
	rdmach_conn_t *c = tst_conn(t, 1 - t->rank);
	struct tst_shape sh = { .min_pieces = 1, .max_pieces = 2,
				.sizes = sizes, .nsizes = nsizes };
	struct tst_shape rsh = { .min_call = 1, .max_call = 3000,
				 .min_pieces = 1, .max_pieces = 2 };
	uint64_t seed = tst_stream_seed(t, 0, 1);
	uint64_t rseed = tst_stream_seed(t, 1, 0);
	struct tst_stream s[2];
	long nomsg;
	int ret;

	*in_place = 0;
	if (!c)
		return -1;
	if (t->rank == 0) {
		tst_stream_init(&s[0], c, 1, 1, seed, total, &sh);
		tst_stream_init(&s[1], c, 1, 0, rseed, reply_total, &rsh);
		ret = tst_run(t, s, 2);
		tst_stream_free(&s[1]);
	} else {
		tst_stream_init(&s[0], c, 0, 1, rseed, reply_total, &rsh);
		ret = tst_peek_reader(t, c, seed, total, &s[0], in_place,
				      &nomsg);
	}
	tst_stream_free(&s[0]);
	return ret;
}
