/*
 * ch3_compat.h - what differs, for this channel, between the MPICH
 * releases it builds with (4.0.x to 5.0.x).  The channel's files use only
 * the names defined here where MPICH's internal interface changed.
 *
 * Each difference is decided at MPICH's configure time (subconfigure.m4
 * defines RDMACH_CH3_* in mpichconf.h): by compiling a call against the
 * header that declares it when that header stands alone, else by looking
 * for the declaration in CH3's own headers (they need configure's output
 * to compile, so a compile test cannot include them).  No version number
 * is compared: a backport or a patched tree gets what it declares.
 */
#ifndef CH3_COMPAT_H_INCLUDED
#define CH3_COMPAT_H_INCLUDED

/* 4.3: progress hooks are per VCI; CH3 has one, -1 runs them all. */
#ifdef RDMACH_CH3_HOOK_VCI
#define MPIDI_CH3I_Progress_hooks(made) MPIR_Progress_hook_exec_all(-1, (made))
#else
#define MPIDI_CH3I_Progress_hooks(made) MPIR_Progress_hook_exec_all((made))
#endif

/* 5.0: internal collectives take MPICH's internal datatypes
 * (MPIR_BYTE_INTERNAL, defined in mpichconf.h); before, MPI_BYTE. */
#ifdef MPIR_BYTE_INTERNAL
#define MPIDI_CH3I_BYTE MPIR_BYTE_INTERNAL
#else
#define MPIDI_CH3I_BYTE MPI_BYTE
#endif

/* The last argument of internal collectives: MPIR_Errflag_t * (4.0, 4.1),
 * MPIR_Errflag_t (4.2, 4.3), int coll_attr (5.0, where MPIR_Errflag_t is
 * gone).  The channel's collectives go through these, bytes only. */
#if defined(RDMACH_CH3_COLL_ATTR)
typedef int MPIDI_CH3I_Coll_arg_t;
#define MPIDI_CH3I_COLL_ARG_INIT 0
#define MPIDI_CH3I_COLL_ARG(a) (a)
#elif defined(RDMACH_CH3_ERRFLAG_PTR)
typedef MPIR_Errflag_t MPIDI_CH3I_Coll_arg_t;
#define MPIDI_CH3I_COLL_ARG_INIT MPIR_ERR_NONE
#define MPIDI_CH3I_COLL_ARG(a) (&(a))
#else
typedef MPIR_Errflag_t MPIDI_CH3I_Coll_arg_t;
#define MPIDI_CH3I_COLL_ARG_INIT MPIR_ERR_NONE
#define MPIDI_CH3I_COLL_ARG(a) (a)
#endif

/* Every member's `each` bytes at buf + rank * each, in place. */
static inline int MPIDI_CH3I_Allgather_bytes(void *buf, MPI_Aint each, MPIR_Comm *comm)
{
	MPIDI_CH3I_Coll_arg_t a = MPIDI_CH3I_COLL_ARG_INIT;

	return MPIR_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, each, MPIDI_CH3I_BYTE,
			      comm, MPIDI_CH3I_COLL_ARG(a));
}

static inline int MPIDI_CH3I_Bcast_bytes(void *buf, MPI_Aint n, int root, MPIR_Comm *comm)
{
	MPIDI_CH3I_Coll_arg_t a = MPIDI_CH3I_COLL_ARG_INIT;

	return MPIR_Bcast(buf, n, MPIDI_CH3I_BYTE, root, comm, MPIDI_CH3I_COLL_ARG(a));
}

static inline int MPIDI_CH3I_Barrier(MPIR_Comm *comm)
{
	MPIDI_CH3I_Coll_arg_t a = MPIDI_CH3I_COLL_ARG_INIT;

	return MPIR_Barrier(comm, MPIDI_CH3I_COLL_ARG(a));
}

/* 5.0: a process's rank in its node communicator through
 * MPIR_Get_intranode_rank (the table is left out for node-consecutive
 * layouts); before, intranode_table.  Told by MPIR_COMM_ATTR__HIERARCHY,
 * a macro of the same revision of mpir_comm.h: the header in use decides,
 * at compile time. */
#ifdef MPIR_COMM_ATTR__HIERARCHY
#define MPIDI_CH3I_Node_rank(comm, r) MPIR_Get_intranode_rank((comm), (r))
#else
#define MPIDI_CH3I_Node_rank(comm, r) ((comm)->intranode_table[r])
#endif

/* 4.2: the window function allocate_shm gained "int must" (1 from
 * MPI_Win_allocate_shared); the channel tells by the window's flavor,
 * which every version has. */
#ifdef RDMACH_CH3_SHM_MUST
#define MPIDI_CH3I_SHM_MUST_PARAM , int must
#else
#define MPIDI_CH3I_SHM_MUST_PARAM
#endif

#endif /* CH3_COMPAT_H_INCLUDED */
