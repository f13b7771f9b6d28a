/*
 * test_api.c - bad input gets a clear error, never a crash: bad iovecs,
 * bad ranks, NULL handles, handles used after finalize, bad knob values,
 * an unavailable transport, ranks on two hosts without a transport between
 * them (the host and its reason named), the zero-copy "same iovec" rule,
 * strerror.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "lib/tst.h"

#define API_SENTINEL ((void *)0x5e57)

static int api_bad_iov(struct tst *t)
{
	rdmach_conn_t *c = tst_conn(t, t->size > 1 ? 1 - t->rank : 0);
	uint8_t buf[16] = { 0 };
	struct iovec null_base = { NULL, 5 }, null_zero = { NULL, 0 };
	struct iovec huge[2] = { { buf, SSIZE_MAX }, { buf, SSIZE_MAX } };
	struct iovec one = { buf, (size_t)SSIZE_MAX + 1 };
	/* two pieces (the core's fast path): a sum over SSIZE_MAX, a NULL
	 * second base */
	struct iovec halves[2] = { { buf, SSIZE_MAX / 2 + 1 }, { buf, SSIZE_MAX / 2 + 1 } };
	struct iovec null_second[2] = { { buf, 4 }, { NULL, 4 } };
	struct iovec ok = { buf, sizeof(buf) };
	uint64_t ticket = 7, done = 7;
	const void *peeked;
	rdmach_stats_t st;

	if (!c)
		return -1;
	TST_CHECK_EQ(t, rdmach_put(c, NULL, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_get(c, NULL, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put(c, NULL, 0), 0);
	TST_CHECK_EQ(t, rdmach_get(c, NULL, 0), 0);
	TST_CHECK_EQ(t, rdmach_put(c, &ok, -1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_get(c, &ok, -1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put(c, &ok, INT_MIN), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put(c, &null_base, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_get(c, &null_base, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put(c, &null_zero, 1), 0);
	TST_CHECK_EQ(t, rdmach_get(c, &null_zero, 1), 0);
	TST_CHECK_EQ(t, rdmach_put(c, huge, 2), -EINVAL);
	TST_CHECK_EQ(t, rdmach_get(c, huge, 2), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put(c, &one, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_get(c, &one, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put(c, halves, 2), -EINVAL);
	TST_CHECK_EQ(t, rdmach_get(c, halves, 2), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put(c, null_second, 2), -EINVAL);
	TST_CHECK_EQ(t, rdmach_get(c, null_second, 2), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put_deferred(c, null_second, 2, &ticket), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put(NULL, &ok, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_get(NULL, &ok, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put_deferred(c, &ok, 1, NULL), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put_deferred(c, &null_base, 1, &ticket), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put_deferred(c, &ok, -1, &ticket), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put_deferred(NULL, &ok, 1, &ticket), -EINVAL);
	TST_CHECK_EQ(t, rdmach_peek(NULL, &peeked), -EINVAL);
	TST_CHECK_EQ(t, rdmach_peek(c, NULL), -EINVAL);
	TST_CHECK_EQ(t, rdmach_consume(NULL, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_consume(c, 0), -EINVAL);
	TST_CHECK(t, ticket == 7, "a refused deferred put set its ticket");
	TST_CHECK_EQ(t, rdmach_put_deferred(c, NULL, 0, &ticket), 0);
	TST_CHECK(t, ticket == 0, "an empty deferred put left ticket %llu",
		  (unsigned long long)ticket);
	TST_CHECK_EQ(t, rdmach_put_done(c, NULL), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put_done(NULL, &done), -EINVAL);
	TST_CHECK_EQ(t, rdmach_put_done(c, &done), 0);
	TST_CHECK(t, done == 0, "put_done with no deferred put: done %llu",
		  (unsigned long long)done);
	TST_CHECK_EQ(t, rdmach_progress(NULL), -EINVAL);
	TST_CHECK_EQ(t, rdmach_wait_arm(NULL), -EINVAL);
	TST_CHECK_EQ(t, rdmach_wait(NULL, 0), -EINVAL);
	TST_CHECK_EQ(t, rdmach_wake(NULL), -EINVAL);
	/* The refusals moved nothing and broke nothing. */
	TST_CHECK_EQ(t, rdmach_conn_stats(c, &st), 0);
	TST_CHECK(t, !st.bytes_put && !st.bytes_got, "refused calls counted "
		  "%llu bytes put, %llu got", (unsigned long long)st.bytes_put,
		  (unsigned long long)st.bytes_got);
	TST_CHECK(t, !rdmach_conn_error(c)[0], "connection marked failed "
		  "after refused calls: %s", rdmach_conn_error(c));
	if (t->size < 2)
		return 0;
	if (t->rank == 0)
		return tst_put_all(t, c, 1, tst_stream_seed(t, 0, 1), 100000);
	return tst_get_all(t, c, 0, tst_stream_seed(t, 0, 1), 100000);
}

/* Host numbers: equal exactly for the ranks rdmach_peer_local calls
 * local, 0 for rank 0's host, each new host the next number in rank
 * order; or -ENODATA for all (demand with a mapping). */
static int api_peer_hosts(struct tst *t)
{
	int me = rdmach_peer_host(t->ctx, t->rank), next = 0, i;

	TST_CHECK_EQ(t, rdmach_peer_host(t->ctx, t->size), -EINVAL);
	TST_CHECK_EQ(t, rdmach_peer_host(t->ctx, -1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_peer_host(NULL, 0), -EBADF);
	TST_CHECK(t, me >= 0 || me == -ENODATA, "rdmach_peer_host(self): %s",
		  tst_errname(me));
	for (i = 0; i < t->size; i++) {
		int h = rdmach_peer_host(t->ctx, i);

		if (me == -ENODATA) {
			TST_CHECK_EQ(t, h, -ENODATA);
			continue;
		}
		TST_CHECK(t, h >= 0 && h <= next, "rank %d on host %d, "
			  "hosts so far %d", i, h, next);
		next += h == next;
		TST_CHECK_EQ(t, rdmach_peer_local(t->ctx, i), h == me);
	}
	return 0;
}

static int api_conn_rank(struct tst *t)
{
	static const int bad[] = { -1, INT_MIN, 1000, INT_MAX };
	rdmach_conn_t *c = API_SENTINEL;
	rdmach_stats_t st;
	const char *tl;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		TST_CHECK_EQ(t, rdmach_conn(t->ctx, bad[i], &c), -EINVAL);
		TST_CHECK(t, c == API_SENTINEL, "rdmach_conn(%d) failed but "
			  "set its output", bad[i]);
	}
	TST_CHECK_EQ(t, rdmach_conn(t->ctx, t->size, &c), -EINVAL);
	TST_CHECK(t, c == API_SENTINEL, "rdmach_conn(size) set its output");
	TST_CHECK_EQ(t, rdmach_conn(NULL, 0, &c), -EINVAL);
	TST_CHECK_EQ(t, rdmach_conn(t->ctx, 0, NULL), -EINVAL);
	TST_CHECK_EQ(t, rdmach_rank(t->ctx), t->rank);
	TST_CHECK_EQ(t, rdmach_size(t->ctx), t->size);
	/* itself on its own host; peers' locality depends on the launch */
	TST_CHECK_EQ(t, rdmach_peer_local(t->ctx, t->rank), 1);
	TST_CHECK_EQ(t, rdmach_peer_local(t->ctx, t->size), -EINVAL);
	TST_CHECK_EQ(t, rdmach_peer_local(t->ctx, -1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_peer_local(NULL, 0), -EBADF);
	if (api_peer_hosts(t))
		return -1;
	TST_CHECK_EQ(t, rdmach_conn(t->ctx, t->size - 1, &c), 0);
	TST_CHECK(t, c && c != API_SENTINEL, "rdmach_conn gave %p", (void *)c);
	tl = rdmach_conn_transport(c);
	TST_CHECK(t, tl && (!strcmp(tl, "shm") || !strcmp(tl, "ib")),
		  "rdmach_conn_transport gave \"%s\"", tl ? tl : "(null)");
	TST_CHECK(t, rdmach_conn_error(c) && !rdmach_conn_error(c)[0],
		  "healthy connection has error \"%s\"",
		  rdmach_conn_error(c) ? rdmach_conn_error(c) : "(null)");
	TST_CHECK_EQ(t, rdmach_conn_stats(NULL, &st), -EINVAL);
	TST_CHECK_EQ(t, rdmach_conn_stats(c, NULL), -EINVAL);
	TST_CHECK_EQ(t, rdmach_ctx_stats(NULL, &st), -EINVAL);
	TST_CHECK_EQ(t, rdmach_ctx_stats(t->ctx, NULL), -EINVAL);
	return 0;
}

/* Handles kept past finalize are refused with -EBADF. */
static int api_after_finalize(struct tst *t)
{
	rdmach_ctx_t *old = t->ctx, *null_ctx = NULL;
	rdmach_conn_t *c = tst_conn(t, 0), *c2 = API_SENTINEL;
	uint8_t buf[8] = { 0 };
	struct iovec iov = { buf, sizeof(buf) };
	uint64_t ticket;
	rdmach_stats_t st;
	const void *peeked;

	if (!c)
		return -1;
	TST_CHECK_EQ(t, rdmach_finalize(&t->ctx), 0);
	TST_CHECK(t, !t->ctx, "rdmach_finalize did not set *ctxp to NULL");
	TST_CHECK_EQ(t, rdmach_put(c, &iov, 1), -EBADF);
	TST_CHECK_EQ(t, rdmach_get(c, &iov, 1), -EBADF);
	TST_CHECK_EQ(t, rdmach_put_deferred(c, &iov, 1, &ticket), -EBADF);
	TST_CHECK_EQ(t, rdmach_put_done(c, &ticket), -EBADF);
	TST_CHECK_EQ(t, rdmach_peek(c, &peeked), -EBADF);
	TST_CHECK_EQ(t, rdmach_consume(c, 1), -EBADF);
	TST_CHECK_EQ(t, rdmach_conn_stats(c, &st), -EBADF);
	TST_CHECK_EQ(t, rdmach_conn(old, 0, &c2), -EBADF);
	TST_CHECK(t, c2 == API_SENTINEL, "rdmach_conn on a dead context "
		  "set its output");
	TST_CHECK_EQ(t, rdmach_progress(old), -EBADF);
	TST_CHECK_EQ(t, rdmach_wait_arm(old), -EBADF);
	TST_CHECK_EQ(t, rdmach_wait(old, 1), -EBADF);
	TST_CHECK_EQ(t, rdmach_wake(old), -EBADF);
	TST_CHECK_EQ(t, rdmach_rank(old), -EBADF);
	TST_CHECK_EQ(t, rdmach_ctx_stats(old, &st), -EBADF);
	TST_CHECK_EQ(t, rdmach_finalize(&old), -EBADF);
	TST_CHECK_EQ(t, rdmach_finalize(NULL), -EINVAL);
	{
		int err = rdmach_finalize(&null_ctx);

		TST_CHECK(t, err == -EINVAL || err == -EBADF,
			  "rdmach_finalize(&NULL) returned %d", err);
	}
	return 0;
}

struct api_env {
	const char *name, *value;
	int want;		/* error of init (or connect) */
	const char *msg;	/* must appear in the message */
};

static int api_init_with(struct tst *t, const struct api_env *e)
{
	rdmach_ctx_t *ctx = API_SENTINEL;
	int err;

	setenv(e->name, e->value, 1);
	err = rdmach_init(&ctx, &t->oob);
	if (!err) {
		err = rdmach_connect(ctx);
		rdmach_finalize(&ctx);
		ctx = API_SENTINEL;
	}
	unsetenv(e->name);
	if (err != e->want)
		return tst_fail(t, "init/connect with %s=%s returned %d (%s), "
				"expected %s", e->name, e->value, err,
				tst_errname(err), tst_errname(e->want));
	TST_CHECK(t, ctx == API_SENTINEL, "rdmach_init failed but set *ctxp");
	return 0;
}

static int api_env_case(struct tst *t, const struct api_env *e, int n)
{
	struct tst_capture cap;
	char msg[4096];
	int i, ret, err;

	for (i = 0; i < n; i++) {
		err = tst_capture_begin(&cap, 0);
		if (err)
			return tst_fail(t, "capturing stderr: %s",
					strerror(-err));
		ret = api_init_with(t, &e[i]);
		tst_capture_end(t, &cap, msg, sizeof(msg));
		if (ret)
			return -1;
		TST_CHECK(t, strstr(msg, e[i].msg), "%s=%s: the error message "
			  "does not name %s: \"%.200s\"", e[i].name,
			  e[i].value, e[i].msg, msg);
	}
	/* And the group still works without the bad setting. */
	if (tst_connect(t, &t->ctx))
		return tst_fail(t, "init/connect after the bad settings failed");
	return 0;
}

static int api_bad_knob(struct tst *t)
{
	static const struct api_env e[] = {
		{ "RDMACH_SHM_RING_SIZE", "banana", -EINVAL,
		  "RDMACH_SHM_RING_SIZE" },
		{ "RDMACH_SHM_RING_SIZE", "1", -EINVAL, "RDMACH_SHM_RING_SIZE" },
		{ "RDMACH_SHM_LINE_RING", "64", -EINVAL, "RDMACH_SHM_LINE_RING" },
		{ "RDMACH_SHM_LINE_RING", "1000", -EINVAL,
		  "RDMACH_SHM_LINE_RING" },
		{ "RDMACH_SHM_RING_SIZE", "64Q", -EINVAL,
		  "RDMACH_SHM_RING_SIZE" },
		/* set but empty: refused, not taken as the default */
		{ "RDMACH_SHM_RING_SIZE", "", -EINVAL,
		  "RDMACH_SHM_RING_SIZE is set but empty" },
		{ "RDMACH_TRANSPORT", "", -EINVAL,
		  "RDMACH_TRANSPORT is set but empty" },
		/* decimal, not octal (octal 0100000 would be 32768: valid) */
		{ "RDMACH_SHM_RING_SIZE", "0100000", -EINVAL,
		  "RDMACH_SHM_RING_SIZE=0100000 is not a power of two" },
		{ "RDMACH_PEER_TIMEOUT_MS", "-5", -EINVAL,
		  "RDMACH_PEER_TIMEOUT_MS" },
		{ "RDMACH_TRANSPORT", "banana", -EINVAL, "RDMACH_TRANSPORT" },
		{ "RDMACH_CONNECT", "sometimes", -EINVAL,
		  "RDMACH_CONNECT=sometimes: expected auto, all or demand" },
		{ "RDMACH_CONNECT_ALL_MAX", "0", -EINVAL,
		  "RDMACH_CONNECT_ALL_MAX" },
		/* a knob of a transport that does not run here */
		{ "RDMACH_IB_RING_SIZE", "banana", -EINVAL,
		  "RDMACH_IB_RING_SIZE" },
	};

	return api_env_case(t, e, (int)(sizeof(e) / sizeof(e[0])));
}

/* Init and connect with name=value set, stderr captured into msg. */
static int api_init_capture(struct tst *t, const char *name,
			    const char *value, char *msg, size_t len)
{
	struct tst_capture cap;
	struct api_env e = { name, value, 0, NULL };
	int err, ret;

	err = tst_capture_begin(&cap, 0);
	if (err)
		return tst_fail(t, "capturing stderr: %s", strerror(-err));
	ret = api_init_with(t, &e);
	tst_capture_end(t, &cap, msg, len);
	return ret;
}

/* A name in the knobs' namespace that is no knob (a typo): warned of at
 * the process's first init, naming the knob it is a typo of; init goes
 * on.  The test harness's own variables are not warned of. */
static int api_unknown_knob(struct tst *t)
{
	char msg[4096];

	setenv("RDMACH_TEST_NOT_A_KNOB", "1", 1);
	if (api_init_capture(t, "RDMACH_ZCOPY_TRESHOLD", "1M", msg,
			     sizeof(msg)))
		return -1;
	TST_CHECK(t, strstr(msg, "RDMACH_ZCOPY_TRESHOLD is set") &&
		     strstr(msg, "did you mean RDMACH_ZCOPY_THRESHOLD?"),
		  "no warning naming the typo and the knob: \"%.300s\"", msg);
	TST_CHECK(t, !strstr(msg, "RDMACH_TEST_NOT_A_KNOB"),
		  "the test harness's variable warned of: \"%.300s\"", msg);
	if (api_init_capture(t, "RDMACH_ZCOPY_TRESHOLD", "1M", msg,
			     sizeof(msg)))
		return -1;
	TST_CHECK(t, !strstr(msg, "TRESHOLD"), "warned again at the second "
		  "init: \"%.300s\"", msg);
	unsetenv("RDMACH_TEST_NOT_A_KNOB");
	return 0;
}

/* rdmach_knob_get(name) with name=value set for the call; what it
 * printed in msg. */
static int api_knob_get_with(struct tst *t, const char *name,
			     const char *value, uint64_t *v, char *msg,
			     size_t len)
{
	struct tst_capture cap;
	int ret, err;

	setenv(name, value, 1);
	err = tst_capture_begin(&cap, 0);
	ret = rdmach_knob_get(name, v);
	msg[0] = '\0';
	if (!err)
		tst_capture_end(t, &cap, msg, len);
	unsetenv(name);
	return ret;
}

/* rdmach_knob_get(): what the CH3 channel reads its knobs with. */
static int api_knob_get(struct tst *t)
{
	uint64_t v = 7;
	char msg[1024];
	int ret;

	unsetenv("RDMACH_CH3_YIELD_SPINS");
	TST_CHECK_EQ(t, rdmach_knob_get("RDMACH_CH3_YIELD_SPINS", &v),
		     -ENODATA);
	TST_CHECK(t, v == 7, "an \"auto\" knob left unset changed *value");
	setenv("RDMACH_CH3_YIELD_SPINS", "auto", 1);
	TST_CHECK_EQ(t, rdmach_knob_get("RDMACH_CH3_YIELD_SPINS", &v),
		     -ENODATA);
	TST_CHECK(t, v == 7, "an \"auto\" knob set to auto changed *value");
	setenv("RDMACH_CH3_YIELD_SPINS", "64", 1);
	TST_CHECK0(t, rdmach_knob_get("RDMACH_CH3_YIELD_SPINS", &v));
	TST_CHECK(t, v == 64, "RDMACH_CH3_YIELD_SPINS=64 read as %llu",
		  (unsigned long long)v);
	unsetenv("RDMACH_CH3_YIELD_SPINS");
	TST_CHECK0(t, rdmach_knob_get("RDMACH_CH3_RX_STAGING", &v));
	TST_CHECK(t, v == 1024, "RDMACH_CH3_RX_STAGING default read as %llu",
		  (unsigned long long)v);
	/* a leading 0 is no octal; 0x is hex */
	setenv("RDMACH_CH3_RX_STAGING", "02000", 1);
	TST_CHECK0(t, rdmach_knob_get("RDMACH_CH3_RX_STAGING", &v));
	TST_CHECK(t, v == 2000, "RDMACH_CH3_RX_STAGING=02000 read as %llu",
		  (unsigned long long)v);
	setenv("RDMACH_CH3_RX_STAGING", "0x800", 1);
	TST_CHECK0(t, rdmach_knob_get("RDMACH_CH3_RX_STAGING", &v));
	TST_CHECK(t, v == 2048, "RDMACH_CH3_RX_STAGING=0x800 read as %llu",
		  (unsigned long long)v);
	unsetenv("RDMACH_CH3_RX_STAGING");
	TST_CHECK_EQ(t, rdmach_knob_get("RDMACH_NO_SUCH_KNOB", &v), -ENOENT);
	TST_CHECK_EQ(t, rdmach_knob_get("RDMACH_TRANSPORT", &v), -ENOENT);
	TST_CHECK_EQ(t, rdmach_knob_get(NULL, &v), -EINVAL);
	v = 7;
	ret = api_knob_get_with(t, "RDMACH_CH3_RX_STAGING", "", &v, msg,
				sizeof(msg));
	TST_CHECK(t, ret == -EINVAL && v == 7 &&
		  strstr(msg, "RDMACH_CH3_RX_STAGING is set but empty"),
		  "RDMACH_CH3_RX_STAGING=\"\": %d (%s), value %llu, message "
		  "\"%.200s\"", ret, tst_errname(ret),
		  (unsigned long long)v, msg);
	/* below its minimum */
	ret = api_knob_get_with(t, "RDMACH_CH3_RX_STAGING", "100", &v, msg,
				sizeof(msg));
	TST_CHECK(t, ret == -EINVAL && v == 7, "RDMACH_CH3_RX_STAGING=100: "
		  "%d (%s), value %llu", ret, tst_errname(ret),
		  (unsigned long long)v);
	TST_CHECK(t, strstr(msg, "RDMACH_CH3_RX_STAGING"), "the message does "
		  "not name the knob: \"%.200s\"", msg);
	return 0;
}

static int api_no_ib_device(struct tst *t)
{
	static const struct api_env e[] = {
		{ "RDMACH_TRANSPORT", "ib", -ENODEV, "ib" },
	};

	if (tst_have_ib_device())
		return tst_skip(t, "an RDMA device exists here");
	return api_env_case(t, e, 1);
}

/* Ranks on two hosts without a transport between them: rank 1's host id
 * (the value of "rdmach-1" in the wire-up, "mask:host:boot") is rewritten
 * on its way out, so that every rank sees rank 1 on host "elsewhere". */
struct api_far {
	rdmach_oob_t base;
	char prefix[8];		/* fresh keys for each context */
	int hostile;		/* api_far_spoil what rank 1 published */
};

static int api_far_key(const struct api_far *f, const char *key, char *out,
		       size_t len)
{
	int n = snprintf(out, len, "%s%s", f->prefix, key);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int api_far_put(void *arg, const char *key, const char *value)
{
	const struct api_far *f = arg;
	char k[128], v[512];
	const char *boot;
	int err = api_far_key(f, key, k, sizeof(k));

	if (err)
		return err;
	boot = strchr(value, ':') ? strchr(strchr(value, ':') + 1, ':') : NULL;
	if (f->base.rank == 1 && !strcmp(key, "rdmach-1") && boot) {
		snprintf(v, sizeof(v), "%.*s:elsewhere%s",
			 (int)strcspn(value, ":"), value, boot);
		value = v;
	}
	return f->base.put(f->base.arg, k, value);
}

/* A hostile rank 1, as every rank reads it: its reason ends in half a %XX
 * escape with stale text behind the NUL, its host name holds a terminal
 * control sequence. */
static void api_far_spoil(const char *key, char *value, size_t len)
{
	static const char why[] = "x%4\0STALE-STACK";
	char *host = strstr(value, "elsewhere");

	if (!strcmp(key, "rdmach-why-1") && len >= sizeof(why)) {
		memcpy(value, why, sizeof(why));
	} else if (!strcmp(key, "rdmach-1") && host &&
		   strlen(value) + 4 < len) {
		memmove(host + 8, host + 4, strlen(host + 4) + 1);
		memcpy(host + 4, "\033[2J", 4);
	}
}

static int api_far_get(void *arg, const char *key, char *value, size_t len)
{
	const struct api_far *f = arg;
	char k[128];
	int err = api_far_key(f, key, k, sizeof(k));

	if (!err)
		err = f->base.get(f->base.arg, k, value, len);
	if (!err && f->hostile)
		api_far_spoil(key, value, len);
	return err;
}

static int api_far_fence(void *arg)
{
	const struct api_far *f = arg;

	return f->base.fence(f->base.arg);
}

/* init + connect with rank 1 "elsewhere" under RDMACH_TRANSPORT=policy:
 * connect's error, and what was logged in msg. */
static int api_far_connect(struct tst *t, const char *policy,
			   const char *prefix, int hostile, char *msg,
			   size_t len)
{
	struct api_far f = { t->oob, "", hostile };
	rdmach_oob_t o = t->oob;
	struct tst_capture cap;
	rdmach_ctx_t *ctx;
	int err;

	snprintf(f.prefix, sizeof(f.prefix), "%s", prefix);
	o.arg = &f;
	o.put = api_far_put;
	o.get = api_far_get;
	o.fence = api_far_fence;
	setenv("RDMACH_TRANSPORT", policy, 1);
	err = tst_capture_begin(&cap, 0);
	if (err)
		return tst_fail(t, "capturing stderr: %s", strerror(-err));
	err = rdmach_init(&ctx, &o);
	if (!err) {
		err = rdmach_connect(ctx);
		rdmach_finalize(&ctx);
	}
	tst_capture_end(t, &cap, msg, len);
	return err;
}

static int api_unreachable_checks(struct tst *t)
{
	char msg[4096];
	int err;

	/* auto: each rank names the host without an RDMA device, and why */
	err = api_far_connect(t, "auto", "a.", 0, msg, sizeof(msg));
	TST_CHECK(t, err == -ENODEV, "connect across hosts without ib "
		  "returned %d (%s), expected -ENODEV", err, tst_errname(err));
	TST_CHECK(t, strstr(msg, "and rank 1 on host elsewhere cannot "
			    "connect"), "the pair and hosts not named: "
		  "\"%.300s\"", msg);
	TST_CHECK(t, strstr(msg, "host elsewhere (rank 1) has no usable RDMA "
			    "device: "), "rank 1's host and reason not named: "
		  "\"%.300s\"", msg);
	TST_CHECK(t, strstr(msg, "(rank 0) has no usable RDMA device: "),
		  "rank 0's host and reason not named: \"%.300s\"", msg);
	TST_CHECK(t, !strstr(msg, "reason unknown"), "a reason was not "
		  "published: \"%.300s\"", msg);
	/* shm forced: the policy is the reason, no device is blamed */
	err = api_far_connect(t, "shm", "b.", 0, msg, sizeof(msg));
	TST_CHECK(t, err == -ENODEV, "connect across hosts under "
		  "RDMACH_TRANSPORT=shm returned %d (%s), expected -ENODEV",
		  err, tst_errname(err));
	TST_CHECK(t, strstr(msg, "under RDMACH_TRANSPORT=shm") &&
		  strstr(msg, "elsewhere"), "RDMACH_TRANSPORT=shm: no message "
		  "naming the policy and the host: \"%.300s\"", msg);
	TST_CHECK(t, !strstr(msg, "RDMA device"), "RDMACH_TRANSPORT=shm: a "
		  "device blamed: \"%.300s\"", msg);
	/* a hostile rank 1: its text escaped, its half escape refused */
	err = api_far_connect(t, "auto", "c.", 1, msg, sizeof(msg));
	TST_CHECK(t, err == -ENODEV, "hostile rank 1: connect returned %d "
		  "(%s), expected -ENODEV", err, tst_errname(err));
	TST_CHECK(t, strstr(msg, "host else\\x1b[2Jwhere") &&
		  !strchr(msg, '\033'), "a peer's control character not "
		  "escaped: \"%.400s\"", msg);
	TST_CHECK(t, strstr(msg, "reason unknown (malformed: \"x%4\")") &&
		  !strstr(msg, "STALE"), "a value ending in %% and one digit "
		  "was decoded past its end: \"%.400s\"", msg);
	return 0;
}

static int api_unreachable_host(struct tst *t)
{
	const char *saved = getenv("RDMACH_TRANSPORT");
	char *keep = saved ? strdup(saved) : NULL;
	int ret;

	if (saved && !keep)
		return tst_fail(t, "out of memory");
	if (tst_have_ib_device())
		ret = tst_skip(t, "an RDMA device exists here");
	else
		ret = api_unreachable_checks(t);
	if (keep)
		setenv("RDMACH_TRANSPORT", keep, 1);
	else
		unsetenv("RDMACH_TRANSPORT");
	free(keep);
	return ret;
}

static int api_strerror(struct tst *t)
{
	static const int codes[] = { -EINVAL, -EBADF, -ECONNRESET, -EPIPE,
				     -ESHUTDOWN, -ENODEV };
	const char *s[6], *x;
	size_t i, j;

	for (i = 0; i < 6; i++) {
		s[i] = rdmach_strerror(codes[i]);
		TST_CHECK(t, s[i] && s[i][0], "rdmach_strerror(%d) is empty",
			  codes[i]);
		for (j = 0; j < i; j++)
			TST_CHECK(t, strcmp(s[i], s[j]), "rdmach_strerror "
				  "gives \"%s\" for both %d and %d", s[i],
				  codes[i], codes[j]);
	}
	x = rdmach_strerror(0);
	TST_CHECK(t, x && x[0], "rdmach_strerror(0) is empty");
	x = rdmach_strerror(-123456);
	TST_CHECK(t, x && x[0], "rdmach_strerror(-123456) is empty");
	x = rdmach_strerror(EINVAL);
	TST_CHECK(t, x != NULL, "rdmach_strerror(EINVAL) is NULL");
	return 0;
}

static int api_bad_oob(struct tst *t)
{
	rdmach_ctx_t *ctx = API_SENTINEL;
	rdmach_oob_t o = t->oob;

	TST_CHECK_EQ(t, rdmach_init(NULL, &t->oob), -EINVAL);
	TST_CHECK_EQ(t, rdmach_init(&ctx, NULL), -EINVAL);
	o.rank = o.size;
	TST_CHECK_EQ(t, rdmach_init(&ctx, &o), -EINVAL);
	o = t->oob;
	o.rank = -1;
	TST_CHECK_EQ(t, rdmach_init(&ctx, &o), -EINVAL);
	o = t->oob;
	o.size = 0;
	o.rank = 0;
	TST_CHECK_EQ(t, rdmach_init(&ctx, &o), -EINVAL);
	o = t->oob;
	o.put = NULL;
	TST_CHECK_EQ(t, rdmach_init(&ctx, &o), -EINVAL);
	o = t->oob;
	o.fence = NULL;
	TST_CHECK_EQ(t, rdmach_init(&ctx, &o), -EINVAL);
	TST_CHECK(t, ctx == API_SENTINEL, "a failed rdmach_init set *ctxp");
	return 0;
}

/* Before connect there are no connections; connect twice is refused. */
static int api_connect_order(struct tst *t)
{
	rdmach_ctx_t *ctx = NULL;
	rdmach_conn_t *c = API_SENTINEL;
	int err;

	TST_CHECK_EQ(t, rdmach_init(&ctx, &t->oob), 0);
	t->ctx = ctx;
	err = rdmach_conn(ctx, 0, &c);
	TST_CHECK(t, err < 0 && c == API_SENTINEL, "rdmach_conn before "
		  "connect returned %d", err);
	TST_CHECK_EQ(t, rdmach_connect(ctx), 0);
	err = rdmach_connect(ctx);
	TST_CHECK(t, err < 0, "a second rdmach_connect returned %d", err);
	TST_CHECK_EQ(t, rdmach_conn(ctx, 0, &c), 0);
	return 0;
}

/* Connections on demand (RDMACH_CONNECT=demand) make a pair at its first
 * put, which returns 0 until then: a case whose first put must be a
 * real one has rank 1 put one byte to rank 0 first (a stream the case
 * does not check), so that both ends are up. */
static int api_conn_up(struct tst *t, rdmach_conn_t *c)
{
	uint64_t deadline = rdmach_now_ns() + 20000000000ull;
	uint8_t byte = 1;
	struct iovec v = { &byte, 1 };
	ssize_t r = 0;

	while (r == 0 && rdmach_now_ns() < deadline)
		r = t->rank == 1 ? rdmach_put(c, &v, 1) : rdmach_get(c, &v, 1);
	TST_CHECK(t, r == 1, "the first byte %s: %s", t->rank == 1 ?
		  "put" : "got", tst_errname(r));
	return 0;
}

/* rdmach_conns_up: -ENOTCONN before connect, -EINVAL for bad arguments;
 * then every rank whose connection is up, each once (listed one at a
 * time here: the rest waits for the next call), the other rank among
 * them once its pair carried a byte (under demand over ib: made then). */
static int api_conns_up(struct tst *t)
{
	int peers[1], listed[2] = { 0, 0 }, n, other = 1 - t->rank;
	uint64_t deadline = rdmach_now_ns() + 20000000000ull;
	rdmach_ctx_t *ctx = NULL;
	rdmach_conn_t *c;

	TST_CHECK_EQ(t, rdmach_init(&ctx, &t->oob), 0);
	t->ctx = ctx;
	TST_CHECK_EQ(t, rdmach_conns_up(ctx, peers, 1), -ENOTCONN);
	TST_CHECK_EQ(t, rdmach_connect(ctx), 0);
	TST_CHECK_EQ(t, rdmach_conns_up(NULL, peers, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_conns_up(ctx, NULL, 1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_conns_up(ctx, peers, -1), -EINVAL);
	TST_CHECK_EQ(t, rdmach_conns_up(ctx, peers, 0), 0);
	TST_CHECK_EQ(t, rdmach_conn(ctx, other, &c), 0);
	if (api_conn_up(t, c))
		return -1;
	while (!listed[other] && rdmach_now_ns() < deadline) {
		n = rdmach_conns_up(ctx, peers, 1);
		TST_CHECK(t, n == 0 || n == 1, "rdmach_conns_up returned %d", n);
		if (!n)
			continue;
		TST_CHECK(t, peers[0] == 0 || peers[0] == 1, "listed rank %d",
			  peers[0]);
		TST_CHECK(t, !listed[peers[0]]++, "rank %d listed twice",
			  peers[0]);
	}
	TST_CHECK(t, listed[other], "rank %d not listed after its pair "
		  "carried a byte", other);
	/* drained: only this rank's own connection may still come */
	n = rdmach_conns_up(ctx, peers, 1);
	TST_CHECK(t, n == 0 || (n == 1 && peers[0] == t->rank && !listed[t->rank]),
		  "after the drain: %d (rank %d)", n, n > 0 ? peers[0] : -1);
	return tst_barrier(t);
}

/* RDMACH_CONNECT=auto (the default): every pair at start-up in a job of
 * up to RDMACH_CONNECT_ALL_MAX ranks, on demand above. */
static int api_connect_auto(struct tst *t)
{
	static const struct {
		const char *connect, *all_max, *want;
	} cases[] = {
		{ NULL, NULL, "(RDMACH_CONNECT=all)" },
		{ "auto", "2", "(RDMACH_CONNECT=all)" },
		{ "auto", "1", "(RDMACH_CONNECT=demand)" },
		{ NULL, "1", "(RDMACH_CONNECT=demand)" },
		{ "all", "1", "(RDMACH_CONNECT=all)" },
	};
	char out[4096];
	FILE *f;

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rdmach_ctx_t *ctx = NULL;

		if (cases[i].connect)
			setenv("RDMACH_CONNECT", cases[i].connect, 1);
		else
			unsetenv("RDMACH_CONNECT");
		if (cases[i].all_max)
			setenv("RDMACH_CONNECT_ALL_MAX", cases[i].all_max, 1);
		else
			unsetenv("RDMACH_CONNECT_ALL_MAX");
		TST_CHECK_EQ(t, rdmach_init(&ctx, &t->oob), 0);
		t->ctx = ctx;
		TST_CHECK_EQ(t, rdmach_connect(ctx), 0);
		f = fmemopen(out, sizeof(out), "w");
		TST_CHECK(t, f != NULL, "fmemopen");
		rdmach_print_stats(ctx, f);
		fclose(f);
		out[sizeof(out) - 1] = 0;
		TST_CHECK(t, strstr(out, cases[i].want), "RDMACH_CONNECT=%s "
			  "RDMACH_CONNECT_ALL_MAX=%s, 2 ranks: no \"%s\" in "
			  "\"%.300s\"", cases[i].connect ? cases[i].connect : "",
			  cases[i].all_max ? cases[i].all_max : "",
			  cases[i].want, out);
		if (tst_barrier(t))
			return -1;
		TST_CHECK_EQ(t, rdmach_finalize(&t->ctx), 0);
	}
	unsetenv("RDMACH_CONNECT");
	unsetenv("RDMACH_CONNECT_ALL_MAX");
	return 0;
}

/* After a zero-copy put returned 0, a different iovec is -EINVAL and the
 * same iovec completes once the peer reads. */
static int api_zcopy_same_iov(struct tst *t)
{
	uint64_t thr, z, seed = tst_stream_seed(t, 0, 1), len;
	struct iovec iov, other;
	rdmach_conn_t *c;
	uint8_t *buf;
	ssize_t r;
	int ret = 0;

	/* shm: large puts by cross-memory attach whatever the copy area's
	 * costs are on this machine; ib: by zero-copy whatever the start-up
	 * tuning chose (an explicit setting wins) */
	setenv("RDMACH_SHM_CMA_USE", "always", 0);
	setenv("RDMACH_LARGE", "zcopy", 0);
	if (tst_connect(t, &t->ctx))
		return tst_fail(t, "init/connect failed");
	thr = tst_knob("RDMACH_SHM_CMA_THRESHOLD");
	z = tst_knob("RDMACH_ZCOPY_THRESHOLD");
	c = tst_conn(t, 1 - t->rank);
	if (!c)
		return -1;
	if (z > thr)
		thr = z;
	len = thr * 2 > tst_ring_size(c) * 4 ? thr * 2 : tst_ring_size(c) * 4;
	if (api_conn_up(t, c))
		return -1;
	if (t->rank == 1) {
		if (tst_barrier(t))
			return -1;
		return tst_get_all(t, c, 0, seed, len);
	}
	buf = malloc(len);
	if (!buf)
		return tst_fail(t, "out of memory");
	tst_pat_fill(buf, len, seed, 0);
	iov.iov_base = buf;
	iov.iov_len = len;
	r = rdmach_put(c, &iov, 1);
	if (r == 0) {
		other = iov;
		other.iov_len--;
		r = rdmach_put(c, &other, 1);
		if (r != -EINVAL)
			ret = tst_fail(t, "a pending zero-copy put retried with "
				       "a shorter iovec returned %zd (%s), "
				       "expected -EINVAL", r, tst_errname(r));
		other = iov;
		other.iov_base = buf + 1;
		other.iov_len--;
		r = rdmach_put(c, &other, 1);
		if (r != -EINVAL && !ret)
			ret = tst_fail(t, "a pending zero-copy put retried with "
				       "another base returned %zd (%s), "
				       "expected -EINVAL", r, tst_errname(r));
	} else {
		tst_log(t, "put of %llu bytes accepted %zd at once: no "
			"zero-copy here", (unsigned long long)len, r);
		ret = r < 0 ? tst_fail(t, "put: %s", tst_errname(r)) :
		      tst_skip(t, "a put of %llu bytes was not zero-copy",
			       (unsigned long long)len);
		iov.iov_base = buf + (r > 0 ? r : 0);
		iov.iov_len = len - (size_t)(r > 0 ? r : 0);
	}
	if (tst_barrier(t)) {
		free(buf);
		return -1;
	}
	{
		uint64_t last = rdmach_now_ns();

		while (iov.iov_len && (ret == 0 || ret == TST_SKIP)) {
			r = rdmach_put(c, &iov, 1);
			if (r < 0) {
				ret = tst_fail(t, "retrying the same iovec: %s "
					       "[%s]", tst_errname(r),
					       rdmach_conn_error(c));
				break;
			}
			if (r > 0) {
				iov.iov_base = (uint8_t *)iov.iov_base + r;
				iov.iov_len -= (size_t)r;
				last = rdmach_now_ns();
			} else if (rdmach_now_ns() - last > tst_stall_ns()) {
				ret = tst_fail(t, "the zero-copy put never "
					       "completed");
				break;
			} else {
				rdmach_progress(t->ctx);
			}
		}
	}
	free(buf);
	return ret;
}

static const struct tst_case api_cases[] = {
	{ "bad_iov", 2, api_bad_iov, 0, NULL, { 0 } },
	{ "conn_rank", 2, api_conn_rank, 0, NULL, { 0 } },
	{ "after_finalize", 2, api_after_finalize, 0, NULL, { 0 } },
	{ "bad_knob", 2, api_bad_knob, TST_NO_CTX | TST_LAUNCH_ONLY, NULL,
	  { 0 } },
	{ "unknown_knob", 2, api_unknown_knob, TST_NO_CTX | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
	{ "no_ib_device", 2, api_no_ib_device, TST_NO_CTX | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
	{ "unreachable_host", 2, api_unreachable_host, TST_NO_CTX, NULL,
	  { 0 } },
	{ "knob_get", 1, api_knob_get, TST_UNIT, NULL, { 0 } },
	{ "strerror", 1, api_strerror, TST_NO_CTX, NULL, { 0 } },
	{ "bad_oob", 1, api_bad_oob, TST_NO_CTX, NULL, { 0 } },
	{ "connect_order", 2, api_connect_order, TST_NO_CTX, NULL, { 0 } },
	{ "conns_up", 2, api_conns_up, TST_NO_CTX, NULL, { 0 } },
	{ "connect_auto", 2, api_connect_auto, TST_NO_CTX, NULL, { 0 } },
	{ "zcopy_same_iov", 2, api_zcopy_same_iov,
	  TST_NO_CTX | TST_LAUNCH_ONLY, NULL, { 0 } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, api_cases,
			(int)(sizeof(api_cases) / sizeof(api_cases[0])));
}
