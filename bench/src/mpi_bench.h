/*
 * mpi_bench.h - what the MPI twins of the rdmach benchmarks share: start-up
 * (exactly 2 ranks), a short name of the MPI library for the header line,
 * and error reporting.  Built with mpicc by `make mpi-bench`.
 */
#ifndef MPI_BENCH_H
#define MPI_BENCH_H

#include <mpi.h>

#include "bench_common.h"

/* "MPICH 4.0.2 ch4:ucx" from MPI_Get_library_version's lines
 * "MPICH Version:\t4.0.2" and "MPICH Device:\tch4:ucx"; else its first line. */
static inline void mb_library(char *out, size_t len)
{
	char s[MPI_MAX_LIBRARY_VERSION_STRING];
	const char *ver, *dev;
	int n, vl, dl;

	MPI_Get_library_version(s, &n);
	ver = strstr(s, "MPICH Version:");
	dev = strstr(s, "MPICH Device:");
	if (ver && dev) {
		ver += strlen("MPICH Version:");
		dev += strlen("MPICH Device:");
		ver += strspn(ver, " \t");
		dev += strspn(dev, " \t");
		vl = (int)strcspn(ver, "\n");
		dl = (int)strcspn(dev, "\n");
		snprintf(out, len, "MPICH %.*s %.*s", vl, ver, dl, dev);
		return;
	}
	snprintf(out, len, "%.*s", (int)strcspn(s, "\n"), s);
}

static inline int mb_start(int *argc, char ***argv, const struct bench_opts *o)
{
	int rank, size;

	MPI_Init(argc, argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "%s: needs exactly 2 processes, got %d "
				"(mpiexec -n 2 %s)\n", o->prog, size, o->prog);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (o->transport || o->stats)
		if (rank == 0)
			fprintf(stderr, "%s: -t and -S apply to rdmach only; "
				"ignored\n", o->prog);
	return rank;
}

static inline void mb_check(int rank, const void *buf, size_t len,
			    unsigned seed, size_t size, long iter)
{
	long bad = bench_check(buf, len, seed);

	if (bad < 0)
		return;
	fprintf(stderr, "mpi bench[rank %d]: DATA MISMATCH: size %zu, "
		"iteration %ld, byte %ld\n", rank, size, iter, bad);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

#endif /* MPI_BENCH_H */
