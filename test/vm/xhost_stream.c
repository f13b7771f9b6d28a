/*
 * xhost_stream.c - byte-checked all-pairs streams across hosts, with a
 * fault injected in the middle (test/run-cluster.sh, inside the cluster of
 * test/vm/vm-cluster.sh).  Started by Hydra's mpiexec (PMI-1), any number
 * of ranks on any hosts.
 *
 * Every rank puts a pattern stream to every other rank and checks, byte by
 * byte, the stream it gets from each (test/lib pattern: a byte depends on
 * the pair and its stream offset, so a lost, repeated or reordered byte is
 * caught at its offset).  Put sizes are random (1 B .. 128 KiB: ring
 * packets, the pipeline and zero-copy reads).  Rank 0 runs the fault
 * command (-a) -w seconds after the start.  Without RDMACH_TRANSPORT (or
 * with "auto") each pair must use shm on one host and ib across hosts.
 *
 *   -x ok      (default) every stream of -b bytes must arrive whole, in
 *              order, once: the fault must be survived;
 *   -x reset   the pairs cut by the fault (one end on host -c, the other
 *              not) must fail with -ECONNRESET on every end that lives,
 *              within -B seconds of the last byte that came through (and,
 *              on rank 0, of the end of the fault command); the other pairs
 *              keep streaming, checked, until then.
 * Each rank that ends prints one line
 *     xhost rank R on HOST: ok: ...   or   xhost rank R on HOST: FAIL: ...
 * and exits 0 or 1; with -x reset, rank 0 then waits the bound (for the
 * others to report) and, if all went as expected, exits with 3: the job
 * lost ranks, so it ends in error, as an MPI job does; the other ranks
 * stay as long as any survivor's bound, so that none ends the job (Hydra
 * does when a rank exits without PMI finalize) before rank 0 reported.
 *
 * usage: xhost_stream [-x ok|reset] [-c HOST] [-b BYTES] [-r MB/s]
 *                     [-a CMD] [-w SECONDS] [-B SECONDS] [-T SECONDS] [-o DIR]
 *   -b  bytes per stream in -x ok (default 8M; -x reset: unbounded)
 *   -r  rate limit per stream, MB/s (default 0: none)
 *   -B  detection bound (default, with T = RDMACH_PEER_TIMEOUT_MS and
 *       n pairs of this rank across the fault: 1.5 x n x T + 3 s)
 *   -T  give up after this long (default 300 s)
 *   -o  write each rank's output (rdmach's messages too) to DIR/rank-R.txt
 *       instead of stdout/stderr
 */
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdmach.h"
#include "rdmach_pmi.h"
#include "lib/tst.h"
#include "core/log.h"

#define XS_CALL_MAX	(128u << 10)
#define XS_GET_MAX	(64u << 10)
#define XS_TEST_ID	0x5e1fu

struct xs_peer {
	rdmach_conn_t *c;
	int rank;
	int cut;			/* across the fault (-c) */
	char host[64];
	/* our stream to it */
	uint64_t put_seed, put_done;
	uint8_t *pbuf;
	struct iovec piov;		/* pending call (retried as is) */
	int put_closed;
	/* its stream to us */
	uint64_t get_seed, got;
	int get_closed;
	uint64_t last_rx_ns;		/* last byte that came in */
	uint64_t max_gap_ns;		/* longest wait for a byte */
	int err;
	uint64_t err_ns;
};

static struct {
	int rank, size;
	char host[64];
	int expect_reset;
	const char *cut_host;
	uint64_t bytes;
	double rate;			/* bytes/ns per stream, 0: none */
	const char *action;
	double action_wait_s;
	uint64_t bound_ns, deadline_ns;
	uint64_t linger_ns;		/* -x reset: how long a rank stays */
	uint64_t t0;
	pid_t action_pid;
	int action_status;
	uint64_t action_end_ns;
	uint64_t rng;
	int verbose;			/* -v: every peer's state each second */
} xs;

static FILE *xs_log;		/* -o: a copy of every line */

