/*
 * test_shm - behaviour specific to the shared-memory transport: the
 * cross-memory (CMA) rendezvous (partial gets, same-iovec retries, more
 * pieces than one control packet holds, RDMACH_SHM_CMA=0), the order of
 * a stream split between the line ring and the main ring, a dead peer
 * (data first, then -ECONNRESET in bounded time, for get, put and a
 * pending zero-copy put), and that no segment is left behind.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "core/log.h"
#include "lib/tst.h"

#define BIG (1u << 20)		/* above the default CMA threshold */

static int shm_only(struct tst *t, rdmach_conn_t *c)
{
	const char *tr = rdmach_conn_transport(c);

	if (!tr || strcmp(tr, "shm"))
		return tst_skip(t, "connection is not shm (%s)", tr ? tr : "?");
	return 0;
}

/* Put one buffer to completion; returns the put calls that returned 0. */
static long put_whole(struct tst *t, rdmach_conn_t *c, const void *buf,
		      size_t len, int *err)
{
	struct iovec iov = { (void *)buf, len };
	long zeros = 0;
	uint64_t t0 = rdmach_now_ns();

	*err = 0;
	while (iov.iov_len) {
		ssize_t n = rdmach_put(c, &iov, 1);

		if (n < 0) {
			*err = (int)n;
			return zeros;
		}
		if (n == 0)
			zeros++;
		else if ((size_t)n != iov.iov_len && zeros && len >= BIG)
			tst_log(t, "partial zero-copy completion %zd", n);
		iov.iov_base = (char *)iov.iov_base + n;
		iov.iov_len -= (size_t)n;
		if (rdmach_now_ns() - t0 > tst_stall_ns()) {
			*err = -ETIMEDOUT;
			return zeros;
		}
	}
	return zeros;
}

/* Put BIG pattern bytes (stream seed) to completion; returns the put calls
 * that returned 0, or -1 with *err = -ENOMEM. */
static long put_big_pattern(struct tst *t, rdmach_conn_t *c, uint64_t seed,
			    int *err)
{
	uint8_t *buf = malloc(BIG);
	long zeros;

	if (!buf) {
		*err = -ENOMEM;
		return -1;
	}
	tst_pat_fill(buf, BIG, seed, 0);
	zeros = put_whole(t, c, buf, BIG, err);
	free(buf);
	return zeros;
}

/* Receive len bytes in gets of `piece` bytes and check the pattern. */
static int get_pieces(struct tst *t, rdmach_conn_t *c, uint64_t seed,
		      size_t len, size_t piece)
{
	uint8_t *buf = malloc(len);
	size_t got = 0, bad;
	uint64_t t0 = rdmach_now_ns();

	if (!buf)
		return tst_fail(t, "out of memory");
	while (got < len) {
		struct iovec iov = { buf + got,
				     len - got < piece ? len - got : piece };
		ssize_t n = rdmach_get(c, &iov, 1);

		if (n < 0) {
			free(buf);
			return tst_fail(t, "get at offset %zu: %s", got,
					rdmach_strerror((int)n));
		}
		got += (size_t)n;
		if (rdmach_now_ns() - t0 > tst_stall_ns()) {
			free(buf);
			return tst_fail(t, "get stalled at %zu of %zu", got, len);
		}
	}
	bad = tst_pat_check(buf, len, seed, 0);
	free(buf);
	TST_CHECK(t, bad == len, "byte %zu of %zu differs", bad, len);
	return 0;
}

/* A large put is read in odd-sized partial gets straight out of the
 * sender's buffer; the put returns 0 until then and counts one zcopy. */
