/*
 * mpi_bw - the MPI twin of rdmach_bw: rank 0 posts a window of W
 * MPI_Isend, rank 1 a window of W MPI_Irecv; both MPI_Waitall, then rank 1
 * answers with a 4-byte reply.  MB/s (10^6 bytes/s) per size, same options
 * and output format.  `mpiexec -n 2 mpi_bw`.
 *
 * As in OSU, the window's receives share one buffer; with -v each receive
 * gets its own slot (window x size bytes) so that every byte is checked.
 * -B: both ranks post W MPI_Irecv and W MPI_Isend at once and wait for all
 * (osu_bibw; the figure counts both directions).  -C POOL: every message
 * from/to the next slice of a POOL-byte buffer on each side (cache-cold).
 */
#include "mpi_bench.h"

#define MB_TAG		1
#define MB_ACK_TAG	2
#define MB_VALIDATE_CAP	(256u << 20)

/* One window of sends (rank 0, or both with -B) and receives, window
 * number i; k counts messages for the -C pools. */
static void bw_window(int rank, const struct bench_opts *o, char *sbuf,
		      char *rbuf, MPI_Request *reqs, MPI_Status *stats,
		      size_t size, long i, unsigned long *k)
{
	int j, n = (int)size, peer = 1 - rank, nreq = 0;
	int sends = rank == 0 || o->bidir, recvs = rank == 1 || o->bidir;

	if (recvs)
		for (j = 0; j < o->window; j++)
			MPI_Irecv(o->validate ? rbuf + j * size :
				  bench_msg_buf(o, rbuf, size, *k + j), n,
				  MPI_CHAR, peer, MB_TAG, MPI_COMM_WORLD,
				  &reqs[nreq++]);
	if (sends) {
		if (o->validate)
			bench_fill(sbuf, size, (unsigned)i);
		for (j = 0; j < o->window; j++)
			MPI_Isend(o->validate ? sbuf :
				  bench_msg_buf(o, sbuf, size, *k + j), n,
				  MPI_CHAR, peer, MB_TAG, MPI_COMM_WORLD,
				  &reqs[nreq++]);
	}
	MPI_Waitall(nreq, reqs, stats);
	for (j = 0; recvs && o->validate && j < o->window; j++)
		mb_check(rank, rbuf + j * size, size, (unsigned)i, size, i);
	*k += (unsigned long)o->window;
}

/* stats: a real array, not MPI_STATUSES_IGNORE, which gcc 12 mistakes for
 * a zero-size buffer (-Wstringop-overflow) in MPICH's prototypes. */
static double bw_run(int rank, const struct bench_opts *o, char *sbuf,
		     char *rbuf, MPI_Request *reqs, MPI_Status *stats,
		     size_t size)
{
	char ack[BENCH_ACK_SIZE] = { 0 };
	long i, iters, warmup;
	unsigned long k = 0;
	struct bench_clock clk = { .n = 0, .per_batch = 1 };

	bench_iters(o, size, &iters, &warmup);
	MPI_Barrier(MPI_COMM_WORLD);
	for (i = 0; i < warmup + iters; i++) {
		if (rank == 0 && i >= warmup)
			bench_clock_tick(&clk, o, iters, i - warmup);
		bw_window(rank, o, sbuf, rbuf, reqs, stats, size, i, &k);
		if (o->bidir)
			continue;	/* each side waited for the other's sends */
		if (rank == 0)
			MPI_Recv(ack, BENCH_ACK_SIZE, MPI_CHAR, 1, MB_ACK_TAG,
				 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		else
			MPI_Send(ack, BENCH_ACK_SIZE, MPI_CHAR, 0, MB_ACK_TAG,
				 MPI_COMM_WORLD);
	}
	bench_clock_tick(&clk, o, iters, iters);
	return (double)size * o->window * (o->bidir ? 2 : 1) /
	       bench_clock_result(&clk);
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	MPI_Request *reqs;
	MPI_Status *stats;
	char lib[128];
	size_t size, first, buf_len;
	char *sbuf, *rbuf;
	int rank;

	bench_parse(argc, argv, BENCH_BW, &o);
	rank = mb_start(&argc, &argv, &o);
	buf_len = bench_buf_len(&o, o.max_size);
	if (o.validate && o.pool) {
		if (rank == 0)
			fprintf(stderr, "%s: -v and -C do not go together\n",
				o.prog);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (o.validate) {
		if ((unsigned long long)o.window * o.max_size > MB_VALIDATE_CAP) {
			if (rank == 0)
				fprintf(stderr, "%s: -v needs window x max "
					"size <= 256 MiB\n", o.prog);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		buf_len = (size_t)o.window * o.max_size;
	}
	/* only what this rank uses: the pools are large */
	rbuf = bench_alloc(rank == 1 || o.bidir ? buf_len : 1);
	sbuf = bench_alloc(rank == 0 || o.bidir ?
			   bench_buf_len(&o, o.max_size) : 1);
	reqs = calloc(2 * (size_t)o.window, sizeof(*reqs));
	stats = calloc(2 * (size_t)o.window, sizeof(*stats));
	if (!reqs || !stats)
		MPI_Abort(MPI_COMM_WORLD, 1);
	mb_library(lib, sizeof(lib));
	if (rank == 0)
		bench_print_header(&o, "MPI", lib);
	first = o.min_size ? o.min_size : 1;
	/* cache-cold: one untimed run of the first size (as mpi_latency) */
	if (o.pool)
		bw_run(rank, &o, sbuf, rbuf, reqs, stats, first);
	for (size = first; size <= o.max_size; size *= 2) {
		double mbs = bw_run(rank, &o, sbuf, rbuf, reqs, stats, size);

		if (rank == 0)
			bench_print_row(size, mbs);
	}
	free(stats);
	free(reqs);
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