/* -v: a watchdog prints the main thread's stack when its loop stalls */
static volatile uint64_t xs_beat;
static pthread_t xs_main;

static void xs_on_usr1(int sig)
{
	void *frames[32];
	int n = backtrace(frames, 32);

	(void)sig;
	backtrace_symbols_fd(frames, n, 2);
}

static void *xs_watchdog(void *arg)
{
	uint64_t seen = 0;
	int still = 0;

	(void)arg;
	for (;;) {
		sleep(1);
		if (xs_beat != seen) {
			seen = xs_beat;
			still = 0;
		} else if (++still == 3) {
			fprintf(stderr, "xhost: main loop stalled for 3 s:\n");
			pthread_kill(xs_main, SIGUSR1);
		}
	}
	return NULL;
}

static void xs_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A line on stdout and in the -o file (Hydra may lose a rank's last
 * output when the job ends in error). */
static void xs_out(const char *fmt, ...)
{
	va_list ap;

	if (xs_log) {
		va_start(ap, fmt);
		vfprintf(xs_log, fmt, ap);
		va_end(ap);
		fflush(xs_log);
	}
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static int xs_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int xs_fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	xs_out("xhost rank %d on %s: FAIL: %s\n", xs.rank, xs.host, msg);
	return 1;
}

static double xs_s(uint64_t ns)
{
	return (double)ns / 1e9;
}

static uint64_t xs_env_ms(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 10) : dflt;
}

/* How long a survivor may take to see resets from `pairs` dead peers: a
 * silent peer is probed after T/2 and declared dead T later (1.5 T); a get
 * that waits for a zero-copy read from one dead peer holds up the others'
 * probes by up to 1.5 T each; 3 s for the emulated CPU. */
static uint64_t xs_bound_ns(uint64_t peer_ms, int pairs)
{
	return (uint64_t)(pairs > 1 ? pairs : 1) * peer_ms * 1500000u +
	       3000000000u;
}

/* "64K", "8M", "1G" or a plain number. */
static uint64_t xs_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'k': case 'K': return v << 10;
	case 'm': case 'M': return v << 20;
	case 'g': case 'G': return v << 30;
	}
	return v;
}

/* Host names of every rank, through the PMI key space. */
static int xs_hosts(rdmach_oob_t *oob, struct xs_peer *p)
{
	char key[32];
	int i, ret;

	snprintf(key, sizeof(key), "xhost-%d", xs.rank);
	ret = oob->put(oob->arg, key, xs.host);
	if (!ret)
		ret = oob->fence(oob->arg);
	for (i = 0; !ret && i < xs.size; i++) {
		snprintf(key, sizeof(key), "xhost-%d", i);
		ret = oob->get(oob->arg, key, p[i].host, sizeof(p[i].host));
	}
	return ret;
}

static void xs_action_start(void)
{
	pid_t pid;

	if (xs.rank || !xs.action || xs.action_pid)
		return;
	if (rdmach_now_ns() - xs.t0 < (uint64_t)(xs.action_wait_s * 1e9))
		return;
	pid = fork();
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", xs.action, (char *)NULL);
		_exit(127);
	}
	xs.action_pid = pid > 0 ? pid : -1;
	xs_out("xhost: rank 0 ran the fault at %.2f s: %s\n",
	       xs_s(rdmach_now_ns() - xs.t0), xs.action);
}

static void xs_action_poll(void)
{
	int st;

	if (xs.action_pid <= 0 || xs.action_end_ns)
		return;
	if (waitpid(xs.action_pid, &st, WNOHANG) == xs.action_pid) {
		xs.action_end_ns = rdmach_now_ns();
		xs.action_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 +
				   WTERMSIG(st);
		xs_out("xhost: the fault command ended with status %d at "
		       "%.2f s\n", xs.action_status,
		       xs_s(xs.action_end_ns - xs.t0));
	}
}

