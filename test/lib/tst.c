/* tst.c - the case runner: selection, launching (fresh processes per case,
 * or all cases in place under mpiexec), result gathering, leftovers; and
 * the checks behind TST_CHECK*. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/knob.h"
#include "core/log.h"
#include "rdmach_launch.h"
#include "tst.h"

#define TST_SHARED_BYTES 4096

struct tst_opts {
	int list, verbose;
	char **filters;
	int nfilters;
	int shm_private;	/* /dev/shm is our own tmpfs */
};

/* The case's key namespace over the real oob, so that every case (and
 * every rdmach context) under one PMI job uses fresh keys. */
struct tst_oob {
	rdmach_oob_t base;
	char prefix[24];
};

static struct tst_oob tst_oob_state;
static int tst_report_fd = -1;	/* launcher: the parent's report pipe */
static void tst_report(int fd, char kind, int rank, const char *why);
static const char *tst_cur_name = "?";
static int tst_cur_rank = -1;

/* ---- settings --------------------------------------------------------- */

static double tst_env_double(const char *name, double deflt)
{
	const char *s = getenv(name);
	char *end;
	double v;

	if (!s || !*s)
		return deflt;
	v = strtod(s, &end);
	if (*end || v <= 0) {
		fprintf(stderr, "tst: %s=%s is not a positive number, using "
			"%g\n", name, s, deflt);
		return deflt;
	}
	return v;
}

double tst_scale(void)
{
	return tst_env_double("RDMACH_TEST_SCALE", 1.0);
}

uint64_t tst_scaled(uint64_t n, uint64_t min)
{
	uint64_t v = (uint64_t)((double)n * tst_scale());

	return v < min ? min : v;
}

uint64_t tst_stall_ns(void)
{
	return (uint64_t)(tst_env_double("RDMACH_TEST_STALL", 20) * 1e9);
}

static unsigned tst_timeout_s(void)
{
	return (unsigned)tst_env_double("RDMACH_TEST_TIMEOUT", 120);
}

uint64_t tst_knob(const char *name)
{
	const struct rdmach_knob *k = rdmach_knob_find(name);
	uint64_t v;

	if (!k || rdmach_knob_u64(k, &v))
		return 0;
	return v;
}

uint64_t tst_ring_size(rdmach_conn_t *conn)
{
	const char *tl = rdmach_conn_transport(conn);
	uint64_t v = 0;

	if (tl && !strcmp(tl, "ib"))
		v = tst_knob("RDMACH_IB_RING_SIZE");
	else if (tl && !strcmp(tl, "shm"))
		v = tst_knob("RDMACH_SHM_RING_SIZE");
	return v ? v : 65536;
}

int tst_have_ib_device(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n > 0;
}

/* ---- reporting -------------------------------------------------------- */

int tst_fail(struct tst *t, const char *fmt, ...)
{
	va_list ap;
	size_t n, i;

	if (t->failed)
		return -1;
	t->failed = 1;
	va_start(ap, fmt);
	vsnprintf(t->why, sizeof(t->why), fmt, ap);
	va_end(ap);
	n = strlen(t->why);
	/* One line: "FAIL name: why" is what the scripts read, and the
	 * launcher's report pipe carries one line per report. */
	for (i = 0; i < n; i++)
		if ((unsigned char)t->why[i] < ' ')
			t->why[i] = ' ';
	if (!(t->c->flags & TST_UNIT))
		snprintf(t->why + n, sizeof(t->why) - n, " (rank %d)",
			 t->rank);
	/* At once: the first failure in time is the one the runner shows,
	 * not the peer's consequence of it (e.g. -EPIPE). */
	if (tst_report_fd >= 0)
		tst_report(tst_report_fd, 'F', t->rank, t->why);
	if (t->verbose)
		fprintf(stderr, "[%s r%d] FAIL: %s\n", t->c->name, t->rank,
			t->why);
	return -1;
}

int tst_skip(struct tst *t, const char *fmt, ...)
{
	va_list ap;

	if (t->failed)		/* the failure is what gets reported */
		return TST_SKIP;
	va_start(ap, fmt);
	vsnprintf(t->why, sizeof(t->why), fmt, ap);
	va_end(ap);
	return TST_SKIP;
}

