/*
 * launch.c - start N processes on this host under a built-in PMI-1 server.
 *
 * Each child gets one end of a socketpair as PMI_FD.  The parent serves the
 * PMI-1 wire protocol (see pmi.c) on the other ends with poll(): a single
 * key-value space, barrier, get_maxes, get_my_kvsname, get_appnum,
 * get_universe_size, abort and finalize.  Child exits are watched through
 * pidfds (a 50 ms waitpid tick where pidfd_open is missing); only our own
 * children are reaped, with waitpid(pid).
 *
 * Failure policy (Hydra's): a child that exits non-zero or dies from a
 * signal before it said PMI finalize, or that calls PMI abort, gets every
 * other child SIGTERM, then SIGKILL after RDMACH_LAUNCH_KILL_GRACE_MS.
 * With keep_going the others go on (abort still ends everything).  A
 * barrier never waits for a rank that can no longer join (exited or
 * finalized): once every rank that can still join has entered, the
 * barrier completes, with rc=-1 and a message naming the missing rank when
 * one is missing, so that survivors get an error, not a hang.  A rank that
 * merely closed its PMI socket still counts until it exits.
 *
 * Children stay in the caller's process group (Ctrl-C reaches them all);
 * kills go to each child's pid, not to grandchildren.  A child is killed
 * (PR_SET_PDEATHSIG) when the launcher dies.  Ranks above 0 read stdin
 * from /dev/null, as under Hydra.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/knob.h"
#include "core/log.h"
#include "pmi_wire.h"
#include "rdmach_launch.h"
#include "rdmach_pmi.h"

#define LAUNCH_MAX_PROCS \
	((int)(sizeof(((struct rdmach_launch_result *)0)->status) / sizeof(int)))
/* Limits announced by get_maxes, NUL included, as Hydra's. */
#define LAUNCH_KVSNAME_MAX 256
#define LAUNCH_KEYLEN_MAX 64
#define LAUNCH_VALLEN_MAX 1024
#define LAUNCH_LINE_MAX \
	(LAUNCH_KVSNAME_MAX + LAUNCH_KEYLEN_MAX + LAUNCH_VALLEN_MAX + 256)
#define LAUNCH_KV_BUCKETS 1024
#define LAUNCH_TICK_MS 50	/* waitpid polling when pidfds are missing */
#define LAUNCH_SEND_WAIT_MS 5000	/* a rank that reads no replies */

enum { LAUNCH_K_KILL_GRACE, LAUNCH_K_NUM };

static const struct rdmach_knob launch_knobs[LAUNCH_K_NUM] = {
	[LAUNCH_K_KILL_GRACE] = { "RDMACH_LAUNCH_KILL_GRACE_MS",
		RDMACH_KNOB_UINT, "2000", 0, 600000,
		"rdmach_launch/rdmach_run: SIGTERM-to-SIGKILL grace when "
		"killing ranks" },
};
RDMACH_KNOB_TABLE(launch, launch_knobs);

struct launch_kv {
	struct launch_kv *next;
	char *key;
	char *val;
};

struct launch_rank {
	pid_t pid;
	int fd;			/* our end of the PMI socket, -1 once closed */
	int pidfd;		/* -1 when unavailable or reaped */
	int status;		/* waitpid status once exited */
	unsigned exited : 1;
	unsigned finalized : 1;	/* said cmd=finalize */
	unsigned in_barrier : 1;
	unsigned killed : 1;	/* we sent it a signal */
	char *buf;		/* partial request line */
	size_t len;
};

struct launch {
	const struct rdmach_launch_opts *opts;
	struct rdmach_launch_result *res;
	int n;
	int running;		/* children not yet reaped */
	struct launch_rank *ranks;
	struct launch_kv *kv[LAUNCH_KV_BUCKETS];
	char kvsname[64];
	int killing;
	uint64_t deadline_ns;	/* opts->timeout_s; 0 = none */
	uint64_t kill_ns;	/* SIGKILL the rest at; 0 = not yet */
	uint64_t grace_ns;
	int abort_code;		/* from PMI abort, -1 if none */
	pid_t launcher_pid;
};