/* A connection reported an error: expected or not? */
static int xs_conn_error(struct xs_peer *p, ssize_t err, const char *where)
{
	uint64_t now = rdmach_now_ns();

	if (p->err)
		return 0;
	p->err = (int)err;
	p->err_ns = now;
	p->put_closed = p->get_closed = 1;
	if (!xs.expect_reset)
		return xs_fail("%s of rank %d (%s): %s: %s", where, p->rank,
			       p->host, rdmach_strerror((int)err),
			       rdmach_conn_error(p->c));
	if (!p->cut) {
		/* a survivor that finished first */
		if (err == -EPIPE || err == -ESHUTDOWN)
			return 0;
		return xs_fail("%s of rank %d (%s), not cut by the fault: %s: "
			       "%s", where, p->rank, p->host,
			       rdmach_strerror((int)err),
			       rdmach_conn_error(p->c));
	}
	if (err != -ECONNRESET)
		return xs_fail("%s of rank %d (%s): expected -ECONNRESET, got "
			       "%s: %s", where, p->rank, p->host,
			       rdmach_strerror((int)err),
			       rdmach_conn_error(p->c));
	if (now - p->last_rx_ns > xs.bound_ns)
		return xs_fail("rank %d (%s): -ECONNRESET %.2f s after its last "
			       "byte (bound %.1f s)", p->rank, p->host,
			       xs_s(now - p->last_rx_ns), xs_s(xs.bound_ns));
	if (xs.action_end_ns && now > xs.action_end_ns &&
	    now - xs.action_end_ns > xs.bound_ns)
		return xs_fail("rank %d (%s): -ECONNRESET %.2f s after the "
			       "fault (bound %.1f s)", p->rank, p->host,
			       xs_s(now - xs.action_end_ns),
			       xs_s(xs.bound_ns));
	xs_out("xhost rank %d on %s: rank %d (%s): -ECONNRESET %.2f s after "
	       "its last byte%s: %s\n", xs.rank, xs.host, p->rank, p->host,
	       xs_s(now - p->last_rx_ns), where, rdmach_conn_error(p->c));
	if (xs.action_end_ns)
		xs_out("xhost rank %d on %s: rank %d: %.2f s after the fault "
		       "command ended\n", xs.rank, xs.host, p->rank,
		       xs_s(now - xs.action_end_ns));
	return 0;
}

static uint64_t xs_put_target(void)
{
	uint64_t t = xs.expect_reset ? UINT64_MAX : xs.bytes;

	if (xs.rate > 0) {
		uint64_t allowed = (uint64_t)((double)(rdmach_now_ns() -
					       xs.t0) * xs.rate) + XS_CALL_MAX;

		if (allowed < t)
			t = allowed;
	}
	return t;
}

/* One round of put and get on one peer; 1 if it moved bytes. */
static int xs_step(struct xs_peer *p, uint8_t *gbuf, int *bad)
{
	int moved = 0;
	ssize_t r;

	if (!p->put_closed) {
		uint64_t target = xs_put_target();

		if (!p->piov.iov_len && p->put_done < target) {
			uint64_t n = tst_rand_range(&xs.rng, 1, XS_CALL_MAX);

			if (n > target - p->put_done)
				n = target - p->put_done;
			tst_pat_fill(p->pbuf, n, p->put_seed, p->put_done);
			p->piov.iov_base = p->pbuf;
			p->piov.iov_len = n;
		}
		if (p->piov.iov_len) {
			r = rdmach_put(p->c, &p->piov, 1);
			if (r > 0) {
				p->put_done += (uint64_t)r;
				p->piov.iov_base = (uint8_t *)p->piov.iov_base + r;
				p->piov.iov_len -= (size_t)r;
				moved = 1;
			} else if (r < 0) {
				*bad |= xs_conn_error(p, r, "put");
			}
		}
		if (!xs.expect_reset && p->put_done == xs.bytes)
			p->put_closed = 1;
	}
	if (!p->get_closed) {
		uint64_t want = xs.expect_reset ? XS_GET_MAX :
				xs.bytes - p->got;
		struct iovec iov = { gbuf, want < XS_GET_MAX ? want : XS_GET_MAX };
		uint64_t now;

		r = rdmach_get(p->c, &iov, 1);
		now = rdmach_now_ns();
		if (r > 0) {
			size_t off = tst_pat_check(gbuf, (size_t)r,
						   p->get_seed, p->got);

			if (off < (size_t)r) {
				*bad |= xs_fail("byte %llu from rank %d (%s) "
						"is 0x%02x, expected 0x%02x",
						(unsigned long long)(p->got +
								     off),
						p->rank, p->host, gbuf[off],
						tst_pat_byte(p->get_seed,
							     p->got + off));
				p->get_closed = p->put_closed = 1;
				return 1;
			}
			if (now - p->last_rx_ns > p->max_gap_ns)
				p->max_gap_ns = now - p->last_rx_ns;
			p->got += (uint64_t)r;
			p->last_rx_ns = now;
			moved = 1;
		} else if (r < 0) {
			*bad |= xs_conn_error(p, r, "get");
		}
		if (!xs.expect_reset && p->got == xs.bytes)
			p->get_closed = 1;
	}
	return moved;
}

