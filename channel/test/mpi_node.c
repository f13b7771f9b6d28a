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
 * Across hosts the node communicator is exactly the ranks whose
 * gethostname() is this rank's, in world order.
 *
 * With collective sizes, an MPI_Allreduce and an MPI_Bcast (rooted at the
 * last rank: on its node, not the node's first) of that many bytes, every
 * byte checked; run with MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=smp and
 * MPIR_CVAR_BCAST_INTRA_ALGORITHM=smp, MPICH's node-aware algorithms, only
 * a node's first rank (its leader) moves data between nodes.  Each rank
 * prints "rank R on HOST: node size K, node rank J, leader|member": with
 * RDMACH_STATS=1 and mpiexec -l, a caller matches it with the rank's
 * counters (test/run-cluster.sh).  MPICH 4.0.2's SMP broadcast is node-aware
 * only below MPIR_CVAR_BCAST_LONG_MSG_SIZE (512 KiB) with a power-of-two
 * group; above, it is the flat scatter and ring allgather.
 * Prints "No Errors" on success.
 *
 *   mpiexec -n 4 ./mpi_node [expected node size [allreduce-bytes bcast-bytes]]
 *   mpiexec -n 4 ./mpi_node expected-node-size host,host,...
 *
 * The list names the host of each rank in turn (as MPI_Get_processor_name
 * gives it), e.g. vm1,vm2,vm2,vm1 for a placement of the launcher's
 * (srun -m arbitrary): each rank checks that it runs there.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NODE_HOST_LEN 256

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

/* The node communicator holds exactly the world ranks on this host (by
 * gethostname, gathered over MPI_COMM_WORLD), in world order. */
static void check_members(MPI_Comm node, int rank, int size)
{
	char me[NODE_HOST_LEN] = "", *hosts = calloc((size_t)size, NODE_HOST_LEN);
	int nsize, *members = calloc((size_t)size, sizeof(int)), j = 0;

	if (!hosts || !members)
		MPI_Abort(MPI_COMM_WORLD, 2);
	gethostname(me, sizeof(me) - 1);
	MPI_Allgather(me, NODE_HOST_LEN, MPI_CHAR, hosts, NODE_HOST_LEN, MPI_CHAR, MPI_COMM_WORLD);
	MPI_Comm_size(node, &nsize);
	MPI_Allgather(&rank, 1, MPI_INT, members, 1, MPI_INT, node);
	for (int r = 0; r < size; r++) {
		if (strcmp(hosts + (size_t)r * NODE_HOST_LEN, me))
			continue;
		if (j >= nsize || members[j] != r) {
			fprintf(stderr, "rank %d: world rank %d is on host %s but not node rank %d\n",
				rank, r, me, j);
			errors++;
		}
		j++;
	}
	expect(j == nsize, "the node communicator holds ranks of other hosts", rank);
	free(members);
	free(hosts);
}

/* The value rank r contributes at index i (the sums wrap, unsigned, as
 * MPI_SUM of MPI_UNSIGNED does). */
static unsigned int coll_val(size_t i, int r)
{
	return (unsigned int)(i * 2654435761u) ^ (unsigned int)r << 24;
}

/* Allreduce (sum) and Bcast of bytes each, every element checked. */
static void check_collectives(MPI_Comm node, int rank, int size, size_t ar_bytes,
			      size_t bc_bytes)
{
	size_t n = ar_bytes / sizeof(unsigned int), m = bc_bytes / sizeof(unsigned int);
	unsigned int *buf = malloc((n > m ? n : m) * sizeof(*buf) + 1);
	size_t bad = 0;
	int nrank, nsize, root = size - 1;
	char host[NODE_HOST_LEN] = "";

	if (!buf)
		MPI_Abort(MPI_COMM_WORLD, 2);
	MPI_Comm_rank(node, &nrank);
	MPI_Comm_size(node, &nsize);
	gethostname(host, sizeof(host) - 1);
	printf("rank %d on %s: node size %d, node rank %d, %s\n", rank, host, nsize, nrank,
	       nrank ? "member" : "leader");
	fflush(stdout);

	for (size_t i = 0; i < n; i++)
		buf[i] = coll_val(i, rank);
	MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_UNSIGNED, MPI_SUM, MPI_COMM_WORLD);
	for (size_t i = 0; i < n; i++) {
		unsigned int want = 0;

		for (int r = 0; r < size; r++)
			want += coll_val(i, r);
		bad += buf[i] != want;
	}
	if (bad)
		fprintf(stderr, "rank %d: allreduce of %zu bytes: %zu elements wrong\n", rank,
			ar_bytes, bad);
	errors += bad != 0;

	for (size_t i = 0; i < m; i++)
		buf[i] = rank == root ? coll_val(i, root) : 0;
	MPI_Bcast(buf, (int)m, MPI_UNSIGNED, root, MPI_COMM_WORLD);
	bad = 0;
	for (size_t i = 0; i < m; i++)
		bad += buf[i] != coll_val(i, root);
	if (bad)
		fprintf(stderr, "rank %d: bcast of %zu bytes from rank %d: %zu elements wrong\n",
			rank, bc_bytes, root, bad);
	errors += bad != 0;
	free(buf);
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
	long ar_bytes, bc_bytes;
	MPI_Comm node, none;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	want = argc > 1 ? atoi(argv[1]) : 0;
	ar_bytes = argc > 3 ? atol(argv[2]) : 0;
	bc_bytes = argc > 3 ? atol(argv[3]) : 0;
	if (ar_bytes < 0 || bc_bytes < 0 || ar_bytes > INT32_MAX || bc_bytes > INT32_MAX) {
		if (rank == 0)
			fprintf(stderr, "usage: mpi_node [node size [allreduce-bytes bcast-bytes]]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}

	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &nrank);
	MPI_Comm_size(node, &nsize);
	if (want && nsize != want) {
		fprintf(stderr, "rank %d: node communicator of %d processes, expected %d\n",
			rank, nsize, want);
		errors++;
	}
	check_same_host(node, rank);
	check_members(node, rank, size);
	if (ar_bytes || bc_bytes)
		check_collectives(node, rank, size, (size_t)ar_bytes, (size_t)bc_bytes);
	if (argc == 3)
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
