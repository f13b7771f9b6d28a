/*
 * rdmach_startup - what start-up costs, under a PMI server (rdmach_run -n N,
 * or mpiexec): rdmach_init + rdmach_connect, then a first 8-byte message
 * to each peer of a pattern and one back from each, every rank timed.
 *
 *   rdmach_run -n 8 build/bin/rdmach_startup [all|ring|pair|none]
 *
 *   all   every rank to every other (all pairs connect)
 *   ring  to rank+1 and from rank-1 (two connections per rank)
 *   pair  to and from rank^1 (one connection per rank)
 *   none  no message
 *
 * Rank 0 prints one line: N, RDMACH_CONNECT, the pattern and the slowest
 * rank's init+connect and first-message times in ms, and their sum:
 *   startup n=8 connect=demand pattern=ring connect_ms=.. first_ms=.. total_ms=..
 * BENCH_PROGRESS_MS=T then has rank 0 call rdmach_progress for T ms with
 * nothing to do, while the others wait, and print its CPU time per call,
 * the median, smallest and largest of 25 batches:
 *   progress n=8 connect=demand pattern=pair ns_per_call=.. min=.. max=..
 * RDMACH_STATS=1 adds each rank's counters (connections, out-of-band calls).
 * A second line gives the ranks' memory after the first messages, the
 * median and largest over the ranks, in kB (the kernel's figures: pinned,
 * which counts every registration, and proportional set size):
 *   memory n=8 connect=demand pattern=ring vmpin_kb=.. max=.. pss_kb=.. max=..
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_proc.h"
#include "rdmach.h"
#include "rdmach_pmi.h"

static double su_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t su_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int su_die(const char *what, int err)
{
	fprintf(stderr, "rdmach_startup: %s: %s\n", what, rdmach_strerror(err));
	exit(1);
}

/* Is peer p in the pattern of rank me (sends to it)? */
static int su_to(const char *pat, int me, int p, int n)
{
	if (p == me || !strcmp(pat, "none"))
		return 0;
	if (!strcmp(pat, "pair"))
		return p == (me ^ 1);
	return !strcmp(pat, "all") || p == (me + 1) % n;
}

/* One 8-byte message to every peer of the pattern, one from each. */
static void su_first(rdmach_ctx_t *ctx, const char *pat, int me, int n)
{
	uint64_t out = 0x5eed, in;
	int p, left = 0, *got = calloc((size_t)n, sizeof(int));
	int *sent = calloc((size_t)n, sizeof(int));

	if (!got || !sent)
		su_die("calloc", -ENOMEM);
	for (p = 0; p < n; p++)
		left += su_to(pat, me, p, n) + su_to(pat, p, me, n);
	while (left) {
		for (p = 0; p < n; p++) {
			struct iovec vo = { &out, 8 }, vi = { &in, 8 };
			rdmach_conn_t *c;
			ssize_t r;

			if (rdmach_conn(ctx, p, &c))
				su_die("rdmach_conn", -EINVAL);
			if (su_to(pat, me, p, n) && !sent[p]) {
				r = rdmach_put(c, &vo, 1);
				if (r < 0)
					su_die("put", (int)r);
				if (r == 8) {
					sent[p] = 1;
					left--;
				}
			}
			if (su_to(pat, p, me, n) && !got[p]) {
				r = rdmach_get(c, &vi, 1);
				if (r < 0)
					su_die("get", (int)r);
				if (r == 8) {	/* 8 bytes come whole here */
					got[p] = 1;
					left--;
				}
			}
		}
		rdmach_progress(ctx);
	}
	free(got);
	free(sent);
}

#define SU_BATCHES 25

