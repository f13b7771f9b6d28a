/* killrank.c - LD_PRELOAD shim for nas/test-nas.sh: the process raises
 * NAS_TEST_SIGNAL (KILL or STOP) at its NAS_TEST_CALL-th MPI_Alltoallv,
 * so that one rank of IS dies or hangs in the middle of a run. */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
		  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
		  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
	static int calls;
	const char *sig = getenv("NAS_TEST_SIGNAL"), *at = getenv("NAS_TEST_CALL");

	if (sig && ++calls == (at ? atoi(at) : 3))
		raise(strcmp(sig, "STOP") == 0 ? SIGSTOP : SIGKILL);
	return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
			      recvcounts, rdispls, recvtype, comm);
}
