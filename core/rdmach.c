/*
 * rdmach.c - the five functions: context and connection table, argument
 * checks, per-pair transport choice, the collective wire-up, dispatch of
 * put/get to the transport, counters, finalize.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "iov.h"
#include "knob.h"
#include "log.h"
#include "nodemap.h"
#include "num.h"
#include "oobval.h"
#include "tl.h"

enum { CORE_KNOB_TRANSPORT, CORE_KNOB_VERBOSE, CORE_KNOB_PEER_TIMEOUT,
       CORE_KNOB_FINALIZE_TIMEOUT, CORE_KNOB_STALL_WARN, CORE_KNOB_STATS,
       CORE_KNOB_CONNECT, CORE_KNOB_CONNECT_ALL_MAX,
       CORE_KNOB_CONNECT_TIMEOUT, CORE_KNOB_NUM };

static const struct rdmach_knob core_knobs[CORE_KNOB_NUM] = {
	[CORE_KNOB_TRANSPORT] = { "RDMACH_TRANSPORT", RDMACH_KNOB_STRING,
		"auto", 0, 0,
		"auto: shared memory to peers on this host, ib to others; shm "
		"or ib forces one for every peer" },
	[CORE_KNOB_VERBOSE] = { "RDMACH_VERBOSE", RDMACH_KNOB_UINT, "1", 0, 3,
		"0 errors only, 1 +warnings, 2 +info, 3 +debug" },
	[CORE_KNOB_PEER_TIMEOUT] = { "RDMACH_PEER_TIMEOUT_MS",
		RDMACH_KNOB_UINT, "2000", 10, 3600000,
		"a silent peer is checked for liveness after this long; a dead "
		"one fails the connection (-ECONNRESET)" },
	[CORE_KNOB_FINALIZE_TIMEOUT] = { "RDMACH_FINALIZE_TIMEOUT_MS",
		RDMACH_KNOB_UINT, "10000", 0, 3600000,
		"how long finalize waits for data in flight to leave" },
	[CORE_KNOB_STALL_WARN] = { "RDMACH_STALL_WARN_MS", RDMACH_KNOB_UINT,
		"10000", 0, 3600000,
		"warn once when a put has made no progress this long (0: never)" },
	[CORE_KNOB_STATS] = { "RDMACH_STATS", RDMACH_KNOB_BOOL, "0", 0, 1,
		"print every connection's counters on stderr at finalize" },
	[CORE_KNOB_CONNECT] = { "RDMACH_CONNECT", RDMACH_KNOB_STRING, "auto",
		0, 0,
		"all: rdmach_connect connects every pair; demand: a transport "
		"that can (ib) connects a pair at its first put, and start-up "
		"reads only the records of ranks on this host; auto: all in "
		"jobs of up to RDMACH_CONNECT_ALL_MAX ranks, demand above" },
	[CORE_KNOB_CONNECT_ALL_MAX] = { "RDMACH_CONNECT_ALL_MAX",
		RDMACH_KNOB_UINT, "64", 1, 1 << 24,
		"RDMACH_CONNECT=auto: the largest job connected at start-up "
		"(as MVAPICH2's MV2_ON_DEMAND_THRESHOLD)" },
	[CORE_KNOB_CONNECT_TIMEOUT] = { "RDMACH_CONNECT_TIMEOUT_MS",
		RDMACH_KNOB_UINT, "30000", 10, 3600000,
		"how long a connection being made waits for the peer's process "
		"to answer (at its next rdmach call: a rank busy computing is "
		"not dead) before -ECONNRESET" },
};
RDMACH_KNOB_TABLE(core, core_knobs);

/* RDMACH_TRANSPORT=auto: every transport may serve a pair. */
#define CORE_TL_AUTO (-1)

/* Bounds of the "rdmach_tls" section (RDMACH_TL_REGISTER). */
extern const struct rdmach_tl_ops *const __start_rdmach_tls[]
	__attribute__((visibility("hidden")));
extern const struct rdmach_tl_ops *const __stop_rdmach_tls[]
	__attribute__((visibility("hidden")));

/* The registered transport in slot t, or NULL (not built in). */
static const struct rdmach_tl_ops *core_tl_ops(int t)
{
	const struct rdmach_tl_ops *const *p;

	for (p = __start_rdmach_tls; p < __stop_rdmach_tls; p++)
		if ((*p)->id == t)
			return *p;
	return NULL;
}

/*
 * Live contexts, so that a stale handle (used after finalize) is refused
 * with -EBADF instead of being dereferenced.  Written under the mutex in
 * init/finalize, read without it on the fast path.  Beside each context
 * the address range of its connection array, so that checking a
 * connection handle reads this table only (no context memory).
 */
#define CORE_MAX_CTX 16
static struct rdmach_ctx *core_live[CORE_MAX_CTX];
static uintptr_t core_live_conns[CORE_MAX_CTX][2];	/* [lo, hi) */
static int core_live_slots;	/* slots ever used: the lookup's bound */
static pthread_mutex_t core_live_lock = PTHREAD_MUTEX_INITIALIZER;

#define CORE_WHY_MAX 160
#define CORE_VALUE_MIN 64	/* an oob value: an address of any transport */
/* Ranks in a group: far beyond any machine, yet the connection table of
 * that many stays allocatable (a bogus PMI_SIZE fails with a message). */
#define CORE_SIZE_MAX (1 << 24)

struct core_ctx_extra {
	int forced;		/* RDMACH_TL_* from RDMACH_TRANSPORT, or
				 * CORE_TL_AUTO */
	char tl_why[RDMACH_TL_MAX][CORE_WHY_MAX];	/* why not opened */
	uint64_t stall_warn_ns;
	int print_stats;
	int tl_peers[RDMACH_TL_MAX];	/* peers each transport reaches */
	int *host_of;		/* [size], after connect: host numbers
				 * (core_number_hosts), -1 where not read */
	int hosts_all;		/* every rank's host id was read */
	char hostid[160];		/* this rank's (core_hostid) */
	int remote_tl;			/* demand: the transport for ranks
					 * whose record is not read yet, or -1 */
	/* out-of-band calls of this context (RDMACH_STATS) */
	uint64_t oob_puts, oob_gets, oob_fences;
	/* ranks whose connection came up, each once, in order: [head, tail)
	 * not yet reported by rdmach_conns_up */
	int *up_ranks;
	int up_head, up_tail;
};

struct core_ctx {
	struct rdmach_ctx pub;
	struct core_ctx_extra x;
};

static struct core_ctx *core_of(const struct rdmach_ctx *ctx)
{
	return (struct core_ctx *)ctx;
}

static void core_set_conn_range(int slot, const struct rdmach_ctx *ctx)
{
	uintptr_t lo = ctx ? (uintptr_t)ctx->conns : 0;
	uintptr_t hi = ctx ? (uintptr_t)(ctx->conns + ctx->size) : 0;

	__atomic_store_n(&core_live_conns[slot][0], lo, __ATOMIC_RELEASE);
	__atomic_store_n(&core_live_conns[slot][1], hi, __ATOMIC_RELEASE);
}

