/*
 * ch3_node.c - CH3 channel "rdma": node awareness.
 *
 * CH3 knows the node of every process (node ids from the process
 * manager's PMI_process_mapping: MPIDI_Populate_vc_node_ids, before the
 * channel starts).  MPICH's generic MPI_Comm_split_type maps
 * MPI_COMM_TYPE_SHARED to one process per communicator unless the device
 * installs its own split_type, as nemesis does and this file does: the
 * node's processes share memory (MPI_Win_allocate_shared, ch3_win.c).
 *
 * rdmach decides by its own host ids (hostname and boot id) which pairs
 * shared memory connects.  The two must agree, or a node communicator
 * would hold processes that cannot share a window: MPI_Init checks every
 * rank against rdmach_peer_local and fails naming both views.
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

int MPIDI_CH3I_Node_init(MPIDI_PG_t *pg, int pg_rank)
{
	for (int i = 0; i < pg->size; i++) {
		int local = rdmach_peer_local(MPIDI_CH3I_rdma_ctx, i);

		if (local < 0)
			return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, __func__, __LINE__,
						    MPI_ERR_OTHER, "**fail", "**fail %s",
						    rdmach_strerror(local));
		if (local != (pg->vct[i].node_id == pg->vct[pg_rank].node_id))
			return node_mismatch(pg, pg_rank, i, local);
	}
	MPIR_Comm_fns = &comm_fns;
	return MPI_SUCCESS;
}