/* ---- the key-value space ---- */

static unsigned launch_hash(const char *s)
{
	unsigned h = 2166136261u;	/* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h % LAUNCH_KV_BUCKETS;
}

static struct launch_kv *launch_kv_find(struct launch *l, const char *key)
{
	struct launch_kv *kv;

	for (kv = l->kv[launch_hash(key)]; kv; kv = kv->next)
		if (!strcmp(kv->key, key))
			return kv;
	return NULL;
}

/* A later put of the same key replaces the value. */
static int launch_kv_put(struct launch *l, const char *key, const char *val)
{
	struct launch_kv *kv = launch_kv_find(l, key);
	char *v = strdup(val);
	unsigned h;

	if (!v)
		return -ENOMEM;
	if (kv) {
		free(kv->val);
		kv->val = v;
		return 0;
	}
	kv = calloc(1, sizeof(*kv));
	if (!kv || !(kv->key = strdup(key))) {
		free(kv);
		free(v);
		return -ENOMEM;
	}
	kv->val = v;
	h = launch_hash(key);
	kv->next = l->kv[h];
	l->kv[h] = kv;
	return 0;
}

static void launch_kv_free(struct launch *l)
{
	int i;

	for (i = 0; i < LAUNCH_KV_BUCKETS; i++) {
		while (l->kv[i]) {
			struct launch_kv *kv = l->kv[i];

			l->kv[i] = kv->next;
			free(kv->key);
			free(kv->val);
			free(kv);
		}
	}
}

/* ---- replies and kills ---- */

static void launch_close_fd(struct launch_rank *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	r->in_barrier = 0;
}

static void launch_reply(struct launch_rank *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Replies are short and ranks read them at once: a blocking send with a
 * bounded wait (our end is non-blocking). */
static void launch_reply(struct launch_rank *r, const char *fmt, ...)
{
	char line[LAUNCH_LINE_MAX + 2];
	size_t off = 0;
	va_list ap;
	int len;

	if (r->fd < 0)
		return;
	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= sizeof(line) - 1)
		len = (int)sizeof(line) - 2;
	line[len++] = '\n';
	while (off < (size_t)len) {
		ssize_t n = send(r->fd, line + off, (size_t)len - off,
				 MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pfd = { r->fd, POLLOUT, 0 };

			if (poll(&pfd, 1, LAUNCH_SEND_WAIT_MS) > 0)
				continue;
			rdmach_warn("rdmach_launch: pid %d reads no PMI replies; closing its PMI connection",
				    (int)r->pid);
		}
		if (n < 0) {
			/* The rank went away: its exit is reported later. */
			launch_close_fd(r);
			return;
		}
		off += (size_t)n;
	}
}

static int launch_rank_of(struct launch *l, struct launch_rank *r)
{
	return (int)(r - l->ranks);
}

static void launch_kill_all(struct launch *l, int sig)
{
	int i;

	for (i = 0; i < l->n; i++) {
		struct launch_rank *r = &l->ranks[i];

		if (r->exited)
			continue;
		kill(r->pid, sig);
		r->killed = 1;
	}
	if (!l->killing) {
		l->killing = 1;
		l->kill_ns = rdmach_now_ns() + l->grace_ns;
	}
}

static void launch_fail(struct launch *l, int rank)
{
	if (l->res->first_failed < 0)
		l->res->first_failed = rank;
}

/* ---- barrier ---- */

/* A rank that closed its PMI socket counts until its exit status is
 * known, so that a crash kills the job rather than failing barriers. */
static int launch_can_join(const struct launch_rank *r)
{
	return !r->exited && !r->finalized;
}

/* Complete the barrier once no rank that can still join is missing. */
static void launch_barrier_check(struct launch *l)
{
	int i, entered = 0, missing = -1;

	if (l->killing)
		return;	/* they are on their way out */
	for (i = 0; i < l->n; i++) {
		struct launch_rank *r = &l->ranks[i];

		if (r->in_barrier)
			entered++;
		else if (launch_can_join(r))
			return;
		else if (missing < 0)
			missing = i;
	}
	if (!entered)
		return;
	for (i = 0; i < l->n; i++) {
		struct launch_rank *r = &l->ranks[i];

		if (!r->in_barrier)
			continue;
		r->in_barrier = 0;
		if (missing < 0)
			launch_reply(r, "cmd=barrier_out");
		else
			launch_reply(r, "cmd=barrier_out rc=-1 msg=rank_%d_%s_before_the_barrier",
				     missing, l->ranks[missing].finalized ?
				     "finalized" : "exited");
	}
}

/* ---- requests ---- */

static int launch_kvs_ok(struct launch *l, struct launch_rank *r,
			 const struct pmi_wire_msg *req, const char *result)
{
	const char *kvs = pmi_wire_attr(req, "kvsname");

	if (kvs && strcmp(kvs, l->kvsname)) {
		launch_reply(r, "cmd=%s rc=-1 msg=kvs_%.64s_not_found%s", result,
			     kvs, strcmp(result, "get_result") ? "" :
			     " value=unknown");
		return 0;
	}
	return 1;
}

static void launch_cmd_put(struct launch *l, struct launch_rank *r,
			   const struct pmi_wire_msg *req)
{
	const char *key = pmi_wire_attr(req, "key");
	const char *val = pmi_wire_attr(req, "value");

	if (!launch_kvs_ok(l, r, req, "put_result"))
		return;
	if (!key || !*key || !val)
		launch_reply(r, "cmd=put_result rc=-1 msg=missing_key_or_value");
	else if (strlen(key) >= LAUNCH_KEYLEN_MAX)
		launch_reply(r, "cmd=put_result rc=-1 msg=key_too_long");
	else if (strlen(val) >= LAUNCH_VALLEN_MAX)
		launch_reply(r, "cmd=put_result rc=-1 msg=value_too_long");
	else if (launch_kv_put(l, key, val))
		launch_reply(r, "cmd=put_result rc=-1 msg=out_of_memory");
	else
		launch_reply(r, "cmd=put_result rc=0 msg=success");
}

static void launch_cmd_get(struct launch *l, struct launch_rank *r,
			   const struct pmi_wire_msg *req)
{
	const char *key = pmi_wire_attr(req, "key");
	struct launch_kv *kv;

	if (!launch_kvs_ok(l, r, req, "get_result"))
		return;
	kv = key ? launch_kv_find(l, key) : NULL;
	if (kv)
		launch_reply(r, "cmd=get_result rc=0 msg=success value=%s",
			     kv->val);
	else
		launch_reply(r, "cmd=get_result rc=-1 msg=key_%.64s_not_found value=unknown",
			     key ? key : "");
}

static void launch_cmd_abort(struct launch *l, struct launch_rank *r,
			     const struct pmi_wire_msg *req)
{
	const char *code = pmi_wire_attr(req, "exitcode");
	const char *msg = pmi_wire_attr(req, "message");
	int rank = launch_rank_of(l, r);
	char esc[256];

	if (l->abort_code < 0)
		l->abort_code = code ? atoi(code) & 0xff : 1;
	if (!l->opts->quiet)
		fprintf(stderr, "rdmach_launch: rank %d (pid %d) called PMI abort (exit code %d)%s%s; killing all ranks\n",
			rank, (int)r->pid, code ? atoi(code) : 1,
			msg ? ": " : "",
			msg ? rdmach_log_esc(msg, esc, sizeof(esc)) : "");
	launch_fail(l, rank);
	launch_close_fd(r);
	launch_kill_all(l, SIGTERM);
}

/* One request line from rank r. */
static void launch_request(struct launch *l, struct launch_rank *r, char *line)
{
	int rank = launch_rank_of(l, r);
	struct pmi_wire_msg req;
	const char *cmd;

	if (pmi_wire_parse(line, &req) || !(cmd = pmi_wire_attr(&req, "cmd"))) {
		rdmach_warn("rdmach_launch: rank %d sent an unparsable PMI line", rank);
		return;
	}
	if (!strcmp(cmd, "init")) {
		const char *v = pmi_wire_attr(&req, "pmi_version");

		if (v && atoi(v) == 1)
			launch_reply(r, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
		else
			launch_reply(r, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=only_PMI-1_is_served");
	} else if (!strcmp(cmd, "get_maxes")) {
		launch_reply(r, "cmd=maxes kvsname_max=%d keylen_max=%d vallen_max=%d",
			     LAUNCH_KVSNAME_MAX, LAUNCH_KEYLEN_MAX,
			     LAUNCH_VALLEN_MAX);
	} else if (!strcmp(cmd, "get_my_kvsname")) {
		launch_reply(r, "cmd=my_kvsname kvsname=%s", l->kvsname);
	} else if (!strcmp(cmd, "get_appnum")) {
		launch_reply(r, "cmd=appnum appnum=0");
	} else if (!strcmp(cmd, "get_universe_size")) {
		launch_reply(r, "cmd=universe_size size=%d", l->n);
	} else if (!strcmp(cmd, "put")) {
		launch_cmd_put(l, r, &req);
	} else if (!strcmp(cmd, "get")) {
		launch_cmd_get(l, r, &req);
	} else if (!strcmp(cmd, "barrier_in")) {
		r->in_barrier = 1;
		launch_barrier_check(l);
	} else if (!strcmp(cmd, "finalize")) {
		r->finalized = 1;
		launch_reply(r, "cmd=finalize_ack");
		launch_barrier_check(l);
	} else if (!strcmp(cmd, "abort")) {
		launch_cmd_abort(l, r, &req);
	} else {
		char esc[80];

		rdmach_warn("rdmach_launch: rank %d: unsupported PMI command \"%s\"",
			    rank, rdmach_log_esc(cmd, esc, sizeof(esc)));
		launch_reply(r, "cmd=%.64s_result rc=-1 msg=unsupported_command",
			     cmd);
	}
}

/* Read what rank r sent and serve every complete line. */
static void launch_read(struct launch *l, struct launch_rank *r)
{
	for (;;) {
		char *nl;
		ssize_t n;

		if (r->fd < 0)
			return;
		n = recv(r->fd, r->buf + r->len, LAUNCH_LINE_MAX - r->len,
			 MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			/* EOF or reset: its exit follows. */
			launch_close_fd(r);
			return;
		}
		r->len += (size_t)n;
		while (r->fd >= 0 && (nl = memchr(r->buf, '\n', r->len))) {
			size_t used = (size_t)(nl - r->buf) + 1;

			*nl = '\0';
			launch_request(l, r, r->buf);
			r->len -= used;
			memmove(r->buf, r->buf + used, r->len);
		}
		if (r->len == LAUNCH_LINE_MAX) {
			rdmach_err("rdmach_launch: rank %d sent a PMI line longer than %d bytes; closing its PMI connection",
				   launch_rank_of(l, r), LAUNCH_LINE_MAX);
			launch_close_fd(r);
			return;
		}
	}
}

/* ---- exits ---- */

static void launch_report(struct launch *l, int rank, int status)
{
	const struct launch_rank *r = &l->ranks[rank];

	if (l->opts->quiet)
		return;
	if (WIFSIGNALED(status))
		fprintf(stderr, "rdmach_launch: rank %d (pid %d) killed by signal %d (%s)%s\n",
			rank, (int)r->pid, WTERMSIG(status),
			strsignal(WTERMSIG(status)),
			r->finalized ? " after PMI finalize" : "");
	else
		fprintf(stderr, "rdmach_launch: rank %d (pid %d) exited with status %d%s\n",
			rank, (int)r->pid, WEXITSTATUS(status),
			r->finalized ? " after PMI finalize" : "");
}

static void launch_exited(struct launch *l, struct launch_rank *r, int status)
{
	int rank = launch_rank_of(l, r);

	/* Serve what it sent before dying (e.g. finalize). */
	launch_read(l, r);
	r->exited = 1;
	r->status = status;
	l->res->status[rank] = status;
	l->running--;
	if (r->pidfd >= 0)
		close(r->pidfd);
	r->pidfd = -1;
	launch_close_fd(r);
	if (status && !(r->killed && l->killing)) {
		launch_report(l, rank, status);
		launch_fail(l, rank);
		if (!r->finalized && !l->opts->keep_going && !l->killing) {
			if (l->running && !l->opts->quiet)
				fprintf(stderr, "rdmach_launch: killing the other %d rank%s\n",
					l->running, l->running > 1 ? "s" : "");
			launch_kill_all(l, SIGTERM);
		}
	}
	launch_barrier_check(l);
}

static void launch_reap(struct launch *l, struct launch_rank *r)
{
	int status;
	pid_t p;

	do
		p = waitpid(r->pid, &status, WNOHANG);
	while (p < 0 && errno == EINTR);
	if (p == 0)
		return;
	if (p < 0) {
		/* Reaped behind our back (SIGCHLD ignored or reaped elsewhere). */
		rdmach_warn("rdmach_launch: rank %d (pid %d): exit status lost: %s",
			    launch_rank_of(l, r), (int)r->pid, strerror(errno));
		status = 255 << 8;
	}
	launch_exited(l, r, status);
}

static void launch_check_deadlines(struct launch *l)
{
	uint64_t now = rdmach_now_ns();
	int i;

	if (l->deadline_ns && now >= l->deadline_ns && !l->res->timed_out) {
		l->res->timed_out = 1;
		if (!l->opts->quiet) {
			fprintf(stderr, "rdmach_launch: timeout after %u s; killing rank%s",
				l->opts->timeout_s, l->running > 1 ? "s" : "");
			for (i = 0; i < l->n; i++)
				if (!l->ranks[i].exited)
					fprintf(stderr, " %d", i);
			fputc('\n', stderr);
		}
		l->killing = 0;		/* a fresh grace period */
		launch_kill_all(l, SIGTERM);
	}
	if (l->killing && now >= l->kill_ns) {
		launch_kill_all(l, SIGKILL);
		l->kill_ns = UINT64_MAX;
	}
}

/* ---- the server loop ---- */

static int launch_poll_timeout(struct launch *l, int tick)
{
	uint64_t now = rdmach_now_ns(), next = UINT64_MAX;
	uint64_t ms;

	if (l->deadline_ns && !l->res->timed_out)
		next = l->deadline_ns;
	if (l->killing && l->kill_ns < next)
		next = l->kill_ns;
	if (next == UINT64_MAX)
		return tick ? LAUNCH_TICK_MS : -1;
	ms = next > now ? (next - now + 999999) / 1000000 : 0;
	if (tick && ms > LAUNCH_TICK_MS)
		ms = LAUNCH_TICK_MS;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

static int launch_serve(struct launch *l)
{
	struct pollfd *pfd;
	int *owner;	/* rank of pfd[i]; negative: -1 - rank for a pidfd */

	pfd = calloc((size_t)l->n * 2, sizeof(*pfd));
	owner = calloc((size_t)l->n * 2, sizeof(*owner));
	if (!pfd || !owner) {
		int i;

		free(pfd);
		free(owner);
		launch_kill_all(l, SIGKILL);
		for (i = 0; i < l->n; i++)
			if (!l->ranks[i].exited)
				waitpid(l->ranks[i].pid, &l->res->status[i], 0);
		return -ENOMEM;
	}
	while (l->running) {
		int i, npfd = 0, tick = 0, ret;

		for (i = 0; i < l->n; i++) {
			struct launch_rank *r = &l->ranks[i];

			if (r->fd >= 0) {
				pfd[npfd] = (struct pollfd){ r->fd, POLLIN, 0 };
				owner[npfd++] = i;
			}
			if (r->exited)
				continue;
			if (r->pidfd >= 0) {
				pfd[npfd] = (struct pollfd){ r->pidfd, POLLIN, 0 };
				owner[npfd++] = -1 - i;
			} else {
				tick = 1;
			}
		}
		ret = poll(pfd, (nfds_t)npfd, launch_poll_timeout(l, tick));
		if (ret < 0 && errno != EINTR) {
			rdmach_err("rdmach_launch: poll failed: %s", strerror(errno));
			launch_kill_all(l, SIGKILL);
			l->kill_ns = UINT64_MAX;
			tick = 1;
			usleep(LAUNCH_TICK_MS * 1000);
		}
		/* Requests first, so that a finalize sent just before the
		 * exit is seen before the exit. */
		for (i = 0; ret > 0 && i < npfd; i++)
			if (owner[i] >= 0 && pfd[i].revents)
				launch_read(l, &l->ranks[owner[i]]);
		for (i = 0; ret > 0 && i < npfd; i++)
			if (owner[i] < 0 && pfd[i].revents)
				launch_reap(l, &l->ranks[-1 - owner[i]]);
		for (i = 0; tick && i < l->n; i++)
			if (!l->ranks[i].exited && l->ranks[i].pidfd < 0)
				launch_reap(l, &l->ranks[i]);
		launch_check_deadlines(l);
	}
	free(pfd);
	free(owner);
	return 0;
}

/* ---- start-up ---- */

static int launch_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
	static int unsupported;	/* ENOSYS once: old kernel, valgrind */
	int fd;

	if (unsupported)
		return -1;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd >= 0)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	else if (errno == ENOSYS)
		unsupported = 1;
	return fd;
#else
	return -1;
#endif
}

static void launch_setenv_int(const char *name, int v)
{
	char s[16];

	snprintf(s, sizeof(s), "%d", v);
	setenv(name, s, 1);
}

/* In the child: never returns. */
static void launch_child(struct launch *l, int rank, int fd,
			 int (*fn)(int, void *), void *arg,
			 const char *file, char *const argv[])
{
	int i;

	for (i = 0; i < rank; i++) {
		close(l->ranks[i].fd);
		if (l->ranks[i].pidfd >= 0)
			close(l->ranks[i].pidfd);
	}
	/* No orphans: this rank dies with the launcher. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != l->launcher_pid)
		_exit(127);
	/* Like Hydra: stdin goes to rank 0 only. */
	if (rank > 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null >= 0 && null != STDIN_FILENO) {
			dup2(null, STDIN_FILENO);
			close(null);
		}
	}
	fcntl(fd, F_SETFD, 0);	/* PMI_FD survives exec */
	launch_setenv_int("PMI_FD", fd);
	launch_setenv_int("PMI_RANK", rank);
	launch_setenv_int("PMI_SIZE", l->n);
	launch_setenv_int("MPI_LOCALNRANKS", l->n);
	launch_setenv_int("MPI_LOCALRANKID", rank);
	unsetenv("PMI_PORT");
	unsetenv("PMI_ID");
	if (fn)
		exit(fn(rank, arg) & 0xff);
	execvp(file, argv);
	fprintf(stderr, "rdmach_launch: rank %d: cannot execute %s: %s\n", rank,
		file, strerror(errno));
	_exit(127);
}

static int launch_start(struct launch *l, int rank, int (*fn)(int, void *),
			void *arg, const char *file, char *const argv[])
{
	struct launch_rank *r = &l->ranks[rank];
	int sv[2], err;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		err = errno;
		rdmach_err("rdmach_launch: socketpair for rank %d: %s", rank,
			   strerror(err));
		return -err;
	}
	r->buf = malloc(LAUNCH_LINE_MAX);
	if (!r->buf) {
		err = ENOMEM;
		goto err_close;
	}
	fflush(NULL);	/* buffered output must not be written twice */
	pid = fork();
	if (pid < 0) {
		err = errno;
		rdmach_err("rdmach_launch: fork of rank %d: %s", rank,
			   strerror(err));
		goto err_close;
	}
	if (pid == 0) {
		close(sv[0]);
		launch_child(l, rank, sv[1], fn, arg, file, argv);
	}
	close(sv[1]);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	r->pid = pid;
	r->fd = sv[0];
	r->pidfd = launch_pidfd(pid);
	l->running++;
	return 0;

err_close:
	close(sv[0]);
	close(sv[1]);
	return -err;
}

