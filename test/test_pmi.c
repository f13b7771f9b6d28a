/*
 * test_pmi - the PMI-1 client (pmi/pmi.c) and the built-in launcher
 * (pmi/launch.c).
 *
 *   test_pmi                 the launcher cases (launch_*), each in a process
 *                            of its own with no PMI server around, and the
 *                            PMI cases (pmi_*) in groups the kit starts with
 *                            rdmach_launch; launch_self runs the PMI cases
 *                            again in 4 and 1 copies of this program started
 *                            by rdmach_launch_self()
 *   mpiexec -n 4 test_pmi    the PMI cases under Hydra
 *
 * The kit (test/lib/tst.h) runs the cases; the PMI cases see the PMI
 * client's own oob (TST_RAW_OOB), so that key names and limits are the
 * server's.  A PMI case records failures and goes on (tst_fail) where its
 * rank must still join the fences that follow.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "lib/tst.h"
#include "rdmach.h"
#include "rdmach_launch.h"
#include "rdmach_pmi.h"

#define FAIL_RANK_ENV "TEST_PMI_FAIL_RANK"	/* this rank exits 3 */
#define ROUNDS 20

/* A printable, space-free value of len bytes, distinct per (rank, salt). */
static void make_value(char *v, size_t len, int rank, int salt)
{
	size_t i;

	for (i = 0; i < len; i++)
		v[i] = (char)(33 + (i * 7 + (size_t)rank * 13 + (size_t)salt * 31) % 94);
	v[len] = '\0';
}

/* ===================== PMI cases: run under a PMI server =============== */

static int pmi_setup(struct tst *t)
{
	const char *fail_rank = getenv(FAIL_RANK_ENV);
	const rdmach_oob_t *oob = &t->oob;

	if (fail_rank && atoi(fail_rank) == oob->rank)
		exit(3);	/* the launcher must kill the others */
	TST_CHECK(t, oob->rank == atoi(getenv("PMI_RANK")), "rank %d",
		  oob->rank);
	TST_CHECK(t, oob->size == atoi(getenv("PMI_SIZE")), "size %d",
		  oob->size);
	TST_CHECK(t, oob->value_max >= 255, "value_max %zu", oob->value_max);
	if (oob->rank == 0)
		printf("  %d ranks, value_max %zu\n", oob->size,
		       oob->value_max);
	return 0;
}

static int pmi_exchange(struct tst *t)
{
	const rdmach_oob_t *oob = &t->oob;
	char key[64], want[64], got[128];
	int p, ret;

	snprintf(key, sizeof(key), "tp_key_%d", oob->rank);
	snprintf(want, sizeof(want), "val-%d-of-%d", oob->rank, oob->size);
	if (oob->put(oob->arg, key, want))
		tst_fail(t, "put %s", key);
	TST_CHECK(t, oob->fence(oob->arg) == 0, "fence after the first put");
	for (p = 0; p < oob->size; p++) {
		snprintf(key, sizeof(key), "tp_key_%d", p);
		snprintf(want, sizeof(want), "val-%d-of-%d", p, oob->size);
		memset(got, 0, sizeof(got));
		ret = oob->get(oob->arg, key, got, sizeof(got));
		TST_CHECK(t, ret == 0 && !strcmp(got, want),
			  "get %s: ret %d, \"%s\" instead of \"%s\"", key, ret,
			  got, want);
	}
	return 0;
}

static int pmi_long_values(struct tst *t)
{
	const rdmach_oob_t *oob = &t->oob;
	size_t lens[] = { 1, oob->value_max / 2, oob->value_max - 1,
			  oob->value_max };
	size_t max = oob->value_max;
	char *want = malloc(max + 2), *got = malloc(max + 2);
	char key[64], msg[512], expect[128];
	struct tst_capture cap;
	unsigned i;
	int p, ret, err;

	if (!want || !got) {
		tst_fail(t, "malloc");
		goto out;
	}
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		make_value(want, lens[i], oob->rank, (int)i);
		snprintf(key, sizeof(key), "tp_long_%u_%d", i, oob->rank);
		ret = oob->put(oob->arg, key, want);
		if (ret)
			tst_fail(t, "put of a %zu-byte value: %d", lens[i], ret);
	}
	/* One past the limit is refused, not truncated. */
	make_value(want, max + 1, oob->rank, 99);
	err = tst_capture_begin(&cap, 0);
	ret = oob->put(oob->arg, "tp_too_long", want);
	if (!err)
		tst_capture_end(t, &cap, msg, sizeof(msg));
	if (ret != -EMSGSIZE)
		tst_fail(t, "put of value_max+1 bytes returned %d, not "
			 "-EMSGSIZE", ret);
	snprintf(expect, sizeof(expect), "PMI put: value of %zu bytes exceeds "
		 "the PMI server's limit of %zu", max + 1, max);
	if (err || !strstr(msg, expect))
		tst_fail(t, "message \"%s\" lacks \"%s\"", err ? "" : msg,
			 expect);
	TST_CHECK(t, oob->fence(oob->arg) == 0, "fence after long puts");
	for (p = 0; p < oob->size; p++) {
		for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			make_value(want, lens[i], p, (int)i);
			snprintf(key, sizeof(key), "tp_long_%u_%d", i, p);
			memset(got, 0, max + 2);
			ret = oob->get(oob->arg, key, got, max + 1);
			if (ret || strlen(got) != lens[i] || strcmp(got, want))
				tst_fail(t, "get %s (%zu bytes): ret %d, got "
					 "%zu bytes%s", key, lens[i], ret,
					 strlen(got), ret == 0 &&
					 strlen(got) == lens[i] ?
					 ", different" : "");
		}
	}
	/* A buffer one byte short: -EMSGSIZE, buffer untouched. */
	snprintf(key, sizeof(key), "tp_long_3_%d", (oob->rank + 1) % oob->size);
	memset(got, 'Z', max + 2);
	err = tst_capture_begin(&cap, 0);
	ret = oob->get(oob->arg, key, got, max);
	if (!err)
		tst_capture_end(t, &cap, msg, sizeof(msg));
	if (ret != -EMSGSIZE || got[0] != 'Z')
		tst_fail(t, "get into a too-small buffer returned %d", ret);
	if (err || !strstr(msg, "does not fit a buffer of"))
		tst_fail(t, "message \"%s\"", err ? "" : msg);
