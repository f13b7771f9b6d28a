/*
 * mpi_bw - the MPI twin of rdmach_bw: rank 0 posts a window of W
 * MPI_Isend, rank 1 a window of W MPI_Irecv; both MPI_Waitall, then rank 1
 * answers with a 4-byte reply.  MB/s (10^6 bytes/s) per size, same options
 * and output format.  `mpiexec -n 2 mpi_bw`.
 *
 * As in OSU, the window's receives share one buffer; with -v each receive
 * gets its own slot (window x size bytes) so that every byte is checked.
 */
#include "mpi_bench.h"

#define MB_TAG		1
#define MB_ACK_TAG	2
#define MB_VALIDATE_CAP	(256u << 20)

/* stats: a real array, not MPI_STATUSES_IGNORE, which gcc 12 mistakes for
 * a zero-size buffer (-Wstringop-overflow) in MPICH's prototypes. */
static double bw_run(int rank, const struct bench_opts *o, char *buf,
		     MPI_Request *reqs, MPI_Status *stats, size_t size)
{
	char ack[BENCH_ACK_SIZE] = { 0 };
	long i, iters, warmup;
	struct bench_clock clk = { .n = 0, .per_batch = 1 };
	int j, n = (int)size;

	bench_iters(o, size, &iters, &warmup);
	MPI_Barrier(MPI_COMM_WORLD);
	for (i = 0; i < warmup + iters; i++) {
		if (rank == 0) {
			if (i >= warmup)
				bench_clock_tick(&clk, o, iters, i - warmup);
			if (o->validate)
				bench_fill(buf, size, (unsigned)i);
			for (j = 0; j < o->window; j++)
				MPI_Isend(buf, n, MPI_CHAR, 1, MB_TAG,
					  MPI_COMM_WORLD, &reqs[j]);
			MPI_Waitall(o->window, reqs, stats);
			MPI_Recv(ack, BENCH_ACK_SIZE, MPI_CHAR, 1, MB_ACK_TAG,
				 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			for (j = 0; j < o->window; j++)
				MPI_Irecv(buf + (o->validate ? j * size : 0), n,
					  MPI_CHAR, 0, MB_TAG, MPI_COMM_WORLD,
					  &reqs[j]);
			MPI_Waitall(o->window, reqs, stats);
			for (j = 0; o->validate && j < o->window; j++)
				mb_check(rank, buf + j * size, size,
					 (unsigned)i, size, i);
			MPI_Send(ack, BENCH_ACK_SIZE, MPI_CHAR, 0, MB_ACK_TAG,
				 MPI_COMM_WORLD);
		}
	}
	bench_clock_tick(&clk, o, iters, iters);
	return (double)size * o->window / bench_clock_result(&clk);
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	MPI_Request *reqs;
	MPI_Status *stats;
	char lib[128];
	size_t size, buf_len;
	char *buf;
	int rank;

	bench_parse(argc, argv, BENCH_BW, &o);
	rank = mb_start(&argc, &argv, &o);
	buf_len = o.max_size;
	if (o.validate) {
		if ((unsigned long long)o.window * o.max_size > MB_VALIDATE_CAP) {
			if (rank == 0)
				fprintf(stderr, "%s: -v needs window x max "
					"size <= 256 MiB\n", o.prog);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		buf_len = (size_t)o.window * o.max_size;
	}
	buf = bench_alloc(buf_len);
	reqs = calloc((size_t)o.window, sizeof(*reqs));
	stats = calloc((size_t)o.window, sizeof(*stats));
	if (!reqs || !stats)
		MPI_Abort(MPI_COMM_WORLD, 1);
	mb_library(lib, sizeof(lib));
	if (rank == 0)
		bench_print_header(&o, "MPI", lib);
	for (size = o.min_size ? o.min_size : 1; size <= o.max_size;
	     size *= 2) {
		double mbs = bw_run(rank, &o, buf, reqs, stats, size);

		if (rank == 0)
			bench_print_row(size, mbs);
	}
	free(stats);
	free(reqs);
	free(buf);
	MPI_Finalize();
	return 0;
}