/* ctx->conns and ctx->size are set before registration. */
static int core_register(struct rdmach_ctx *ctx)
{
	int i, ret = -ENOMEM;

	pthread_mutex_lock(&core_live_lock);
	for (i = 0; i < CORE_MAX_CTX; i++) {
		if (!core_live[i]) {
			core_set_conn_range(i, ctx);
			__atomic_store_n(&core_live[i], ctx, __ATOMIC_RELEASE);
			if (i >= core_live_slots)
				__atomic_store_n(&core_live_slots, i + 1,
						 __ATOMIC_RELEASE);
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&core_live_lock);
	if (ret)
		rdmach_err("too many live contexts (at most %d)", CORE_MAX_CTX);
	return ret;
}

static void core_unregister(struct rdmach_ctx *ctx)
{
	int i;

	pthread_mutex_lock(&core_live_lock);
	for (i = 0; i < CORE_MAX_CTX; i++) {
		if (core_live[i] == ctx) {
			__atomic_store_n(&core_live[i], NULL, __ATOMIC_RELEASE);
			core_set_conn_range(i, NULL);
		}
	}
	pthread_mutex_unlock(&core_live_lock);
}

static int core_ctx_live(const struct rdmach_ctx *ctx)
{
	int i;

	for (i = 0; i < CORE_MAX_CTX; i++)
		if (__atomic_load_n(&core_live[i], __ATOMIC_ACQUIRE) == ctx)
			return 1;
	return 0;
}

static int core_conn_live_slow(uintptr_t a)
{
	int i, n = __atomic_load_n(&core_live_slots, __ATOMIC_ACQUIRE);

	for (i = 1; i < n; i++) {
		uintptr_t lo = __atomic_load_n(&core_live_conns[i][0],
					       __ATOMIC_ACQUIRE);

		if (a >= lo && a < __atomic_load_n(&core_live_conns[i][1],
						   __ATOMIC_RELAXED))
			return (a - lo) % sizeof(struct rdmach_conn) == 0;
	}
	return 0;
}

/* Is conn a connection of a live context?  Slot 0 (the one context of
 * nearly every program) is checked inline: one unsigned compare covers
 * both ends of its range (an empty slot has lo == hi). */
static inline int core_conn_live(const struct rdmach_conn *conn)
{
	uintptr_t a = (uintptr_t)conn;
	uintptr_t lo = __atomic_load_n(&core_live_conns[0][0], __ATOMIC_ACQUIRE);
	uintptr_t hi = __atomic_load_n(&core_live_conns[0][1], __ATOMIC_RELAXED);

	if (__builtin_expect(a - lo < hi - lo, 1))
		return (a - lo) % sizeof(*conn) == 0;
	return core_conn_live_slow(a);
}

#define CORE_ERRMSG_MAX 256

int rdmach_conn_fail(struct rdmach_conn *conn, int err, const char *fmt, ...)
{
	char msg[CORE_ERRMSG_MAX];
	va_list ap;
	int n;

	if (conn->err)
		return err;
	n = snprintf(msg, sizeof(msg), "connection to rank %d (%s) failed: ",
		     conn->peer, conn->tl ? conn->tl->ops->name :
		     conn->via ? conn->via->ops->name : "none");
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	conn->errmsg = strdup(msg);	/* NULL: rdmach_conn_error says so */
	conn->err = err;
	rdmach_err("%s", msg);
	return err;
}

static void core_free_conns(struct rdmach_ctx *ctx)
{
	int i;

	for (i = 0; ctx->conns && i < ctx->size; i++)
		free(ctx->conns[i].errmsg);
	free(ctx->conns);
	ctx->conns = NULL;
}

void rdmach_tl_unavailable(struct rdmach_ctx *ctx, int tl, const char *fmt,
			   ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(core_of(ctx)->x.tl_why[tl], CORE_WHY_MAX, fmt, ap);
	va_end(ap);
}

int rdmach_oob_put(struct rdmach_ctx *ctx, const char *key, const char *value)
{
	int ret;

	if (strlen(value) > ctx->oob.value_max) {
		rdmach_err("out-of-band value for %s is %zu bytes, the exchange "
			   "carries at most %zu", key, strlen(value),
			   ctx->oob.value_max);
		return -E2BIG;
	}
	core_of(ctx)->x.oob_puts++;
	ret = ctx->oob.put(ctx->oob.arg, key, value);
	if (ret)
		rdmach_err("out-of-band put of %s failed: %s", key,
			   rdmach_strerror(ret));
	return ret;
}

/* A get that may find nothing (no message): counted like every get. */
static int core_oob_try_get(struct rdmach_ctx *ctx, const char *key,
			    char *value, size_t len)
{
	core_of(ctx)->x.oob_gets++;
	return ctx->oob.get(ctx->oob.arg, key, value, len);
}

int rdmach_oob_get(struct rdmach_ctx *ctx, const char *key, char *value,
		   size_t len)
{
	int ret = core_oob_try_get(ctx, key, value, len);

	if (ret)
		rdmach_err("out-of-band get of %s failed: %s", key,
			   rdmach_strerror(ret));
	return ret;
}

/* A fence during which this process keeps answering the transports'
 * connection requests: the fence runs on a thread of its own while this
 * one polls (listen).  Under RDMACH_CONNECT=all a rank whose connections
 * are all up enters the fence "connections made"; a peer whose last
 * answer from it was lost retransmits, and would wait in vain for a rank
 * blocked in the fence, which waits in turn for that peer. */
struct core_fence_job {
	struct rdmach_ctx *ctx;
	pthread_mutex_t lock;
	pthread_cond_t over;
	int done, ret;
};

static void *core_fence_thread(void *arg)
{
	struct core_fence_job *job = arg;
	int ret = job->ctx->oob.fence(job->ctx->oob.arg);

	pthread_mutex_lock(&job->lock);
	job->ret = ret;
	job->done = 1;
	pthread_cond_signal(&job->over);
	pthread_mutex_unlock(&job->lock);
	return NULL;
}

#define CORE_FENCE_NAP_MIN_NS 1000000ull	/* 1 ms */
#define CORE_FENCE_NAP_MAX_NS 32000000ull	/* well under a retransmission */

/* Poll the transports until the fence is over, every millisecond at
 * first, then less and less often: the ranks still connecting share the
 * CPUs with the ones waiting here, and a peer that lost our answer
 * retransmits only every 20-400 ms. */
static void core_fence_listen(struct core_fence_job *job)
{
	struct rdmach_ctx *ctx = job->ctx;
	uint64_t nap = CORE_FENCE_NAP_MIN_NS;
	struct timespec until;
	int t;

	pthread_mutex_lock(&job->lock);
	while (!job->done) {
		pthread_mutex_unlock(&job->lock);
		for (t = 0; t < RDMACH_TL_MAX; t++)
			if (ctx->tls[t] && ctx->tls[t]->ops->listen)
				ctx->tls[t]->ops->listen(ctx->tls[t]);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += (time_t)(nap / 1000000000u);
		until.tv_nsec += (long)(nap % 1000000000u);
		nap = nap * 2 < CORE_FENCE_NAP_MAX_NS ? nap * 2 :
			CORE_FENCE_NAP_MAX_NS;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&job->lock);
		if (!job->done)
			pthread_cond_timedwait(&job->over, &job->lock, &until);
	}
	pthread_mutex_unlock(&job->lock);
}

/* The oob's fence, answering meanwhile where a transport takes
 * connection requests; the fence's result. */
static int core_fence_answering(struct rdmach_ctx *ctx)
{
	struct core_fence_job job = {
		.ctx = ctx,
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.over = PTHREAD_COND_INITIALIZER,
	};
	pthread_t thread;
	int t, ret, answers = 0;

	for (t = 0; t < RDMACH_TL_MAX; t++)
		answers |= ctx->tls[t] && ctx->tls[t]->ops->listen;
	if (!answers)	/* no transport takes connection requests */
		return ctx->oob.fence(ctx->oob.arg);
	ret = pthread_create(&thread, NULL, core_fence_thread, &job);
	if (ret) {	/* no thread: the plain fence, answering nobody */
		rdmach_debug("fence on this thread: %s", strerror(ret));
		return ctx->oob.fence(ctx->oob.arg);
	}
	core_fence_listen(&job);
	pthread_join(thread, NULL);
	return job.ret;
}

/* The oob's fence (answering connection requests meanwhile with
 * answering), counted, a failure named. */
static int core_fence(struct rdmach_ctx *ctx, const char *what, int answering)
{
	int ret;

	core_of(ctx)->x.oob_fences++;
	ret = answering ? core_fence_answering(ctx) :
			  ctx->oob.fence(ctx->oob.arg);
	if (ret)
		rdmach_err("out-of-band fence (%s) failed: %s", what,
			   rdmach_strerror(ret));
	return ret;
}

/* RDMACH_TRANSPORT: auto, or the name of a transport built in. */
static int core_read_policy(struct core_ctx *c)
{
	const char *want = rdmach_knob_str(&core_knobs[CORE_KNOB_TRANSPORT]);
	const struct rdmach_tl_ops *const *p;
	char built[64] = "";

	c->x.forced = CORE_TL_AUTO;
	if (!strcmp(want, "auto"))
		return 0;
	for (p = __start_rdmach_tls; p < __stop_rdmach_tls; p++) {
		if (!strcmp(want, (*p)->name)) {
			c->x.forced = (*p)->id;
			return 0;
		}
		snprintf(built + strlen(built), sizeof(built) - strlen(built),
			 ", %s", (*p)->name);
	}
	rdmach_err("RDMACH_TRANSPORT=%s: expected auto%s%s", want, built,
		   strcmp(want, "ib") ? "" : " (this build has no InfiniBand "
		   "support: configure found no libibverbs)");
	return strcmp(want, "ib") ? -EINVAL : -ENODEV;
}

static int core_env_checked;