out:
	free(want);
	free(got);
	return 0;
}

static int pmi_barriers(struct tst *t)
{
	const rdmach_oob_t *oob = &t->oob;
	int next = (oob->rank + 1) % oob->size;
	char key[64], want[64], got[64];
	uint64_t t0;
	int i, ret;

	for (i = 0; i < ROUNDS; i++) {
		snprintf(key, sizeof(key), "tp_round_%d_%d", i, oob->rank);
		snprintf(want, sizeof(want), "%d:%d", i, oob->rank);
		if (oob->put(oob->arg, key, want))
			tst_fail(t, "round %d put", i);
		TST_CHECK(t, oob->fence(oob->arg) == 0, "round %d fence", i);
		/* The neighbour's put of this round must be visible now. */
		snprintf(key, sizeof(key), "tp_round_%d_%d", i, next);
		snprintf(want, sizeof(want), "%d:%d", i, next);
		ret = oob->get(oob->arg, key, got, sizeof(got));
		if (ret || strcmp(got, want))
			tst_fail(t, "round %d: get %s: ret %d \"%s\"", i, key,
				 ret, ret ? "" : got);
	}
	t0 = rdmach_now_ns();
	for (i = 0; i < ROUNDS; i++)
		TST_CHECK(t, oob->fence(oob->arg) == 0, "bare fence %d", i);
	if (oob->rank == 0)
		printf("  fence: %.1f us on average over %d ranks\n",
		       (double)(rdmach_now_ns() - t0) / ROUNDS / 1e3, oob->size);
	return 0;
}

static int pmi_errors(struct tst *t)
{
	const rdmach_oob_t *oob = &t->oob;
	int ret_get, ret_space, ret_empty, ret_newline, ret_long, err;
	struct tst_capture cap;
	char got[64], msg[2048] = "";

	err = tst_capture_begin(&cap, 0);
	ret_get = oob->get(oob->arg, "tp_no_such_key", got, sizeof(got));
	ret_space = oob->put(oob->arg, "bad key", "v");
	ret_empty = oob->put(oob->arg, "", "v");
	ret_newline = oob->put(oob->arg, "tp_k", "a\nb");
	ret_long = oob->put(oob->arg, "tp_0123456789012345678901234567890123456789012345678901234567890123",
			    "v");
	if (!err)
		tst_capture_end(t, &cap, msg, sizeof(msg));
	if (ret_get != -ENOENT)
		tst_fail(t, "get of a missing key returned %d, not -ENOENT",
			 ret_get);
	if (ret_space != -EINVAL)
		tst_fail(t, "a key with a space is accepted");
	if (ret_empty != -EINVAL)
		tst_fail(t, "an empty key is accepted");
	if (ret_newline != -EINVAL)
		tst_fail(t, "a value with a newline is accepted");
	if (ret_long != -EMSGSIZE)
		tst_fail(t, "a key over keylen_max is accepted");
	/* the rc is the server's: Hydra's -1, Slurm's 1 (with no msg) */
	if (!strstr(msg, "PMI get of key tp_no_such_key failed: rc=-1") &&
	    !strstr(msg, "PMI get of key tp_no_such_key failed: rc=1"))
		tst_fail(t, "no clear message for a missing key: \"%s\"", msg);
	if (!strstr(msg, "character 0x20 at offset 3 of a key"))
		tst_fail(t, "no clear message for a bad key: \"%s\"", msg);
	/* The connection still works after the refusals. */
	snprintf(got, sizeof(got), "after-errors-%d", oob->rank);
	if (oob->put(oob->arg, "tp_after_errors", got))
		tst_fail(t, "put after errors");
	TST_CHECK(t, oob->fence(oob->arg) == 0, "fence after errors");
	return 0;
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

static int pid_report_fd = -1;	/* CH_SLEEP_REPORT writes its pid */

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

		if (write(pid_report_fd, &me, sizeof(me)) != sizeof(me))
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

/* ===================== a scripted PMI server =========================== */

/* The cases below (fake_*) play a hostile or broken PMI server: a child
 * process reads the client's request lines and answers each with the next
 * scripted reply, verbatim (several lines, or a line without its end);
 * FAKE_SILENT reads the request, answers nothing and closes the socket
 * 3 s later, so that a client without a timeout fails instead of hanging.
 * After the last reply the server shuts its side: a client that waits for
 * more reads the end of the connection. */
#define FAKE_SILENT ((const char *)1)
/* FAKE_PUT_LINE answers a put as Slurm's PMI-1 server can only if its line
 * fits one read of 1024 bytes: rc=0, else rc=1 naming the length. */
#define FAKE_PUT_LINE ((const char *)2)
#define FAKE_INIT "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
#define FAKE_MAXES "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n"
#define FAKE_KVS "cmd=my_kvsname kvsname=kvs_fake\n"
#define FAKE_FIN "cmd=finalize_ack\n"

static void fake_serve(int fd, const char *const *replies)
{
	char line[4096];

	for (; *replies; replies++) {
		if (raw_line(fd, line, sizeof(line)))
			_exit(0);
		if (*replies == FAKE_SILENT) {
			sleep(3);
			_exit(0);
		}
		if (*replies == FAKE_PUT_LINE) {
			char rep[128];
			size_t n = strlen(line) + 1;

			snprintf(rep, sizeof(rep), n <= 1024 ?
				 "cmd=put_result rc=0\n" :
				 "cmd=put_result rc=1 msg=line_of_%zu_bytes\n", n);
			if (raw_send(fd, rep))
				_exit(0);
			continue;
		}
		if (raw_send(fd, *replies))
			_exit(0);
	}
	shutdown(fd, SHUT_WR);
	while (read(fd, line, sizeof(line)) > 0)
		;
	_exit(0);
}

/* Start the server; the client's end is PMI_FD of rank 0 of size. */
static pid_t fake_start(const char *const *replies, const char *size)
{
	char fd[16];
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		fake_serve(sv[1], replies);
	}
	close(sv[1]);
	snprintf(fd, sizeof(fd), "%d", sv[0]);
	setenv("PMI_FD", fd, 1);
	setenv("PMI_RANK", "0", 1);
	setenv("PMI_SIZE", size, 1);
	return pid;
}

