/*
 * rdmach_launch.h - start N processes on this host under a built-in PMI-1
 * server, so that tests, benchmarks and `rdmach_run` need no mpiexec.  Each
 * child gets PMI_FD, PMI_RANK and PMI_SIZE, as under Hydra, and finds its
 * rdmach_oob_t through rdmach_pmi_init().
 *
 * Like Hydra, when a child exits non-zero or is killed before it said PMI
 * finalize, the others are killed (unless keep_going), so that a failure
 * never leaves the group hanging in a fence: SIGTERM, then SIGKILL after
 * RDMACH_LAUNCH_KILL_GRACE_MS (default 2000).  PMI abort kills everyone
 * even with keep_going.  With keep_going, a barrier that a dead (or
 * finalized) rank can no longer join completes with an error for the
 * survivors (rdmach_pmi_barrier / oob fence return -ECONNRESET).
 * Children die with the launcher (PR_SET_PDEATHSIG); ranks above 0 get
 * /dev/null as stdin.
 */
#ifndef RDMACH_LAUNCH_H
#define RDMACH_LAUNCH_H

#include "rdmach.h"	/* RDMACH_API */

#ifdef __cplusplus
extern "C" {
#endif

struct rdmach_launch_opts {
	int nprocs;		/* >= 1 */
	unsigned timeout_s;	/* kill everything after this; 0 = none */
	int keep_going;		/* a failed child does not kill the rest */
	int quiet;		/* do not report failed children on stderr */
};

/* Child exit status as waitpid() reports it, per rank. */
struct rdmach_launch_result {
	int status[256];
	int timed_out;
	int first_failed;	/* rank whose failure came first, or -1 */
	int exit_code;		/* what a launcher exits with: 0; else the
				 * first failed rank's exit code (128+signal
				 * if killed), a PMI abort's exit code, or
				 * 124 on timeout */
};

/*
 * Fork nprocs children.  Child i runs fn(i, arg) and exits with its return
 * value, or, when fn is NULL, execvp(argv[0], argv).  The parent serves
 * PMI until every child has exited.  Returns 0 when every child exited 0,
 * 1 when one did not (see res), or a negative errno if the launch failed.
 */
RDMACH_API int rdmach_launch(const struct rdmach_launch_opts *opts,
		  int (*fn)(int rank, void *arg), void *arg,
		  char *const argv[], struct rdmach_launch_result *res);

/*
 * For programs that start themselves: when not under a PMI server, run
 * nprocs copies of this very program (/proc/self/exe, same argv) under
 * rdmach_launch and exit with its result; under a PMI server, return 0 at
 * once and let the program go on as one of the ranks.
 */
RDMACH_API int rdmach_launch_self(int argc, char *argv[], int nprocs, unsigned timeout_s);

#ifdef __cplusplus
}
#endif
#endif /* RDMACH_LAUNCH_H */
