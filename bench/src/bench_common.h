/*
 * bench_common.h - what every benchmark of bench/ shares, rdmach or MPI:
 * options, iteration schedule, data patterns, clock and OSU-style output.
 * Plain libc only, so that the MPI benchmarks (built with mpicc) use it too.
 * Everything is static inline: each benchmark is a single translation unit.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_LARGE_MSG		8192	/* above: the "large" iteration counts */
#define BENCH_MAX_SIZE		(4u << 20)
#define BENCH_ACK_SIZE		4	/* the bandwidth test's reply */
#define BENCH_BW_BYTES_CAP	(2ull << 30)	/* bytes per size, bw test */
#define BENCH_LAT_BYTES_CAP	(256ull << 20)	/* bytes per size, latency */
#define BENCH_MAX_BATCHES	10000	/* -b 1000 -i 1000: per-iteration median, like perftest's t_typical */

enum bench_kind { BENCH_LATENCY, BENCH_BW };

struct bench_opts {
	enum bench_kind kind;
	const char *prog;
	int validate;		/* -v: check every byte received */
	int stats;		/* -S: print rdmach counters */
	const char *transport;	/* -t: shm|ib|auto, NULL = leave env alone */
	long iters, iters_large;	/* -i / -I */
	long warmup, warmup_large;	/* -x / -X */
	size_t min_size, max_size;	/* -m min:max */
	int window;		/* -w (bandwidth test) */
	unsigned timeout_s;	/* -T: launcher timeout and stall watchdog */
	int batches;		/* -b: report the median batch (1 = mean) */
	int pin;		/* -P: pin rank r to the r-th allowed CPU */
	int first_touch;	/* -F: fresh buffer per message (rdmach_bw) */
	size_t pool;		/* -C: cache-cold, messages walk a pool this big */
	int bidir;		/* -B: both directions at once (bandwidth) */
};

/* Timestamps at batch boundaries of the timed iterations. */
struct bench_clock {
	double t[BENCH_MAX_BATCHES + 1];
	int n;
	long per_batch;
};

static inline double bench_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/*
 * The clock of the timed loops.  On x86-64 the time-stamp counter,
 * calibrated once against CLOCK_MONOTONIC, as perftest's get_cycles:
 * reading it costs nanoseconds anywhere, where clock_gettime can be a
 * system call reading an emulated HPET (0.9 us in the Soft-RoCE VM) that
 * per-iteration timing (-b = -i) would add to every sample and perftest's
 * figures do not carry.  BENCH_CLOCK=monotonic uses clock_gettime.
 */
