/*
 * mpi_latency - the MPI twin of rdmach_latency: MPI_Send/MPI_Recv
 * ping-pong between 2 ranks, one-way latency (half the round trip) per
 * size, same options and output format.  `mpiexec -n 2 mpi_latency`.
 * -C POOL: the i-th ping and pong go from/to the i-th slice of a POOL-byte
 * buffer on each side (cache-cold) instead of one reused buffer.
 */
#include "mpi_bench.h"

#define MB_TAG 1

static double lat_run(int rank, const struct bench_opts *o, char *sbase,
		      char *rbase, size_t size)
{
	long i, iters, warmup;
	struct bench_clock clk = { .n = 0, .per_batch = 1 };
	int n = (int)size;

	bench_iters(o, size, &iters, &warmup);
	MPI_Barrier(MPI_COMM_WORLD);
	for (i = 0; i < warmup + iters; i++) {
		char *sb = bench_msg_buf(o, sbase, size, (unsigned long)i);
		char *rb = bench_msg_buf(o, rbase, size, (unsigned long)i);

		if (rank == 0) {
			if (i >= warmup)
				bench_clock_tick(&clk, o, iters, i - warmup);
			if (o->validate)
				bench_fill(sb, size, (unsigned)(2 * i));
			MPI_Send(sb, n, MPI_CHAR, 1, MB_TAG, MPI_COMM_WORLD);
			MPI_Recv(rb, n, MPI_CHAR, 1, MB_TAG, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			if (o->validate)
				mb_check(rank, rb, size, (unsigned)(2 * i + 1),
					 size, i);
		} else {
			MPI_Recv(rb, n, MPI_CHAR, 0, MB_TAG, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			if (o->validate) {
				mb_check(rank, rb, size, (unsigned)(2 * i),
					 size, i);
				bench_fill(sb, size, (unsigned)(2 * i + 1));
			}
			MPI_Send(sb, n, MPI_CHAR, 0, MB_TAG, MPI_COMM_WORLD);
		}
	}
	bench_clock_tick(&clk, o, iters, iters);
	return bench_clock_result(&clk) / 2.0;
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	char lib[128];
	char *sbuf, *rbuf;
	size_t size;
	int rank;

	bench_parse(argc, argv, BENCH_LATENCY, &o);
	rank = mb_start(&argc, &argv, &o);
	sbuf = bench_alloc(bench_buf_len(&o, o.max_size));
	rbuf = bench_alloc(bench_buf_len(&o, o.max_size));
	mb_library(lib, sizeof(lib));
	if (rank == 0)
		bench_print_header(&o, "MPI", lib);
	/* cache-cold: one untimed run of the first size, which otherwise
	 * comes out slower than the next for every MPI (bench/README.md) */
	if (o.pool)
		lat_run(rank, &o, sbuf, rbuf, o.min_size);
	for (size = o.min_size; size <= o.max_size;
	     size = bench_next_size(size)) {
		double us = lat_run(rank, &o, sbuf, rbuf, size);

		if (rank == 0)
			bench_print_row(size, us);
	}
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