static int shm_rndv_partial(struct tst *t)
{
	rdmach_conn_t *c = tst_conn(t, 1 - t->rank);
	uint64_t seed = tst_stream_seed(t, 0, 1);
	rdmach_stats_t st;
	int err;

	if (!c || shm_only(t, c))
		return c ? TST_SKIP : -1;
	if (t->rank == 0) {
		long zeros = put_big_pattern(t, c, seed, &err);

		TST_CHECK(t, !err, "put: %s", rdmach_strerror(err));
		TST_CHECK(t, zeros > 0, "a zero-copy put returned the count at "
			  "once (not waiting for the reader)");
		TST_CHECK(t, !rdmach_conn_stats(c, &st) && st.zcopy_msgs == 1 &&
			  st.zcopy_bytes == BIG, "zcopy counters %llu msgs "
			  "%llu bytes, expected 1 / %u",
			  (unsigned long long)st.zcopy_msgs,
			  (unsigned long long)st.zcopy_bytes, BIG);
		return tst_barrier(t);
	}
	if (get_pieces(t, c, seed, BIG, 4097))
		return -1;
	return tst_barrier(t);
}

/* A retry with another iovec while a zero-copy put is pending: -EINVAL,
 * and the pending put still completes with the right one. */
static int shm_rndv_changed_iov(struct tst *t)
{
	rdmach_conn_t *c = tst_conn(t, 1 - t->rank);
	uint64_t seed = tst_stream_seed(t, 0, 1);

	if (!c || shm_only(t, c))
		return c ? TST_SKIP : -1;
	if (t->rank == 0) {
		uint8_t *buf = malloc(BIG), *other = malloc(BIG);
		struct iovec iov = { buf, BIG }, bad = { other, BIG };
		ssize_t n;
		int err;

		if (!buf || !other)
			return tst_fail(t, "out of memory");
		tst_pat_fill(buf, BIG, seed, 0);
		n = rdmach_put(c, &iov, 1);
		TST_CHECK(t, n == 0, "first zero-copy put returned %zd", n);
		n = rdmach_put(c, &bad, 1);
		TST_CHECK(t, n == -EINVAL, "retry with another buffer "
			  "returned %zd, expected -EINVAL", n);
		bad.iov_base = buf;
		bad.iov_len = BIG / 2;
		n = rdmach_put(c, &bad, 1);
		TST_CHECK(t, n == -EINVAL, "retry with another length "
			  "returned %zd, expected -EINVAL", n);
		put_whole(t, c, buf, BIG, &err);
		free(other);
		free(buf);
		TST_CHECK(t, !err, "put: %s", rdmach_strerror(err));
		return tst_barrier(t);
	}
	if (get_pieces(t, c, seed, BIG, BIG))
		return -1;
	return tst_barrier(t);
}

/* 100 pieces of 16 KiB: one control packet covers at most 64, the put
 * returns their bytes and the caller goes on with the rest. */
static int shm_rndv_many_pieces(struct tst *t)
{
	enum { NP = 100, PL = 16384 };
	rdmach_conn_t *c = tst_conn(t, 1 - t->rank);
	uint64_t seed = tst_stream_seed(t, 0, 1);

	if (!c || shm_only(t, c))
		return c ? TST_SKIP : -1;
	if (t->rank == 0) {
		uint8_t *buf = malloc((size_t)NP * PL);
		struct iovec iov[NP];
		int i, first = 0, calls_done = 0;
		uint64_t t0 = rdmach_now_ns();

		if (!buf)
			return tst_fail(t, "out of memory");
		tst_pat_fill(buf, (size_t)NP * PL, seed, 0);
		for (i = 0; i < NP; i++)
			iov[i] = (struct iovec){ buf + (size_t)i * PL, PL };
		while (first < NP) {
			ssize_t n = rdmach_put(c, iov + first, NP - first);

			if (n < 0) {
				free(buf);
				return tst_fail(t, "put: %s",
						rdmach_strerror((int)n));
			}
			if (n > 0) {
				if (n % PL) {
					free(buf);
					return tst_fail(t, "put took %zd bytes "
							"(not whole pieces)", n);
				}
				first += (int)(n / PL);
				calls_done++;
			}
			if (rdmach_now_ns() - t0 > tst_stall_ns()) {
				free(buf);
				return tst_fail(t, "put stalled");
			}
		}
		free(buf);
		TST_CHECK(t, calls_done >= 2, "100 pieces went in %d put(s)",
			  calls_done);
		return tst_barrier(t);
	}
	if (get_pieces(t, c, seed, (size_t)NP * PL, 300000))
		return -1;
	return tst_barrier(t);
}

