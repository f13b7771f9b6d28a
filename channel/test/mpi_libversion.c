/*
 * mpi_libversion.c - which MPI library a program runs on: succeeds when
 * MPI_Get_library_version names the text given (e.g. "ch3:rdma"), so that
 * a program built with another MPICH of the same ABI (Debian's mpicc.mpich,
 * libmpich.so.12) shows it runs on this one.  Prints "No Errors".
 *
 *   LD_LIBRARY_PATH=PREFIX/lib mpiexec -n 2 ./mpi_libversion ch3:rdma
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING];
	int len, rank, ok;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Get_library_version(v, &len);
	ok = argc < 2 || strstr(v, argv[1]) != NULL;
	if (rank == 0) {
		if (ok)
			printf("No Errors\n");
		else
			printf("library is not %s:\n%s\n", argv[1], v);
	}
	MPI_Finalize();
	return !ok;
}