static void fake_end(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	unsetenv("PMI_FD");
	unsetenv("PMI_RANK");
	unsetenv("PMI_SIZE");
}

/* What a case does under the scripted server after rdmach_pmi_init. */
enum fake_act {
	FAKE_ACT_INIT,		/* nothing more */
	FAKE_ACT_PUT,		/* put k=v */
	FAKE_ACT_BARRIER,	/* rdmach_pmi_barrier */
	FAKE_ACT_GETS,		/* get k1, then k2 */
	FAKE_ACT_RDMACH,	/* rdmach_init on the PMI oob */
	FAKE_ACT_PUT_MAX,	/* put value_max bytes with the longest key,
				 * then one byte more */
};

struct fake_run {
	enum fake_act act;
	const char *size;	/* PMI_SIZE */
	int ret[2];		/* init's or the action's error; k2's get */
	char val[2][64];	/* FAKE_ACT_GETS: the values */
	double secs;		/* how long the action took */
	char msg[2048];		/* what was printed */
};

static int fake_act(struct fake_run *run, rdmach_pmi_t *pmi,
		    const rdmach_oob_t *oob)
{
	rdmach_ctx_t *ctx = NULL;
	int ret;

	switch (run->act) {
	case FAKE_ACT_PUT:
		return oob->put(oob->arg, "k", "v");
	case FAKE_ACT_BARRIER:
		return rdmach_pmi_barrier(pmi);
	case FAKE_ACT_GETS:
		ret = oob->get(oob->arg, "k1", run->val[0], 64);
		run->ret[1] = oob->get(oob->arg, "k2", run->val[1], 64);
		return ret;
	case FAKE_ACT_PUT_MAX: {
		char key[64], *val = malloc(oob->value_max + 2);

		if (!val)
			return -ENOMEM;
		memset(key, 'k', 63);
		key[63] = '\0';
		memset(val, 'v', oob->value_max + 1);
		val[oob->value_max] = '\0';
		ret = oob->put(oob->arg, key, val);
		val[oob->value_max] = 'v';
		val[oob->value_max + 1] = '\0';
		run->ret[1] = oob->put(oob->arg, key, val);
		snprintf(run->val[0], sizeof(run->val[0]), "%zu",
			 oob->value_max);
		free(val);
		return ret;
	}
	case FAKE_ACT_RDMACH:
		ret = rdmach_init(&ctx, oob);
		if (ctx)
			rdmach_finalize(&ctx);
		return ret;
	default:
		return 0;
	}
}

/* Init and run->act under a server answering with replies, stderr
 * captured; the client finalizes. */
static void fake_run(struct tst *t, const char *const *replies,
		     struct fake_run *run)
{
	pid_t pid = fake_start(replies, run->size ? run->size : "1");
	struct tst_capture cap;
	rdmach_pmi_t *pmi = NULL;
	rdmach_oob_t oob;
	uint64_t t0;
	int err = tst_capture_begin(&cap, 0);

