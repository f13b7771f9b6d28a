/*
 * rdmach_bw - the bandwidth test of the MPICH2-over-InfiniBand paper (and of
 * OSU): rank 0 puts a window of W messages back to back, rank 1 gets them
 * and answers with a 4-byte reply; repeated.  Prints MB/s (10^6 bytes/s)
 * per message size, in the OSU format.
 *
 *   rdmach_bw [-m 1:4M] [-w 64] [-i 100] [-I 20] [-v] [-t shm|ib] [-S] [-F]
 *
 * -F (first touch): every message goes from and to a fresh mmap'd buffer,
 * written before the put and unmapped after it (page faults, and for the
 * zero-copy path a registration-cache miss every time).
 * -C POOL (cache-cold): message k goes from/to the k-th slice of a
 * POOL-byte buffer on each side.  -B (bidirectional): both ranks put and
 * get a window at once, no reply; the figure counts both directions.
 *
 * Starts two copies of itself when not under a PMI server.
 */
#include "rdmach_bench.h"

#include <sys/mman.h>

/* The buffer of message k: buf (or its k-th slice with -C), or with -F a
 * fresh mapping. */
static char *bw_buf(const struct bench_opts *o, char *buf, size_t size,
		    unsigned long k)
{
	void *p;

	if (!o->first_touch)
		return bench_msg_buf(o, buf, size, k);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("rdmach_bw: mmap");
		exit(1);
	}
	return p;
}

static void bw_buf_done(const struct bench_opts *o, char *p, size_t size)
{
	if (o->first_touch)
		munmap(p, size);
}

/* Rank 0: returns MB/s. */
static double bw_send(struct rb *b, const struct bench_opts *o, char *sbuf,
		      size_t size)
{
	struct rb_cursor ack;
	char abuf[BENCH_ACK_SIZE];
	long i, iters, warmup;
	struct bench_clock clk = { .n = 0, .per_batch = 1 };
	int j;

	bench_iters(o, size, &iters, &warmup);
	for (i = 0; i < warmup + iters; i++) {
		if (i >= warmup)
			bench_clock_tick(&clk, o, iters, i - warmup);
		/* The reply's receive is open during the window, so that
		 * get runs while puts wait (zero-copy needs it). */
		rb_cursor_set(&ack, abuf, sizeof(abuf));
		for (j = 0; j < o->window; j++) {
			char *p = bw_buf(o, sbuf, size,
					 (unsigned long)(i * o->window + j));

			if (o->validate)
				bench_fill(p, size,
					   (unsigned)(i * o->window + j));
			else if (o->first_touch)
				memset(p, j, size);
			rb_put_all(b, p, size, &ack);
			bw_buf_done(o, p, size);
		}
		rb_xfer(b, NULL, &ack, 1);
	}
	bench_clock_tick(&clk, o, iters, iters);
	return (double)size * o->window / bench_clock_result(&clk);
}

static void bw_recv(struct rb *b, const struct bench_opts *o, char *rbuf,
		    size_t size)
{
	char abuf[BENCH_ACK_SIZE] = { 0 };
	long i, iters, warmup;
	int j;

	bench_iters(o, size, &iters, &warmup);
	for (i = 0; i < warmup + iters; i++) {
		for (j = 0; j < o->window; j++) {
			char *p = bw_buf(o, rbuf, size,
					 (unsigned long)(i * o->window + j));

			rb_get_all(b, p, size);
			if (o->validate)
				rb_check(b, p, size,
					 (unsigned)(i * o->window + j), size,
					 i);
			bw_buf_done(o, p, size);
		}
		rb_put_all(b, abuf, sizeof(abuf), NULL);
	}
}

/* -B, both ranks: put message j while getting the peer's message j. */
static double bw_bidir(struct rb *b, const struct bench_opts *o, char *sbuf,
		       char *rbuf, size_t size)
{
	struct bench_clock clk = { .n = 0, .per_batch = 1 };
	struct rb_cursor s, r;
	long i, iters, warmup;
	int j;

	bench_iters(o, size, &iters, &warmup);
	for (i = 0; i < warmup + iters; i++) {
		if (i >= warmup)
			bench_clock_tick(&clk, o, iters, i - warmup);
		for (j = 0; j < o->window; j++) {
			unsigned long k = (unsigned long)(i * o->window + j);

			rb_cursor_set(&s, bench_msg_buf(o, sbuf, size, k), size);
			rb_cursor_set(&r, bench_msg_buf(o, rbuf, size, k), size);
			rb_xfer(b, &s, &r, 1);
		}
	}
	bench_clock_tick(&clk, o, iters, iters);
	return 2.0 * (double)size * o->window / bench_clock_result(&clk);
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct rb b;
	char detail[64];
	char *buf, *rbuf;
	size_t size;

	bench_parse(argc, argv, BENCH_BW, &o);
	if (o.min_size == 0) {
		fprintf(stderr, "%s: sizes start at 1 (a byte pipe has no "
			"empty messages)\n", o.prog);
		return 2;
	}
	if (o.validate && (o.pool || o.bidir)) {
		fprintf(stderr, "%s: -v goes with neither -C nor -B\n", o.prog);
		return 2;
	}
	rb_start(&b, argc, argv, &o);
	buf = bench_alloc(bench_buf_len(&o, o.max_size));
	rbuf = o.bidir ? bench_alloc(bench_buf_len(&o, o.max_size)) : buf;
	if (b.rank == 0) {
		snprintf(detail, sizeof(detail), "transport %s%s",
			 rdmach_conn_transport(b.conn), o.pin ? ", pinned" : "");
		bench_print_header(&o, "rdmach", detail);
	}
	for (size = o.min_size; size <= o.max_size; size *= 2) {
		if (o.bidir) {
			double v = bw_bidir(&b, &o, buf, rbuf, size);

			if (b.rank == 0)
				bench_print_row(size, v);
		} else if (b.rank == 0) {
			bench_print_row(size, bw_send(&b, &o, buf, size));
		} else {
			bw_recv(&b, &o, buf, size);
		}
	}
	if (o.stats)
		rb_print_stats(&b);
	if (rbuf != buf)
		free(rbuf);
	free(buf);
	return rb_finish(&b);
}