static int core_read_knobs(struct core_ctx *c)
{
	const struct rdmach_knob *k = core_knobs;
	uint64_t verbose, peer_ms, fin_ms, stall_ms, stats, all_max, conn_ms;
	const char *want;
	int ret;

	if (rdmach_knob_check_tables() ||
	    rdmach_knob_u64(&k[CORE_KNOB_VERBOSE], &verbose) ||
	    rdmach_knob_u64(&k[CORE_KNOB_PEER_TIMEOUT], &peer_ms) ||
	    rdmach_knob_u64(&k[CORE_KNOB_FINALIZE_TIMEOUT], &fin_ms) ||
	    rdmach_knob_u64(&k[CORE_KNOB_STALL_WARN], &stall_ms) ||
	    rdmach_knob_u64(&k[CORE_KNOB_STATS], &stats))
		return -EINVAL;
	ret = core_read_policy(c);
	if (ret)
		return ret;
	rdmach_log_level = (int)verbose;
	/* unknown names: warned of at the first init of the process only */
	ret = rdmach_knob_check_env(!core_env_checked);
	core_env_checked = 1;
	if (ret)
		return ret;
	c->pub.peer_timeout_ns = peer_ms * 1000000u;
	c->pub.finalize_timeout_ns = fin_ms * 1000000u;
	c->x.stall_warn_ns = stall_ms * 1000000u;
	c->x.print_stats = (int)stats;
	want = rdmach_knob_str(&k[CORE_KNOB_CONNECT]);
	if (strcmp(want, "all") && strcmp(want, "demand") &&
	    strcmp(want, "auto")) {
		rdmach_err("RDMACH_CONNECT=%s: expected auto, all or demand",
			   want);
		return -EINVAL;
	}
	if (rdmach_knob_u64(&k[CORE_KNOB_CONNECT_ALL_MAX], &all_max) ||
	    rdmach_knob_u64(&k[CORE_KNOB_CONNECT_TIMEOUT], &conn_ms))
		return -EINVAL;
	c->pub.connect_timeout_ns = conn_ms * 1000000u;
	c->pub.demand = !strcmp(want, "demand") ||
		(!strcmp(want, "auto") && (uint64_t)c->pub.size > all_max);
	return 0;
}

/* Every refusal says what, the value and the limit: an oob filled from a
 * PMI server's replies is the server's word. */
static int core_check_oob(const rdmach_oob_t *oob)
{
	if (!oob || !oob->put || !oob->get || !oob->fence) {
		rdmach_err("rdmach_init: %s", oob ? "an oob callback is NULL" :
			   "the oob is NULL");
		return -EINVAL;
	}
	if (oob->size < 1 || oob->size > CORE_SIZE_MAX ||
	    oob->rank < 0 || oob->rank >= oob->size) {
		rdmach_err("rdmach_init: rank %d of size %d: the size must be "
			   "1 to %d and the rank below it", oob->rank,
			   oob->size, CORE_SIZE_MAX);
		return -EINVAL;
	}
	if (oob->value_max < CORE_VALUE_MIN) {
		rdmach_err("rdmach_init: the oob carries values of %zu bytes "
			   "at most; rdmach needs %d", oob->value_max,
			   CORE_VALUE_MIN);
		return -EINVAL;
	}
	return 0;
}

/* Open what the policy allows; a forced transport must open. */
static int core_open_transports(struct rdmach_ctx *ctx)
{
	int forced = core_of(ctx)->x.forced;
	int t, ret;

	for (t = 0; t < RDMACH_TL_MAX; t++) {
		const struct rdmach_tl_ops *ops = core_tl_ops(t);

		if (!ops || (forced != CORE_TL_AUTO && t != forced))
			continue;
		ret = ops->open(ctx, &ctx->tls[t]);
		/* In auto mode an absent device is fine; a bad setting is not. */
		if (ret && (forced != CORE_TL_AUTO || ret != -ENODEV)) {
			rdmach_err("RDMACH_TRANSPORT=%s: the %s transport "
				   "cannot open: %s",
				   rdmach_knob_str(&core_knobs[
					   CORE_KNOB_TRANSPORT]),
				   ops->name, rdmach_strerror(ret));
			return ret;
		}
		if (ret)
			rdmach_debug("%s transport not available: %s",
				     ops->name, rdmach_strerror(ret));
	}
	for (t = 0; t < RDMACH_TL_MAX; t++)
		if (ctx->tls[t])
			return 0;
	rdmach_err("no transport could open");
	return -ENODEV;
}

static void core_close_transports(struct rdmach_ctx *ctx, uint64_t deadline)
{
	int t;

	for (t = 0; t < RDMACH_TL_MAX; t++) {
		if (ctx->tls[t]) {
			ctx->tls[t]->ops->close(ctx->tls[t], deadline);
			ctx->tls[t] = NULL;
		}
	}
}

int rdmach_init(rdmach_ctx_t **ctxp, const rdmach_oob_t *oob)
{
	struct core_ctx *c;
	int i, ret;

	if (!ctxp || core_check_oob(oob))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->pub.oob = *oob;
	c->pub.rank = oob->rank;
	c->pub.size = oob->size;
	rdmach_log_rank = oob->rank;
	ret = core_read_knobs(c);
	if (ret)
		goto err_free;
	ret = -ENOMEM;
	c->pub.conns = calloc((size_t)oob->size, sizeof(*c->pub.conns));
	if (!c->pub.conns) {
		rdmach_err("rdmach_init: no memory for %d connections",
			   oob->size);
		goto err_free;
	}
	c->x.up_ranks = calloc((size_t)oob->size, sizeof(*c->x.up_ranks));
	if (!c->x.up_ranks)
		goto err_free;
	for (i = 0; i < oob->size; i++) {
		c->pub.conns[i].ctx = &c->pub;
		c->pub.conns[i].peer = i;
	}
	ret = core_open_transports(&c->pub);
	if (ret)
		goto err_close;
	ret = core_register(&c->pub);
	if (ret)
		goto err_close;
	*ctxp = &c->pub;
	return 0;

err_close:
	core_close_transports(&c->pub, rdmach_now_ns());
err_free:
	free(c->x.up_ranks);
	core_free_conns(&c->pub);
	free(c);
	return ret;
}

/* ---- wire-up --------------------------------------------------------- */

#define CORE_HOSTID_MAX 160

struct core_peer_info {
	char hostid[CORE_HOSTID_MAX];
	unsigned tl_mask;
	int known;		/* read; under demand a remote rank's is read
				 * at first contact */
};

/* hostname + boot id: equal strings mean one kernel, one shm domain. */
static void core_hostid(char *buf, size_t len)
{
	char host[64] = "unknown", boot[64] = "noboot";
	FILE *f;

	gethostname(host, sizeof(host) - 1);
	f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			strcpy(boot, "noboot");
		boot[strcspn(boot, "\n")] = '\0';
		fclose(f);
	}
	host[strcspn(host, " :")] = '\0';
	snprintf(buf, len, "%s:%s", host, boot);
}

/* Does one of the transports in mask reach other hosts? */
static int core_reaches_hosts(unsigned mask)
{
	int t;

	for (t = 0; t < RDMACH_TL_MAX; t++) {
		const struct rdmach_tl_ops *ops = core_tl_ops(t);

		if (ops && (mask & (1u << t)) && !ops->same_host_only)
			return 1;
	}
	return 0;
}

/* RDMACH_TRANSPORT forces a transport that stays on this host (shm). */
static int core_forced_local(const struct rdmach_ctx *ctx)
{
	int forced = core_of(ctx)->x.forced;

	return forced != CORE_TL_AUTO && core_tl_ops(forced)->same_host_only;
}

/* Why this rank reaches no other host: each such transport's reason
 * (rdmach_tl_unavailable), or that none is built in. */
static void core_why_local(struct rdmach_ctx *ctx, char *buf, size_t len)
{
	size_t n = 0;
	int t;

	buf[0] = '\0';
	for (t = 0; t < RDMACH_TL_MAX && n + 1 < len; t++) {
		const struct rdmach_tl_ops *ops = core_tl_ops(t);
		const char *why = core_of(ctx)->x.tl_why[t];

		if (!ops || ops->same_host_only)
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%s%s", n ? "; " : "",
				      why[0] ? why : ops->name,
				      why[0] ? "" : " did not open");
	}
	if (!buf[0])
		snprintf(buf, len, "this build has no transport between hosts "
			 "(configure found no libibverbs)");
}

/* This rank reaches no other host: say why to the other ranks, which need
 * it when a pair across hosts is then left without a transport. */
static int core_publish_why(struct rdmach_ctx *ctx, unsigned mask)
{
	char key[64], why[CORE_WHY_MAX], val[3 * CORE_WHY_MAX + 1];

	if (core_reaches_hosts(mask) || core_forced_local(ctx))
		return 0;
	core_why_local(ctx, why, sizeof(why));
	rdmach_oobval_encode(why, val, ctx->oob.value_max < sizeof(val) ?
			     ctx->oob.value_max + 1 : sizeof(val));
	snprintf(key, sizeof(key), "rdmach-why-%d", ctx->rank);
	return rdmach_oob_put(ctx, key, val);
}

/* The host part of a host id (a peer's text), printable. */
static void core_host_name(const char *hostid, char *buf, size_t len)
{
	char host[CORE_HOSTID_MAX];

	snprintf(host, sizeof(host), "%.*s", (int)strcspn(hostid, ":"),
		 hostid);
	rdmach_log_esc(host, buf, len);
}

