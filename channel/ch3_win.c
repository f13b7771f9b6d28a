/*
 * ch3_win.c - CH3 channel "rdma": RMA window hooks and shared-memory
 * windows.
 *
 * MPI_Win_allocate_shared (and MPI_Win_allocate) over processes of one
 * node get one shared segment, created by the node's first process and
 * attached by the others, as nemesis does: the node's memory back to back
 * (each rank's start page-aligned with alloc_shared_noncontig), then a
 * process-shared mutex.  CH3 then applies RMA operations between node
 * peers straight to that memory (mpid_rma_shm.h: shm_allocated,
 * shm_base_addrs, the mutex around accumulates) and MPI_Win_shared_query
 * returns peers' addresses.  Peers on other nodes go through the pipes.
 * MPI_Win_create windows stay as CH3 makes them (no detect_shm).
 */
#include "mpidi_ch3_impl.h"

#include <unistd.h>

/* the mutex after the data, on its own cache line */
#define SHM_MUTEX_SPACE MPL_ROUND_UP_ALIGN(sizeof(pthread_mutex_t), 64)

static int shm_fail(const char *what, int err)
{
	return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
				    MPI_ERR_OTHER, "**fail", "**fail %s %d",
				    what, err);
}

static int mutex_create(pthread_mutex_t *m)
{
	pthread_mutexattr_t attr;
	int err = pthread_mutexattr_init(&attr);

	if (!err)
		err = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	if (!err)
		err = pthread_mutex_init(m, &attr);
	pthread_mutexattr_destroy(&attr);
	return err ? shm_fail("ch3:rdma: shared window mutex", err) : MPI_SUCCESS;
}

/* Node rank 0 creates the segment (and the mutex in it) and removes its
 * name once every peer attached: it goes when the last one detaches. */
static int segment_create(MPIR_Win *win, MPIR_Comm *node, MPI_Aint data_len)
{
	char *name = NULL;
	int err = MPL_shm_seg_create_and_attach(win->shm_seg_hnd, win->shm_seg_len,
						&win->shm_seg, 0);

	if (err)
		return shm_fail("ch3:rdma: shared window segment", err);
	win->shm_mutex = (pthread_mutex_t *) ((char *) win->shm_seg + data_len);
	err = mutex_create(win->shm_mutex);
	if (!err)
		err = MPL_shm_hnd_get_serialized_by_ref(win->shm_seg_hnd, &name);
	if (!err)
		err = MPIDI_CH3I_Bcast_bytes(name, MPL_SHM_GHND_SZ, 0, node);
	if (!err)
		err = MPIDI_CH3I_Barrier(node);
	if (!err && MPL_shm_seg_remove(win->shm_seg_hnd))
		err = shm_fail("ch3:rdma: removing the shared window segment's name", 0);
	return err;
}

static int segment_attach(MPIR_Win *win, MPIR_Comm *node, MPI_Aint data_len)
{
	char name[MPL_SHM_GHND_SZ] = { 0 };
	int err = MPIDI_CH3I_Bcast_bytes(name, MPL_SHM_GHND_SZ, 0, node);

	if (err)
		return err;
	if (MPL_shm_hnd_deserialize(win->shm_seg_hnd, name, strlen(name)) ||
	    MPL_shm_seg_attach(win->shm_seg_hnd, win->shm_seg_len, &win->shm_seg, 0))
		return shm_fail("ch3:rdma: attaching the shared window segment", 0);
	win->shm_mutex = (pthread_mutex_t *) ((char *) win->shm_seg + data_len);
	return MPIDI_CH3I_Barrier(node);
}

/* Bytes each node rank's memory takes in the segment. */
static MPI_Aint slot(MPI_Aint size, int noncontig)
{
	return noncontig ? MPL_ROUND_UP_ALIGN(size, (MPI_Aint) sysconf(_SC_PAGESIZE)) : size;
}

/* The segment of a window over node (sizes: every node rank's size), and
 * every node rank's base in it (NULL for ranks of size 0). */
static int shm_segment(MPIR_Win *win, MPIR_Comm *node, const MPI_Aint *sizes)
{
	int n = node->local_size, noncontig = win->info_args.alloc_shared_noncontig, err;
	MPI_Aint data_len = 0, off = 0;

	for (int i = 0; i < n; i++)
		data_len += slot(sizes[i], noncontig);
	data_len = MPL_ROUND_UP_ALIGN(data_len, 64);
	win->shm_seg_len = data_len + SHM_MUTEX_SPACE;
	if (MPL_shm_hnd_init(&win->shm_seg_hnd))
		return shm_fail("ch3:rdma: shared window handle", 0);
	err = node->rank == 0 ? segment_create(win, node, data_len)
			      : segment_attach(win, node, data_len);
	for (int i = 0; !err && i < n; i++) {
		win->shm_base_addrs[i] = sizes[i] ? (char *) win->shm_seg + off : NULL;
		off += slot(sizes[i], noncontig);
	}
	return err;
}

