/*
 * mpi_startup.c - how long a job takes to start (test/run-cluster.sh,
 * boot S): times since STARTUP_T0 (CLOCK_REALTIME seconds, set by whoever
 * submits the job just before it does) on rank 0 of the job, which runs
 * where the job was submitted (same clock).
 *
 *   STARTUP_T0=$(date +%s.%N) srun --mpi=pmi2 -N 2 -n 4 ./mpi_startup
 *
 * The process whose PMI_RANK is 0 prints, at main's entry (before any MPI
 * call), "startup first <s>"; after MPI_Init and a barrier rank 0 prints
 * "startup init <s> (n=N)".  Ends with "No Errors".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double since_t0(double t0)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - t0;
}

int main(int argc, char **argv)
{
	const char *s = getenv("STARTUP_T0"), *r = getenv("PMI_RANK");
	double t0 = s ? strtod(s, NULL) : 0, first = since_t0(t0), init;
	int rank, size;

	if (r && !strcmp(r, "0")) {
		printf("startup first %.3f\n", first);
		fflush(stdout);
	}
	MPI_Init(&argc, &argv);
	MPI_Barrier(MPI_COMM_WORLD);
	init = since_t0(t0);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rank == 0)
		printf("startup init %.3f (n=%d)\nNo Errors\n", init, size);
	MPI_Finalize();
	return 0;
}
