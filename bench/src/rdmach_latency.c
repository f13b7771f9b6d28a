/*
 * rdmach_latency - ping-pong over one rdmach connection; prints the one-way
 * latency (half the round trip) per message size, in the OSU format.
 *
 *   rdmach_latency [-m 0:4M] [-i 10000] [-I 1000] [-v] [-t shm|ib] [-S]
 *
 * Starts two copies of itself when not under a PMI server; under Hydra
 * (`mpiexec -n 2 rdmach_latency`) or rdmach_run each copy is one rank.
 * A byte pipe carries no empty messages: the 0-byte row sends a 1-byte
 * token, the smallest thing the pipe can signal.
 */
#include "rdmach_bench.h"

/* Rank 0: ping, then wait for the pong; returns the one-way time in us. */
static double lat_ping(struct rb *b, const struct bench_opts *o, char *sbuf,
		       char *rbuf, size_t size, size_t wire)
{
	struct rb_cursor pong;
	long i, iters, warmup;
	struct bench_clock clk = { .n = 0, .per_batch = 1 };

	bench_iters(o, size, &iters, &warmup);
	for (i = 0; i < warmup + iters; i++) {
		if (i >= warmup)
			bench_clock_tick(&clk, o, iters, i - warmup);
		if (o->validate)
			bench_fill(sbuf, wire, (unsigned)(2 * i));
		rb_cursor_set(&pong, rbuf, wire);
		rb_put_all(b, sbuf, wire, &pong);
		rb_xfer(b, NULL, &pong, 1);
		if (o->validate)
			rb_check(b, rbuf, wire, (unsigned)(2 * i + 1), size, i);
	}
	bench_clock_tick(&clk, o, iters, iters);
	return bench_clock_result(&clk) / 2.0;
}

/* Rank 1: answer each ping; the next ping's receive is open meanwhile. */
static void lat_pong(struct rb *b, const struct bench_opts *o, char *sbuf,
		     char *rbuf, size_t size, size_t wire)
{
	struct rb_cursor ping;
	long i, iters, warmup;

	bench_iters(o, size, &iters, &warmup);
	rb_cursor_set(&ping, rbuf, wire);
	for (i = 0; i < warmup + iters; i++) {
		int last = i + 1 == warmup + iters;

		rb_xfer(b, NULL, &ping, 1);
		if (o->validate) {
			rb_check(b, rbuf, wire, (unsigned)(2 * i), size, i);
			bench_fill(sbuf, wire, (unsigned)(2 * i + 1));
		}
		rb_cursor_set(&ping, rbuf, wire);
		rb_put_all(b, sbuf, wire, last ? NULL : &ping);
	}
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct rb b;
	char detail[64];
	char *sbuf, *rbuf;
	size_t size;

	bench_parse(argc, argv, BENCH_LATENCY, &o);
	rb_start(&b, argc, argv, &o);
	sbuf = bench_alloc(o.max_size ? o.max_size : 1);
	rbuf = bench_alloc(o.max_size ? o.max_size : 1);
	if (b.rank == 0) {
		snprintf(detail, sizeof(detail), "transport %s%s",
			 rdmach_conn_transport(b.conn), o.pin ? ", pinned" : "");
		bench_print_header(&o, "rdmach", detail);
		if (o.min_size == 0)
			printf("# size 0 sends a 1-byte token: a byte pipe "
			       "has no empty messages\n");
	}
	for (size = o.min_size; size <= o.max_size;
	     size = bench_next_size(size)) {
		size_t wire = size ? size : 1;

		if (b.rank == 0)
			bench_print_row(size, lat_ping(&b, &o, sbuf, rbuf,
						       size, wire));
		else
			lat_pong(&b, &o, sbuf, rbuf, size, wire);
	}
	if (o.stats)
		rb_print_stats(&b);
	free(sbuf);
	free(rbuf);
	return rb_finish(&b);
}