static int shm_window(MPIR_Win *win, MPIR_Comm *node, MPI_Aint size)
{
	int n = node->local_size, err;
	MPI_Aint *sizes = MPL_malloc(n * sizeof(MPI_Aint), MPL_MEM_RMA);

	win->shm_base_addrs = MPL_malloc(n * sizeof(void *), MPL_MEM_RMA);
	if (!sizes || !win->shm_base_addrs) {
		MPL_free(sizes);
		return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
					    MPI_ERR_OTHER, "**nomem", NULL);
	}
	sizes[node->rank] = size;
	err = MPIDI_CH3I_Allgather_bytes(sizes, sizeof(MPI_Aint), node);
	if (!err)
		err = shm_segment(win, node, sizes);
	MPL_free(sizes);
	if (!err)
		win->shm_allocated = TRUE;
	return err;
}

static int win_allocate_shm(MPI_Aint size, int disp_unit, MPIR_Info *info, MPIR_Comm *comm,
			    void *base_ptr, MPIR_Win **win_ptr MPIDI_CH3I_SHM_MUST_PARAM)
{
	MPIR_Win *win = *win_ptr;
	MPIR_Comm *node = win->comm_ptr->node_comm;
	int err;

	/* MPI_Win_allocate_shared needs every process on this node */
	if (win->create_flavor == MPI_WIN_FLAVOR_SHARED && win->comm_ptr->local_size > 1 &&
	    (!node || node->local_size < win->comm_ptr->local_size))
		return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
					    MPI_ERR_OTHER, "**winallocnotshared", NULL);
	if (!node)	/* alone on its node */
		return MPIDI_CH3U_Win_allocate_no_shm(size, disp_unit, info, comm, base_ptr,
						      win_ptr);
	err = shm_window(win, node, size);
	if (err)
		return err;
	win->base = size ? win->shm_base_addrs[node->rank] : NULL;
	*(void **) base_ptr = win->base;
	return MPIDI_CH3U_Win_fns.gather_info(win->base, size, disp_unit, info, comm, win_ptr);
}

static int win_shared_query(MPIR_Win *win, int rank, MPI_Aint *size, int *disp_unit,
			    void *base_ptr)
{
	int local;

	if (!win->shm_seg)
		return MPIDI_CH3U_Win_shared_query(win, rank, size, disp_unit, base_ptr);
	if (rank == MPI_PROC_NULL) {	/* the first rank with memory */
		for (rank = 0; rank < win->comm_ptr->local_size - 1; rank++)
			if (win->basic_info_table[rank].size > 0)
				break;
	}
	local = MPIDI_CH3I_Node_rank(win->comm_ptr, rank);
	*size = local >= 0 ? win->basic_info_table[rank].size : 0;
	*disp_unit = local >= 0 ? win->basic_info_table[rank].disp_unit : 0;
	*(void **) base_ptr = local >= 0 ? win->shm_base_addrs[local] : NULL;
	return MPI_SUCCESS;
}

static int win_init(MPI_Aint size, int disp_unit, int create_flavor, int model,
		    MPIR_Info *info, MPIR_Comm *comm, MPIR_Win **win_ptr)
{
	(*win_ptr)->shm_seg = NULL;
	(*win_ptr)->shm_seg_len = 0;
	(*win_ptr)->shm_mutex = NULL;
	return MPI_SUCCESS;
}

/* After CH3's barrier on the window: nobody takes the mutex any more (a
 * process-shared mutex holds no kernel resource: it goes with the
 * segment).  shm_allocated stays TRUE: CH3 must not free the base. */
static int win_free(MPIR_Win **win_ptr)
{
	MPIR_Win *win = *win_ptr;

	MPL_free(win->shm_base_addrs);
	win->shm_base_addrs = NULL;
	if (!win->shm_seg)
		return MPI_SUCCESS;
	win->shm_mutex = NULL;
	if (MPL_shm_seg_detach(win->shm_seg_hnd, &win->shm_seg, win->shm_seg_len))
		return shm_fail("ch3:rdma: detaching the shared window segment", 0);
	MPL_shm_hnd_finalize(&win->shm_seg_hnd);
	win->shm_seg = NULL;
	return MPI_SUCCESS;
}

int MPIDI_CH3_Win_fns_init(MPIDI_CH3U_Win_fns_t *win_fns)
{
	win_fns->allocate_shm = win_allocate_shm;
	win_fns->shared_query = win_shared_query;
	return MPI_SUCCESS;
}

int MPIDI_CH3_Win_hooks_init(MPIDI_CH3U_Win_hooks_t *win_hooks)
{
	win_hooks->win_init = win_init;
	win_hooks->win_free = win_free;
	return MPI_SUCCESS;
}

int MPIDI_CH3_Win_pkt_orderings_init(MPIDI_CH3U_Win_pkt_ordering_t *win_pkt_orderings)
{
	/* one FIFO pipe per pair: flushes are ordered after the operations */
	win_pkt_orderings->am_flush_ordered = 1;
	return MPI_SUCCESS;
}
