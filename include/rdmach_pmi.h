/*
 * rdmach_pmi.h - a PMI-1 wire-protocol client, so that stand-alone programs
 * started by Hydra's mpiexec (or by rdmach_run / rdmach_launch_*) get an
 * rdmach_oob_t without linking an MPI library.
 *
 * It reads PMI_FD, PMI_RANK and PMI_SIZE from the environment (the variables
 * Hydra, Slurm's srun --mpi=pmi2 and rdmach_run set) and speaks the text
 * protocol on that socket: init, get_maxes, get_my_kvsname, put,
 * barrier_in, get, finalize; a request line is at most 1024 bytes (Slurm
 * reads no more per request), which bounds the oob's value_max.
 *
 * The server's replies are checked, not trusted: every call (and the oob's
 * put/get/fence) fails with -ETIMEDOUT when no reply comes within
 * RDMACH_PMI_TIMEOUT_MS (default 60 s; a barrier RDMACH_PMI_FENCE_TIMEOUT_MS,
 * default 15 min), -EMSGSIZE for a reply line longer than the server's
 * announced maxima allow, -EPROTO for a reply that is not the one its
 * request expects or that brings more than one line; each with a message.
 * After such a failure the connection is out of step: later calls fail
 * (-EPROTO, or -ECONNRESET once the server closed it) without a request.
 */
#ifndef RDMACH_PMI_H
#define RDMACH_PMI_H

#include "rdmach.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rdmach_pmi rdmach_pmi_t;

/* Is this process running under a PMI-1 server (PMI_FD set)? */
RDMACH_API int rdmach_pmi_available(void);

/* Connect to the PMI server; on success *pmip is set and *oob is filled
 * with callbacks that use it (put/commit/barrier/get). */
RDMACH_API int rdmach_pmi_init(rdmach_pmi_t **pmip, rdmach_oob_t *oob);

/* A plain collective barrier through the PMI server. */
RDMACH_API int rdmach_pmi_barrier(rdmach_pmi_t *pmi);

/* Ask the server to end the whole job (no reply; the server kills every
 * process, this one included).  msg: one line, may be NULL. */
RDMACH_API int rdmach_pmi_abort(rdmach_pmi_t *pmi, int exit_code, const char *msg);

/* Tell the server this process is done, close the socket, free. */
RDMACH_API int rdmach_pmi_finalize(rdmach_pmi_t *pmi);

#ifdef __cplusplus
}
#endif
#endif /* RDMACH_PMI_H */
