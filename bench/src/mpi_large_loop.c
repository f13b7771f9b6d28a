/*
 * mpi_large_loop - large-message buffer patterns through MPI, for the
 * per-message protocol choice of rdma_ib (RDMACH_LARGE=auto): rank 0 sends
 * N messages of SIZE bytes to rank 1, which answers each with 4 bytes.
 *
 *   mpiexec -n 2 mpi_large_loop [-m SIZE] [-n N] PATTERN
 *   PATTERN: alloc-send-free  a fresh mmap'd buffer per message on both
 *                             sides, unmapped after it (NAS IS style: the
 *                             memory is released, a new buffer each time)
 *            malloc-free      malloc + free per message (glibc, tuned by
 *                             rdmach not to unmap: the same pages come
 *                             back, so the buffer is in fact reused)
 *            reuse            one buffer per rank for all messages
 * Prints the pattern's bandwidth (MB/s = 10^6 B/s, message bytes over the
 * loop's time) on rank 0; RDMACH_STATS=1 adds rdmach's counters at
 * finalize: which protocol carried the messages and why.
 */
#include <sys/mman.h>

#include "mpi_bench.h"

enum { LL_ALLOC, LL_MALLOC, LL_REUSE };

static char *ll_get(int pat, size_t size, char *keep)
{
	char *p;

	if (pat == LL_REUSE)
		return keep;
	if (pat == LL_MALLOC) {
		p = malloc(size);
		if (!p)
			MPI_Abort(MPI_COMM_WORLD, 1);
		return p;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		MPI_Abort(MPI_COMM_WORLD, 1);
	return p;
}

static void ll_put(int pat, char *p, size_t size)
{
	if (pat == LL_MALLOC)
		free(p);
	else if (pat == LL_ALLOC)
		munmap(p, size);
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "alloc-send-free", "malloc-free",
					     "reuse" };
	size_t size = 1u << 20;
	long n = 200, i;
	int rank, pat = -1, c;
	char ack[4] = { 0 }, *keep;
	double t0, t;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	while ((c = getopt(argc, argv, "m:n:")) != -1) {
		if (c == 'm' && !bench_parse_size(optarg, &size))
			continue;
		if (c == 'n' && (n = atol(optarg)) > 0)
			continue;
		pat = -2;
	}
	for (c = 0; pat == -1 && optind < argc && c < 3; c++)
		if (!strcmp(argv[optind], names[c]))
			pat = c;
	if (pat < 0) {
		if (rank == 0)
			fprintf(stderr, "usage: mpiexec -n 2 %s [-m SIZE] "
				"[-n N] alloc-send-free|malloc-free|reuse\n",
				argv[0]);
		MPI_Finalize();
		return 2;
	}
	keep = bench_alloc(size);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (i = 0; i < n; i++) {
		char *b = ll_get(pat, size, keep);

		if (rank == 0) {
			memset(b, (int)i, size);	/* the application's data */
			MPI_Send(b, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(ack, 4, MPI_CHAR, 1, 2, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(b, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			if ((unsigned char)b[size - 1] != (unsigned char)i)
				MPI_Abort(MPI_COMM_WORLD, 3);
			MPI_Send(ack, 4, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
		}
		ll_put(pat, b, size);
	}
	t = MPI_Wtime() - t0;
	if (rank == 0)
		printf("%-16s %zu bytes x %ld: %.2f MB/s (%.3f s)\n",
		       names[pat], size, n, (double)size * (double)n / t / 1e6,
		       t);
	free(keep);
	MPI_Finalize();
	return 0;
}