/* CPU ns per idle rdmach_progress call over ms of wall time. */
static double su_idle_progress(rdmach_ctx_t *ctx, uint64_t ms)
{
	uint64_t end = su_ns(CLOCK_MONOTONIC) + ms * 1000000u, calls = 0;
	uint64_t cpu0 = su_ns(CLOCK_PROCESS_CPUTIME_ID);
	int i, ret;

	do {
		for (i = 0; i < 256; i++) {
			ret = rdmach_progress(ctx);
			if (ret)
				su_die("rdmach_progress", ret);
		}
		calls += 256;
	} while (su_ns(CLOCK_MONOTONIC) < end);
	return (double)(su_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / (double)calls;
}

static int su_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of n values (sorted in place). */
static double su_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), su_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* BENCH_PROGRESS_MS: rank 0's idle cost, in SU_BATCHES batches, while the
 * others wait in the fence (asleep: with more ranks than cores, spinning
 * ranks would time each other's preemption). */
static void su_progress(rdmach_ctx_t *ctx, rdmach_oob_t *oob, const char *pat,
			const char *mode, uint64_t ms)
{
	double ns[SU_BATCHES];
	int b;

	oob->fence(oob->arg);	/* every first message is in */
	if (oob->rank == 0) {
		for (b = 0; b < SU_BATCHES; b++)
			ns[b] = su_idle_progress(ctx, ms / SU_BATCHES + 1);
		qsort(ns, SU_BATCHES, sizeof(*ns), su_cmp);
		printf("progress n=%d connect=%s pattern=%s ns_per_call=%.1f "
		       "min=%.1f max=%.1f\n", oob->size, mode ? mode : "all",
		       pat, ns[SU_BATCHES / 2], ns[0], ns[SU_BATCHES - 1]);
	}
	oob->fence(oob->arg);
}

int main(int argc, char **argv)
{
	const char *pat = argc > 1 ? argv[1] : "ring";
	const char *mode = getenv("RDMACH_CONNECT");
	const char *pms = getenv("BENCH_PROGRESS_MS");
	char key[32], val[64];
	double t0, t1, t2, cmax = 0, fmax = 0, c, f, *pin, *pss;
	long pin_kb, pss_kb;
	rdmach_pmi_t *pmi;
	rdmach_oob_t oob;
	rdmach_ctx_t *ctx;
	int ret, r;

	ret = rdmach_pmi_init(&pmi, &oob);
	if (ret)
		su_die("rdmach_pmi_init", ret);
	rdmach_pmi_barrier(pmi);
	t0 = su_ms();
	ret = rdmach_init(&ctx, &oob);
	if (!ret)
		ret = rdmach_connect(ctx);
	if (ret)
		su_die("init/connect", ret);
	t1 = su_ms();
	su_first(ctx, pat, oob.rank, oob.size);
	t2 = su_ms();
	pin_kb = bench_proc_kb("status", "VmPin");
	pss_kb = bench_proc_kb("smaps_rollup", "Pss");
	snprintf(key, sizeof(key), "su-%d", oob.rank);
	snprintf(val, sizeof(val), "%.3f:%.3f:%ld:%ld", t1 - t0, t2 - t1,
		 pin_kb, pss_kb);
	oob.put(oob.arg, key, val);
	oob.fence(oob.arg);	/* also: nobody finalizes before all got */
	pin = calloc((size_t)oob.size, sizeof(*pin));
	pss = calloc((size_t)oob.size, sizeof(*pss));
	if (!pin || !pss)
		su_die("calloc", -ENOMEM);
	for (r = 0; oob.rank == 0 && r < oob.size; r++) {
		snprintf(key, sizeof(key), "su-%d", r);
		if (oob.get(oob.arg, key, val, sizeof(val)) ||
		    sscanf(val, "%lf:%lf:%lf:%lf", &c, &f, &pin[r],
			   &pss[r]) != 4)
			su_die("times", -EPROTO);
		cmax = c > cmax ? c : cmax;
		fmax = f > fmax ? f : fmax;
	}
	if (oob.rank == 0) {
		printf("startup n=%d connect=%s pattern=%s connect_ms=%.1f "
		       "first_ms=%.1f total_ms=%.1f\n", oob.size,
		       mode ? mode : "all", pat, cmax, fmax, cmax + fmax);
		printf("memory n=%d connect=%s pattern=%s vmpin_kb=%.0f ",
		       oob.size, mode ? mode : "all", pat,
		       su_median(pin, oob.size));
		printf("max=%.0f ", pin[oob.size - 1]);
		printf("pss_kb=%.0f ", su_median(pss, oob.size));
		printf("max=%.0f\n", pss[oob.size - 1]);
	}
	free(pin);
	free(pss);
	if (pms && atoi(pms) > 0)
		su_progress(ctx, &oob, pat, mode, (uint64_t)atoi(pms));
	rdmach_finalize(&ctx);
	rdmach_pmi_finalize(pmi);
	return 0;
}
