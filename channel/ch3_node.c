/*
 * ch3_node.c - CH3 channel "rdma": node awareness.
 *
 * CH3 knows the node of every process (node ids from the process
 * manager's PMI_process_mapping: MPIR_Process.node_map, copied into the
 * VCs by MPIDI_Populate_vc_node_ids before the channel starts).  MPICH's
 * generic MPI_Comm_split_type maps MPI_COMM_TYPE_SHARED to one process
 * per communicator unless the device installs its own split_type, as
 * nemesis does and this file does: the node's processes share memory
 * (MPI_Win_allocate_shared, ch3_win.c).
 *
 * The mapping is a hint: Slurm's for `srun -m arbitrary` puts every rank
 * on a node of its own, and Hydra counts two names of one host as two
 * nodes.  rdmach knows where the ranks run (host ids: hostname and boot
 * id, which decide where shared memory reaches), so where the two group
 * the ranks differently MPICH's node ids are rewritten from rdmach's host
 * numbers, before MPI_COMM_WORLD and its node communicators are built.
 * Where rdmach has not read every host id (RDMACH_CONNECT=demand with a
 * mapping, which it checks as it goes) the node ids stay and every rank
 * is checked against rdmach_peer_local.
 */
#include "mpidi_ch3_impl.h"

static int split_type(MPIR_Comm *user_comm, int stype, int key, MPIR_Info *info,
		      MPIR_Comm **newcomm)
{
	MPIR_Comm *comm = NULL;
	int mpi_errno;

	/* a copy of user_comm ordered by key (none for MPI_UNDEFINED) */
	mpi_errno = MPIR_Comm_split_impl(user_comm, stype == MPI_UNDEFINED ? MPI_UNDEFINED : 0,
					 key, &comm);
	if (mpi_errno)
		return mpi_errno;
	if (stype == MPI_UNDEFINED)
		*newcomm = NULL;
	else if (stype == MPI_COMM_TYPE_SHARED)
		mpi_errno = MPIR_Comm_split_type_node_topo(comm, key, info, newcomm);
	else if (stype == MPIX_COMM_TYPE_NEIGHBORHOOD)
		mpi_errno = MPIR_Comm_split_type_neighborhood(comm, stype, key, info, newcomm);
	else	/* the generic code, which does not call back here */
		mpi_errno = MPIR_Comm_split_type(comm, stype, key, info, newcomm);
	if (comm)
		MPIR_Comm_free_impl(comm);
	return mpi_errno;
}

static MPIR_Commops comm_fns = { split_type };

static int node_mismatch(MPIDI_PG_t *pg, int me, int peer, int rdmach_local)
{
	int mpi_errno = MPI_SUCCESS;
	char msg[400];

	snprintf(msg, sizeof(msg),
		 "ch3:rdma: MPICH's node ids (the process manager's PMI_process_mapping) "
		 "put rank %d on node %d and rank %d on node %d, but rdmach's host ids "
		 "(hostname and boot id) put them on %s; the host names given to "
		 "mpiexec must be the hosts' own names", me, pg->vct[me].node_id, peer,
		 pg->vct[peer].node_id, rdmach_local ? "the same host" : "different hosts");
	MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**fail", "**fail %s", msg);
	return mpi_errno;
}

static int rdma_error(int rc)
{
	return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, __func__, __LINE__,
				    MPI_ERR_OTHER, "**fail", "**fail %s", rdmach_strerror(rc));
}

/* Without every host number: MPICH's node ids, checked rank by rank. */
static int check_node_ids(MPIDI_PG_t *pg, int pg_rank)
{
	for (int i = 0; i < pg->size; i++) {
		int local = rdmach_peer_local(MPIDI_CH3I_rdma_ctx, i);

		if (local < 0)
			return rdma_error(local);
		if (local != (pg->vct[i].node_id == pg->vct[pg_rank].node_id))
			return node_mismatch(pg, pg_rank, i, local);
	}
	return MPI_SUCCESS;
}

/* Every rank's host number into host[] (0 .. *nhosts - 1): MPI_SUCCESS;
 * *nhosts = 0 when rdmach has not read every host id. */
