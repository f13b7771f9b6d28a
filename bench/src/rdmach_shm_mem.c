/*
 * rdmach_shm_mem - shared-memory footprint per node, MPI-free, under a PMI
 * server (rdmach_run -n N): node PSS (every rank's /proc/self/smaps_rollup
 * Pss, summed) after each phase:
 *
 *   connect    rdmach_init + rdmach_connect
 *   neighbours 16 messages of 4 KiB to rank-1 and rank+1, and from them
 *   alltoall   one 4 KiB message from every rank to every other
 *   256k       every pair: 16 deferred puts of 16 KiB (the bulk ring,
 *              as MPI send requests) and one put of 64 KiB (copy area)
 *   idle       BENCH_IDLE_MS of polls only, a get on every
 *              connection every millisecond (default 0: skipped)
 *
 *   rdmach_run -n 64 build/bin/rdmach_shm_mem [phases]   (default: all)
 *
 * Rank 0 prints one line per phase: "mem n=64 phase=alltoall pss_mib=..";
 * RDMACH_STATS=1 adds rank 0's counters at the end.
 *
 *   rdmach_run -n 2 build/bin/rdmach_shm_mem refill
 *
 * what getting the areas back costs: 5 rounds of BENCH_IDLE_MS (default
 * 300) of polls, then 256 KiB both ways in one message (copy area) and in
 * 16 deferred puts of 16 KiB (bulk ring), each timed on rank 0 ("refill
 * round=.. pipe_us=.. bulk_us=.."); compare RDMACH_SHM_IDLE_RELEASE_MS
 * below the idle time (areas given back) with 0 (kept).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rdmach.h"
#include "rdmach_pmi.h"

static char mem_buf[256 << 10];	/* the largest message */

static void mem_die(const char *what, int err)
{
	fprintf(stderr, "rdmach_shm_mem: %s: %s\n", what, rdmach_strerror(err));
	exit(1);
}

static long mem_pss_kib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

struct mem_flow {
	size_t out, in;		/* bytes still to send / to receive */
	size_t msg_off;		/* offset in the message being sent */
};

/* Send `bytes` in messages of `msg` to every peer that want() picks, and
 * receive as much from every peer that picks this rank. */
static void mem_exchange(rdmach_ctx_t *ctx, int me, int n, size_t bytes,
			 size_t msg, int deferred,
			 int (*want)(int from, int to, int n))
{
	struct mem_flow *fl = calloc((size_t)n, sizeof(*fl));
	size_t left = 0;
	int p;

	if (!fl)
		mem_die("calloc", -ENOMEM);
	for (p = 0; p < n; p++) {
		if (p == me)
			continue;
		fl[p].out = want(me, p, n) ? bytes : 0;
		fl[p].in = want(p, me, n) ? bytes : 0;
		left += fl[p].out + fl[p].in;
	}
	while (left) {
		/* sleep when idle only where ranks share CPUs */
		int moved = 0, armed = n > 2 ? rdmach_wait_arm(ctx) : -1;

		for (p = 0; p < n; p++) {
			struct mem_flow *f = &fl[p];
			rdmach_conn_t *c;
			ssize_t r;

			if (p == me || (!f->out && !f->in))
				continue;
			if (rdmach_conn(ctx, p, &c))
				mem_die("rdmach_conn", -EINVAL);
			if (f->out) {
				struct iovec v = { mem_buf + f->msg_off,
						   msg - f->msg_off };
				uint64_t t;

				r = deferred ? rdmach_put_deferred(c, &v, 1, &t)
					     : rdmach_put(c, &v, 1);
				if (r < 0)
					mem_die("put", (int)r);
				f->out -= (size_t)r;
				f->msg_off = (f->msg_off + (size_t)r) % msg;
				left -= (size_t)r;
				moved |= r > 0;
			}
			if (f->in) {
				struct iovec v = { mem_buf, f->in < msg ?
						   f->in : msg };

				r = rdmach_get(c, &v, 1);
				if (r < 0)
					mem_die("get", (int)r);
				f->in -= (size_t)r;
				left -= (size_t)r;
				moved |= r > 0;
			}
		}
		if (armed >= 0)
			rdmach_wait(ctx, moved ? 0 : 1000);
	}
	for (p = 0; p < n; p++) {
		rdmach_conn_t *c;
		uint64_t done;

		if (p == me || rdmach_conn(ctx, p, &c))
			continue;
		while (rdmach_put_done(c, &done) > 0)
			rdmach_progress(ctx);
	}
	free(fl);
}

static int mem_neigh(int from, int to, int n)
{
	return to == (from + 1) % n || from == (to + 1) % n;
}

