/*
 * test_pmi - the PMI-1 client (core/pmi.c) and the built-in launcher
 * (core/launch.c).
 *
 *   mpiexec -n 4 test_pmi    every rank runs the PMI checks under Hydra
 *   test_pmi                 launcher checks, then the PMI checks in 4 (and
 *                            1) copies of itself started by
 *                            rdmach_launch_self()
 *
 * Ends with "<N> passed, <M> failed"; the exit status is non-zero on any
 * failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "rdmach_launch.h"
#include "rdmach_pmi.h"

#define NESTED_ENV "TEST_PMI_NESTED"		/* ranks of our own launch */
#define FAIL_RANK_ENV "TEST_PMI_FAIL_RANK"	/* this rank exits 3 */
#define ROUNDS 20

static int npass, nfail;
static int my_rank = -1;

static int check(int ok, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int check(int ok, int line, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		npass++;
		return 1;
	}
	nfail++;
	if (my_rank >= 0)
		fprintf(stderr, "FAIL [rank %d] test_pmi.c:%d: ", my_rank, line);
	else
		fprintf(stderr, "FAIL test_pmi.c:%d: ", line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 0;
}

#define CHECK(cond, ...) check(!!(cond), __LINE__, __VA_ARGS__)

/* Send stderr to a temporary file until cap_end(); returns its fd. */
static int cap_begin(int *saved)
{
	char path[] = "/tmp/test_pmi_stderr.XXXXXX";
	int fd = mkstemp(path);

	fflush(stderr);
	*saved = dup(STDERR_FILENO);
	if (fd >= 0) {
		unlink(path);
		dup2(fd, STDERR_FILENO);
	}
	return fd;
}

/* Restore stderr; buf gets what was written meanwhile. */
static void cap_end(int fd, int saved, char *buf, size_t len)
{
	ssize_t n = 0;

	fflush(stderr);
	if (fd >= 0) {
		dup2(saved, STDERR_FILENO);
		n = pread(fd, buf, len - 1, 0);
		close(fd);
	}
	close(saved);
	buf[n > 0 ? n : 0] = '\0';
}

/* A printable, space-free value of len bytes, distinct per (rank, salt). */
static void make_value(char *v, size_t len, int rank, int salt)
{
	size_t i;

	for (i = 0; i < len; i++)
		v[i] = (char)(33 + (i * 7 + (size_t)rank * 13 + (size_t)salt * 31) % 94);
	v[len] = '\0';
}

/* ===================== rank side: runs under a PMI server ============== */

static void rank_exchange(rdmach_oob_t *oob)
{
	char key[64], want[64], got[128];
	int p, ret;

	snprintf(key, sizeof(key), "tp_key_%d", oob->rank);
	snprintf(want, sizeof(want), "val-%d-of-%d", oob->rank, oob->size);
	CHECK(oob->put(oob->arg, key, want) == 0, "put %s", key);
	CHECK(oob->fence(oob->arg) == 0, "fence after the first put");
	for (p = 0; p < oob->size; p++) {
		snprintf(key, sizeof(key), "tp_key_%d", p);
		snprintf(want, sizeof(want), "val-%d-of-%d", p, oob->size);
		memset(got, 0, sizeof(got));
		ret = oob->get(oob->arg, key, got, sizeof(got));
		CHECK(ret == 0 && !strcmp(got, want),
		      "get %s: ret %d, \"%s\" instead of \"%s\"", key, ret, got,
		      want);
	}
}

static void rank_long_values(rdmach_oob_t *oob)
{
	size_t lens[] = { 1, oob->value_max / 2, oob->value_max - 1,
			  oob->value_max };
	size_t max = oob->value_max;
	char *want = malloc(max + 2), *got = malloc(max + 2);
	char key[64], msg[512], expect[128];
	unsigned i;
	int p, ret, cap, saved;

	if (!CHECK(want && got, "malloc"))
		goto out;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		make_value(want, lens[i], oob->rank, (int)i);
		snprintf(key, sizeof(key), "tp_long_%u_%d", i, oob->rank);
		ret = oob->put(oob->arg, key, want);
		CHECK(ret == 0, "put of a %zu-byte value: %d", lens[i], ret);
	}
	/* One past the limit is refused, not truncated. */
	make_value(want, max + 1, oob->rank, 99);
	cap = cap_begin(&saved);
	ret = oob->put(oob->arg, "tp_too_long", want);
	cap_end(cap, saved, msg, sizeof(msg));
	CHECK(ret == -EMSGSIZE, "put of value_max+1 bytes returned %d, not -EMSGSIZE",
	      ret);
	snprintf(expect, sizeof(expect), "PMI put: value of %zu bytes exceeds the PMI server's limit of %zu",
		 max + 1, max);
	CHECK(strstr(msg, expect), "message \"%s\" lacks \"%s\"", msg, expect);
	CHECK(oob->fence(oob->arg) == 0, "fence after long puts");
	for (p = 0; p < oob->size; p++) {
		for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			make_value(want, lens[i], p, (int)i);
			snprintf(key, sizeof(key), "tp_long_%u_%d", i, p);
			memset(got, 0, max + 2);
			ret = oob->get(oob->arg, key, got, max + 1);
			CHECK(ret == 0 && strlen(got) == lens[i] &&
			      !strcmp(got, want),
			      "get %s (%zu bytes): ret %d, got %zu bytes%s", key,
			      lens[i], ret, strlen(got),
			      ret == 0 && strlen(got) == lens[i] ? ", different" : "");
		}
	}
	/* A buffer one byte short: -EMSGSIZE, buffer untouched. */
	snprintf(key, sizeof(key), "tp_long_3_%d", (oob->rank + 1) % oob->size);
	memset(got, 'Z', max + 2);
	cap = cap_begin(&saved);
	ret = oob->get(oob->arg, key, got, max);
	cap_end(cap, saved, msg, sizeof(msg));
	CHECK(ret == -EMSGSIZE && got[0] == 'Z',
	      "get into a too-small buffer returned %d", ret);
	CHECK(strstr(msg, "does not fit a buffer of"), "message \"%s\"", msg);
