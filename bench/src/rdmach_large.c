/*
 * rdmach_large - ping-pong bandwidth of large messages in the style of
 * Denis' Fig. 7 (Euro-Par 2011): for each size, the FIRST round trip on
 * fresh buffers and the BEST of many round trips on a reused buffer.
 *
 *   rdmach_large [-m 16K:16M] [-i 100] [-f 10] [-c 256M] [-t ib] [-S] [-v]
 *
 * first  -f times: both ranks map a fresh buffer (mmap, every page written
 *        before the clock starts: page faults are not the protocol's),
 *        rank 1 says it is ready, rank 0 times put + get of the size, rank
 *        1 gets it and puts it back from the same buffer; both unmap it
 *        (the registration cache sees the release).  Each of these round
 *        trips is a first touch; the best and the median are printed.
 * reused -i round trips (at most -c bytes each way per size) on one
 *        buffer per rank; the best and the median.
 * Bandwidth: size / (round trip / 2), MB/s = 10^6 B/s.  The protocol is
 * whatever RDMACH_LARGE selects (auto, zcopy, superpipeline, pipeline).
 * -v fills and checks every message (timed: for correctness runs).
 * Starts two copies of itself when not under a PMI server.
 */
#include "rdmach_bench.h"

#include <sys/mman.h>

struct lg_opts {
	size_t min, max;
	long reused, fresh;
	size_t cap;		/* bytes per size and direction, reused */
	int validate, stats;
	const char *transport;
};

static void lg_usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-m MIN:MAX] [-i reused] [-f fresh] "
		"[-c cap] [-t shm|ib|auto] [-S] [-v]\n", prog);
	exit(2);
}

static void lg_parse(int argc, char **argv, struct lg_opts *o,
		     struct bench_opts *bo)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->min = 16u << 10;
	o->max = 16u << 20;
	o->reused = 100;
	o->fresh = 10;
	o->cap = 256u << 20;
	while ((c = getopt(argc, argv, "m:i:f:c:t:Sv")) != -1) {
		switch (c) {
		case 'm':
			if (bench_parse_range(optarg, &o->min, &o->max) ||
			    !o->min)
				lg_usage(argv[0]);
			break;
		case 'i': o->reused = bench_parse_count(optarg, "-i"); break;
		case 'f': o->fresh = bench_parse_count(optarg, "-f"); break;
		case 'c':
			if (bench_parse_size(optarg, &o->cap))
				lg_usage(argv[0]);
			break;
		case 't': o->transport = optarg; break;
		case 'S': o->stats = 1; break;
		case 'v': o->validate = 1; break;
		default: lg_usage(argv[0]);
		}
	}
	if (optind != argc || o->reused < 1 || o->fresh < 0)
		lg_usage(argv[0]);
	/* what rb_start needs */
	memset(bo, 0, sizeof(*bo));
	bo->prog = "rdmach_large";
	bo->transport = o->transport;
	bo->timeout_s = 300;
}

static char *lg_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("rdmach_large: mmap");
		exit(1);
	}
	return p;
}

/* Rank 0's side of one round trip from buf: seconds. */
static double lg_ping(struct rb *b, const struct lg_opts *o, char *buf,
		      size_t size, unsigned seed)
{
	struct rb_cursor back;
	double t0;

	if (o->validate)
		bench_fill(buf, size, seed);
	t0 = bench_stamp_us();
	rb_cursor_set(&back, buf, size);
	/* the reply's get runs while the put waits (zero-copy needs it) */
	rb_put_all(b, buf, size, NULL);
	rb_xfer(b, NULL, &back, 1);
	t0 = bench_stamp_us() - t0;
	if (o->validate)
		rb_check(b, buf, size, seed + 1, size, (long)seed);
	return t0 / 1e6;
}

static void lg_pong(struct rb *b, const struct lg_opts *o, char *buf,
		    size_t size, unsigned seed)
{
	rb_get_all(b, buf, size);
	if (o->validate) {
		rb_check(b, buf, size, seed, size, (long)seed);
		bench_fill(buf, size, seed + 1);
	}
	rb_put_all(b, buf, size, NULL);
}

static int lg_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* best and median of n samples (sorted in place) */
static void lg_stats(double *t, long n, double *best, double *median)
{
	qsort(t, (size_t)n, sizeof(*t), lg_cmp);
	*best = t[0];
	*median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static double lg_mbs(size_t size, double rtt)
{
	return rtt > 0 ? (double)size / (rtt / 2) / 1e6 : 0;
}

int main(int argc, char **argv)
{
	struct bench_opts bo;
	struct lg_opts o;
	struct rb b;
	double *t, fb = 0, fm = 0, rbest, rmed;
	const char *mode = getenv("RDMACH_LARGE");
	char token = 1, *buf;
	size_t size;
	long i, n;

	lg_parse(argc, argv, &o, &bo);
	rb_start(&b, argc, argv, &bo);
	t = calloc((size_t)(o.reused > o.fresh ? o.reused : o.fresh) + 1,
		   sizeof(*t));
	if (!t)
		return 1;
	if (b.rank == 0) {
		printf("# rdmach large-message ping-pong (transport %s, "
		       "RDMACH_LARGE=%s): first touch = fresh buffers each "
		       "round trip (%ld), reused = one buffer (%ld, at most "
		       "%zu bytes)\n", rdmach_conn_transport(b.conn),
		       mode && *mode ? mode : "auto", o.fresh, o.reused,
		       o.cap);
		printf("# %-10s %12s %12s %12s %12s   (MB/s)\n", "Size",
		       "first-best", "first-median", "reused-best",
		       "reused-median");
		fflush(stdout);
	}
	for (size = o.min; size <= o.max; size *= 2) {
		/* first touch */
		for (i = 0; i < o.fresh; i++) {
			buf = lg_map(size);
			memset(buf, (int)i, size);
			if (b.rank == 0) {
				rb_get_all(&b, &token, 1);	/* peer ready */
				t[i] = lg_ping(&b, &o, buf, size,
					       (unsigned)(2 * i));
			} else {
				rb_put_all(&b, &token, 1, NULL);
				lg_pong(&b, &o, buf, size, (unsigned)(2 * i));
			}
			munmap(buf, size);
		}
		if (b.rank == 0 && o.fresh)
			lg_stats(t, o.fresh, &fb, &fm);
		/* reused */
		n = o.reused;
		if ((size_t)n * size > o.cap)
			n = (long)(o.cap / size) > 4 ? (long)(o.cap / size) : 4;
		buf = lg_map(size);
		memset(buf, 7, size);
		for (i = 0; i < n; i++) {
			if (b.rank == 0)
				t[i] = lg_ping(&b, &o, buf, size,
					       (unsigned)(1000 + 2 * i));
			else
				lg_pong(&b, &o, buf, size,
					(unsigned)(1000 + 2 * i));
		}
		munmap(buf, size);
		if (b.rank == 0) {
			lg_stats(t, n, &rbest, &rmed);
			printf("%-12zu %12.2f %12.2f %12.2f %12.2f\n", size,
			       lg_mbs(size, fb), lg_mbs(size, fm),
			       lg_mbs(size, rbest), lg_mbs(size, rmed));
			fflush(stdout);
		}
	}
	if (o.stats)
		rb_print_stats(&b);
	free(t);
	return rb_finish(&b);
}