/* Why rank r reaches no other host (published by core_publish_why). */
static void core_peer_why(struct rdmach_ctx *ctx, int r, char *buf,
			  size_t len)
{
	char key[64], val[3 * CORE_WHY_MAX + 1], esc[128];

	snprintf(key, sizeof(key), "rdmach-why-%d", r);
	if (core_oob_try_get(ctx, key, val, sizeof(val)))
		snprintf(buf, len, "reason unknown");
	else if (rdmach_oobval_decode(val, buf, len))
		snprintf(buf, len, "reason unknown (malformed: \"%s\")",
			 rdmach_log_esc(val, esc, sizeof(esc)));
}

/* Rank r's "mask:hostid" (core_exchange_info): a hex mask of transports,
 * of which those this build knows count (a newer peer may know more), and
 * a host id that is not empty. */
static int core_parse_peer_info(const char *val, int r,
				struct core_peer_info *out)
{
	char esc[4 * CORE_HOSTID_MAX];
	const char *colon;
	uint64_t mask;

	if (rdmach_num(val, 16, UINT64_MAX, &mask, &colon) || *colon != ':' ||
	    !colon[1]) {
		rdmach_err("malformed host id from rank %d: \"%s\"", r,
			   rdmach_log_esc(val, esc, sizeof(esc)));
		return -EPROTO;
	}
	out->tl_mask = (unsigned)(mask & ((1u << RDMACH_TL_MAX) - 1));
	snprintf(out->hostid, sizeof(out->hostid), "%s", colon + 1);
	return 0;
}

/* Rank r's record, "mask:hostid" (core_exchange_info), into *out. */
static int core_read_record(struct rdmach_ctx *ctx, int r,
			    struct core_peer_info *out)
{
	char key[64], val[CORE_HOSTID_MAX + 16];
	int ret;

	snprintf(key, sizeof(key), "rdmach-%d", r);
	ret = rdmach_oob_get(ctx, key, val, sizeof(val));
	if (!ret)
		ret = core_parse_peer_info(val, r, out);
	if (!ret)
		out->known = 1;
	return ret;
}

/* PMI_process_mapping into node_of[]: 1; 0 when the server has none (the
 * exchange of every host id is the fallback), or a malformed one
 * (warned). */
static int core_read_nodemap(struct rdmach_ctx *ctx, int *node_of)
{
	size_t len = ctx->oob.value_max + 1;
	char *val = malloc(len), why[160], esc[256];
	int ret = 0;

	if (!val || core_oob_try_get(ctx, "PMI_process_mapping", val, len) ||
	    !val[0])
		goto out;
	if (rdmach_nodemap_parse(val, ctx->size, node_of, why, sizeof(why))) {
		rdmach_warn("PMI_process_mapping \"%s\": %s; every rank's host "
			    "id is read instead",
			    rdmach_log_esc(val, esc, sizeof(esc)), why);
		goto out;
	}
	ret = 1;
out:
	free(val);
	return ret;
}

/* The mapping says rank r is (or is not) on this node: its host id must
 * agree.  strict: an error (-EPROTO); else a warning (-EAGAIN): every
 * record is read, so the host ids can decide. */
static int core_check_mapped(struct rdmach_ctx *ctx, int r,
			     const struct core_peer_info *pi, int mapped_local,
			     int strict)
{
	char e1[4 * CORE_HOSTID_MAX], e2[4 * CORE_HOSTID_MAX];
	const char *fmt = "PMI_process_mapping puts rank %d %s rank %d (this "
			  "rank), but their host ids say otherwise: rank %d "
			  "on %s, rank %d on %s%s";

	if ((strcmp(pi->hostid, core_of(ctx)->x.hostid) == 0) == mapped_local)
		return 0;
	rdmach_log_esc(pi->hostid, e1, sizeof(e1));
	rdmach_log_esc(core_of(ctx)->x.hostid, e2, sizeof(e2));
	if (strict) {
		rdmach_err(fmt, r, mapped_local ? "on the node of" :
			   "on another node than", ctx->rank, r, e1,
			   ctx->rank, e2, ctx->demand ? " (RDMACH_CONNECT="
			   "demand reads the host ids of this node's ranks "
			   "only and needs a right mapping; "
			   "RDMACH_CONNECT=all reads every rank's)" : "");
		return -EPROTO;
	}
	rdmach_warn(fmt, r, mapped_local ? "on the node of" :
		    "on another node than", ctx->rank, r, e1, ctx->rank, e2,
		    "; the host ids decide (the mapping is a hint: Slurm's "
		    "is wrong for some task distributions)");
	return -EAGAIN;
}

/* Publish this rank's record; read those of the ranks on this node (per
 * PMI_process_mapping) or, without a mapping or when every pair is
 * connected now, of every rank. */
static int core_exchange_info(struct rdmach_ctx *ctx,
			      struct core_peer_info *info, int *node_of,
			      int *mapped)
{
	char key[64], val[CORE_HOSTID_MAX + 16];
	char *me = core_of(ctx)->x.hostid;
	unsigned mask = 0;
	int i, t, ret;

	for (t = 0; t < RDMACH_TL_MAX; t++)
		if (ctx->tls[t])
			mask |= 1u << t;
	core_hostid(me, CORE_HOSTID_MAX);
	snprintf(key, sizeof(key), "rdmach-%d", ctx->rank);
	snprintf(val, sizeof(val), "%x:%s", mask, me);
	ret = rdmach_oob_put(ctx, key, val);
	if (!ret)
		ret = core_publish_why(ctx, mask);
	if (ret)
		return ret;
	ret = core_fence(ctx, "host ids", 0);
	if (ret)
		return ret;
	*mapped = core_read_nodemap(ctx, node_of);
	for (i = 0; i < ctx->size; i++) {
		int local = *mapped && node_of[i] == node_of[ctx->rank];

		if (*mapped && ctx->demand && !local)
			continue;
		ret = core_read_record(ctx, i, &info[i]);
		if (!ret && *mapped)
			ret = core_check_mapped(ctx, i, &info[i], local,
						ctx->demand);
		if (ret == -EAGAIN) {
			/* every record is read: the host ids decide, and
			 * no more warnings */
			*mapped = 0;
			ret = 0;
		}
		if (ret)
			return ret;
	}
	return 0;
}

/* The transport for the pair (a, b): the first, in order of preference,
 * that both opened and that can reach across them.  Both ends compute
 * the same answer. */
static int core_choose(const struct rdmach_ctx *ctx,
		       const struct core_peer_info *info, int a, int b)
{
	unsigned both = info[a].tl_mask & info[b].tl_mask;
	int same_host = !strcmp(info[a].hostid, info[b].hostid);
	int t;

	for (t = 0; t < RDMACH_TL_MAX; t++) {
		const struct rdmach_tl_ops *ops = core_tl_ops(t);

		if (ops && (both & (1u << t)) &&
		    (same_host || !ops->same_host_only))
			return t;
	}
	return -1;
}

/* The transports a rank opened, as "shm ib" (or "none"). */
static void core_tl_names(unsigned mask, char *buf, size_t len)
{
	int t;

	snprintf(buf, len, "none");
	for (t = 0; t < RDMACH_TL_MAX; t++) {
		const struct rdmach_tl_ops *ops = core_tl_ops(t);
		size_t n = strcmp(buf, "none") ? strlen(buf) : 0;

		if (ops && (mask & (1u << t)))
			snprintf(buf + n, len - n, "%s%s", n ? " " : "",
				 ops->name);
	}
}

/* Ranks a and b are on two hosts and one of them (or both) reaches no
 * other host: name that host and its reason (core_publish_why).  0 when
 * that is not what left the pair unconnected. */
static int core_report_no_route(struct rdmach_ctx *ctx,
				const struct core_peer_info *info, int a, int b)
{
	char ha[CORE_HOSTID_MAX], hb[CORE_HOSTID_MAX], why[3 * CORE_WHY_MAX];
	char esc[4 * CORE_WHY_MAX];
	const int pair[2] = { a, b };
	int i, n = 0;

	if (!strcmp(info[a].hostid, info[b].hostid) || core_forced_local(ctx))
		return 0;
	core_host_name(info[a].hostid, ha, sizeof(ha));
	core_host_name(info[b].hostid, hb, sizeof(hb));
	for (i = 0; i < 2; i++) {
		int r = pair[i];

		if (core_reaches_hosts(info[r].tl_mask))
			continue;
		core_peer_why(ctx, r, why, sizeof(why));
		rdmach_err("rank %d on host %s and rank %d on host %s cannot "
			   "connect: different hosts need the ib transport, "
			   "and host %s (rank %d) has no usable RDMA device: "
			   "%s", a, ha, b, hb, r == a ? ha : hb, r,
			   rdmach_log_esc(why, esc, sizeof(esc)));
		n++;
	}
	return n;
}