static int mem_all(int from, int to, int n)
{
	return from != to;
}

/* Every rank's PSS summed by rank 0, printed for this phase. */
static void mem_report(rdmach_oob_t *oob, const char *phase, int round)
{
	char key[32], val[32];
	long sum = 0, v;
	int r;

	snprintf(key, sizeof(key), "mem-%d-%d", round, oob->rank);
	snprintf(val, sizeof(val), "%ld", mem_pss_kib());
	oob->put(oob->arg, key, val);
	oob->fence(oob->arg);
	for (r = 0; oob->rank == 0 && r < oob->size; r++) {
		snprintf(key, sizeof(key), "mem-%d-%d", round, r);
		if (oob->get(oob->arg, key, val, sizeof(val)) ||
		    sscanf(val, "%ld", &v) != 1 || v < 0)
			mem_die("pss", -EPROTO);
		sum += v;
	}
	if (oob->rank == 0)
		printf("mem n=%d phase=%s pss_mib=%.1f\n", oob->size, phase,
		       (double)sum / 1024);
	fflush(stdout);
}

static double mem_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Polls only (an idle MPI progress engine): a get on every connection
 * every millisecond for ms. */
static void mem_idle(rdmach_ctx_t *ctx, int me, int n, int ms)
{
	double end = mem_us() + ms * 1e3;
	int p;

	while (mem_us() < end) {
		for (p = 0; p < n; p++) {
			rdmach_conn_t *c;
			struct iovec v = { mem_buf, 1 };

			if (p != me && !rdmach_conn(ctx, p, &c))
				rdmach_get(c, &v, 1);
		}
		usleep(1000);
	}
}

static void mem_refill(rdmach_ctx_t *ctx, rdmach_oob_t *oob, int ms)
{
	double t0, t1, t2;
	int r;

	for (r = 0; r < 5; r++) {
		mem_idle(ctx, oob->rank, oob->size, ms);
		oob->fence(oob->arg);
		t0 = mem_us();
		mem_exchange(ctx, oob->rank, oob->size, 256 << 10, 256 << 10,
			     0, mem_all);
		t1 = mem_us();
		mem_exchange(ctx, oob->rank, oob->size, 256 << 10, 16 << 10,
			     1, mem_all);
		t2 = mem_us();
		if (oob->rank == 0)
			printf("refill round=%d pipe_us=%.1f bulk_us=%.1f\n",
			       r, t1 - t0, t2 - t1);
	}
}

static int mem_phase(const char *list, const char *p)
{
	return !list || strstr(list, p);
}

int main(int argc, char **argv)
{
	const char *list = argc > 1 ? argv[1] : NULL;
	const char *idle = getenv("BENCH_IDLE_MS");
	rdmach_pmi_t *pmi;
	rdmach_oob_t oob;
	rdmach_ctx_t *ctx;
	int ret, round = 0, me, n;

	ret = rdmach_pmi_init(&pmi, &oob);
	if (ret)
		mem_die("rdmach_pmi_init", ret);
	ret = rdmach_init(&ctx, &oob);
	if (!ret)
		ret = rdmach_connect(ctx);
	if (ret)
		mem_die("init/connect", ret);
	me = oob.rank;
	n = oob.size;
	memset(mem_buf, 0x5a, 64 << 10);	/* what the phases send from */
	if (list && !strcmp(list, "refill")) {
		mem_refill(ctx, &oob, idle ? atoi(idle) : 300);
		goto out;
	}
	mem_report(&oob, "connect", round++);
	if (mem_phase(list, "neighbours")) {
		mem_exchange(ctx, me, n, 64 << 10, 4096, 1, mem_neigh);
		mem_report(&oob, "neighbours", round++);
	}
	if (mem_phase(list, "alltoall")) {
		mem_exchange(ctx, me, n, 4096, 4096, 1, mem_all);
		mem_report(&oob, "alltoall", round++);
	}
	if (mem_phase(list, "256k")) {
		mem_exchange(ctx, me, n, 256 << 10, 16 << 10, 1, mem_all);
		mem_exchange(ctx, me, n, 64 << 10, 64 << 10, 0, mem_all);
		mem_report(&oob, "256k", round++);
	}
	if (idle && atoi(idle) > 0) {
		mem_idle(ctx, me, n, atoi(idle));
		mem_report(&oob, "idle", round++);
	}
	if (getenv("RDMACH_STATS") && me == 0)
		rdmach_print_stats(ctx, stdout);
out:
	oob.fence(oob.arg);
	rdmach_finalize(&ctx);
	rdmach_pmi_finalize(pmi);
	return 0;
}