void tst_log(struct tst *t, const char *fmt, ...)
{
	va_list ap;

	if (!t->verbose)
		return;
	fprintf(stderr, "[%s r%d] ", t->c->name, t->rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *tst_errname(long v)
{
	return v < 0 ? rdmach_strerror((int)v) : "ok";
}

/* " (reason)" for a value that is an error code. */
static void tst_value_reason(long v, int err, char *out, size_t len)
{
	out[0] = 0;
	if (v == -1 && err)
		snprintf(out, len, " (errno: %s)", strerror(err));
	else if (v < 0)
		snprintf(out, len, " (%s)", tst_errname(v));
}

int tst_fail_eq(struct tst *t, const char *file, int line, const char *expr,
		long got, long want, int err)
{
	char got_why[128], want_why[128];

	tst_value_reason(got, err, got_why, sizeof(got_why));
	tst_value_reason(want, 0, want_why, sizeof(want_why));
	return tst_fail(t, "%s:%d: %s returned %ld%s, expected %ld%s", file,
			line, expr, got, got_why, want, want_why);
}

int tst_status_is(int status, int want)
{
	if (want < 0)
		return WIFSIGNALED(status) && WTERMSIG(status) == -want;
	return WIFEXITED(status) && WEXITSTATUS(status) == want;
}

int tst_capture_begin(struct tst_capture *cap, int with_stdout)
{
	char path[] = "/tmp/tst_capture.XXXXXX";
	int err;

	cap->saved_err = cap->saved_out = -1;
	cap->fd = mkstemp(path);
	if (cap->fd < 0)
		return -errno;
	unlink(path);
	fflush(NULL);
	cap->saved_err = dup(STDERR_FILENO);
	if (with_stdout)
		cap->saved_out = dup(STDOUT_FILENO);
	if (cap->saved_err < 0 || (with_stdout && cap->saved_out < 0) ||
	    dup2(cap->fd, STDERR_FILENO) < 0 ||
	    (with_stdout && dup2(cap->fd, STDOUT_FILENO) < 0)) {
		err = errno;
		tst_capture_end(NULL, cap, NULL, 0);
		return -err;
	}
	return 0;
}

void tst_capture_end(struct tst *t, struct tst_capture *cap, char *buf,
		     size_t len)
{
	ssize_t n = 0;

	fflush(NULL);
	if (cap->saved_err >= 0) {
		dup2(cap->saved_err, STDERR_FILENO);
		close(cap->saved_err);
	}
	if (cap->saved_out >= 0) {
		dup2(cap->saved_out, STDOUT_FILENO);
		close(cap->saved_out);
	}
	if (buf && len)
		n = pread(cap->fd, buf, len - 1, 0);
	close(cap->fd);
	cap->fd = cap->saved_err = cap->saved_out = -1;
	if (!buf || !len)
		return;
	buf[n > 0 ? n : 0] = 0;
	if (t && t->verbose)
		fprintf(stderr, "[%s r%d] captured: %s\n", t->c->name, t->rank,
			buf);
}

/* ---- oob with a per-case prefix --------------------------------------- */

static int tst_oob_key(char *out, size_t len, const char *key)
{
	int n = snprintf(out, len, "%s%s", tst_oob_state.prefix, key);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int tst_oob_put(void *arg, const char *key, const char *value)
{
	char k[256];
	int err = tst_oob_key(k, sizeof(k), key);

	(void)arg;
	return err ? err : tst_oob_state.base.put(tst_oob_state.base.arg, k,
						  value);
}

static int tst_oob_get(void *arg, const char *key, char *value, size_t len)
{
	char k[256];
	int err;

	(void)arg;
	/* what the process manager serves (PMI_process_mapping) is the job's */
	if (!strncmp(key, "PMI_", 4))
		return tst_oob_state.base.get(tst_oob_state.base.arg, key,
					      value, len);
	err = tst_oob_key(k, sizeof(k), key);
	return err ? err : tst_oob_state.base.get(tst_oob_state.base.arg, k,
						  value, len);
}

static int tst_oob_fence(void *arg)
{
	(void)arg;
	return tst_oob_state.base.fence(tst_oob_state.base.arg);
}

static void tst_oob_setup(struct tst *t, const rdmach_oob_t *base, int gen)
{
	t->rank = base->rank;
	t->size = base->size;
	if (t->c->flags & TST_RAW_OOB) {
		t->oob = *base;
		return;
	}
	tst_oob_state.base = *base;
	snprintf(tst_oob_state.prefix, sizeof(tst_oob_state.prefix), "t%d.",
		 gen);
	t->oob = *base;
	t->oob.arg = &tst_oob_state;
	t->oob.put = tst_oob_put;
	t->oob.get = tst_oob_get;
	t->oob.fence = tst_oob_fence;
}

int tst_barrier(struct tst *t)
{
	int err = t->oob.fence(t->oob.arg);

	return err ? tst_fail(t, "oob fence: %s", rdmach_strerror(err)) : 0;
}

int tst_connect(struct tst *t, rdmach_ctx_t **ctxp)
{
	rdmach_ctx_t *ctx = NULL;
	int err;

	err = rdmach_init(&ctx, &t->oob);
	if (err)
		return err;
	err = rdmach_connect(ctx);
	if (err) {
		rdmach_finalize(&ctx);
		return err;
	}
	*ctxp = ctx;
	return 0;
}

rdmach_conn_t *tst_conn(struct tst *t, int peer)
{
	rdmach_conn_t *conn = NULL;
	int err = rdmach_conn(t->ctx, peer, &conn);

	if (err) {
		tst_fail(t, "rdmach_conn(%d): %s", peer, rdmach_strerror(err));
		return NULL;
	}
	return conn;
}

rdmach_conn_t *tst_connect_env(struct tst *t, const char *const *env,
			       const char *transport, int *ret)
{
	rdmach_conn_t *c;
	const char *tr;
	int err;

	for (; env[0]; env += 2)
		setenv(env[0], env[1], 1);
	err = tst_connect(t, &t->ctx);
	if (err) {
		*ret = tst_fail(t, "connect: %s", rdmach_strerror(err));
		return NULL;
	}
	c = tst_conn(t, 1 - t->rank);
	if (!c) {
		*ret = -1;
		return NULL;
	}
	tr = rdmach_conn_transport(c);
	if (!tr || strcmp(tr, transport)) {
		*ret = tst_skip(t, "connection is not %s (%s)", transport,
				tr ? tr : "?");
		return NULL;
	}
	*ret = 0;
	return c;
}

/* RC QPs of this process, as the kernel lists them; -1 if it cannot. */
int tst_kernel_rc_qps(void)
{
	char cmd[64], line[512], pid[32];
	int n = 0, any = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "rdma resource show qp 2>/dev/null");
	snprintf(pid, sizeof(pid), " pid %d ", (int)getpid());
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		any = 1;
		n += strstr(line, "type RC") && strstr(line, pid);
	}
	return pclose(f) == 0 && any ? n : -1;
}

char *tst_stats_text(rdmach_ctx_t *ctx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	rdmach_print_stats(ctx, f);
	fclose(f);
	return buf;
}

int tst_ib_conns(rdmach_ctx_t *ctx, struct tst_ib_conns *c)
{
	char *buf = tst_stats_text(ctx), *p;
	int n = 0;

	memset(c, 0, sizeof(*c));
	p = buf ? strstr(buf, "# ib connections: ") : NULL;
	if (p)
		n = sscanf(p, "# ib connections: %" SCNu64 " made, %u QPs to "
			   "peers now (%u at most, RDMACH_IB_QPS_MAX=%*u, %"
			   SCNu64 " refused by the adapter%*[^;]; idle ones "
			   "closed: %" SCNu64 " asked by us, %" SCNu64 " by "
			   "peers, %" SCNu64 " kept by a busy peer; %" SCNu64
			   " waited for room, %" SCNu64 " made beyond it; %"
			   SCNu64 " messages resent, answers in %lf ms",
			   &c->made, &c->now, &c->most, &c->refused, &c->closed,
			   &c->closed_asked, &c->kept, &c->waits, &c->over,
			   &c->resent, &c->answer_ms);
	free(buf);
	return n == 11 ? 0 : -ENOENT;
}

int tst_connect_all_env(struct tst *t, const char *const *env,
			const char *transport)
{
	int err, p;

	for (; env[0]; env += 2)
		setenv(env[0], env[1], 1);
	err = tst_connect(t, &t->ctx);
	if (err)
		return tst_fail(t, "connect: %s", rdmach_strerror(err));
	for (p = 0; p < t->size; p++) {
		rdmach_conn_t *c;
		const char *tr;

		if (p == t->rank)
			continue;
		c = tst_conn(t, p);
		if (!c)
			return -1;
		tr = rdmach_conn_transport(c);
		if (!tr || strcmp(tr, transport))
			return tst_skip(t, "connection to %d is not %s (%s)", p,
					transport, tr ? tr : "?");
	}
	return 0;
}

/* ---- running one case in this process --------------------------------- */

/* A mapping of shared memory still alive after finalize is a leak. */
static int tst_check_maps(struct tst *t)
{
	static const char *const pats[] = { "/dev/shm/", "memfd:", "SYSV" };
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	size_t i;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		for (i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
			if (!strstr(line, pats[i]))
				continue;
			line[strcspn(line, "\n")] = 0;
			fclose(f);
			return tst_fail(t, "still maps shared memory after "
					"finalize: %s", line);
		}
	}
	fclose(f);
	return 0;
}

