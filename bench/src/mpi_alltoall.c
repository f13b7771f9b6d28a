/*
 * mpi_alltoall - MPI_Alltoall time per call, like OSU's osu_alltoall: for
 * each size (bytes per pair), every rank times its calls (median batch
 * with -b) and rank 0 prints the average over the ranks.  Any number of
 * ranks from 2: `mpiexec -n 2 mpi_alltoall -m 8:128`.
 * Same options as mpi_latency (-m, -i, -x, -b, -v checks every block).
 */
#include <mpi.h>

#include "bench_common.h"

static void a2a_fill(char *buf, size_t size, int rank, int np, long i)
{
	int p;

	for (p = 0; p < np; p++)	/* the block for rank p */
		bench_fill(buf + (size_t)p * size, size,
			   (unsigned)(i * 1009 + rank * 31 + p));
}

static void a2a_check(const char *buf, size_t size, int rank, int np, long i)
{
	int p;

	for (p = 0; p < np; p++) {	/* the block rank p sent us */
		long bad = bench_check(buf + (size_t)p * size, size,
				       (unsigned)(i * 1009 + p * 31 + rank));

		if (bad >= 0) {
			fprintf(stderr, "mpi_alltoall[rank %d]: DATA MISMATCH: "
				"size %zu, iteration %ld, block from rank %d, "
				"byte %ld\n", rank, size, i, p, bad);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
}

static double a2a_run(int rank, int np, const struct bench_opts *o,
		      char *sbuf, char *rbuf, size_t size)
{
	struct bench_clock clk = { .n = 0, .per_batch = 1 };
	long i, iters, warmup;
	double mine, sum = 0;

	bench_iters(o, size, &iters, &warmup);
	MPI_Barrier(MPI_COMM_WORLD);
	for (i = 0; i < warmup + iters; i++) {
		if (i >= warmup)
			bench_clock_tick(&clk, o, iters, i - warmup);
		if (o->validate)
			a2a_fill(sbuf, size, rank, np, i);
		MPI_Alltoall(sbuf, (int)size, MPI_CHAR, rbuf, (int)size,
			     MPI_CHAR, MPI_COMM_WORLD);
		if (o->validate)
			a2a_check(rbuf, size, rank, np, i);
	}
	bench_clock_tick(&clk, o, iters, iters);
	mine = bench_clock_result(&clk);
	MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	return sum / np;
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	char *sbuf, *rbuf;
	size_t size;
	int rank, np;

	bench_parse(argc, argv, BENCH_LATENCY, &o);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	if (o.min_size == 0)
		o.min_size = 1;
	sbuf = bench_alloc(o.max_size * (size_t)np);
	rbuf = bench_alloc(o.max_size * (size_t)np);
	if (rank == 0) {
		printf("# MPI Alltoall Latency Test v1 (%d ranks)\n", np);
		printf("# Size       Avg Latency (us)\n");
		fflush(stdout);
	}
	for (size = o.min_size; size <= o.max_size;
	     size = bench_next_size(size)) {
		double us = a2a_run(rank, np, &o, sbuf, rbuf, size);

		if (rank == 0)
			bench_print_row(size, us);
	}
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