static void core_report_unreachable(struct rdmach_ctx *ctx,
				    const struct core_peer_info *info, int a,
				    int b)
{
	char ta[32], tb[32], ha[4 * CORE_HOSTID_MAX], hb[4 * CORE_HOSTID_MAX];

	if (core_report_no_route(ctx, info, a, b))
		return;
	core_tl_names(info[a].tl_mask, ta, sizeof(ta));
	core_tl_names(info[b].tl_mask, tb, sizeof(tb));
	rdmach_err("no transport connects rank %d (host %s, transports: %s) "
		   "and rank %d (host %s, transports: %s) under "
		   "RDMACH_TRANSPORT=%s", a,
		   rdmach_log_esc(info[a].hostid, ha, sizeof(ha)), ta, b,
		   rdmach_log_esc(info[b].hostid, hb, sizeof(hb)), tb,
		   rdmach_knob_str(&core_knobs[CORE_KNOB_TRANSPORT]));
}

/* Demand with a mapping: the ranks on other nodes go through the first
 * transport this rank opened that reaches other hosts; whether the peer
 * has it too is checked at first contact (core_contact). */
static int core_plan_remote(struct rdmach_ctx *ctx,
			    const struct core_peer_info *info, int *choice)
{
	int *remote_tl = &core_of(ctx)->x.remote_tl;
	char why[CORE_WHY_MAX];
	int b, t;

	for (t = 0, *remote_tl = -1; t < RDMACH_TL_MAX && *remote_tl < 0; t++)
		if (ctx->tls[t] && !ctx->tls[t]->ops->same_host_only)
			*remote_tl = t;
	for (b = 0; b < ctx->size; b++) {
		if (info[b].known) {
			choice[b] = core_choose(ctx, info, ctx->rank, b);
			if (choice[b] < 0) {
				core_report_unreachable(ctx, info, ctx->rank,
							b);
				return -ENODEV;
			}
		} else if (*remote_tl < 0 || core_forced_local(ctx)) {
			core_why_local(ctx, why, sizeof(why));
			rdmach_err("rank %d is on another node and this rank "
				   "reaches no other host: %s", b, why);
			return -ENODEV;
		} else {
			choice[b] = *remote_tl;
		}
	}
	return 0;
}

static int core_plan(struct rdmach_ctx *ctx, const struct core_peer_info *info,
		     int *choice, int partial)
{
	int a, b;

	if (partial)
		return core_plan_remote(ctx, info, choice);

	/* Every process checks every pair, so all fail alike or none does. */
	for (a = 0; a < ctx->size; a++) {
		for (b = a; b < ctx->size; b++) {
			int t = core_choose(ctx, info, a, b);

			if (t < 0) {
				if (ctx->rank == a || ctx->rank == b ||
				    ctx->rank == 0)
					core_report_unreachable(ctx, info, a,
								b);
				return -ENODEV;
			}
			if (a == ctx->rank)
				choice[b] = t;
			else if (b == ctx->rank)
				choice[a] = t;
		}
	}
	return 0;
}

typedef int (*core_phase_fn)(struct rdmach_tl *tl, const int *peers,
			     int npeers);

static int core_run_phase(struct rdmach_ctx *ctx, const int *choice,
			  int *peers, int phase)
{
	int t, i, n, ret;

	for (t = 0; t < RDMACH_TL_MAX; t++) {
		struct rdmach_tl *tl = ctx->tls[t];
		core_phase_fn fn;

		if (!tl)
			continue;
		fn = phase == 0 ? tl->ops->publish : tl->ops->connect;
		for (i = 0, n = 0; i < ctx->size; i++)
			if (choice[i] == t)
				peers[n++] = i;
		/* on demand: connect_peer does it later */
		if (phase && ctx->demand && tl->ops->connect_peer)
			n = 0;
		ret = fn(tl, peers, n);
		if (ret)
			return ret;
	}
	return 0;
}

struct core_host_key {
	const char *hostid;
	int rank;
};