/* Connect with the settings env (name, value, ..., NULL) and return the
 * shm connection to the other rank; NULL with *ret the case's result
 * (TST_SKIP or a failure) if there is none. */
static rdmach_conn_t *connect_with(struct tst *t, const char *const *env,
				   int *ret)
{
	rdmach_conn_t *c;
	int err;

	for (; env[0]; env += 2)
		setenv(env[0], env[1], 1);
	err = tst_connect(t, &t->ctx);
	if (err) {
		*ret = tst_fail(t, "connect: %s", rdmach_strerror(err));
		return NULL;
	}
	c = tst_conn(t, 1 - t->rank);
	if (!c || shm_only(t, c)) {
		*ret = c ? TST_SKIP : -1;
		return NULL;
	}
	return c;
}

/* RDMACH_SHM_CMA=0: large puts are copied through the ring. */
static int shm_cma_off(struct tst *t)
{
	static const char *const env[] = { "RDMACH_SHM_CMA", "0", NULL };
	uint64_t seed;
	rdmach_conn_t *c;
	rdmach_stats_t st;
	int err, ret;

	c = connect_with(t, env, &ret);
	if (!c)
		return ret;
	seed = tst_stream_seed(t, 0, 1);
	if (t->rank == 0) {
		put_big_pattern(t, c, seed, &err);
		TST_CHECK(t, !err, "put: %s", rdmach_strerror(err));
		TST_CHECK(t, !rdmach_conn_stats(c, &st) && st.zcopy_msgs == 0,
			  "RDMACH_SHM_CMA=0 but %llu zero-copy puts",
			  (unsigned long long)st.zcopy_msgs);
		ret = 0;
	} else {
		ret = get_pieces(t, c, seed, BIG, 65536);
	}
	return ret ? ret : tst_barrier(t);
}

/* A stream of puts of 1..120 bytes through a 2-line line ring and a
 * 4 KiB main ring, read only after a pause: one-line puts go to the line
 * ring while it has room and to the main ring once it is full, so packets
 * alternate between the rings in every order.  The reader must still see
 * the bytes in the order they were put. */
static int shm_line_ring_order(struct tst *t)
{
	static const char *const env[] = { "RDMACH_SHM_LINE_RING", "128",
					   "RDMACH_SHM_RING_SIZE", "4096",
					   NULL };
	enum { LEN = 200000 };
	uint64_t seed;
	rdmach_conn_t *c;
	uint8_t *buf;
	int err, ret = 0;

	c = connect_with(t, env, &ret);
	if (!c)
		return ret;
	seed = tst_stream_seed(t, 0, 1);
	if (t->rank == 1) {
		usleep(20000);	/* let both rings fill */
		ret = get_pieces(t, c, seed, LEN, 77);
		return ret ? ret : tst_barrier(t);
	}
	buf = malloc(LEN);
	if (!buf)
		return tst_fail(t, "out of memory");
	tst_pat_fill(buf, LEN, seed, 0);
	for (size_t off = 0, i = 0; off < LEN && !ret; i++) {
		size_t len = 1 + (i * 37) % 120;

		if (len > LEN - off)
			len = LEN - off;
		put_whole(t, c, buf + off, len, &err);
		if (err)
			ret = tst_fail(t, "put at offset %zu: %s", off,
				       rdmach_strerror(err));
		off += len;
	}
	free(buf);
	return ret ? ret : tst_barrier(t);
}