static void usage(void)
{
	fprintf(stderr, "usage: xhost_stream [-x ok|reset] [-c HOST] "
		"[-b BYTES] [-r MB/s] [-a CMD] [-w S] [-B S] [-T S] [-o DIR]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t peer_ms = xs_env_ms("RDMACH_PEER_TIMEOUT_MS", 2000);
	double bound_s = -1, limit_s = 300;
	const char *logdir = NULL;
	rdmach_pmi_t *pmi;
	rdmach_oob_t oob;
	rdmach_ctx_t *ctx;
	struct xs_peer *p;
	uint8_t *gbuf;
	int i, c, ret, bad = 0, cut = 0, nshm = 0, nib = 0;
	uint64_t now, last_move, last_report = 0;

	xs.bytes = 8u << 20;
	while ((c = getopt(argc, argv, "x:c:b:r:a:w:B:T:o:vh")) != -1) {
		switch (c) {
		case 'x':
			if (!strcmp(optarg, "reset"))
				xs.expect_reset = 1;
			else if (strcmp(optarg, "ok"))
				usage();
			break;
		case 'c': xs.cut_host = optarg; break;
		case 'b': xs.bytes = xs_size(optarg); break;
		case 'r': xs.rate = atof(optarg) * 1e6 / 1e9; break;
		case 'a': xs.action = optarg; break;
		case 'w': xs.action_wait_s = atof(optarg); break;
		case 'B': bound_s = atof(optarg); break;
		case 'T': limit_s = atof(optarg); break;
		case 'o': logdir = optarg; break;
		case 'v': xs.verbose = 1; break;
		default: usage();
		}
	}
	if (optind != argc || (xs.expect_reset && !xs.cut_host))
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);	/* Hydra's proxy may go first */
	gethostname(xs.host, sizeof(xs.host) - 1);
	xs.bound_ns = bound_s >= 0 ? (uint64_t)(bound_s * 1e9) :
		      xs_bound_ns(peer_ms, 1);
	ret = rdmach_pmi_init(&pmi, &oob);
	if (ret) {
		fprintf(stderr, "xhost: PMI: %s (start me with mpiexec)\n",
			rdmach_strerror(ret));
		return 1;
	}
	xs.rank = oob.rank;
	xs.size = oob.size;
	if (logdir) {
		/* all of this rank's output (rdmach's messages too) goes to a
		 * file: when a host is lost, Hydra may stop forwarding output,
		 * and a rank writing to its stdout pipe would block for good */
		char path[4096];
		int fd;

		snprintf(path, sizeof(path), "%s/rank-%d.txt", logdir, xs.rank);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) {
			fprintf(stderr, "xhost: cannot write %s\n", path);
			return 1;
		}
		close(fd);
	}
	xs.rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)xs.rank * 7919;
	p = calloc((size_t)xs.size, sizeof(*p));
	gbuf = malloc(XS_GET_MAX);
	if (!p || !gbuf || xs_hosts(&oob, p))
		return xs_fail("PMI exchange of host names failed");
	ret = rdmach_init(&ctx, &oob);
	if (!ret)
		ret = rdmach_connect(ctx);
	if (ret)
		return xs_fail("rdmach_init/connect: %s", rdmach_strerror(ret));
	for (i = 0; i < xs.size; i++) {
		p[i].rank = i;
		if (i == xs.rank)
			continue;
		if (rdmach_conn(ctx, i, &p[i].c))
			return xs_fail("rdmach_conn(%d)", i);
		p[i].cut = xs.cut_host &&
			   (!strcmp(p[i].host, xs.cut_host) !=
			    !strcmp(xs.host, xs.cut_host));
		cut += p[i].cut;
		p[i].put_seed = tst_seed(XS_TEST_ID, xs.rank, i);
		p[i].get_seed = tst_seed(XS_TEST_ID, i, xs.rank);
		p[i].pbuf = malloc(XS_CALL_MAX);
		if (!p[i].pbuf)
			return xs_fail("out of memory");
	}
	/* no knob: shm to the ranks on this host, ib to the others */
	if (!getenv("RDMACH_TRANSPORT") ||
	    !strcmp(getenv("RDMACH_TRANSPORT"), "auto")) {
		for (i = 0; i < xs.size; i++) {
			const char *want, *tl;

			if (i == xs.rank)
				continue;
			want = strcmp(p[i].host, xs.host) ? "ib" : "shm";
			tl = rdmach_conn_transport(p[i].c);
			if (strcmp(tl, want))
				return xs_fail("rank %d (%s) is reached through "
					       "%s, expected %s", i, p[i].host,
					       tl, want);
			if (*want == 's')
				nshm++;
			else
				nib++;
		}
		xs_out("xhost rank %d on %s: shm to %d ranks on this host, ib "
		       "to %d on others\n", xs.rank, xs.host, nshm, nib);
	}
	/* the bound for the pairs this rank has across the fault; a rank
	 * lingers for the largest any rank can have (size - 1 pairs) */
	xs.linger_ns = xs.bound_ns;
	if (bound_s < 0) {
		xs.bound_ns = xs_bound_ns(peer_ms, cut);
		xs.linger_ns = xs_bound_ns(peer_ms, xs.size - 1);
	}
	if (xs.expect_reset)
		xs_out("xhost rank %d on %s: %d pairs cross the fault, bound "
		       "%.1f s\n", xs.rank, xs.host, cut, xs_s(xs.bound_ns));
	if (xs.expect_reset && !cut) {
		/* nothing of ours crosses the fault: stream until it is over */
		xs_out("xhost rank %d on %s: no pair of this rank crosses the "
		       "fault\n", xs.rank, xs.host);
	}
	oob.fence(oob.arg);
	xs.t0 = last_move = rdmach_now_ns();
	xs.deadline_ns = xs.t0 + (uint64_t)(limit_s * 1e9);
	for (i = 0; i < xs.size; i++)
		p[i].last_rx_ns = xs.t0;
	if (xs.verbose) {
		pthread_t th;

		xs_main = pthread_self();
		signal(SIGUSR1, xs_on_usr1);
		pthread_create(&th, NULL, xs_watchdog, NULL);
	}
	for (;;) {
		int open = 0, cut_open = 0, moved = 0;

		xs_beat++;

		xs_action_start();
		xs_action_poll();
		for (i = 0; i < xs.size; i++) {
			if (i == xs.rank)
				continue;
			moved |= xs_step(&p[i], gbuf, &bad);
			open += !p[i].put_closed || !p[i].get_closed;
			cut_open += p[i].cut && !p[i].err;
		}
		now = rdmach_now_ns();
		if (xs.verbose && now - last_report > 1000000000ull) {
			last_report = now;
			for (i = 0; i < xs.size; i++)
				if (i != xs.rank)
					xs_out("xhost rank %d at %.1f s: rank %d "
					       "err %d got %llu put %llu pending "
					       "%zu silent %.1f s\n", xs.rank,
					       xs_s(now - xs.t0), i, p[i].err,
					       (unsigned long long)p[i].got,
					       (unsigned long long)p[i].put_done,
					       p[i].piov.iov_len,
					       xs_s(now - p[i].last_rx_ns));
		}
		if (moved)
			last_move = now;
		else
			rdmach_progress(ctx);
		if (bad)
			break;
		if (!xs.expect_reset && !open)
			break;
		if (xs.expect_reset && !cut_open && cut &&
		    (xs.rank || !xs.action || xs.action_pid))
			break;
		if (xs.expect_reset && !cut && xs.action_end_ns &&
		    now - xs.action_end_ns > xs.bound_ns)
			break;
		if (xs.expect_reset) {
			for (i = 0; i < xs.size; i++)
				if (p[i].cut && !p[i].err &&
				    now - p[i].last_rx_ns > xs.bound_ns +
				    5000000000ull) {
					bad = xs_fail("rank %d (%s): no error "
						      "%.1f s after its last "
						      "byte (bound %.1f s)",
						      i, p[i].host,
						      xs_s(now - p[i].last_rx_ns),
						      xs_s(xs.bound_ns));
					break;
				}
			if (bad)
				break;
		} else if (now - last_move > 60000000000ull) {
			bad = xs_fail("no byte moved for 60 s");
			break;
		}
		if (now > xs.deadline_ns) {
			bad = xs_fail("not done after %.0f s", limit_s);
			break;
		}
		if (!moved)
			sched_yield();
	}
	if (!bad && xs.action && !xs.rank && xs.action_pid <= 0)
		bad = xs_fail("the stream ended before the fault (raise -b)");
	if (!bad) {
		uint64_t gap = 0, bytes = 0;

		for (i = 0; i < xs.size; i++) {
			if (p[i].max_gap_ns > gap)
				gap = p[i].max_gap_ns;
			bytes += p[i].got;
		}
		xs_out("xhost rank %d on %s: ok: %llu bytes checked from %d "
		       "peers in %.1f s, longest wait for a byte %.2f s%s\n",
		       xs.rank, xs.host, (unsigned long long)bytes,
		       xs.size - 1, xs_s(rdmach_now_ns() - xs.t0), xs_s(gap),
		       xs.expect_reset ? (cut ? ", every pair across the "
				"fault reset in bound" : "") :
		       ", every stream whole, in order");
	}
	/* the fault command must end well (a job that lost a host may be
	 * ended meanwhile: the result line above is out already) */
	while (!bad && xs.action_pid > 0 && !xs.action_end_ns &&
	       rdmach_now_ns() < xs.deadline_ns) {
		xs_action_poll();
		usleep(10000);
	}
	if (!bad && xs.action_pid > 0 && xs.action_status)
		bad = xs_fail("the fault command failed (status %d)",
			      xs.action_status);
	now = rdmach_now_ns();
	ret = rdmach_finalize(&ctx);
	if (ret && !(xs.expect_reset && ret == -ECONNRESET) && !bad)
		bad = xs_fail("rdmach_finalize: %s", rdmach_strerror(ret));
	if (xs.expect_reset)
		xs_out("xhost rank %d on %s: rdmach_finalize took %.2f s\n",
		       xs.rank, xs.host, xs_s(rdmach_now_ns() - now));
	/* no PMI finalize after a fault: the server may have lost ranks */
	if (!xs.expect_reset) {
		rdmach_pmi_finalize(pmi);
		return bad;
	}
	/* Hydra ends the job when any rank exits without PMI finalize: a rank
	 * that saw its resets first stays until every survivor can have seen
	 * its own (the largest bound: size - 1 pairs across the fault) */
	if (xs.rank != 0 && !bad) {
		usleep((useconds_t)(xs.linger_ns / 1000));
		return bad;
	}
	/* -x reset: the job lost ranks, so it ends in error: rank 0 gives
	 * the others the detection bound to report, then exits with 3 */
	if (xs.rank == 0 && !bad) {
		usleep((useconds_t)(xs.bound_ns / 1000));
		xs_out("xhost rank 0 on %s: exits with status 3 (ranks were "
		       "lost) at %.1f s\n", xs.host,
		       xs_s(rdmach_now_ns() - xs.t0));
		return 3;
	}
	return bad;
}