#if defined(__x86_64__)
static inline uint64_t bench_tsc(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

static inline double bench_stamp_us(void)
{
	static double us_per_tick = -1;	/* 0: use clock_gettime */

	if (us_per_tick < 0) {
		const char *c = getenv("BENCH_CLOCK");
		double t0, t1;
		uint64_t c0, c1;

		us_per_tick = 0;
		if (c && !strcmp(c, "monotonic"))
			return bench_now_us();
		t0 = bench_now_us();
		c0 = bench_tsc();
		do
			t1 = bench_now_us();
		while (t1 - t0 < 20000);	/* 20 ms */
		c1 = bench_tsc();
		if (c1 > c0)
			us_per_tick = (t1 - t0) / (double)(c1 - c0);
	}
	if (us_per_tick == 0)
		return bench_now_us();
	return (double)bench_tsc() * us_per_tick;
}
#else
static inline double bench_stamp_us(void)
{
	return bench_now_us();
}
#endif

/* A number with an optional binary suffix (K, M, G): "64K", "1G". */
static inline int bench_parse_suffixed(const char *s, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

/* A message size, at most 16 x BENCH_MAX_SIZE. */
static inline int bench_parse_size(const char *s, size_t *out)
{
	unsigned long long v;

	if (bench_parse_suffixed(s, &v) || v > BENCH_MAX_SIZE * 16ull)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

/* A size without the message-size cap, not 0: "256M", "1G". */
static inline int bench_parse_pool(const char *s, size_t *out)
{
	unsigned long long v;

	if (bench_parse_suffixed(s, &v) || v == 0)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

static inline int bench_parse_range(const char *s, size_t *lo, size_t *hi)
{
	char buf[64];
	char *colon;
	size_t a, b;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	colon = strchr(buf, ':');
	if (!colon) {		/* "-m N": N only */
		if (bench_parse_size(buf, &a))
			return -EINVAL;
		*lo = *hi = a;
		return 0;
	}
	*colon = '\0';
	a = 0;
	b = BENCH_MAX_SIZE;
	if ((*buf && bench_parse_size(buf, &a)) ||
	    (colon[1] && bench_parse_size(colon + 1, &b)) || a > b)
		return -EINVAL;
	*lo = a;
	*hi = b;
	return 0;
}

static inline void bench_usage(const struct bench_opts *o, FILE *f)
{
	fprintf(f,
		"usage: %s [options]\n"
		"  -m MIN:MAX  message sizes, powers of two (K/M suffixes; default %s:4M)\n"
		"  -i N        iterations for sizes <= %d B (default %ld)\n"
		"  -I N        iterations for larger sizes (default %ld, fewer above 1 MiB)\n"
		"  -x N / -X N warm-up iterations, small / large sizes (default %ld / %ld)\n"
		"  -w N        window: messages back to back per reply (bandwidth; default 64)\n"
		"  -v          validate: fill every message with a pattern, check every byte\n"
		"  -t T        transport shm|ib|auto (sets RDMACH_TRANSPORT; rdmach only)\n"
		"  -S          print the rdmach counters at the end (rdmach only)\n"
		"  -T SEC      give up after SEC seconds without progress, or after\n"
		"              10 x SEC in all (self-launched; default %u)\n"
		"  -b N        split the timed iterations in N batches, report the median\n"
		"              batch (robust to preemption on a busy host; default 1 =\n"
		"              the plain mean, as OSU)\n"
		"  -P          pin rank r to the r-th CPU this process may use (rdmach only)\n"
		"  -F          first touch: a fresh mmap'd buffer for every message\n"
		"              (rdmach_bw only)\n"
		"  -C POOL     cache-cold: message k goes from/to the k-th slice of a\n"
		"              POOL-byte buffer on each side (e.g. 256M, far above the\n"
		"              last-level cache), walked in order, instead of one\n"
		"              reused buffer\n"
		"  -B          bidirectional bandwidth: both ranks send a window at\n"
		"              once (bibw; MB/s counts both directions)\n"
		"  -h          this help\n",
		o->prog, o->kind == BENCH_LATENCY ? "0" : "1", BENCH_LARGE_MSG,
		o->iters, o->iters_large, o->warmup, o->warmup_large,
		o->timeout_s);
}

static inline long bench_parse_count(const char *s, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < 0) {
		fprintf(stderr, "bad %s: '%s'\n", what, s);
		exit(2);
	}
	return v;
}

/* Defaults follow the OSU micro-benchmarks (latency: 10000/1000 iterations,
 * bandwidth: window 64, 100/20 iterations). */
static inline void bench_parse(int argc, char **argv, enum bench_kind kind,
			       struct bench_opts *o)
{
	const char *slash = strrchr(argv[0], '/');
	int c;

	memset(o, 0, sizeof(*o));
	o->kind = kind;
	o->prog = slash ? slash + 1 : argv[0];
	o->iters = kind == BENCH_LATENCY ? 10000 : 100;
	o->iters_large = kind == BENCH_LATENCY ? 1000 : 20;
	o->warmup = kind == BENCH_LATENCY ? 200 : 10;
	o->warmup_large = kind == BENCH_LATENCY ? 20 : 2;
	o->min_size = kind == BENCH_LATENCY ? 0 : 1;
	o->max_size = BENCH_MAX_SIZE;
	o->window = 64;
	o->timeout_s = 300;
	o->batches = 1;
	while ((c = getopt(argc, argv, "m:i:I:x:X:w:vt:ST:b:PFC:Bh")) != -1) {
		switch (c) {
		case 'm':
			if (bench_parse_range(optarg, &o->min_size,
					      &o->max_size)) {
				fprintf(stderr, "bad size range '%s' (e.g. 8:1M)\n",
					optarg);
				exit(2);
			}
			break;
		case 'i': o->iters = bench_parse_count(optarg, "-i"); break;
		case 'I': o->iters_large = bench_parse_count(optarg, "-I"); break;
		case 'x': o->warmup = bench_parse_count(optarg, "-x"); break;
		case 'X': o->warmup_large = bench_parse_count(optarg, "-X"); break;
		case 'w': o->window = (int)bench_parse_count(optarg, "-w"); break;
		case 'v': o->validate = 1; break;
		case 't':
			if (strcmp(optarg, "shm") && strcmp(optarg, "ib") &&
			    strcmp(optarg, "auto")) {
				fprintf(stderr, "bad transport '%s' (shm|ib|auto)\n",
					optarg);
				exit(2);
			}
			o->transport = optarg;
			break;
		case 'S': o->stats = 1; break;
		case 'T': o->timeout_s = (unsigned)bench_parse_count(optarg, "-T"); break;
		case 'b': o->batches = (int)bench_parse_count(optarg, "-b"); break;
		case 'P': o->pin = 1; break;
		case 'F': o->first_touch = 1; break;
		case 'C':
			if (bench_parse_pool(optarg, &o->pool)) {
				fprintf(stderr, "bad pool size '%s' (e.g. 256M)\n",
					optarg);
				exit(2);
			}
			break;
		case 'B': o->bidir = 1; break;
		case 'h': bench_usage(o, stdout); exit(0);
		default: bench_usage(o, stderr); exit(2);
		}
	}
	if (optind != argc || o->window < 1 || o->iters < 1 ||
	    o->iters_large < 1 || o->batches < 1 ||
	    o->batches > BENCH_MAX_BATCHES) {
		bench_usage(o, stderr);
		exit(2);
	}
}

/* Iterations for one size: the large counts above BENCH_LARGE_MSG, and
 * fewer still when one size would move more than a cap of bytes. */
static inline void bench_iters(const struct bench_opts *o, size_t size,
			       long *iters, long *warmup)
{
	unsigned long long per_iter, cap;
	long n = o->iters, w = o->warmup;

	if (size > BENCH_LARGE_MSG) {
		n = o->iters_large;
		w = o->warmup_large;
	}
	if (o->kind == BENCH_LATENCY) {
		per_iter = 2ull * size;
		cap = BENCH_LAT_BYTES_CAP;
	} else {
		per_iter = (unsigned long long)o->window * size;
		cap = BENCH_BW_BYTES_CAP;
	}
	if (per_iter && (unsigned long long)n * per_iter > cap) {
		n = (long)(cap / per_iter);
		if (n < 4)
			n = 4;
		if (w > n / 4 + 1)
			w = n / 4 + 1;
	}
	/* Whole batches, so that both ranks run the same count. */
	if (o->batches > 1) {
		long per = n / o->batches > 0 ? n / o->batches : 1;

		n = n / per * per;
		if (n / per > o->batches)
			n = per * o->batches;
	}
	*iters = n;
	*warmup = w;
}

/* Call at every timed iteration i (0-based, after warm-up) and once more
 * with i == iters after the last one. */
static inline void bench_clock_tick(struct bench_clock *c,
				    const struct bench_opts *o, long iters,
				    long i)
{
	if (i == 0) {
		c->n = 0;
		c->per_batch = o->batches <= 1 ? iters :
			       iters >= o->batches ? iters / o->batches : 1;
	}
	if (i % c->per_batch == 0 && c->n <= BENCH_MAX_BATCHES)
		c->t[c->n++] = bench_stamp_us();
}

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median time of one iteration over the batches, in us. */
static inline double bench_clock_result(const struct bench_clock *c)
{
	static double d[BENCH_MAX_BATCHES];
	double x;
	int n = c->n - 1, a;

	if (n < 1)
		return 0;
	for (a = 0; a < n; a++)
		d[a] = c->t[a + 1] - c->t[a];
	qsort(d, (size_t)n, sizeof(d[0]), bench_cmp_double);
	x = n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
	return x / (double)c->per_batch;
}

/* Next power of two after size (0 -> 1). */
static inline size_t bench_next_size(size_t size)
{
	return size ? size * 2 : 1;
}

/* Pattern: bytes of consecutive seeds differ at every offset, so a
 * message left over from the previous iteration never passes the check. */
static inline uint8_t bench_pattern(size_t i, unsigned seed)
{
	return (uint8_t)((i ^ (i >> 8) ^ (i >> 16)) * 7u + seed);
}

static inline void bench_fill(void *buf, size_t len, unsigned seed)
{
	uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = bench_pattern(i, seed);
}

/* Offset of the first wrong byte, or -1 if all are right. */
static inline long bench_check(const void *buf, size_t len, unsigned seed)
{
	const uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != bench_pattern(i, seed))
			return (long)i;
	return -1;
}

/* The buffer of message k (counted over the whole run of one size): base
 * itself, or with -C the k-th slot of the pool at base, walked in order
 * and wrapping, so that every message touches memory that the last
 * pool bytes of traffic have pushed out of the caches.  Slots are a page
 * at least, so that small messages too land on lines (and pages) not
 * touched since the last lap. */
static inline char *bench_msg_buf(const struct bench_opts *o, char *base,
				  size_t size, unsigned long k)
{
	size_t slot = size > 4096 ? size : 4096, per;

	if (!o->pool)
		return base;
	per = o->pool / slot;
	return base + (per ? k % per : 0) * slot;
}

/* Bytes to allocate for messages up to max_size: the pool with -C. */
static inline size_t bench_buf_len(const struct bench_opts *o, size_t max_size)
{
	return o->pool > max_size ? o->pool : max_size;
}

/* " cache-cold pool 256 MiB" or "" for the header line. */
static inline const char *bench_mode_desc(const struct bench_opts *o)
{
	static char d[96];

	snprintf(d, sizeof(d), "%s%s", o->bidir ? ", bidirectional" : "",
		 o->pool ? ", cache-cold pool" : "");
	if (o->pool)
		snprintf(d + strlen(d), sizeof(d) - strlen(d), " %zu MiB",
			 o->pool >> 20);
	return d;
}

static inline void bench_print_header(const struct bench_opts *o,
				      const char *stack, const char *detail)
{
	if (o->kind == BENCH_LATENCY) {
		printf("# %s Latency Test v1 (%s%s)\n", stack, detail,
		       bench_mode_desc(o));
		printf("# Size          Latency (us)\n");
	} else {
		printf("# %s %s Test v1 (%s%s, window %d)\n", stack,
		       o->bidir ? "Bi-Directional Bandwidth" : "Bandwidth",
		       detail, bench_mode_desc(o), o->window);
		printf("# Size      Bandwidth (MB/s)\n");
	}
	fflush(stdout);
}

/* Two decimals as OSU prints them; BENCH_DIGITS=N (0-6) for more, when
 * sub-microsecond latencies are compared. */
static inline void bench_print_row(size_t size, double value)
{
	const char *d = getenv("BENCH_DIGITS");
	int digits = d && *d >= '0' && *d <= '6' && !d[1] ? *d - '0' : 2;

	printf("%-10zu %18.*f\n", size, digits, value);
	fflush(stdout);
}

/* Aligned to a page, so that results do not depend on malloc's offsets. */
static inline void *bench_alloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len ? len : 1)) {
		fprintf(stderr, "out of memory (%zu bytes)\n", len);
		exit(1);
	}
	memset(p, 0, len ? len : 1);
	return p;
}

#endif /* BENCH_COMMON_H */