/* The sender dies (SIGKILL) after putting; the survivor first gets every
 * byte that was in the ring, then -ECONNRESET within bounded time. */
static int shm_peer_death_get(struct tst *t)
{
	enum { LEN = 30000 };
	rdmach_conn_t *c = tst_conn(t, 1 - t->rank);
	uint64_t seed = tst_stream_seed(t, 1, 0), t0;
	uint8_t byte;
	struct iovec iov = { &byte, 1 };
	ssize_t n;

	if (!c || shm_only(t, c))
		return c ? TST_SKIP : -1;
	if (t->rank == 1) {
		if (tst_put_all(t, c, 0, seed, LEN))
			return -1;
		raise(SIGKILL);
		return tst_fail(t, "still alive after SIGKILL");
	}
	if (get_pieces(t, c, seed, LEN, 1000))
		return -1;
	t0 = rdmach_now_ns();
	do
		n = rdmach_get(c, &iov, 1);
	while (n == 0 && rdmach_now_ns() - t0 < 10000000000ull);
	TST_CHECK(t, n == -ECONNRESET, "get after the peer died returned %zd "
		  "(%s), expected -ECONNRESET", n, n < 0 ?
		  rdmach_strerror((int)n) : "bytes");
	tst_log(t, "death detected in %.2f ms (%s)",
		(double)(rdmach_now_ns() - t0) / 1e6, rdmach_conn_error(c));
	TST_CHECK(t, strstr(rdmach_conn_error(c), "rank 1"),
		  "error message '%s' does not name the peer",
		  rdmach_conn_error(c));
	n = rdmach_put(c, &iov, 1);
	TST_CHECK(t, n == -ECONNRESET, "put after the death returned %zd", n);
	return 0;
}

/* The receiver dies: a put that fills the ring, and a pending zero-copy
 * put, end with -ECONNRESET instead of hanging. */
static int shm_peer_death_put(struct tst *t)
{
	rdmach_conn_t *c = tst_conn(t, 1 - t->rank);
	volatile uint64_t *sh = t->shared;
	uint8_t *buf;
	uint64_t t0;
	int err, zc = t->c->arg != NULL;

	if (!c || shm_only(t, c))
		return c ? TST_SKIP : -1;
	if (t->rank == 1) {
		raise(SIGKILL);
		return tst_fail(t, "still alive after SIGKILL");
	}
	(void)sh;
	buf = calloc(1, 64u << 20);
	if (!buf)
		return tst_fail(t, "out of memory");
	t0 = rdmach_now_ns();
	/* copy path: far more than the ring holds, in puts under the
	 * CMA threshold; zero-copy: one large put */
	if (zc) {
		put_whole(t, c, buf, BIG, &err);
	} else {
		size_t off;

		for (off = 0, err = 0; off < (64u << 20) && !err; off += 32768)
			put_whole(t, c, buf + off, 32768, &err);
	}
	free(buf);
	TST_CHECK(t, err == -ECONNRESET, "put to a dead peer ended with %s, "
		  "expected -ECONNRESET", rdmach_strerror(err));
	tst_log(t, "failed after %.2f ms: %s",
		(double)(rdmach_now_ns() - t0) / 1e6, rdmach_conn_error(c));
	return 0;
}

/* After ready no exchange fd stays open, nothing is named in /dev/shm,
 * and after finalize no segment stays mapped. */
static int count_lines(const char *path, const char *needle)
{
	char line[512];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

static int count_fds(const char *needle)
{
	char path[300], target[256];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");
	int n = 0;

	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		ssize_t l;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		l = readlink(path, target, sizeof(target) - 1);
		if (l <= 0)
			continue;
		target[l] = '\0';
		n += strstr(target, needle) != NULL;
	}
	closedir(dir);
	return n;
}