static void launch_free(struct launch *l)
{
	int i;

	for (i = 0; i < l->n; i++) {
		launch_close_fd(&l->ranks[i]);
		if (l->ranks[i].pidfd >= 0)
			close(l->ranks[i].pidfd);
		free(l->ranks[i].buf);
	}
	free(l->ranks);
	launch_kv_free(l);
}

static uint64_t launch_grace_ns(void)
{
	uint64_t ms = 2000;

	rdmach_knob_u64(&launch_knobs[LAUNCH_K_KILL_GRACE], &ms);
	return ms * 1000000u;
}

/* The code a launcher exits with: see rdmach_launch_result.exit_code. */
static int launch_exit_code(const struct launch *l)
{
	const struct rdmach_launch_result *res = l->res;
	int st;

	if (res->first_failed < 0)
		return res->timed_out ? 124 : 0;
	if (l->abort_code >= 0)
		return l->abort_code;
	st = res->status[res->first_failed];
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

static int launch_run(const struct rdmach_launch_opts *opts,
		      int (*fn)(int, void *), void *arg, const char *file,
		      char *const argv[], struct rdmach_launch_result *res)
{
	struct rdmach_launch_result local;
	struct launch l;
	char map[64];
	int i, ret;

	if (!opts || opts->nprocs < 1 || opts->nprocs > LAUNCH_MAX_PROCS ||
	    (!fn && (!file || !argv || !argv[0])))
		return -EINVAL;
	if (!res)
		res = &local;
	memset(res, 0, sizeof(*res));
	res->first_failed = -1;

	memset(&l, 0, sizeof(l));
	l.opts = opts;
	l.res = res;
	l.n = opts->nprocs;
	l.abort_code = -1;
	l.launcher_pid = getpid();
	l.grace_ns = launch_grace_ns();
	snprintf(l.kvsname, sizeof(l.kvsname), "rdmach_kvs_%d", (int)getpid());
	if (opts->timeout_s)
		l.deadline_ns = rdmach_now_ns() +
				(uint64_t)opts->timeout_s * 1000000000u;
	l.ranks = calloc((size_t)l.n, sizeof(*l.ranks));
	if (!l.ranks)
		return -ENOMEM;
	for (i = 0; i < l.n; i++) {
		l.ranks[i].fd = -1;
		l.ranks[i].pidfd = -1;
	}
	/* What Hydra pre-puts for MPICH: every rank on one node. */
	snprintf(map, sizeof(map), "(vector,(0,1,%d))", l.n);
	ret = launch_kv_put(&l, "PMI_process_mapping", map);
	for (i = 0; !ret && i < l.n; i++)
		ret = launch_start(&l, i, fn, arg, file, argv);
	if (ret) {
		/* Those already started must not run without a server. */
		for (i = 0; i < l.n; i++)
			l.ranks[i].exited = !l.ranks[i].pid;
		launch_kill_all(&l, SIGKILL);
		l.killing = 1;
		l.kill_ns = UINT64_MAX;
	}
	i = launch_serve(&l);
	if (!ret)
		ret = i;
	res->exit_code = launch_exit_code(&l);
	launch_free(&l);
	if (ret)
		return ret;
	for (i = 0; i < opts->nprocs; i++)
		if (res->status[i])
			return 1;
	return res->timed_out ? 1 : 0;
}

int rdmach_launch(const struct rdmach_launch_opts *opts,
		  int (*fn)(int rank, void *arg), void *arg,
		  char *const argv[], struct rdmach_launch_result *res)
{
	return launch_run(opts, fn, arg, argv ? argv[0] : NULL, argv, res);
}

int rdmach_launch_self(int argc, char *argv[], int nprocs, unsigned timeout_s)
{
	struct rdmach_launch_opts opts = { .nprocs = nprocs,
					   .timeout_s = timeout_s };
	char exe[PATH_MAX];
	ssize_t len;
	int ret;

	if (rdmach_pmi_available())
		return 0;
	if (argc < 1 || !argv || !argv[0])
		return -EINVAL;
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len < 0) {
		rdmach_err("rdmach_launch_self: cannot find this program: /proc/self/exe: %s",
			   strerror(errno));
		exit(1);
	}
	exe[len] = '\0';
	ret = launch_run(&opts, NULL, NULL, exe, argv, NULL);
	if (ret < 0)
		fprintf(stderr, "rdmach_launch_self: cannot start %d copies of %s: %s\n",
			nprocs, exe, strerror(-ret));
	exit(ret ? 1 : 0);
}
