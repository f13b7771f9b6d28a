/*
 * mpi_abnormal - a job whose rank 1 ends abnormally, for checking what
 * mpiexec reports (channel/test-mpich.sh faults).
 *
 *   mpi_abnormal exit-finalize  rank 1 exit(3)s; rank 0 goes to MPI_Finalize
 *   mpi_abnormal exit-recv      rank 1 exit(3)s; rank 0 waits in MPI_Recv
 *   mpi_abnormal kill           ranks ping-pong; rank 1 SIGKILLs itself
 *                               in the middle
 *
 * mpiexec must report the dead rank's own status: 3, or 9 (killed).
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "exit-finalize";
	int rank, size, x = 0, i;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		fprintf(stderr, "mpi_abnormal: needs 2 processes\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	/* who is who in Hydra's banner (test-mpich.sh faults) */
	printf("mpi_abnormal: rank %d pid %d\n", rank, (int)getpid());
	fflush(stdout);
	MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (!strcmp(mode, "kill")) {
		for (i = 0;; i++) {
			if (rank == 1 && i == 1000)
				kill(getpid(), SIGKILL);
			if (rank == 0) {
				MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
				MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
			} else if (rank == 1) {
				MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
			}
		}
	}
	if (rank == 1)
		exit(3);
	if (rank == 0 && !strcmp(mode, "exit-recv"))
		MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Finalize();
	return 0;
}