out:
	free(want);
	free(got);
}

static void rank_barriers(rdmach_oob_t *oob)
{
	int next = (oob->rank + 1) % oob->size;
	char key[64], want[64], got[64];
	uint64_t t0;
	int i, ret;

	for (i = 0; i < ROUNDS; i++) {
		snprintf(key, sizeof(key), "tp_round_%d_%d", i, oob->rank);
		snprintf(want, sizeof(want), "%d:%d", i, oob->rank);
		CHECK(oob->put(oob->arg, key, want) == 0, "round %d put", i);
		CHECK(oob->fence(oob->arg) == 0, "round %d fence", i);
		/* The neighbour's put of this round must be visible now. */
		snprintf(key, sizeof(key), "tp_round_%d_%d", i, next);
		snprintf(want, sizeof(want), "%d:%d", i, next);
		ret = oob->get(oob->arg, key, got, sizeof(got));
		CHECK(ret == 0 && !strcmp(got, want),
		      "round %d: get %s: ret %d \"%s\"", i, key, ret,
		      ret ? "" : got);
	}
	t0 = rdmach_now_ns();
	for (i = 0; i < ROUNDS; i++)
		if (!CHECK(oob->fence(oob->arg) == 0, "bare fence %d", i))
			break;
	if (oob->rank == 0)
		printf("  fence: %.1f us on average over %d ranks\n",
		       (double)(rdmach_now_ns() - t0) / ROUNDS / 1e3, oob->size);
}