static int count_dev_shm(void)
{
	struct dirent *d;
	DIR *dir = opendir("/dev/shm");
	int n = 0;

	if (!dir)
		return 0;
	while ((d = readdir(dir)))
		n += strncmp(d->d_name, "rdmach", 6) == 0;
	closedir(dir);
	return n;
}

static int shm_no_leftovers(struct tst *t)
{
	rdmach_conn_t *c = tst_conn(t, 1 - t->rank);
	int maps, fds;

	if (!c || shm_only(t, c))
		return c ? TST_SKIP : -1;
	maps = count_lines("/proc/self/maps", "rdmach-shm");
	fds = count_fds("rdmach-shm");
	TST_CHECK(t, maps >= 2, "%d rdmach-shm mappings while connected "
		  "(expected mine and the peer's)", maps);
	TST_CHECK(t, fds == 0, "%d memfd(s) still open after connect", fds);
	TST_CHECK(t, count_dev_shm() == 0, "a segment is named in /dev/shm");
	if (tst_barrier(t))
		return -1;
	TST_CHECK(t, rdmach_finalize(&t->ctx) == 0, "finalize failed");
	maps = count_lines("/proc/self/maps", "rdmach-shm");
	TST_CHECK(t, maps == 0, "%d rdmach-shm mappings after finalize", maps);
	return 0;
}

/* A process that is not dumpable cannot share its memfd through /proc: it
 * falls back to a named segment, unlinked once everybody is connected. */
static int shm_named_fallback(struct tst *t)
{
	uint64_t seed;
	rdmach_conn_t *c;
	int err;

	if (t->rank == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return tst_fail(t, "prctl(PR_SET_DUMPABLE): %s", strerror(errno));
	err = tst_connect(t, &t->ctx);
	if (err)
		return tst_fail(t, "connect: %s", rdmach_strerror(err));
	c = tst_conn(t, 1 - t->rank);
	if (!c || shm_only(t, c))
		return c ? TST_SKIP : -1;
	/* the owner unlinks in its own connect: wait until both returned */
	if (tst_barrier(t))
		return -1;
	TST_CHECK(t, count_dev_shm() == 0, "a named segment was not unlinked "
		  "after connect");
	seed = tst_stream_seed(t, 0, 1);
	if (t->rank == 0) {
		if (tst_put_all(t, c, 1, seed, 100000))
			return -1;
	} else if (get_pieces(t, c, seed, 100000, 999)) {
		return -1;
	}
	return tst_barrier(t);
}

static const struct tst_case shm_cases[] = {
	{ "shm_rndv_partial", 2, shm_rndv_partial, 0, NULL, { 0 } },
	{ "shm_rndv_changed_iov", 2, shm_rndv_changed_iov, 0, NULL, { 0 } },
	{ "shm_rndv_many_pieces", 2, shm_rndv_many_pieces, 0, NULL, { 0 } },
	{ "shm_cma_off", 2, shm_cma_off, TST_NO_CTX | TST_LAUNCH_ONLY, NULL,
	  { 0 } },
	{ "shm_line_ring_order", 2, shm_line_ring_order,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "shm_peer_death_get", 2, shm_peer_death_get,
	  TST_LAUNCH_ONLY | TST_KEEP_GOING, NULL, { 0, -SIGKILL } },
	{ "shm_peer_death_put", 2, shm_peer_death_put,
	  TST_LAUNCH_ONLY | TST_KEEP_GOING, NULL, { 0, -SIGKILL } },
	{ "shm_peer_death_zcopy", 2, shm_peer_death_put,
	  TST_LAUNCH_ONLY | TST_KEEP_GOING, "zcopy", { 0, -SIGKILL } },
	{ "shm_no_leftovers", 2, shm_no_leftovers, 0, NULL, { 0 } },
	{ "shm_named_fallback", 2, shm_named_fallback,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, shm_cases,
			(int)(sizeof(shm_cases) / sizeof(shm_cases[0])));
}