static int read_hosts(int size, int *host, int *nhosts)
{
	int n = 0;

	for (int i = 0; i < size; i++) {
		int h = rdmach_peer_host(MPIDI_CH3I_rdma_ctx, i);

		if (h == -ENODATA) {
			*nhosts = 0;
			return MPI_SUCCESS;
		}
		if (h < 0)
			return rdma_error(h);
		host[i] = h;
		n = h >= n ? h + 1 : n;
	}
	*nhosts = n;
	return MPI_SUCCESS;
}

/* Out of memory while setting up the node ids (fatal: MPI_Init fails). */
static int node_nomem(const char *fn, int line)
{
	return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, fn, line,
				    MPI_ERR_OTHER, "**nomem", 0);
}

/* Do MPICH's node ids group the ranks as the host numbers do: one node id
 * per host and one host per node id? */
static int same_grouping(MPIDI_PG_t *pg, const int *host, int nhosts)
{
	int *node_of_host = MPL_malloc(nhosts * sizeof(int), MPL_MEM_OTHER);
	int *host_of_node = MPL_malloc(pg->size * sizeof(int), MPL_MEM_OTHER);
	int same = node_of_host && host_of_node;

	for (int h = 0; same && h < nhosts; h++)
		node_of_host[h] = -1;
	for (int i = 0; same && i < pg->size; i++)
		host_of_node[i] = -1;
	for (int i = 0; same && i < pg->size; i++) {
		int node = pg->vct[i].node_id, h = host[i];

		if (node < 0 || node >= pg->size) {
			same = 0;
		} else if (node_of_host[h] < 0 && host_of_node[node] < 0) {
			node_of_host[h] = node;
			host_of_node[node] = h;
		} else {
			same = node_of_host[h] == node && host_of_node[node] == h;
		}
	}
	MPL_free(node_of_host);
	MPL_free(host_of_node);
	return same;
}

/* The host numbers as MPICH's node ids: the VCs' (MPID_Get_node_id in
 * 4.x), MPIR_Process.node_map (in 5.0) and what MPICH derives from it
 * (its node count, each node's first rank, this node's ranks). */
static int set_node_ids(MPIDI_PG_t *pg, int pg_rank, const int *host, int nhosts)
{
	int *root = MPL_malloc(nhosts * sizeof(int), MPL_MEM_ADDRESS), *local;
	int nlocal = 0, lrank = 0;

	if (!root)
		return node_nomem(__func__, __LINE__);
	for (int h = 0; h < nhosts; h++)
		root[h] = -1;
	for (int i = 0; i < pg->size; i++) {
		if (root[host[i]] < 0)
			root[host[i]] = i;
		if (host[i] != host[pg_rank])
			continue;
		if (i == pg_rank)
			lrank = nlocal;
		nlocal++;
	}
	local = MPL_malloc(nlocal * sizeof(int), MPL_MEM_ADDRESS);
	if (!local) {
		MPL_free(root);
		return node_nomem(__func__, __LINE__);
	}
	nlocal = 0;
	for (int i = 0; i < pg->size; i++) {
		pg->vct[i].node_id = host[i];
		MPIR_Process.node_map[i] = host[i];
		if (host[i] == host[pg_rank])
			local[nlocal++] = i;
	}
	MPL_free(MPIR_Process.node_root_map);
	MPL_free(MPIR_Process.node_local_map);
	MPIR_Process.node_root_map = root;
	MPIR_Process.node_local_map = local;
	MPIR_Process.num_nodes = nhosts;
	MPIR_Process.local_size = nlocal;
	MPIR_Process.local_rank = lrank;
	return MPI_SUCCESS;
}

int MPIDI_CH3I_Node_init(MPIDI_PG_t *pg, int pg_rank)
{
	int *host = MPL_malloc(pg->size * sizeof(int), MPL_MEM_OTHER);
	int nhosts, mpi_errno;

	if (!host)
		return node_nomem(__func__, __LINE__);
	mpi_errno = read_hosts(pg->size, host, &nhosts);
	if (!mpi_errno && !nhosts)
		mpi_errno = check_node_ids(pg, pg_rank);
	else if (!mpi_errno && !same_grouping(pg, host, nhosts))
		mpi_errno = set_node_ids(pg, pg_rank, host, nhosts);
	MPL_free(host);
	if (!mpi_errno)
		MPIR_Comm_fns = &comm_fns;
	return mpi_errno;
}