/* Does fn run on this rank? */
static int tst_runs_here(const struct tst *t)
{
	unsigned flags = t->c->flags;

	if (flags & TST_UNIT)
		return t->rank == 0;
	/* Ranks beyond np only join the group (init/connect/finalize). */
	return t->rank < t->np || (flags & (TST_NO_CTX | TST_ALL_RANKS));
}

/* 0 pass, -1 fail (t->why), TST_SKIP. */
static int tst_run_case(struct tst *t)
{
	const struct tst_case *c = t->c;
	int ret, err;

	if (!(c->flags & (TST_NO_CTX | TST_UNIT))) {
		err = tst_connect(t, &t->ctx);
		if (err)
			return tst_fail(t, "rdmach_init/connect: %s",
					rdmach_strerror(err));
	}
	ret = tst_runs_here(t) ? c->fn(t) : 0;
	if (t->failed)		/* recorded, then the case went on */
		ret = -1;
	if (ret && ret != TST_SKIP && !t->failed)
		tst_fail(t, "case returned %d", ret);
	if (t->ctx) {
		rdmach_ctx_t *ctx = t->ctx;

		err = rdmach_finalize(&t->ctx);
		if (err && !ret)
			ret = tst_fail(t, "rdmach_finalize: %s",
				       rdmach_strerror(err));
		if (!err && t->ctx)
			ret = tst_fail(t, "rdmach_finalize left *ctxp %p",
				       (void *)ctx);
	}
	if (!ret)
		ret = tst_check_maps(t);
	return ret;
}