static void rank_errors(rdmach_oob_t *oob)
{
	char got[64], msg[2048];
	int ret, cap, saved;

	cap = cap_begin(&saved);
	ret = oob->get(oob->arg, "tp_no_such_key", got, sizeof(got));
	CHECK(ret == -ENOENT, "get of a missing key returned %d, not -ENOENT",
	      ret);
	CHECK(oob->put(oob->arg, "bad key", "v") == -EINVAL,
	      "a key with a space is accepted");
	CHECK(oob->put(oob->arg, "", "v") == -EINVAL, "an empty key is accepted");
	CHECK(oob->put(oob->arg, "tp_k", "a\nb") == -EINVAL,
	      "a value with a newline is accepted");
	CHECK(oob->put(oob->arg,
		       "tp_0123456789012345678901234567890123456789012345678901234567890123",
		       "v") == -EMSGSIZE, "a key over keylen_max is accepted");
	cap_end(cap, saved, msg, sizeof(msg));
	CHECK(strstr(msg, "PMI get of key tp_no_such_key failed: rc=-1"),
	      "no clear message for a missing key: \"%s\"", msg);
	CHECK(strstr(msg, "character 0x20 at offset 3 of a key"),
	      "no clear message for a bad key: \"%s\"", msg);
	/* The connection still works after the refusals. */
	snprintf(got, sizeof(got), "after-errors-%d", oob->rank);
	CHECK(oob->put(oob->arg, "tp_after_errors", got) == 0,
	      "put after errors");
	CHECK(oob->fence(oob->arg) == 0, "fence after errors");
}

/* Sum every rank's failure count on rank 0. */
static int rank_total_failures(rdmach_oob_t *oob, int *passed)
{
	char key[64], val[64];
	int p, total = 0;

	snprintf(key, sizeof(key), "tp_result_%d", oob->rank);
	snprintf(val, sizeof(val), "%d,%d", npass, nfail);
	if (oob->put(oob->arg, key, val) || oob->fence(oob->arg))
		return -1;
	*passed = 0;
	for (p = 0; oob->rank == 0 && p < oob->size; p++) {
		int np = 0, nf = 1;

		snprintf(key, sizeof(key), "tp_result_%d", p);
		if (oob->get(oob->arg, key, val, sizeof(val)) ||
		    sscanf(val, "%d,%d", &np, &nf) != 2)
			nf = 1;
		*passed += np;
		total += nf;
	}
	return total;
}

static int rank_main(void)
{
	const char *fail_rank = getenv(FAIL_RANK_ENV);
	int nested = getenv(NESTED_ENV) != NULL;
	rdmach_pmi_t *pmi = NULL;
	rdmach_oob_t oob;
	int ret, total, passed = 0;

	ret = rdmach_pmi_init(&pmi, &oob);
	if (ret) {
		fprintf(stderr, "FAIL: rdmach_pmi_init: %s\n", strerror(-ret));
		return 1;
	}
	my_rank = oob.rank;
	if (fail_rank && atoi(fail_rank) == oob.rank)
		exit(3);	/* the launcher must kill the others */
	CHECK(oob.rank == atoi(getenv("PMI_RANK")), "rank %d", oob.rank);
	CHECK(oob.size == atoi(getenv("PMI_SIZE")), "size %d", oob.size);
	CHECK(oob.value_max >= 255, "value_max %zu", oob.value_max);
	if (oob.rank == 0)
		printf("  %d ranks, value_max %zu\n", oob.size, oob.value_max);

	rank_exchange(&oob);
	rank_long_values(&oob);
	rank_barriers(&oob);
	rank_errors(&oob);

	total = rank_total_failures(&oob, &passed);
	ret = rdmach_pmi_finalize(pmi);
	if (ret)
		fprintf(stderr, "FAIL [rank %d]: rdmach_pmi_finalize: %s\n",
			oob.rank, strerror(-ret));
	if (oob.rank != 0)
		return nfail || ret ? 1 : 0;
	if (total < 0) {
		fprintf(stderr, "FAIL: could not gather the results\n");
		return 1;
	}
	if (nested)
		printf("  group of %d ranks: %d checks ok, %d failed\n", oob.size,
		       passed, total);
	else
		printf("%d passed, %d failed\n", passed, total);
	fflush(stdout);
	return total || ret ? 1 : 0;
}

/* ===================== launcher side: no PMI server ==================== */

enum child_mode {
	CH_EXCHANGE,		/* put/fence/get with every rank */
	CH_NO_PMI,		/* exit 0 without touching PMI */
	CH_FAIL_2,		/* rank 2 exits 3, others sleep */
	CH_SIGKILL_1,		/* rank 1 killed by SIGKILL, others sleep */
	CH_IGNORE_TERM,		/* rank 0 exits 1, rank 1 ignores SIGTERM */
	CH_SLEEP,		/* everyone sleeps (timeout) */
	CH_KEEP_GOING,		/* rank 0 exits 5, the others barrier */
	CH_ABORT,		/* rank 1 calls PMI abort 7 */
	CH_RAW,			/* the wire protocol by hand */
	CH_FINALIZED_PEER,	/* rank 0 finalizes and exits; 1 barriers */
	CH_FAIL_AFTER_FIN,	/* rank 0 exits 4 after finalize */
	CH_SLEEP_REPORT,	/* write the pid to report_fd, sleep */
};