	run->ret[1] = -1;
	run->val[0][0] = run->val[1][0] = run->msg[0] = '\0';
	run->ret[0] = pid < 0 ? -ECHILD : rdmach_pmi_init(&pmi, &oob);
	t0 = rdmach_now_ns();
	if (!run->ret[0])
		run->ret[0] = fake_act(run, pmi, &oob);
	run->secs = (double)(rdmach_now_ns() - t0) / 1e9;
	if (!run->ret[0] || pmi)
		rdmach_pmi_finalize(pmi);
	if (!err)
		tst_capture_end(t, &cap, run->msg, sizeof(run->msg));
	fake_end(pid);
}

/* A server that stops answering: -ETIMEDOUT after the knob's time, and a
 * message naming the command waited for and the timeout. */
static int fake_timeout(struct tst *t)
{
	static const char *const silent[] = { FAKE_INIT, FAKE_MAXES,
					      FAKE_KVS, FAKE_SILENT, NULL };
	struct fake_run run = { .act = FAKE_ACT_PUT };

	setenv("RDMACH_PMI_TIMEOUT_MS", "300", 1);
	fake_run(t, silent, &run);
	unsetenv("RDMACH_PMI_TIMEOUT_MS");
	TST_CHECK(t, run.ret[0] == -ETIMEDOUT && run.secs >= 0.29 &&
		  run.secs < 2.5, "put to a silent server: %d (%s) after "
		  "%.2f s", run.ret[0], tst_errname(run.ret[0]), run.secs);
	TST_CHECK(t, strstr(run.msg, "PMI put: no reply (cmd=put_result) from "
			    "the PMI server within 300 ms "
			    "(RDMACH_PMI_TIMEOUT_MS)"),
		  "put timeout message: \"%.300s\"", run.msg);

	run.act = FAKE_ACT_BARRIER;
	setenv("RDMACH_PMI_FENCE_TIMEOUT_MS", "300", 1);
	fake_run(t, silent, &run);
	unsetenv("RDMACH_PMI_FENCE_TIMEOUT_MS");
	TST_CHECK(t, run.ret[0] == -ETIMEDOUT && run.secs >= 0.29 &&
		  run.secs < 2.5, "barrier with a silent server: %d (%s) "
		  "after %.2f s", run.ret[0], tst_errname(run.ret[0]),
		  run.secs);
	TST_CHECK(t, strstr(run.msg, "PMI barrier: no reply (cmd=barrier_out) "
			    "from the PMI server within 300 ms "
			    "(RDMACH_PMI_FENCE_TIMEOUT_MS)"),
		  "barrier timeout message: \"%.300s\"", run.msg);
	return 0;
}

/* An endless reply line after huge announced maxima: refused once past
 * what the (clamped) maxima allow, not buffered. */
static int fake_long_line(struct tst *t)
{
	const size_t big = 4u << 20;
	char *line = malloc(big + 1);
	const char *replies[] = { FAKE_INIT,
		"cmd=maxes kvsname_max=256 keylen_max=64 "
		"vallen_max=99999999999999\n", line, NULL };
	struct fake_run run = { .act = FAKE_ACT_INIT };

	if (!line)
		return tst_fail(t, "malloc");
	memset(line, 'a', big);
	line[big] = '\0';
	fake_run(t, replies, &run);
	free(line);
	TST_CHECK(t, run.ret[0] == -EMSGSIZE, "a 4 MiB reply line: %d (%s)",
		  run.ret[0], tst_errname(run.ret[0]));
	TST_CHECK(t, strstr(run.msg, "PMI get_my_kvsname: reply "
			    "(cmd=my_kvsname expected) longer than 66368 "
			    "bytes"), "long line message: \"%.300s\"", run.msg);
	return 0;
}

/* A first reply that holds a second line (a newline inside a value) is a
 * protocol error, and the stale line answers nothing: the connection is
 * out of step, later requests are refused. */
static int fake_lock_step(struct tst *t)
{
	static const char *const replies[] = { FAKE_INIT, FAKE_MAXES, FAKE_KVS,
		"cmd=get_result rc=0 msg=success value=abc\n"
		"cmd=get_result rc=0 msg=success value=STALE\n",
		"cmd=get_result rc=0 msg=success value=fresh\n", FAKE_FIN,
		NULL };
	struct fake_run run = { .act = FAKE_ACT_GETS };

	fake_run(t, replies, &run);
	TST_CHECK(t, run.ret[0] == -EPROTO &&
		  strstr(run.msg, "PMI get: the PMI server sent more than one "
			 "line in reply"), "a two-line reply: %d (%s) \"%s\", "
		  "message \"%.300s\"", run.ret[0], tst_errname(run.ret[0]),
		  run.val[0], run.msg);
	TST_CHECK(t, run.ret[1] == -EPROTO &&
		  strstr(run.msg, "PMI get: not sent: an earlier exchange with "
			 "the PMI server failed"), "the get after it: %d (%s) "
		  "\"%s\" (a stale line taken as its reply?)", run.ret[1],
		  tst_errname(run.ret[1]), run.val[1]);
	return 0;
}