static uint64_t tst_name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

uint64_t tst_stream_seed(struct tst *t, int from, int to)
{
	return tst_seed(tst_name_hash(t->c->name), from, to);
}

/* ---- launcher mode ----------------------------------------------------- */

struct tst_child {
	const struct tst_case *c;
	int gen;
	int report_fd;
	int verbose;
	volatile uint64_t *shared;
};

static void tst_report(int fd, char kind, int rank, const char *why)
{
	char line[700];
	int n = snprintf(line, sizeof(line), "%c %d %s\n", kind, rank, why);

	if (n > (int)sizeof(line) - 1) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	if (write(fd, line, (size_t)n) < 0)
		perror("tst: report");
}

static int tst_child_main(int rank, void *arg)
{
	struct tst_child *ch = arg;
	struct tst t;
	rdmach_pmi_t *pmi = NULL;
	rdmach_oob_t oob;
	int err, ret;

	memset(&t, 0, sizeof(t));
	t.c = ch->c;
	t.rank = rank;
	t.verbose = ch->verbose;
	t.shared = ch->shared;
	tst_cur_name = ch->c->name;
	tst_cur_rank = rank;
	tst_report_fd = ch->report_fd;
	if (ch->c->flags & TST_UNIT) {
		t.size = t.np = 1;
		ret = tst_run_case(&t);
		if (ret == TST_SKIP)
			tst_report(ch->report_fd, 'S', rank, t.why);
		return ret == TST_SKIP ? 0 : ret ? 1 : 0;
	}
	err = rdmach_pmi_init(&pmi, &oob);
	if (err) {
		tst_fail(&t, "rdmach_pmi_init: %s", rdmach_strerror(err));
		return 1;
	}
	tst_oob_setup(&t, &oob, ch->gen);
	t.np = ch->c->nprocs ? ch->c->nprocs : t.size;
	ret = tst_run_case(&t);
	err = rdmach_pmi_finalize(pmi);
	if (err && ret != -1)
		ret = tst_fail(&t, "rdmach_pmi_finalize: %s",
			       rdmach_strerror(err));
	if (ret == TST_SKIP)
		tst_report(ch->report_fd, 'S', rank, t.why);
	return ret == TST_SKIP ? 0 : ret ? 1 : 0;
}

