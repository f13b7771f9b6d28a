/*
 * mpi_node.c - node awareness: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)
 * puts the processes of one host into one communicator (all of them when
 * mpiexec starts them on this host): every member names the same host and
 * every process of MPI_COMM_WORLD that names it is a member, whatever
 * the process manager's mapping said; ranks keep their order, and
 * MPI_UNDEFINED gives MPI_COMM_NULL.  A
 * window MPI_Win_allocate_shared over that communicator is shared memory:
 * each process reads its peers' stores through MPI_Win_shared_query's
 * addresses, and accumulates from all reach one counter exactly.
 * Prints "No Errors" on success.
 *
 *   mpiexec -n 4 ./mpi_node [expected node size [host,host,...]]
 *
 * The list names the host of each rank in turn (as MPI_Get_processor_name
 * gives it), e.g. vm1,vm2,vm2,vm1 for a placement of the launcher's
 * (srun -m arbitrary): each rank checks that it runs there.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int errors;

static void expect(int ok, const char *what, int rank)
{
	if (!ok) {
		fprintf(stderr, "rank %d: %s\n", rank, what);
		errors++;
	}
}

/* Every member of node names the host this rank runs on. */
static void check_same_host(MPI_Comm node, int rank)
{
	char me[MPI_MAX_PROCESSOR_NAME] = "", *all;
	int len, n;

	MPI_Get_processor_name(me, &len);
	MPI_Comm_size(node, &n);
	all = calloc((size_t)n, sizeof(me));
	MPI_Allgather(me, sizeof(me), MPI_CHAR, all, sizeof(me), MPI_CHAR, node);
	for (int i = 0; i < n; i++)
		expect(!strcmp(all + (size_t)i * sizeof(me), me),
		       "a member of the node communicator is on another host", rank);
	free(all);
}

/* The members of node are every process of MPI_COMM_WORLD on this host
 * (check_same_host: no other), as named by MPI_Get_processor_name. */
static void check_whole_host(MPI_Comm node, int rank)
{
	char me[MPI_MAX_PROCESSOR_NAME] = "", *all;
	int len, size, nsize, here = 0;

	MPI_Get_processor_name(me, &len);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_size(node, &nsize);
	all = calloc((size_t)size, sizeof(me));
	MPI_Allgather(me, sizeof(me), MPI_CHAR, all, sizeof(me), MPI_CHAR, MPI_COMM_WORLD);
	for (int i = 0; i < size; i++)
		here += !strcmp(all + (size_t)i * sizeof(me), me);
	if (here != nsize) {
		fprintf(stderr, "rank %d: %d processes on host %s, %d in the node communicator\n",
			rank, here, me, nsize);
		errors++;
	}
	free(all);
}

/* This rank runs on the host the comma-separated list names for it. */
static void check_placement(const char *list, int rank)
{
	char me[MPI_MAX_PROCESSOR_NAME] = "";
	const char *p = list;
	int len;

	MPI_Get_processor_name(me, &len);
	for (int i = 0; i < rank && p; i++) {
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	len = p ? (int)strcspn(p, ",") : 0;
	if (!p || len != (int)strlen(me) || strncmp(p, me, (size_t)len)) {
		fprintf(stderr, "rank %d: on host %s, not where %s places it\n", rank, me, list);
		errors++;
	}
}

/* Store, fence, read the peers' values in place; then every process adds
 * to node rank 0's counter (CH3 applies it under the window's mutex). */
static void check_shared_window(MPI_Comm node, int rank)
{
	int nrank, nsize, *mine, *peer, disp, sum = 0;
	MPI_Aint bytes;
	MPI_Win win;

	MPI_Comm_rank(node, &nrank);
	MPI_Comm_size(node, &nsize);
	MPI_Win_allocate_shared(2 * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &mine, &win);
	MPI_Win_lock_all(0, win);
	mine[0] = 1000 + nrank;
	mine[1] = 0;
	MPI_Win_sync(win);
	MPI_Barrier(node);
	MPI_Win_sync(win);
	for (int i = 0; i < nsize; i++) {
		MPI_Win_shared_query(win, i, &bytes, &disp, &peer);
		expect(bytes == 2 * sizeof(int) && disp == sizeof(int) && peer[0] == 1000 + i,
		       "a peer's store is not seen through MPI_Win_shared_query", rank);
	}
	for (int k = 0; k < 100; k++) {
		int one = 1;

		MPI_Accumulate(&one, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_SUM, win);
	}
	MPI_Win_flush_all(win);
	MPI_Barrier(node);
	MPI_Fetch_and_op(&sum, &sum, MPI_INT, 0, 1, MPI_NO_OP, win);
	MPI_Win_flush(0, win);
	expect(sum == 100 * nsize, "accumulates on a shared window lost updates", rank);
	MPI_Win_unlock_all(win);
	MPI_Win_free(&win);
}

int main(int argc, char **argv)
{
	int rank, size, nrank, nsize, want;
	MPI_Comm node, none;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	want = argc > 1 ? atoi(argv[1]) : 0;

	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &nrank);
	MPI_Comm_size(node, &nsize);
	if (want && nsize != want) {
		fprintf(stderr, "rank %d: node communicator of %d processes, expected %d\n",
			rank, nsize, want);
		errors++;
	}
	check_same_host(node, rank);
	check_whole_host(node, rank);
	if (argc > 2)
		check_placement(argv[2], rank);
	check_shared_window(node, rank);
	/* key 0 for all: node ranks follow world ranks */
	if (nsize == size)
		expect(nrank == rank, "node rank differs from world rank", rank);

	MPI_Comm_split_type(MPI_COMM_WORLD, rank % 2 ? MPI_UNDEFINED : MPI_COMM_TYPE_SHARED, 0,
			    MPI_INFO_NULL, &none);
	expect(rank % 2 ? none == MPI_COMM_NULL : none != MPI_COMM_NULL,
	       "MPI_UNDEFINED split", rank);
	if (none != MPI_COMM_NULL)
		MPI_Comm_free(&none);
	MPI_Comm_free(&node);

	MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf(errors ? "%d errors\n" : "No Errors\n", errors);
	MPI_Finalize();
	return errors != 0;
}