/* The server's text reaches messages escaped: no control character. */
static int fake_escape(struct tst *t)
{
	static const char *const replies[] = { FAKE_INIT, FAKE_MAXES, FAKE_KVS,
		"cmd=get_result rc=-1 msg=\033]0;pwned\007\n",
		"cmd=\033[2Jbogus\n", FAKE_FIN, NULL };
	struct fake_run run = { .act = FAKE_ACT_GETS };

	fake_run(t, replies, &run);
	TST_CHECK(t, run.ret[0] == -ENOENT && run.ret[1] == -EPROTO,
		  "gets: %d (%s), %d (%s)", run.ret[0],
		  tst_errname(run.ret[0]), run.ret[1],
		  tst_errname(run.ret[1]));
	TST_CHECK(t, strstr(run.msg, "rc=-1 (\\x1b]0;pwned\\x07)") &&
		  strstr(run.msg, "expected cmd=get_result from the PMI "
			 "server, got \"cmd=\\x1b[2Jbogus\""),
		  "the server's text not quoted escaped: \"%.400s\"", run.msg);
	TST_CHECK(t, !strchr(run.msg, '\033') && !strchr(run.msg, '\007'),
		  "a control character reached the message: \"%.400s\"",
		  run.msg);
	return 0;
}

/* Every refusal of what the server announced says what, the value and the
 * limit. */
static int fake_limits(struct tst *t)
{
	static const char *const small[] = { FAKE_INIT,
		"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=64\n",
		FAKE_KVS, FAKE_FIN, NULL };
	static const char *const junk[] = { FAKE_INIT,
		"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=2000junk\n",
		NULL };
	static const char *const ok[] = { FAKE_INIT, FAKE_MAXES, FAKE_KVS,
					  FAKE_FIN, NULL };
	static const char *const bad_sizes[] = { " 2", "+2", "2 ", "0x2",
						 "2147483648",
						 "99999999999999999999" };
	struct fake_run run = { .act = FAKE_ACT_RDMACH };
	size_t i;

	fake_run(t, small, &run);
	TST_CHECK(t, run.ret[0] == -EINVAL &&
		  strstr(run.msg, "the oob carries values of 63 bytes at most; "
			 "rdmach needs 64"), "vallen_max=64: %d (%s), message "
		  "\"%.300s\"", run.ret[0], tst_errname(run.ret[0]), run.msg);
	run.size = "2147483647";
	fake_run(t, ok, &run);
	TST_CHECK(t, run.ret[0] == -EINVAL &&
		  strstr(run.msg, "rank 0 of size 2147483647: the size must be "
			 "1 to 16777216"), "PMI_SIZE=2^31-1: %d (%s), message "
		  "\"%.300s\"", run.ret[0], tst_errname(run.ret[0]), run.msg);
	/* decimal digits only, within an int: no blank, sign, overflow */
	for (i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		run.size = bad_sizes[i];
		fake_run(t, ok, &run);
		TST_CHECK(t, run.ret[0] == -EINVAL &&
			  strstr(run.msg, "is not a number from 1 to "
				 "2147483647"), "PMI_SIZE=\"%s\": %d (%s), "
			  "message \"%.300s\"", bad_sizes[i], run.ret[0],
			  tst_errname(run.ret[0]), run.msg);
	}
	run.size = NULL;
	fake_run(t, junk, &run);
	TST_CHECK(t, run.ret[0] == -EPROTO &&
		  strstr(run.msg, "PMI get_maxes: vallen_max=2000junk is "
			 "missing or not a number"), "vallen_max=2000junk: %d "
		  "(%s), message \"%.300s\"", run.ret[0],
		  tst_errname(run.ret[0]), run.msg);
	return 0;
}

/* Slurm's PMI-1 server announces vallen_max=1024 but reads a request in
 * one read of 1024 bytes: the longest put (value_max bytes, the longest
 * key) must fit that line, and one byte more is refused before it is
 * sent (a longer line would reach Slurm cut: its value truncated). */
static int fake_line_limit(struct tst *t)
{
	static const char *const replies[] = { FAKE_INIT, FAKE_MAXES, FAKE_KVS,
		FAKE_PUT_LINE, FAKE_FIN, NULL };
	struct fake_run run = { .act = FAKE_ACT_PUT_MAX };
	/* "cmd=put kvsname=kvs_fake key=" + 63 + " value=" + v + "\n" */
	size_t want = 1024 - (strlen("cmd=put kvsname=kvs_fake key=") + 63 +
			      strlen(" value=") + 1);
	char expect[128];

	fake_run(t, replies, &run);
	TST_CHECK(t, run.ret[0] == 0, "put of value_max bytes, the longest "
		  "key: %d (%s), message \"%.300s\"", run.ret[0],
		  tst_errname(run.ret[0]), run.msg);
	TST_CHECK(t, (size_t)atol(run.val[0]) == want, "value_max %s, not "
		  "%zu (a put line of 1024 bytes)", run.val[0], want);
	snprintf(expect, sizeof(expect), "PMI put: value of %zu bytes exceeds "
		 "the PMI server's limit of %zu", want + 1, want);
	TST_CHECK(t, run.ret[1] == -EMSGSIZE && strstr(run.msg, expect),
		  "put of value_max + 1 bytes: %d (%s), message \"%.300s\"",
		  run.ret[1], tst_errname(run.ret[1]), run.msg);
	return 0;
}

struct run {
	int ret;
	struct rdmach_launch_result res;
	double secs;
	char err[8192];		/* what the launcher wrote on stderr */
};