static void tst_status_str(int st, char *out, size_t len)
{
	if (WIFEXITED(st))
		snprintf(out, len, "exited with %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(out, len, "was killed by signal %d (%s)",
			 WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(out, len, "ended with status 0x%x", st);
}

/* Private /dev/shm: anything left there after a case is a leak. */
static int tst_private_shm(void)
{
	const char *s = getenv("RDMACH_TEST_NO_NS");

	if ((s && *s && strcmp(s, "0")) || geteuid() != 0)
		return 0;
	if (unshare(CLONE_NEWNS) ||
	    mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) ||
	    mount("tst-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=1777")) {
		fprintf(stderr, "tst: no private /dev/shm (%s): shared-memory "
			"leftovers are not checked\n", strerror(errno));
		return 0;
	}
	return 1;
}

/* Names left in /dev/shm, removed so the next case starts clean. */
static void tst_shm_leftovers(char *out, size_t len)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	size_t n = 0;

	out[0] = 0;
	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[300];

		if (e->d_name[0] == '.')
			continue;
		if (n < len)
			n += (size_t)snprintf(out + n, len - n, "%s%s",
					      n ? " " : "", e->d_name);
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		unlink(path);
	}
	closedir(d);
}

/* Read "K rank why" lines; first failure wins, then first skip.  Every
 * process of the case has ended: what is in the pipe is all there is
 * (a grandchild still holding the pipe must not make us wait). */
static void tst_read_reports(int fd, char *fail, char *skip, size_t len)
{
	static char buf[16384];
	size_t got = 0;
	ssize_t r;
	char *line, *save = NULL;

	fcntl(fd, F_SETFL, O_NONBLOCK);
	while (got < sizeof(buf) - 1 &&
	       (r = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)r;
	buf[got] = 0;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *why = strchr(line, ' ');

		why = why ? strchr(why + 1, ' ') : NULL;
		why = why ? why + 1 : line;
		if (line[0] == 'F' && !fail[0])
			snprintf(fail, len, "%s", why);
		else if (line[0] == 'S' && !skip[0])
			snprintf(skip, len, "%s", why);
	}
}

/* A TST_UNIT case: one process forked from this one, no PMI server (and
 * no PMI environment), killed after timeout_s; returns like rdmach_launch
 * with rank 0's status in res. */
static int tst_fork_case(struct tst_child *ch, unsigned timeout_s,
			 struct rdmach_launch_result *res)
{
	uint64_t deadline = rdmach_now_ns() + timeout_s * 1000000000ull;
	struct timespec nap = { 0, 100000 };	/* 0.1 ms, doubling to 12.8 */
	pid_t pid, r;
	int st = 0;

	res->first_failed = -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		exit(tst_child_main(0, ch));
	}
	while ((r = waitpid(pid, &st, WNOHANG)) <= 0) {
		if (r < 0 && errno != EINTR)
			return -errno;
		if (!res->timed_out && rdmach_now_ns() > deadline) {
			kill(pid, SIGKILL);
			res->timed_out = 1;
		}
		nanosleep(&nap, NULL);
		if (nap.tv_nsec < 10000000)
			nap.tv_nsec *= 2;
	}
	res->status[0] = st;
	if (tst_status_is(st, 0))
		return 0;
	res->first_failed = 0;
	return 1;
}