static int report_fd = -1;

static int child_exchange(int rank)
{
	char key[64], want[64], got[64];
	rdmach_pmi_t *pmi;
	rdmach_oob_t oob;
	int p, bad = 0;

	if (rdmach_pmi_init(&pmi, &oob) || oob.rank != rank)
		return 10;
	snprintf(key, sizeof(key), "k%d", rank);
	snprintf(want, sizeof(want), "v%d.%d", rank, oob.size);
	if (oob.put(oob.arg, key, want) || oob.fence(oob.arg))
		bad = 11;
	for (p = 0; !bad && p < oob.size; p++) {
		snprintf(key, sizeof(key), "k%d", p);
		snprintf(want, sizeof(want), "v%d.%d", p, oob.size);
		if (oob.get(oob.arg, key, got, sizeof(got)) || strcmp(got, want))
			bad = 12;
	}
	if (rdmach_pmi_finalize(pmi))
		bad = 13;
	return bad;
}

static int raw_send(int fd, const char *s)
{
	size_t len = strlen(s);

	return write(fd, s, len) == (ssize_t)len ? 0 : -1;
}

/* Read one line (without '\n') from fd, byte by byte. */
static int raw_line(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		char c;
		ssize_t r = read(fd, &c, 1);

		if (r <= 0)
			return -1;
		if (c == '\n')
			break;
		buf[n++] = c;
	}
	buf[n] = '\0';
	return 0;
}

#define RAW_EXPECT(cond, code) do { if (!(cond)) { \
	fprintf(stderr, "raw protocol check failed at line %d: %s\n", \
		__LINE__, line); return code; } } while (0)