/* rdmach_launch with stderr captured in run->err. */
static void run_launch(struct tst *t, struct run *run, int nprocs,
		       unsigned timeout_s, int keep_going, int quiet,
		       enum child_mode mode, char *const argv[])
{
	struct rdmach_launch_opts opts = { nprocs, timeout_s, keep_going,
					   quiet };
	struct tst_capture cap;
	uint64_t t0;
	int err;

	memset(run, 0, sizeof(*run));
	err = tst_capture_begin(&cap, 0);
	t0 = rdmach_now_ns();
	run->ret = rdmach_launch(&opts, argv ? NULL : child_main, &mode, argv,
				 &run->res);
	run->secs = (double)(rdmach_now_ns() - t0) / 1e9;
	if (!err)
		tst_capture_end(t, &cap, run->err, sizeof(run->err));
}

static int launch_ok(struct tst *t)
{
	struct run run;
	int i, ok = 1;

	run_launch(t, &run, 3, 30, 0, 0, CH_EXCHANGE, NULL);
	for (i = 0; i < 3; i++)
		ok &= tst_status_is(run.res.status[i], 0);
	TST_CHECK(t, run.ret == 0 && ok && run.res.first_failed == -1 &&
		  run.res.exit_code == 0 && !run.res.timed_out,
		  "3-rank exchange: ret %d, statuses %#x %#x %#x, stderr: %s",
		  run.ret, run.res.status[0], run.res.status[1],
		  run.res.status[2], run.err);

	run_launch(t, &run, 32, 60, 0, 0, CH_EXCHANGE, NULL);
	for (i = 0, ok = 1; i < 32; i++)
		ok &= tst_status_is(run.res.status[i], 0);
	TST_CHECK(t, run.ret == 0 && ok, "32-rank exchange: ret %d, stderr: %s",
		  run.ret, run.err);
	printf("  32-rank put/fence/get-all: %.3f s\n", run.secs);

	run_launch(t, &run, 2, 30, 0, 0, CH_NO_PMI, NULL);
	TST_CHECK(t, run.ret == 0, "ranks without PMI: ret %d", run.ret);

	run_launch(t, &run, 2, 30, 0, 0, CH_RAW, NULL);
	TST_CHECK(t, run.ret == 0 && tst_status_is(run.res.status[0], 0) &&
		  tst_status_is(run.res.status[1], 0),
		  "raw protocol: ret %d, statuses %#x %#x, stderr: %s", run.ret,
		  run.res.status[0], run.res.status[1], run.err);

	run_launch(t, &run, 2, 30, 0, 0, CH_FINALIZED_PEER, NULL);
	TST_CHECK(t, run.ret == 0, "barrier after a peer finalized: ret %d, "
		  "statuses %#x %#x", run.ret, run.res.status[0],
		  run.res.status[1]);
	return 0;
}

static int launch_failures(struct tst *t)
{
	struct run run;
	int i, ok = 1;

	run_launch(t, &run, 4, 60, 0, 0, CH_FAIL_2, NULL);
	for (i = 0; i < 4; i++)
		if (i != 2)
			ok &= tst_status_is(run.res.status[i], -SIGTERM);
	TST_CHECK(t, run.ret == 1 && tst_status_is(run.res.status[2], 3) &&
		  ok && run.res.first_failed == 2 && run.res.exit_code == 3 &&
		  run.secs < 10,
		  "rank 2 exits 3: ret %d, first_failed %d, exit_code %d, "
		  "%.1f s", run.ret, run.res.first_failed, run.res.exit_code,
		  run.secs);
	TST_CHECK(t, strstr(run.err, "rank 2 (pid ") &&
		  strstr(run.err, "exited with status 3") &&
		  strstr(run.err, "killing the other 3 ranks"),
		  "failure report: \"%s\"", run.err);

	run_launch(t, &run, 4, 60, 0, 1, CH_FAIL_2, NULL);
	TST_CHECK(t, run.ret == 1 && !strstr(run.err, "rdmach_launch:"),
		  "quiet: ret %d, stderr \"%s\"", run.ret, run.err);

	run_launch(t, &run, 2, 60, 0, 0, CH_SIGKILL_1, NULL);
	TST_CHECK(t, run.ret == 1 &&
		  tst_status_is(run.res.status[1], -SIGKILL) &&
		  tst_status_is(run.res.status[0], -SIGTERM) &&
		  run.res.exit_code == 128 + SIGKILL && run.secs < 10,
		  "rank 1 SIGKILLed: ret %d, statuses %#x %#x, exit_code %d",
		  run.ret, run.res.status[0], run.res.status[1],
		  run.res.exit_code);
	TST_CHECK(t, strstr(run.err, "rank 1 (pid ") &&
		  strstr(run.err, "killed by signal 9"), "report: \"%s\"",
		  run.err);

	setenv("RDMACH_LAUNCH_KILL_GRACE_MS", "300", 1);
	run_launch(t, &run, 2, 60, 0, 1, CH_IGNORE_TERM, NULL);
	unsetenv("RDMACH_LAUNCH_KILL_GRACE_MS");
	TST_CHECK(t, run.ret == 1 && tst_status_is(run.res.status[0], 1) &&
		  tst_status_is(run.res.status[1], -SIGKILL) &&
		  run.secs >= 0.3 && run.secs < 10,
		  "SIGTERM ignored: ret %d, statuses %#x %#x, %.2f s", run.ret,
		  run.res.status[0], run.res.status[1], run.secs);

	run_launch(t, &run, 2, 1, 0, 0, CH_SLEEP, NULL);
	TST_CHECK(t, run.ret == 1 && run.res.timed_out &&
		  run.res.exit_code == 124 &&
		  tst_status_is(run.res.status[0], -SIGTERM) &&
		  tst_status_is(run.res.status[1], -SIGTERM) &&
		  run.secs >= 1.0 && run.secs < 5,
		  "timeout: ret %d, timed_out %d, exit_code %d, %.2f s",
		  run.ret, run.res.timed_out, run.res.exit_code, run.secs);
	TST_CHECK(t, strstr(run.err, "timeout after 1 s"),
		  "timeout report: \"%s\"", run.err);

	run_launch(t, &run, 3, 60, 1, 1, CH_KEEP_GOING, NULL);
	TST_CHECK(t, run.ret == 1 && tst_status_is(run.res.status[0], 5) &&
		  tst_status_is(run.res.status[1], 0) &&
		  tst_status_is(run.res.status[2], 0) &&
		  run.res.exit_code == 5 && run.secs < 10,
		  "keep going: ret %d, statuses %#x %#x %#x, %.1f s", run.ret,
		  run.res.status[0], run.res.status[1], run.res.status[2],
		  run.secs);

	run_launch(t, &run, 3, 60, 1, 0, CH_ABORT, NULL);
	TST_CHECK(t, run.ret == 1 && run.res.exit_code == 7 &&
		  run.res.first_failed == 1 && run.secs < 10 &&
		  strstr(run.err, "called PMI abort (exit code 7): test_abort"),
		  "abort: ret %d, exit_code %d, first_failed %d, %.1f s, "
		  "stderr \"%s\"", run.ret, run.res.exit_code,
		  run.res.first_failed, run.secs, run.err);

	run_launch(t, &run, 2, 60, 0, 1, CH_FAIL_AFTER_FIN, NULL);
	TST_CHECK(t, run.ret == 1 && tst_status_is(run.res.status[0], 4) &&
		  tst_status_is(run.res.status[1], 0) &&
		  run.res.exit_code == 4,
		  "failure after finalize must not kill: ret %d, statuses %#x "
		  "%#x", run.ret, run.res.status[0], run.res.status[1]);
	return 0;
}