static int core_host_key_cmp(const void *a, const void *b)
{
	const struct core_host_key *x = a, *y = b;
	int c = strcmp(x->hostid, y->hostid);

	return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

/* Host numbers of the ranks whose host id was read: equal host ids, equal
 * numbers; the hosts numbered 0, 1, ... in the order of their lowest rank,
 * so that every rank that read every host id numbers them alike.  Sorted
 * by host id: no pairwise comparison of all ranks. */
static int core_number_hosts(struct rdmach_ctx *ctx,
			     const struct core_peer_info *info, int *host_of)
{
	struct core_host_key *k = malloc((size_t)ctx->size * sizeof(*k));
	int i, n = 0, next = 0;

	if (!k)
		return -ENOMEM;
	for (i = 0; i < ctx->size; i++) {
		host_of[i] = -1;
		if (info[i].known)
			k[n++] = (struct core_host_key){ info[i].hostid, i };
	}
	qsort(k, (size_t)n, sizeof(*k), core_host_key_cmp);
	/* host_of[] first holds each rank's host's lowest rank ... */
	for (i = 0; i < n; i++)
		host_of[k[i].rank] = i && !strcmp(k[i].hostid, k[i - 1].hostid) ?
				     host_of[k[i - 1].rank] : k[i].rank;
	free(k);
	/* ... then, in rank order, the number of that lowest rank's host */
	for (i = 0; i < ctx->size; i++)
		if (host_of[i] >= 0)
			host_of[i] = host_of[i] == i ? next++ :
				     host_of[host_of[i]];
	return 0;
}

/* Where the ranks are, for rdmach_peer_local and rdmach_peer_host. */
static int core_keep_locality(struct rdmach_ctx *ctx,
			      const struct core_peer_info *info)
{
	int *host_of = malloc((size_t)ctx->size * sizeof(*host_of));
	int i, ret, all = 1;

	if (!host_of)
		return -ENOMEM;
	ret = core_number_hosts(ctx, info, host_of);
	if (ret) {
		free(host_of);
		return ret;
	}
	ctx->host_procs = 0;
	for (i = 0; i < ctx->size; i++) {
		all &= info[i].known;
		ctx->host_procs += host_of[i] == host_of[ctx->rank];
	}
	free(core_of(ctx)->x.host_of);
	core_of(ctx)->x.host_of = host_of;
	core_of(ctx)->x.hosts_all = all;
	return 0;
}

int rdmach_connect(rdmach_ctx_t *ctx)
{
	struct core_peer_info *info;
	int *choice, *peers, mapped = 0;
	int t, i, ret = -ENOMEM;

	if (!ctx)
		return -EINVAL;
	if (!core_ctx_live(ctx))
		return -EBADF;
	if (ctx->connected)
		return -EALREADY;
	info = calloc((size_t)ctx->size, sizeof(*info));
	choice = calloc((size_t)ctx->size, sizeof(*choice));
	peers = calloc((size_t)ctx->size, sizeof(*peers));
	if (!info || !choice || !peers)
		goto out;
	/* peers doubles as the node map until the phases need it */
	ret = core_exchange_info(ctx, info, peers, &mapped);
	if (ret)
		goto out;
	ret = core_plan(ctx, info, choice, mapped && ctx->demand);
	if (!ret)	/* a rank not read yet (demand) is on another host */
		ret = core_keep_locality(ctx, info);
	if (ret)
		goto out;
	for (i = 0; i < ctx->size; i++) {
		ctx->conns[i].via = ctx->tls[choice[i]];
		ctx->conns[i].contacted = info[i].known;
	}
	ret = core_run_phase(ctx, choice, peers, 0);
	if (ret)
		goto out;
	ret = core_fence(ctx, "addresses published", 0);
	if (ret)
		goto out;
	ret = core_run_phase(ctx, choice, peers, 1);
	if (ret)
		goto out;
	ret = core_fence(ctx, "connections made", !ctx->demand);
	if (ret)
		goto out;
	for (t = 0; t < RDMACH_TL_MAX; t++) {
		if (ctx->tls[t]) {
			ret = ctx->tls[t]->ops->ready(ctx->tls[t]);
			if (ret)
				goto out;
		}
	}
	for (i = 0; i < ctx->size; i++) {
		rdmach_debug("rank %d reached through %s", i,
			     ctx->tls[choice[i]]->ops->name);
		core_of(ctx)->x.tl_peers[choice[i]]++;
	}
	ctx->connected = 1;
out:
	free(peers);
	free(choice);
	free(info);
	return ret;
}

int rdmach_conn(rdmach_ctx_t *ctx, int peer, rdmach_conn_t **connp)
{
	if (!ctx || !connp)
		return -EINVAL;
	if (!core_ctx_live(ctx))
		return -EBADF;
	if (peer < 0 || peer >= ctx->size)
		return -EINVAL;
	if (!ctx->connected)
		return -ENOTCONN;
	*connp = &ctx->conns[peer];
	return 0;
}

/* ---- data path -------------------------------------------------------- */

/* First contact with a rank whose record was not read at start-up (on
 * another node, per PMI_process_mapping): read it; the pair needs the
 * transport this rank chose for it, and another host id than ours. */
static int core_contact(struct rdmach_conn *conn)
{
	struct rdmach_ctx *ctx = conn->ctx;
	struct core_peer_info pi;
	char hn[CORE_HOSTID_MAX];
	int ret;

	memset(&pi, 0, sizeof(pi));
	ret = core_read_record(ctx, conn->peer, &pi);
	if (!ret)
		ret = core_check_mapped(ctx, conn->peer, &pi, 0, 1);
	if (ret)
		return rdmach_conn_fail(conn, ret, "its record (host id) is "
					"missing or does not fit the mapping");
	if (!(pi.tl_mask & (1u << conn->via->ops->id))) {
		core_host_name(pi.hostid, hn, sizeof(hn));
		return rdmach_conn_fail(conn, -ENODEV, "rank %d on host %s has "
					"no %s transport", conn->peer, hn,
					conn->via->ops->name);
	}
	conn->contacted = 1;
	return 0;
}

/* A connection that is not up: start it (start: a put wants it) or move
 * it on.  0 when up now, -EINPROGRESS while not, or its error. */
static __attribute__((noinline)) int core_demand(struct rdmach_conn *conn,
						 int start)
{
	struct rdmach_tl *via = conn->via;
	int ret;

	if (!via || !via->ops->connect_peer)
		return -ENOTCONN;
	if (conn->err)
		return conn->err;
	if (!conn->contacted && start) {
		ret = core_contact(conn);
		if (ret)
			return ret;
	}
	ret = via->ops->connect_peer(via, conn->peer, start &&
				     conn->contacted);
	if (ret < 0)
		return ret;
	return conn->tl ? 0 : -EINPROGRESS;
}

/* Argument checks of put and get (the general path; the common call has
 * core_fast_call); 0 and *total set, -EINPROGRESS while the connection is
 * being made (start: a put, which starts it), or a negative errno. */
static int core_check_call(struct rdmach_conn *conn, const struct iovec *iov,
			   int iovcnt, size_t *total, int start)
{
	if (!core_conn_live(conn))
		return conn ? -EBADF : -EINVAL;
	if (rdmach_iov_check(iov, iovcnt, total))
		return -EINVAL;
	if (!conn->tl)
		return core_demand(conn, start && *total);
	return 0;
}

/* Warn once when a connection's puts have made no progress for long. */
static void core_note_stall(struct rdmach_conn *conn)
{
	struct core_ctx *c = core_of(conn->ctx);
	uint64_t now;

	/* (a put that found its connection closing: no stall) */
	if (!c->x.stall_warn_ns || conn->stall_warned || !conn->tl)
		return;
	now = rdmach_now_ns();
	if (!conn->stall_since_ns) {
		conn->stall_since_ns = now;
	} else if (now - conn->stall_since_ns > c->x.stall_warn_ns) {
		conn->stall_warned = 1;
		rdmach_warn("put to rank %d (%s) has made no progress for "
			    "%.1f s: its ring is full or a zero-copy read is "
			    "pending; is the peer calling get?",
			    conn->peer, conn->tl->ops->name,
			    (double)(now - conn->stall_since_ns) / 1e9);
	}
}

/* The common call on a live, connected, healthy connection: one piece, or
 * two (CH3's header and payload), none empty; 1 and *total set.  Kept to
 * a few compares before the transport (the two-piece put of every MPI
 * message went the full checks: ~100 instructions of ~1100 per message);
 * everything else goes through core_check_call. */
static inline int core_fast_call(const struct rdmach_conn *conn,
				 const struct iovec *iov, int iovcnt,
				 size_t *total)
{
	const size_t piece_max = (size_t)SSIZE_MAX / 2;
	size_t len;

	if ((unsigned)iovcnt - 1 > 1 || !iov || !iov[0].iov_base)
		return 0;
	len = iov[0].iov_len;
	if (len - 1 >= piece_max)
		return 0;
	if (iovcnt == 2) {
		if (!iov[1].iov_base || iov[1].iov_len - 1 >= piece_max)
			return 0;
		len += iov[1].iov_len;
	}
	if (!core_conn_live(conn) || !conn->tl || conn->err)
		return 0;
	*total = len;
	return 1;
}

/* Count what a transport's put took; a put that took nothing may be a
 * stall to warn of, one that took something ends it.  fast: the call took
 * core_fast_call's path, which no stall being timed takes (stall_warned
 * is set only while one is), so there is none to end. */
static inline void core_put_done(struct rdmach_conn *conn, ssize_t n, int fast)
{
	if (__builtin_expect(n > 0, 1)) {
		conn->stats.bytes_put += (uint64_t)n;
		conn->stats.msgs_put++;
		if (fast)
			return;
		conn->stall_since_ns = 0;
		conn->stall_warned = 0;
	} else if (n == 0) {
		core_note_stall(conn);
	}
}

/* Count what a transport's get gave; nothing on a failed connection is
 * its error. */
static inline ssize_t core_get_done(struct rdmach_conn *conn, ssize_t n)
{
	if (n > 0) {
		conn->stats.bytes_got += (uint64_t)n;
		conn->stats.msgs_got++;
	} else if (n == 0 && __builtin_expect(conn->err != 0, 0)) {
		n = conn->err;
	}
	return n;
}

/* The checked put: rdmach_put, or with ticket rdmach_put_deferred (*ticket
 * set only by a transport that takes the bytes by reference). */
static __attribute__((noinline)) ssize_t
core_put_slow(rdmach_conn_t *conn, const struct iovec *iov, int iovcnt,
	      uint64_t *ticket)
{
	const struct rdmach_tl_ops *ops;
	size_t total;
	ssize_t n;
	int ret;

	ret = core_check_call(conn, iov, iovcnt, &total, 1);
	if (ret)
		return ret == -EINPROGRESS ? 0 : ret;
	if (conn->err)
		return conn->err;
	if (!total)
		return 0;
	ops = conn->tl->ops;
	if (ticket && ops->put_deferred)
		n = ops->put_deferred(conn, iov, iovcnt, total, ticket);
	else
		n = ops->put(conn, iov, iovcnt, total);
	core_put_done(conn, n, 0);
	return n;
}

ssize_t rdmach_put(rdmach_conn_t *conn, const struct iovec *iov, int iovcnt)
{
	size_t total;
	ssize_t n;

	/* a stall being timed goes the full way: it ends at the next success */
	if (__builtin_expect(!core_fast_call(conn, iov, iovcnt, &total) ||
			     conn->stall_since_ns, 0))
		return core_put_slow(conn, iov, iovcnt, NULL);
	n = conn->tl->ops->put(conn, iov, iovcnt, total);
	core_put_done(conn, n, 1);
	return n;
}

ssize_t rdmach_put_deferred(rdmach_conn_t *conn, const struct iovec *iov,
			    int iovcnt, uint64_t *ticket)
{
	uint64_t t = 0;
	size_t total;
	ssize_t n;

	if (!ticket)
		return -EINVAL;
	if (__builtin_expect(core_fast_call(conn, iov, iovcnt, &total) &&
			     !conn->stall_since_ns &&
			     conn->tl->ops->put_deferred, 1)) {
		n = conn->tl->ops->put_deferred(conn, iov, iovcnt, total, &t);
		core_put_done(conn, n, 1);
	} else {
		n = core_put_slow(conn, iov, iovcnt, &t);
	}
	if (n >= 0)
		*ticket = t;
	return n;
}

/* A pending deferred put that is not read is a stall like a put that
 * takes nothing: warned of after RDMACH_STALL_WARN_MS. */
int rdmach_put_done(rdmach_conn_t *conn, uint64_t *done)
{
	uint64_t d = 0;
	int ret = 0;

	if (!done)
		return -EINVAL;
	if (!core_conn_live(conn))
		return conn ? -EBADF : -EINVAL;
	if (!conn->tl) {
		/* nothing put yet: nothing pending */
		ret = core_demand(conn, 0);
		if (ret && ret != -EINPROGRESS)
			return ret;
		if (!conn->tl) {	/* never up, or closed idle */
			*done = conn->tickets_done;
			return 0;
		}
	}
	if (conn->tl->ops->put_done)
		ret = conn->tl->ops->put_done(conn, &d);
	if (ret < 0)
		return ret;
	if (ret && d == conn->put_done_seen) {
		core_note_stall(conn);
	} else if (d != conn->put_done_seen) {
		conn->put_done_seen = d;
		conn->stall_since_ns = 0;
		conn->stall_warned = 0;
	}
	*done = d;
	return ret;
}

static __attribute__((noinline)) ssize_t
core_get_slow(rdmach_conn_t *conn, const struct iovec *iov, int iovcnt)
{
	size_t total;
	int ret;

	ret = core_check_call(conn, iov, iovcnt, &total, 0);
	if (ret)
		return ret == -EINPROGRESS ? 0 : ret;
	if (!total)
		return conn->err;
	return core_get_done(conn, conn->tl->ops->get(conn, iov, iovcnt,
						       total));
}

ssize_t rdmach_get(rdmach_conn_t *conn, const struct iovec *iov, int iovcnt)
{
	size_t total;

	if (__builtin_expect(!core_fast_call(conn, iov, iovcnt, &total), 0))
		return core_get_slow(conn, iov, iovcnt);
	return core_get_done(conn, conn->tl->ops->get(conn, iov, iovcnt,
						       total));
}

ssize_t rdmach_peek(rdmach_conn_t *conn, const void **buf)
{
	ssize_t n;

	if (!conn || !buf)
		return -EINVAL;
	if (!core_conn_live(conn))
		return -EBADF;
	if (!conn->tl) {
		n = core_demand(conn, 0);
		if (n)
			return n == -EINPROGRESS ? 0 : n;
	}
	if (conn->err)
		return conn->err;
	if (!conn->tl->ops->peek)
		return -EOPNOTSUPP;
	n = conn->tl->ops->peek(conn, buf);
	if (n == 0 && __builtin_expect(conn->err != 0, 0))
		n = conn->err;
	return n;
}

int rdmach_consume(rdmach_conn_t *conn, size_t n)
{
	int ret;

	if (!conn || !n)
		return -EINVAL;
	if (!core_conn_live(conn))
		return -EBADF;
	if (!conn->tl || !conn->tl->ops->consume)
		return -EINVAL;
	ret = conn->tl->ops->consume(conn, n);
	if (!ret) {
		core_get_done(conn, (ssize_t)n);
		conn->in_place_reads++;
		conn->in_place_bytes += n;
	}
	return ret;
}

void rdmach_conn_up(struct rdmach_conn *conn, struct rdmach_tl *tl)
{
	struct core_ctx_extra *x = &core_of(conn->ctx)->x;

	conn->tl = tl;
	if (conn->announced)
		return;
	conn->announced = 1;
	x->up_ranks[x->up_tail++] = conn->peer;	/* once per rank: fits */
}

void rdmach_conn_down(struct rdmach_conn *conn, uint64_t tickets_done)
{
	conn->tl = NULL;
	conn->tickets_done = tickets_done;
}

int rdmach_conns_up(rdmach_ctx_t *ctx, int *peers, int max)
{
	struct core_ctx_extra *x;
	int n = 0, t;

	if (!ctx || max < 0 || (max && !peers))
		return -EINVAL;
	if (!core_ctx_live(ctx))
		return -EBADF;
	if (!ctx->connected)
		return -ENOTCONN;
	x = &core_of(ctx)->x;
	/* under demand a peer's request waits for this process to look */
	for (t = 0; t < RDMACH_TL_MAX && ctx->demand; t++)
		if (ctx->tls[t] && ctx->tls[t]->ops->listen)
			ctx->tls[t]->ops->listen(ctx->tls[t]);
	while (n < max && x->up_head < x->up_tail)
		peers[n++] = x->up_ranks[x->up_head++];
	return n;
}

int rdmach_progress(rdmach_ctx_t *ctx)
{
	int t, ret;

	if (!ctx)
		return -EINVAL;
	if (!core_ctx_live(ctx))
		return -EBADF;
	for (t = 0; t < RDMACH_TL_MAX; t++) {
		if (!ctx->tls[t])
			continue;
		ret = ctx->tls[t]->ops->progress(ctx->tls[t]);
		if (ret)
			return ret;
	}
	return 0;
}

/* The transports armed by this thread's rdmach_wait_arm, and their
 * tokens: a thread arms and waits in turn, so the state is its own. */
static _Thread_local struct {
	struct rdmach_ctx *ctx;
	unsigned armed;			/* bit t: ctx->tls[t] armed */
	uint32_t token[RDMACH_TL_MAX];
} core_wait;

static int core_ctx_ready(const struct rdmach_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	if (!core_ctx_live(ctx))
		return -EBADF;
	return ctx->connected ? 0 : -ENOTCONN;
}

int rdmach_wait_arm(rdmach_ctx_t *ctx)
{
	int t, ret = core_ctx_ready(ctx), wakeable = 1;

	if (ret)
		return ret;
	core_wait.ctx = ctx;
	core_wait.armed = 0;
	for (t = 0; t < RDMACH_TL_MAX; t++) {
		struct rdmach_tl *tl = ctx->tls[t];

		if (!tl || !core_of(ctx)->x.tl_peers[t])
			continue;
		if (tl->ops->wait_arm &&
		    tl->ops->wait_arm(tl, &core_wait.token[t]))
			core_wait.armed |= 1u << t;
		else
			wakeable = 0;
	}
	return wakeable && core_wait.armed;
}

int rdmach_wait(rdmach_ctx_t *ctx, uint64_t timeout_us)
{
	uint64_t timeout_ns = timeout_us * 1000u;
	int t, ret = core_ctx_ready(ctx), slept = 0;

	if (ret)
		return ret;
	if (core_wait.ctx != ctx)
		core_wait.armed = 0;
	/* one transport can sleep; any other armed one only disarms */
	for (t = 0; t < RDMACH_TL_MAX; t++) {
		if (!(core_wait.armed & (1u << t)))
			continue;
		ctx->tls[t]->ops->wait(ctx->tls[t], core_wait.token[t],
				       slept ? 0 : timeout_ns);
		slept = 1;
	}
	core_wait.armed = 0;
	if (!slept && timeout_ns) {
		struct timespec ts = rdmach_timespec_ns(timeout_ns);

		nanosleep(&ts, NULL);
	}
	return 0;
}

int rdmach_wake(rdmach_ctx_t *ctx)
{
	int t, ret = core_ctx_ready(ctx);

	if (ret)
		return ret;
	for (t = 0; t < RDMACH_TL_MAX; t++)
		if (ctx->tls[t] && ctx->tls[t]->ops->wake)
			ctx->tls[t]->ops->wake(ctx->tls[t]);
	return 0;
}

int rdmach_finalize(rdmach_ctx_t **ctxp)
{
	struct rdmach_ctx *ctx;
	struct core_ctx *c;

	if (!ctxp || !*ctxp)
		return -EINVAL;
	ctx = *ctxp;
	if (!core_ctx_live(ctx))
		return -EBADF;
	c = core_of(ctx);
	if (c->x.print_stats)
		rdmach_print_stats(ctx, stderr);
	core_unregister(ctx);
	core_close_transports(ctx, rdmach_now_ns() + ctx->finalize_timeout_ns);
	core_free_conns(ctx);
	free(c->x.host_of);
	free(c->x.up_ranks);
	free(c);
	*ctxp = NULL;
	return 0;
}

/* ---- helpers ------------------------------------------------------------ */

const char *rdmach_strerror(int err)
{
	switch (-err) {
	case 0: return "success";
	case EINVAL: return "invalid argument";
	case EBADF: return "not a live rdmach handle (used after finalize?)";
	case ENOTCONN: return "not connected (call rdmach_connect first)";
	case EALREADY: return "already connected";
	case ECONNRESET: return "connection failed: peer died or link error";
	case EPIPE: return "peer has finalized: nobody reads this pipe";
	case ESHUTDOWN: return "peer has finalized and all its data was read";
	case ENODEV: return "transport not available";
	case ENOMEM: return "out of memory";
	case E2BIG: return "value too long for the out-of-band exchange";
	case ETIMEDOUT: return "timed out";
	case EPROTO: return "protocol error (malformed packet or address)";
	case EIO: return "I/O error reported by the device";
	case EPERM: return "operation not permitted";
	default: return err < 0 ? strerror(-err) : "not an error code";
	}
}

const char *rdmach_conn_error(const rdmach_conn_t *conn)
{
	if (!conn || !core_conn_live(conn))
		return "not a live connection";
	if (!conn->err)
		return "";
	return conn->errmsg ? conn->errmsg : "failed (no memory for the message)";
}

const char *rdmach_conn_transport(const rdmach_conn_t *conn)
{
	if (!conn || !core_conn_live(conn) || !(conn->tl || conn->via))
		return "none";
	return conn->tl ? conn->tl->ops->name : conn->via->ops->name;
}

/* The checks of rdmach_peer_local and rdmach_peer_host: 0 and
 * *host_of the host numbers, or their error. */
static int core_host_of(const rdmach_ctx_t *ctx, int peer,
			const int **host_of)
{
	if (!ctx || !core_ctx_live(ctx))
		return -EBADF;
	if (peer < 0 || peer >= ctx->size)
		return -EINVAL;
	if (!core_of(ctx)->x.host_of)
		return -ENOTCONN;
	*host_of = core_of(ctx)->x.host_of;
	return 0;
}

int rdmach_peer_local(const rdmach_ctx_t *ctx, int peer)
{
	const int *host_of;
	int ret = core_host_of(ctx, peer, &host_of);

	if (ret)
		return ret;
	return host_of[peer] >= 0 && host_of[peer] == host_of[ctx->rank];
}

int rdmach_peer_host(const rdmach_ctx_t *ctx, int peer)
{
	const int *host_of;
	int ret = core_host_of(ctx, peer, &host_of);

	if (ret)
		return ret;
	if (!core_of(ctx)->x.hosts_all)
		return -ENODATA;
	return host_of[peer];
}

int rdmach_rank(const rdmach_ctx_t *ctx)
{
	return ctx && core_ctx_live(ctx) ? ctx->rank : -EBADF;
}

int rdmach_size(const rdmach_ctx_t *ctx)
{
	return ctx && core_ctx_live(ctx) ? ctx->size : -EBADF;
}

int rdmach_conn_stats(const rdmach_conn_t *conn, rdmach_stats_t *st)
{
	if (!conn || !st)
		return -EINVAL;
	if (!core_conn_live(conn))
		return -EBADF;
	*st = conn->stats;
	return 0;
}

static void core_stats_add(rdmach_stats_t *sum, const rdmach_stats_t *s)
{
	uint64_t *d = (uint64_t *)sum;
	const uint64_t *a = (const uint64_t *)s;
	size_t i;

	for (i = 0; i < sizeof(*s) / sizeof(uint64_t); i++)
		d[i] += a[i];
}

int rdmach_ctx_stats(const rdmach_ctx_t *ctx, rdmach_stats_t *st)
{
	rdmach_stats_t sum;
	int i;

	if (!ctx || !st)
		return -EINVAL;
	if (!core_ctx_live(ctx))
		return -EBADF;
	sum = ctx->ctx_stats;
	for (i = 0; i < ctx->size; i++)
		core_stats_add(&sum, &ctx->conns[i].stats);
	*st = sum;
	return 0;
}

static void core_print_row(FILE *out, const char *who, const rdmach_stats_t *s)
{
	fprintf(out,
		"%-10s %14llu %14llu %10llu %10llu %8llu %8llu %8llu %8llu %8llu\n",
		who, (unsigned long long)s->bytes_put,
		(unsigned long long)s->bytes_got,
		(unsigned long long)s->packets_sent,
		(unsigned long long)s->packets_received,
		(unsigned long long)s->ring_full_stalls,
		(unsigned long long)s->credit_updates_sent,
		(unsigned long long)s->credit_updates_received,
		(unsigned long long)s->zcopy_msgs,
		(unsigned long long)s->pipelined_msgs);
}

/* Large puts by protocol and reason (ib), when there were any. */
static void core_print_large(FILE *out, const rdmach_stats_t *s)
{
	uint64_t large = s->zcopy_bytes + s->spipe_bytes + s->large_ring_bytes;

	if (!s->why_hit && !s->why_reuse && !s->why_predicted &&
	    !s->why_model && !s->why_new && !s->why_no_payoff &&
	    !s->why_forced && !s->why_below && !s->why_fallback)
		return;
	fprintf(out, "# large puts: zero-copy %llu msgs %llu B, "
		"superpipeline %llu msgs %llu B (%llu chunks), ring %llu msgs "
		"%llu B; smaller puts %llu B\n",
		(unsigned long long)s->zcopy_msgs,
		(unsigned long long)s->zcopy_bytes,
		(unsigned long long)s->spipe_msgs,
		(unsigned long long)s->spipe_bytes,
		(unsigned long long)s->spipe_chunks,
		(unsigned long long)s->large_ring_msgs,
		(unsigned long long)s->large_ring_bytes,
		(unsigned long long)(s->bytes_put > large ?
				     s->bytes_put - large : 0));
	fprintf(out, "# large puts, why: zero-copy: %llu hit, %llu reuse, "
		"%llu predicted, %llu model; superpipeline: %llu new buffer, "
		"%llu no payoff; %llu below a threshold; ring: %llu fallback; "
		"%llu forced (RDMACH_LARGE)\n",
		(unsigned long long)s->why_hit,
		(unsigned long long)s->why_reuse,
		(unsigned long long)s->why_predicted,
		(unsigned long long)s->why_model,
		(unsigned long long)s->why_new,
		(unsigned long long)s->why_no_payoff,
		(unsigned long long)s->why_below,
		(unsigned long long)s->why_fallback,
		(unsigned long long)s->why_forced);
}

/* Connections made, by transport, and the out-of-band traffic of the
 * context (kept out of rdmach_stats_t: its size is part of the ABI). */
static void core_print_conns(FILE *out, const struct rdmach_ctx *ctx)
{
	const struct core_ctx_extra *x = &core_of(ctx)->x;
	int made[RDMACH_TL_MAX] = { 0 }, none = 0, i, t;

	for (i = 0; i < ctx->size; i++) {
		const struct rdmach_conn *c = &ctx->conns[i];

		/* one closed while idle since (rdmach_conn_down) was made */
		if (c->tl || (c->announced && c->via))
			made[(c->tl ? c->tl : c->via)->ops->id]++;
		else
			none++;
	}
	fprintf(out, "# connections:");
	for (t = 0; t < RDMACH_TL_MAX; t++)
		if (ctx->tls[t])
			fprintf(out, " %s %d,", ctx->tls[t]->ops->name,
				made[t]);
	fprintf(out, " not made %d (RDMACH_CONNECT=%s)\n", none,
		ctx->demand ? "demand" : "all");
	fprintf(out, "# out-of-band: %llu puts, %llu gets, %llu fences\n",
		(unsigned long long)x->oob_puts,
		(unsigned long long)x->oob_gets,
		(unsigned long long)x->oob_fences);
}

static void core_print_stats(const rdmach_ctx_t *ctx, FILE *out)
{
	uint64_t in_place_reads = 0, in_place_bytes = 0;
	rdmach_stats_t sum;
	char who[32];
	int i;

	if (rdmach_ctx_stats(ctx, &sum))
		return;
	fprintf(out, "# rdmach counters, rank %d\n", ctx->rank);
	fprintf(out, "%-10s %14s %14s %10s %10s %8s %8s %8s %8s %8s\n", "peer",
		"bytes_put", "bytes_got", "pkts_out", "pkts_in", "stalls",
		"cred_out", "cred_in", "zcopy", "piped");
	for (i = 0; i < ctx->size; i++) {
		const struct rdmach_conn *conn = &ctx->conns[i];

		in_place_reads += conn->in_place_reads;
		in_place_bytes += conn->in_place_bytes;
		if (!conn->stats.bytes_put && !conn->stats.bytes_got)
			continue;
		snprintf(who, sizeof(who), "%d/%s", i,
			 conn->tl ? conn->tl->ops->name : "-");
		core_print_row(out, who, &conn->stats);
	}
	core_print_row(out, "total", &sum);
	fprintf(out, "# rcache: %llu hits, %llu misses, %llu evictions, "
		"%llu invalidations\n",
		(unsigned long long)sum.rcache_hits,
		(unsigned long long)sum.rcache_misses,
		(unsigned long long)sum.rcache_evictions,
		(unsigned long long)sum.rcache_invalidations);
	if (sum.zcopy_reads)
		fprintf(out, "# zero-copy reads issued for the peers' puts: "
			"%llu\n", (unsigned long long)sum.zcopy_reads);
	if (in_place_reads)
		fprintf(out, "# read in place (rdmach_consume): %llu reads, "
			"%llu bytes\n", (unsigned long long)in_place_reads,
			(unsigned long long)in_place_bytes);
	core_print_large(out, &sum);
	core_print_conns(out, ctx);
	for (i = 0; i < RDMACH_TL_MAX; i++)
		if (ctx->tls[i] && ctx->tls[i]->ops->print_stats)
			ctx->tls[i]->ops->print_stats(ctx->tls[i], out);
}

void rdmach_print_stats(const rdmach_ctx_t *ctx, FILE *out)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem;

	if (!ctx || !out)
		return;
	/* one write: the ranks of a job usually share one stderr (mpiexec
	 * forwards it), where line pieces of several would interleave */
	mem = open_memstream(&text, &len);
	if (!mem) {
		core_print_stats(ctx, out);
		return;
	}
	core_print_stats(ctx, mem);
	if (!fclose(mem) && len) {
		fwrite(text, 1, len, out);
		fflush(out);
	}
	free(text);
}