/* 0 pass, -1 fail, TST_SKIP; prints the verdict. */
static int tst_launch_case(const struct tst_case *c, int gen,
			   const struct tst_opts *o)
{
	struct rdmach_launch_opts lo = { 0 };
	struct rdmach_launch_result res;
	struct tst_child ch = { c, gen, -1, o->verbose, NULL };
	char fail[600] = "", skip[600] = "", left[300];
	int fds[2], ret, i;
	void *shared;

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	shared = mmap(NULL, TST_SHARED_BYTES, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	ch.report_fd = fds[1];
	ch.shared = shared;
	lo.nprocs = c->flags & TST_UNIT ? 1 : c->nprocs ? c->nprocs : 2;
	lo.timeout_s = tst_timeout_s();
	lo.keep_going = !!(c->flags & TST_KEEP_GOING);
	lo.quiet = !o->verbose;
	memset(&res, 0, sizeof(res));
	fflush(NULL);
	if (c->flags & TST_UNIT)
		ret = tst_fork_case(&ch, lo.timeout_s, &res);
	else
		ret = rdmach_launch(&lo, tst_child_main, &ch, NULL, &res);
	close(fds[1]);
	tst_read_reports(fds[0], fail, skip, sizeof(fail));
	close(fds[0]);
	munmap(shared, TST_SHARED_BYTES);

	if (ret < 0 && !fail[0])
		snprintf(fail, sizeof(fail), "rdmach_launch: %s",
			 strerror(-ret));
	if (res.timed_out && !fail[0])
		snprintf(fail, sizeof(fail), "timed out after %u s "
			 "(RDMACH_TEST_TIMEOUT)", lo.timeout_s);
	for (i = 0; ret >= 0 && i < lo.nprocs && i < 8 && !fail[0]; i++) {
		char st[80];

		if (tst_status_is(res.status[i], c->expect_status[i]))
			continue;
		/* a case that skipped did not get to the point of dying */
		if (skip[0] && tst_status_is(res.status[i], 0))
			continue;
		tst_status_str(res.status[i], st, sizeof(st));
		snprintf(fail, sizeof(fail), "rank %d %s, expected %s %d%s",
			 i, st, c->expect_status[i] < 0 ? "signal" : "exit",
			 abs(c->expect_status[i]), " without a reason: see "
			 "its stderr (sanitizer/valgrind report?) above");
	}
	if (o->shm_private) {
		tst_shm_leftovers(left, sizeof(left));
		if (left[0] && !fail[0])
			snprintf(fail, sizeof(fail), "left shared memory "
				 "behind: /dev/shm/%s", left);
	}
	if (fail[0]) {
		printf("FAIL %s: %s\n", c->name, fail);
		return -1;
	}
	if (skip[0]) {
		printf("skip %s: %s\n", c->name, skip);
		return TST_SKIP;
	}
	printf("ok %s\n", c->name);
	return 0;
}

/* ---- mpiexec mode ----------------------------------------------------- */

static void tst_alarm(int sig)
{
	char msg[200];
	int n;

	(void)sig;
	n = snprintf(msg, sizeof(msg), "FAIL %s: timed out after %u s "
		     "(rank %d)\n", tst_cur_name, tst_timeout_s(),
		     tst_cur_rank);
	if (write(1, msg, (size_t)n) < 0)
		_exit(3);
	_exit(3);
}

/* PMI values carry no spaces or '=': %XX-encode them. */
static void tst_encode(const char *in, char *out, size_t len)
{
	size_t n = 0;

	for (; *in && n + 4 < len; in++) {
		unsigned char ch = (unsigned char)*in;

		if (ch > ' ' && ch < 127 && ch != '%' && ch != '=')
			out[n++] = (char)ch;
		else
			n += (size_t)snprintf(out + n, len - n, "%%%02X", ch);
	}
	out[n] = 0;
}

static void tst_decode(char *s)
{
	char *o = s;
	unsigned v;

	for (; *s; s++) {
		/* both digits checked: "%A" must not step over the NUL */
		if (*s == '%' && isxdigit((unsigned char)s[1]) &&
		    isxdigit((unsigned char)s[2]) &&
		    sscanf(s + 1, "%2X", &v) == 1) {
			*o++ = (char)v;
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* Publish this rank's verdict, gather all, print on rank 0. */
static int tst_gather(const rdmach_oob_t *oob, const struct tst_case *c,
		      int gen, int ret, const char *why)
{
	char key[64], val[1024], enc[1024];
	size_t vmax = oob->value_max && oob->value_max < sizeof(val) ?
		      oob->value_max : sizeof(val);
	int r, fail = 0, skip = 0, err;
	char first[1024] = "";

	snprintf(val, sizeof(val), "%c%s", ret == TST_SKIP ? 'S' : ret ? 'F' :
		 'O', why);
	tst_encode(val, enc, vmax > 8 ? vmax - 1 : 8);
	snprintf(key, sizeof(key), "tr%d.%d", gen, oob->rank);
	err = oob->put(oob->arg, key, enc);
	if (!err)
		err = oob->fence(oob->arg);
	if (err) {
		fprintf(stderr, "tst: PMI result exchange failed: %s\n",
			strerror(-err));
		exit(2);
	}
	for (r = 0; r < oob->size; r++) {
		snprintf(key, sizeof(key), "tr%d.%d", gen, r);
		err = oob->get(oob->arg, key, val, sizeof(val));
		if (err) {
			fail = 1;
			snprintf(first, sizeof(first), "no result from rank %d",
				 r);
			continue;
		}
		tst_decode(val);
		if (val[0] == 'F' && !fail) {
			fail = 1;
			snprintf(first, sizeof(first), "%s", val + 1);
		} else if (val[0] == 'S' && !skip && !fail) {
			skip = 1;
			snprintf(first, sizeof(first), "%s", val + 1);
		}
	}
	if (oob->rank == 0) {
		if (fail)
			printf("FAIL %s: %s\n", c->name, first);
		else if (skip)
			printf("skip %s: %s\n", c->name, first);
		else
			printf("ok %s\n", c->name);
		fflush(stdout);
	}
	return fail ? -1 : skip ? TST_SKIP : 0;
}

static int tst_selected(const struct tst_case *c, const struct tst_opts *o)
{
	int i;

	if (!o->nfilters)
		return !(c->flags & TST_NAMED);
	for (i = 0; i < o->nfilters; i++)
		if (!fnmatch(o->filters[i], c->name, 0) ||
		    strstr(c->name, o->filters[i]))
			return 1;
	return 0;
}

static int tst_main_pmi(const struct tst_case *cases, int ncases,
			const struct tst_opts *o, int *passed, int *failed,
			int *rankp)
{
	rdmach_pmi_t *pmi;
	rdmach_oob_t oob;
	int err, i, gen = 0;

	err = rdmach_pmi_init(&pmi, &oob);
	if (err) {
		fprintf(stderr, "tst: rdmach_pmi_init: %s\n", strerror(-err));
		return -1;
	}
	*rankp = oob.rank;
	tst_cur_rank = oob.rank;
	signal(SIGALRM, tst_alarm);
	for (i = 0; i < ncases; i++) {
		const struct tst_case *c = &cases[i];
		struct tst t;
		int ret;

		if (!tst_selected(c, o) || (c->flags & TST_LAUNCH_ONLY))
			continue;
		if (c->nprocs > oob.size) {
			if (oob.rank == 0)
				printf("skip %s: needs %d processes\n",
				       c->name, c->nprocs);
			continue;
		}
		memset(&t, 0, sizeof(t));
		t.c = c;
		t.verbose = o->verbose;
		tst_oob_setup(&t, &oob, ++gen);
		t.np = c->nprocs ? c->nprocs : t.size;
		if (c->flags & TST_UNIT) {	/* rank 0 runs it in place */
			memset(&t.oob, 0, sizeof(t.oob));
			t.size = t.np = 1;
		}
		tst_cur_name = c->name;
		alarm(tst_timeout_s());
		ret = tst_run_case(&t);
		alarm(0);
		ret = tst_gather(&oob, c, gen, ret, t.why);
		*passed += ret == 0;
		*failed += ret == -1;
	}
	err = rdmach_pmi_finalize(pmi);
	if (err) {	/* after the last verdict: fails this rank's exit */
		fprintf(stderr, "tst: rank %d: rdmach_pmi_finalize: %s\n",
			oob.rank, rdmach_strerror(err));
		++*failed;
	}
	return 0;
}

int tst_main(int argc, char **argv, const struct tst_case *cases, int ncases)
{
	struct tst_opts o = { 0 };
	int passed = 0, failed = 0, i, rank = 0, gen = 0;

	o.filters = calloc((size_t)argc, sizeof(char *));
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-l")) {
			o.list = 1;
		} else if (!strcmp(argv[i], "-v")) {
			o.verbose = 1;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "usage: %s [-l] [-v] [name-filter...]\n"
				"  filters: substrings or globs of case names\n",
				argv[0]);
			free(o.filters);
			return 2;
		} else {
			o.filters[o.nfilters++] = argv[i];
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (o.list) {
		for (i = 0; i < ncases; i++)
			if (tst_selected(&cases[i], &o))
				printf("%s\n", cases[i].name);
		free(o.filters);
		return 0;
	}
	if (rdmach_pmi_available()) {
		if (tst_main_pmi(cases, ncases, &o, &passed, &failed,
				 &rank)) {
			free(o.filters);
			return 2;
		}
	} else {
		o.shm_private = tst_private_shm();
		for (i = 0; i < ncases; i++) {
			int ret;

			if (!tst_selected(&cases[i], &o))
				continue;
			ret = tst_launch_case(&cases[i], ++gen, &o);
			passed += ret == 0;
			failed += ret == -1;
		}
	}
	free(o.filters);
	if (rank == 0)
		printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