static int launch_args(struct tst *t)
{
	char *const bad_prog[] = { "/nonexistent/rdmach_prog", NULL };
	struct rdmach_launch_opts opts = { 0 };
	struct run run;

	run_launch(t, &run, 2, 30, 0, 0, 0, bad_prog);
	TST_CHECK(t, run.ret == 1 && run.res.exit_code == 127 &&
		  strstr(run.err, "cannot execute /nonexistent/rdmach_prog"),
		  "exec failure: ret %d, exit_code %d, stderr \"%s\"", run.ret,
		  run.res.exit_code, run.err);

	opts.nprocs = 0;
	TST_CHECK(t, rdmach_launch(&opts, child_main, NULL, NULL, NULL) ==
		  -EINVAL, "nprocs 0 accepted");
	opts.nprocs = 257;
	TST_CHECK(t, rdmach_launch(&opts, child_main, NULL, NULL, NULL) ==
		  -EINVAL, "nprocs 257 accepted");
	opts.nprocs = 2;
	TST_CHECK(t, rdmach_launch(&opts, NULL, NULL, NULL, NULL) == -EINVAL,
		  "no fn and no argv accepted");
	TST_CHECK(t, rdmach_launch(NULL, child_main, NULL, NULL, NULL) ==
		  -EINVAL, "NULL opts accepted");
	return 0;
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
static int launcher_death(struct tst *t)
{
	pid_t launcher, ranks[2];
	int fds[2], i, left = 2;
	enum child_mode mode = CH_SLEEP_REPORT;
	uint64_t t0;

	TST_CHECK(t, pipe(fds) == 0, "pipe");
	fflush(NULL);
	launcher = fork();
	if (launcher == 0) {
		struct rdmach_launch_opts opts = { .nprocs = 2, .timeout_s = 60,
						   .quiet = 1 };

		close(fds[0]);
		pid_report_fd = fds[1];
		_exit(rdmach_launch(&opts, child_main, &mode, NULL, NULL));
	}
	close(fds[1]);
	for (i = 0; i < 2; i++)
		if (read(fds[0], &ranks[i], sizeof(ranks[i])) != sizeof(ranks[i]))
			break;
	close(fds[0]);
	kill(launcher, SIGKILL);
	waitpid(launcher, NULL, 0);
	TST_CHECK(t, i == 2, "the ranks did not report their pids");
	t0 = rdmach_now_ns();
	while (left && rdmach_now_ns() - t0 < 5000000000ull) {
		usleep(10000);
		for (i = 0, left = 0; i < 2; i++)
			left += process_alive(ranks[i]);
	}
	for (i = 0; left && i < 2; i++)
		kill(ranks[i], SIGKILL);
	TST_CHECK(t, !left, "%d rank(s) outlived a killed launcher", left);
	return 0;
}

/* The PMI cases again, in nprocs copies of this program started by
 * rdmach_launch_self() in a child process, which exits with the group's
 * result; *out gets what the group printed.  The wait status, or -1. */
static int run_self(struct tst *t, int nprocs, const char *fail_rank,
		    double *secs, char *out, size_t len)
{
	char *argv[] = { program_invocation_name, NULL };
	uint64_t t0 = rdmach_now_ns();
	struct tst_capture cap;
	int st = -1, err;
	pid_t pid;

	err = tst_capture_begin(&cap, 1);
	if (err)
		return tst_fail(t, "capturing the output: %s", strerror(-err));
	pid = fork();
	if (pid == 0) {
		if (fail_rank)
			setenv(FAIL_RANK_ENV, fail_rank, 1);
		rdmach_launch_self(1, argv, nprocs, 60);
		_exit(99);	/* launch_self must not return here */
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		st = -1;
	*secs = (double)(rdmach_now_ns() - t0) / 1e9;
	tst_capture_end(t, &cap, out, len);
	return st;
}

/* Show what a nested group printed, indented (its summary line is not
 * ours). */
static void print_indented(const char *s)
{
	const char *nl;

	for (; *s; s = nl + 1) {
		nl = strchr(s, '\n');
		if (!nl) {
			printf("    %s\n", s);
			break;
		}
		printf("    %.*s\n", (int)(nl - s), s);
	}
}

static int launch_self(struct tst *t);

static const struct tst_case pmi_cases[] = {
	{ "pmi_setup", 0, pmi_setup, TST_NO_CTX | TST_RAW_OOB, NULL, { 0 } },
	{ "pmi_exchange", 0, pmi_exchange, TST_NO_CTX | TST_RAW_OOB, NULL,
	  { 0 } },
	{ "pmi_long_values", 0, pmi_long_values, TST_NO_CTX | TST_RAW_OOB,
	  NULL, { 0 } },
	{ "pmi_barriers", 0, pmi_barriers, TST_NO_CTX | TST_RAW_OOB, NULL,
	  { 0 } },
	{ "pmi_errors", 0, pmi_errors, TST_NO_CTX | TST_RAW_OOB, NULL, { 0 } },
	{ "launch_ok", 1, launch_ok, TST_UNIT | TST_LAUNCH_ONLY, NULL, { 0 } },
	{ "launch_failures", 1, launch_failures, TST_UNIT | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
	{ "launch_args", 1, launch_args, TST_UNIT | TST_LAUNCH_ONLY, NULL,
	  { 0 } },
	{ "launcher_death", 1, launcher_death, TST_UNIT | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
	{ "launch_self", 1, launch_self, TST_UNIT | TST_LAUNCH_ONLY, NULL,
	  { 0 } },
	{ "fake_timeout", 1, fake_timeout, TST_UNIT | TST_LAUNCH_ONLY, NULL,
	  { 0 } },
	{ "fake_long_line", 1, fake_long_line, TST_UNIT | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
	{ "fake_lock_step", 1, fake_lock_step, TST_UNIT | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
	{ "fake_escape", 1, fake_escape, TST_UNIT | TST_LAUNCH_ONLY, NULL,
	  { 0 } },
	{ "fake_limits", 1, fake_limits, TST_UNIT | TST_LAUNCH_ONLY, NULL,
	  { 0 } },
	{ "fake_line_limit", 1, fake_line_limit, TST_UNIT | TST_LAUNCH_ONLY,
	  NULL, { 0 } },
};
#define PMI_NCASES ((int)(sizeof(pmi_cases) / sizeof(pmi_cases[0])))

static int launch_self(struct tst *t)
{
	char out[16384], summary[64], want[68];
	int st, i, npmi = 0;
	double secs = 0;

	/* Under a PMI server the kit runs exactly the cases it may run
	 * there: the PMI cases. */
	for (i = 0; i < PMI_NCASES; i++)
		npmi += !(pmi_cases[i].flags & TST_LAUNCH_ONLY);
	snprintf(summary, sizeof(summary), "%d passed, 0 failed", npmi);
	snprintf(want, sizeof(want), "\n%s\n", summary);

	printf("  self-launch, 4 ranks:\n");
	st = run_self(t, 4, NULL, &secs, out, sizeof(out));
	print_indented(out);
	TST_CHECK(t, tst_status_is(st, 0) && strstr(out, want),
		  "rdmach_launch_self with 4 ranks: status %#x, no \"%s\"", st,
		  summary);
	printf("  self-launch, 1 rank:\n");
	st = run_self(t, 1, NULL, &secs, out, sizeof(out));
	print_indented(out);
	TST_CHECK(t, tst_status_is(st, 0) && strstr(out, want),
		  "rdmach_launch_self with 1 rank: status %#x, no \"%s\"", st,
		  summary);
	printf("  self-launch, rank 2 of 3 exits 3 (expect a report):\n");
	st = run_self(t, 3, "2", &secs, out, sizeof(out));
	print_indented(out);
	TST_CHECK(t, tst_status_is(st, 1) && secs < 10 &&
		  strstr(out, "rank 2 (pid ") &&
		  strstr(out, "exited with status 3"),
		  "rdmach_launch_self with a failing rank: status %#x, %.1f s",
		  st, secs);
	return 0;
}

int main(int argc, char **argv)
{
	return tst_main(argc, argv, pmi_cases, PMI_NCASES);
}