/* The server must cope with split and batched requests. */
static int child_raw(int rank)
{
	int fd = atoi(getenv("PMI_FD"));
	char line[2048], kvs[300], req[1500], big[1100];

	line[0] = '\0';
	RAW_EXPECT(!raw_send(fd, "cmd=ini"), 20);
	usleep(20000);
	RAW_EXPECT(!raw_send(fd, "t pmi_version=1 pmi_"), 20);
	usleep(20000);
	RAW_EXPECT(!raw_send(fd, "subversion=1\n"), 20);
	RAW_EXPECT(!raw_line(fd, line, sizeof(line)), 21);
	RAW_EXPECT(!strcmp(line, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"), 22);
	RAW_EXPECT(!raw_send(fd, "cmd=get_appnum\ncmd=get_my_kvsname\ncmd=get_maxes\n"), 23);
	RAW_EXPECT(!raw_line(fd, line, sizeof(line)) && !strcmp(line, "cmd=appnum appnum=0"), 24);
	RAW_EXPECT(!raw_line(fd, line, sizeof(line)) &&
		   sscanf(line, "cmd=my_kvsname kvsname=%299s", kvs) == 1, 25);
	RAW_EXPECT(!raw_line(fd, line, sizeof(line)) &&
		   !strcmp(line, "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024"), 26);
	snprintf(req, sizeof(req), "cmd=get kvsname=%s key=PMI_process_mapping\n", kvs);
	RAW_EXPECT(!raw_send(fd, req) && !raw_line(fd, line, sizeof(line)), 27);
	RAW_EXPECT(!strcmp(line, "cmd=get_result rc=0 msg=success value=(vector,(0,1,2))"), 28);
	RAW_EXPECT(!raw_send(fd, "cmd=no_such_command\n") && !raw_line(fd, line, sizeof(line)), 29);
	RAW_EXPECT(strstr(line, "rc=-1"), 30);
	make_value(big, 1024, rank, 0);
	snprintf(req, sizeof(req), "cmd=put kvsname=%s key=big value=%s\n", kvs, big);
	RAW_EXPECT(!raw_send(fd, req) && !raw_line(fd, line, sizeof(line)), 31);
	RAW_EXPECT(!strcmp(line, "cmd=put_result rc=-1 msg=value_too_long"), 32);
	big[1023] = '\0';	/* = is allowed inside a value */
	big[5] = '=';
	snprintf(req, sizeof(req), "cmd=put kvsname=%s key=big%d value=%s\n", kvs, rank, big);
	RAW_EXPECT(!raw_send(fd, req) && !raw_line(fd, line, sizeof(line)), 33);
	RAW_EXPECT(!strcmp(line, "cmd=put_result rc=0 msg=success"), 34);
	snprintf(req, sizeof(req), "cmd=get kvsname=%s key=big%d\n", kvs, rank);
	RAW_EXPECT(!raw_send(fd, req) && !raw_line(fd, line, sizeof(line)), 35);
	RAW_EXPECT(!strncmp(line, "cmd=get_result rc=0 msg=success value=", 38) &&
		   !strcmp(line + 38, big), 36);
	RAW_EXPECT(!raw_send(fd, "cmd=get kvsname=wrong key=big0\n") &&
		   !raw_line(fd, line, sizeof(line)), 37);
	RAW_EXPECT(strstr(line, "cmd=get_result rc=-1"), 38);
	RAW_EXPECT(!raw_send(fd, "cmd=barrier_in\n") && !raw_line(fd, line, sizeof(line)), 39);
	RAW_EXPECT(!strcmp(line, "cmd=barrier_out"), 40);
	RAW_EXPECT(!raw_send(fd, "cmd=finalize\n") && !raw_line(fd, line, sizeof(line)), 41);
	RAW_EXPECT(!strcmp(line, "cmd=finalize_ack"), 42);
	return 0;
}

static int child_keep_going(int rank)
{
	rdmach_pmi_t *pmi;
	rdmach_oob_t oob;
	int ret;

	if (rank == 0)
		return 5;
	if (rdmach_pmi_init(&pmi, &oob))
		return 10;
	/* Rank 0 never joins: an error, not a hang. */
	ret = rdmach_pmi_barrier(pmi);
	rdmach_pmi_finalize(pmi);
	return ret == -ECONNRESET ? 0 : 20;
}

static int child_main(int rank, void *arg)
{
	enum child_mode mode = *(enum child_mode *)arg;
	rdmach_pmi_t *pmi;
	rdmach_oob_t oob;
	int ret;

	switch (mode) {
	case CH_EXCHANGE:
		return child_exchange(rank);
	case CH_NO_PMI:
		return 0;
	case CH_FAIL_2:
		if (rank == 2)
			return 3;
		sleep(30);
		return 0;
	case CH_SIGKILL_1:
		if (rank == 1)
			raise(SIGKILL);
		sleep(30);
		return 0;
	case CH_IGNORE_TERM:
		if (rank == 0) {
			usleep(100000);	/* let rank 1 install SIG_IGN */
			return 1;
		}
		signal(SIGTERM, SIG_IGN);
		sleep(30);
		return 0;
	case CH_SLEEP:
		sleep(30);
		return 0;
	case CH_SLEEP_REPORT: {
		pid_t me = getpid();

		if (write(report_fd, &me, sizeof(me)) != sizeof(me))
			return 1;
		sleep(30);
		return 0;
	}
	case CH_KEEP_GOING:
		return child_keep_going(rank);
	case CH_ABORT:
		if (rdmach_pmi_init(&pmi, &oob))
			return 10;
		if (rank == 1)
			rdmach_pmi_abort(pmi, 7, "test abort");
		sleep(30);
		return 0;
	case CH_RAW:
		return child_raw(rank);
	case CH_FINALIZED_PEER:
		if (rdmach_pmi_init(&pmi, &oob))
			return 10;
		if (rank == 0)
			return rdmach_pmi_finalize(pmi) ? 11 : 0;
		ret = rdmach_pmi_barrier(pmi);
		rdmach_pmi_finalize(pmi);
		return ret == -ECONNRESET ? 0 : 20;
	case CH_FAIL_AFTER_FIN:
		if (rdmach_pmi_init(&pmi, &oob))
			return 10;
		if (rank == 0) {
			rdmach_pmi_finalize(pmi);
			return 4;
		}
		usleep(300000);	/* still running when rank 0 fails */
		return rdmach_pmi_finalize(pmi) ? 11 : 0;
	}
	return 99;
}

struct run {
	int ret;
	struct rdmach_launch_result res;
	double secs;
	char err[8192];		/* what the launcher wrote on stderr */
};

/* rdmach_launch with stderr captured in run->err. */
static void run_launch(struct run *run, int nprocs, unsigned timeout_s,
		       int keep_going, int quiet, enum child_mode mode,
		       char *const argv[])
{
	struct rdmach_launch_opts opts = { nprocs, timeout_s, keep_going,
					   quiet };
	uint64_t t0;
	int fd, saved;

	memset(run, 0, sizeof(*run));
	fd = cap_begin(&saved);
	t0 = rdmach_now_ns();
	run->ret = rdmach_launch(&opts, argv ? NULL : child_main, &mode, argv,
				 &run->res);
	run->secs = (double)(rdmach_now_ns() - t0) / 1e9;
	cap_end(fd, saved, run->err, sizeof(run->err));
}

static int exited(int st, int code)
{
	return WIFEXITED(st) && WEXITSTATUS(st) == code;
}

static int signaled(int st, int sig)
{
	return WIFSIGNALED(st) && WTERMSIG(st) == sig;
}

static void test_launch_ok(void)
{
	struct run run;
	int i, ok = 1;

	run_launch(&run, 3, 30, 0, 0, CH_EXCHANGE, NULL);
	for (i = 0; i < 3; i++)
		ok &= exited(run.res.status[i], 0);
	CHECK(run.ret == 0 && ok && run.res.first_failed == -1 &&
	      run.res.exit_code == 0 && !run.res.timed_out,
	      "3-rank exchange: ret %d, statuses %#x %#x %#x, stderr: %s",
	      run.ret, run.res.status[0], run.res.status[1],
	      run.res.status[2], run.err);

	run_launch(&run, 32, 60, 0, 0, CH_EXCHANGE, NULL);
	for (i = 0, ok = 1; i < 32; i++)
		ok &= exited(run.res.status[i], 0);
	CHECK(run.ret == 0 && ok, "32-rank exchange: ret %d, stderr: %s",
	      run.ret, run.err);
	printf("  32-rank put/fence/get-all: %.3f s\n", run.secs);

	run_launch(&run, 2, 30, 0, 0, CH_NO_PMI, NULL);
	CHECK(run.ret == 0, "ranks without PMI: ret %d", run.ret);

	run_launch(&run, 2, 30, 0, 0, CH_RAW, NULL);
	CHECK(run.ret == 0 && exited(run.res.status[0], 0) &&
	      exited(run.res.status[1], 0),
	      "raw protocol: ret %d, statuses %#x %#x, stderr: %s", run.ret,
	      run.res.status[0], run.res.status[1], run.err);

	run_launch(&run, 2, 30, 0, 0, CH_FINALIZED_PEER, NULL);
	CHECK(run.ret == 0, "barrier after a peer finalized: ret %d, statuses %#x %#x",
	      run.ret, run.res.status[0], run.res.status[1]);
}

static void test_launch_failures(void)
{
	struct run run;
	int i, ok = 1;

	run_launch(&run, 4, 60, 0, 0, CH_FAIL_2, NULL);
	for (i = 0; i < 4; i++)
		if (i != 2)
			ok &= signaled(run.res.status[i], SIGTERM);
	CHECK(run.ret == 1 && exited(run.res.status[2], 3) && ok &&
	      run.res.first_failed == 2 && run.res.exit_code == 3 &&
	      run.secs < 10,
	      "rank 2 exits 3: ret %d, first_failed %d, exit_code %d, %.1f s",
	      run.ret, run.res.first_failed, run.res.exit_code, run.secs);
	CHECK(strstr(run.err, "rank 2 (pid ") &&
	      strstr(run.err, "exited with status 3") &&
	      strstr(run.err, "killing the other 3 ranks"),
	      "failure report: \"%s\"", run.err);

	run_launch(&run, 4, 60, 0, 1, CH_FAIL_2, NULL);
	CHECK(run.ret == 1 && !strstr(run.err, "rdmach_launch:"),
	      "quiet: ret %d, stderr \"%s\"", run.ret, run.err);

	run_launch(&run, 2, 60, 0, 0, CH_SIGKILL_1, NULL);
	CHECK(run.ret == 1 && signaled(run.res.status[1], SIGKILL) &&
	      signaled(run.res.status[0], SIGTERM) &&
	      run.res.exit_code == 128 + SIGKILL && run.secs < 10,
	      "rank 1 SIGKILLed: ret %d, statuses %#x %#x, exit_code %d",
	      run.ret, run.res.status[0], run.res.status[1],
	      run.res.exit_code);
	CHECK(strstr(run.err, "rank 1 (pid ") &&
	      strstr(run.err, "killed by signal 9"), "report: \"%s\"", run.err);

	setenv("RDMACH_LAUNCH_KILL_GRACE_MS", "300", 1);
	run_launch(&run, 2, 60, 0, 1, CH_IGNORE_TERM, NULL);
	unsetenv("RDMACH_LAUNCH_KILL_GRACE_MS");
	CHECK(run.ret == 1 && exited(run.res.status[0], 1) &&
	      signaled(run.res.status[1], SIGKILL) && run.secs >= 0.3 &&
	      run.secs < 10,
	      "SIGTERM ignored: ret %d, statuses %#x %#x, %.2f s", run.ret,
	      run.res.status[0], run.res.status[1], run.secs);

	run_launch(&run, 2, 1, 0, 0, CH_SLEEP, NULL);
	CHECK(run.ret == 1 && run.res.timed_out && run.res.exit_code == 124 &&
	      signaled(run.res.status[0], SIGTERM) &&
	      signaled(run.res.status[1], SIGTERM) && run.secs >= 1.0 &&
	      run.secs < 5,
	      "timeout: ret %d, timed_out %d, exit_code %d, %.2f s", run.ret,
	      run.res.timed_out, run.res.exit_code, run.secs);
	CHECK(strstr(run.err, "timeout after 1 s"), "timeout report: \"%s\"",
	      run.err);

	run_launch(&run, 3, 60, 1, 1, CH_KEEP_GOING, NULL);
	CHECK(run.ret == 1 && exited(run.res.status[0], 5) &&
	      exited(run.res.status[1], 0) && exited(run.res.status[2], 0) &&
	      run.res.exit_code == 5 && run.secs < 10,
	      "keep going: ret %d, statuses %#x %#x %#x, %.1f s", run.ret,
	      run.res.status[0], run.res.status[1], run.res.status[2],
	      run.secs);

	run_launch(&run, 3, 60, 1, 0, CH_ABORT, NULL);
	CHECK(run.ret == 1 && run.res.exit_code == 7 &&
	      run.res.first_failed == 1 && run.secs < 10 &&
	      strstr(run.err, "called PMI abort (exit code 7): test_abort"),
	      "abort: ret %d, exit_code %d, first_failed %d, %.1f s, stderr \"%s\"",
	      run.ret, run.res.exit_code, run.res.first_failed, run.secs,
	      run.err);

	run_launch(&run, 2, 60, 0, 1, CH_FAIL_AFTER_FIN, NULL);
	CHECK(run.ret == 1 && exited(run.res.status[0], 4) &&
	      exited(run.res.status[1], 0) && run.res.exit_code == 4,
	      "failure after finalize must not kill: ret %d, statuses %#x %#x",
	      run.ret, run.res.status[0], run.res.status[1]);
}

static void test_launch_args(void)
{
	char *const bad_prog[] = { "/nonexistent/rdmach_prog", NULL };
	struct rdmach_launch_opts opts = { 0 };
	struct run run;

	run_launch(&run, 2, 30, 0, 0, 0, bad_prog);
	CHECK(run.ret == 1 && run.res.exit_code == 127 &&
	      strstr(run.err, "cannot execute /nonexistent/rdmach_prog"),
	      "exec failure: ret %d, exit_code %d, stderr \"%s\"", run.ret,
	      run.res.exit_code, run.err);

	opts.nprocs = 0;
	CHECK(rdmach_launch(&opts, child_main, NULL, NULL, NULL) == -EINVAL,
	      "nprocs 0 accepted");
	opts.nprocs = 257;
	CHECK(rdmach_launch(&opts, child_main, NULL, NULL, NULL) == -EINVAL,
	      "nprocs 257 accepted");
	opts.nprocs = 2;
	CHECK(rdmach_launch(&opts, NULL, NULL, NULL, NULL) == -EINVAL,
	      "no fn and no argv accepted");
	CHECK(rdmach_launch(NULL, child_main, NULL, NULL, NULL) == -EINVAL,
	      "NULL opts accepted");
}

/* Alive and not a zombie? */
static int process_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	int alive = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		alive = p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
	fclose(f);
	return alive;
}

/* Ranks must not outlive a launcher that was killed. */
static void test_launcher_death(void)
{
	pid_t launcher, ranks[2];
	int fds[2], i, left = 2;
	enum child_mode mode = CH_SLEEP_REPORT;
	uint64_t t0;

	if (!CHECK(pipe(fds) == 0, "pipe"))
		return;
	fflush(NULL);
	launcher = fork();
	if (launcher == 0) {
		struct rdmach_launch_opts opts = { .nprocs = 2, .timeout_s = 60,
						   .quiet = 1 };

		close(fds[0]);
		report_fd = fds[1];
		_exit(rdmach_launch(&opts, child_main, &mode, NULL, NULL));
	}
	close(fds[1]);
	for (i = 0; i < 2; i++)
		if (read(fds[0], &ranks[i], sizeof(ranks[i])) != sizeof(ranks[i]))
			break;
	close(fds[0]);
	if (!CHECK(i == 2, "the ranks did not report their pids")) {
		kill(launcher, SIGKILL);
		waitpid(launcher, NULL, 0);
		return;
	}
	kill(launcher, SIGKILL);
	waitpid(launcher, NULL, 0);
	t0 = rdmach_now_ns();
	while (left && rdmach_now_ns() - t0 < 5000000000ull) {
		usleep(10000);
		for (i = 0, left = 0; i < 2; i++)
			left += process_alive(ranks[i]);
	}
	CHECK(!left, "%d rank(s) outlived a killed launcher", left);
	for (i = 0; left && i < 2; i++)
		kill(ranks[i], SIGKILL);
}

/* rdmach_launch_self in a child process: it exits with the group's result. */
static int run_self(int argc, char **argv, int nprocs, const char *fail_rank,
		    double *secs)
{
	uint64_t t0 = rdmach_now_ns();
	int st = -1;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		setenv(NESTED_ENV, "1", 1);
		if (fail_rank)
			setenv(FAIL_RANK_ENV, fail_rank, 1);
		rdmach_launch_self(argc, argv, nprocs, 60);
		_exit(99);	/* launch_self must not return here */
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	*secs = (double)(rdmach_now_ns() - t0) / 1e9;
	return st;
}

static void test_launch_self(int argc, char **argv)
{
	double secs = 0;
	int st;

	printf("  self-launch, 4 ranks:\n");
	st = run_self(argc, argv, 4, NULL, &secs);
	CHECK(exited(st, 0), "rdmach_launch_self with 4 ranks: status %#x", st);
	printf("  self-launch, 1 rank:\n");
	st = run_self(argc, argv, 1, NULL, &secs);
	CHECK(exited(st, 0), "rdmach_launch_self with 1 rank: status %#x", st);
	printf("  self-launch, rank 2 of 3 exits 3 (expect a report):\n");
	st = run_self(argc, argv, 3, "2", &secs);
	CHECK(exited(st, 1) && secs < 10,
	      "rdmach_launch_self with a failing rank: status %#x, %.1f s", st,
	      secs);
}

int main(int argc, char **argv)
{
	if (rdmach_pmi_available())
		return rank_main();

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("test_pmi: launcher\n");
	test_launch_ok();
	test_launch_failures();
	test_launch_args();
	test_launcher_death();
	test_launch_self(argc, argv);
	printf("%d passed, %d failed\n", npass, nfail);
	return nfail ? 1 : 0;
}
