/*
 * rdmach_run - a tiny mpiexec for one host: start N copies of a program
 * under rdmach_launch's built-in PMI-1 server.
 *
 *   rdmach_run -n N [-t timeout_s] [-k] [-q] prog [args...]
 *
 * `rdmach_run --help` is its manual page (exit status included).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmach_launch.h"

#ifndef RDMACH_VERSION
#define RDMACH_VERSION "unknown"
#endif

static const char run_manual[] =
"NAME\n"
"    rdmach_run - start N copies of a program on this host under a PMI-1 server\n"
"\n"
"SYNOPSIS\n"
"    rdmach_run -n N [-t SECONDS] [-k] [-q] PROGRAM [ARGS...]\n"
"    rdmach_run -h | --help | --version\n"
"\n"
"DESCRIPTION\n"
"    A small mpiexec for one host.  Each copy (rank 0..N-1) gets PMI_FD,\n"
"    PMI_RANK and PMI_SIZE, as under Hydra's mpiexec, and talks PMI-1 to\n"
"    rdmach_run, so that programs using rdmach_pmi_init() find their group.\n"
"    Ranks above 0 read stdin from /dev/null.  When a rank exits non-zero\n"
"    or is killed before it finalized PMI, the others get SIGTERM, then\n"
"    SIGKILL after a grace period (see ENVIRONMENT); a rank calling PMI\n"
"    abort ends them all.  Every rank dies with rdmach_run.\n"
"\n"
"OPTIONS\n"
"    -n N\n"
"        Number of processes, 1 to 256 (required).\n"
"    -t SECONDS\n"
"        Kill every rank after SECONDS; rdmach_run then exits with 124.\n"
"    -k  Keep going: a failed rank does not kill the others (a barrier it\n"
"        can no longer join fails for the rest instead of hanging).\n"
"    -q  Do not report failed ranks on stderr.\n"
"    -h, --help\n"
"        This text.\n"
"    --version\n"
"        The rdmach version.\n"
"    Options end at PROGRAM: what follows is passed to it unchanged.\n"
"\n"
"ENVIRONMENT\n"
"    RDMACH_LAUNCH_KILL_GRACE_MS\n"
"        SIGTERM-to-SIGKILL grace when killing ranks (default 2000).\n"
"    The ranks inherit the environment, so RDMACH_* knobs set for rdmach_run\n"
"    apply to every rank: `rdmach_info -c` lists them.\n"
"\n"
"EXIT STATUS\n"
"    0 when every rank exits 0; else the first failing rank's exit code\n"
"    (128+signal when it was killed) or the code a rank gave to PMI abort;\n"
"    124 on timeout (-t); 2 on bad arguments; 1 when the launch failed.\n"
"\n"
"EXAMPLES\n"
"    rdmach_run -n 4 ./my_prog          # 4 ranks over shared memory\n"
"    RDMACH_STATS=1 rdmach_run -n 2 rdmach_latency -m 8:8\n"
"\n"
"SEE ALSO\n"
"    rdmach_info --help; rdmach_launch.h (the launcher as a library call).\n";

static void usage(FILE *out)
{
	fprintf(out, "usage: rdmach_run -n N [-t timeout_s] [-k] [-q] prog [args...]\n"
		"       (rdmach_run --help for more)\n");
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int main(int argc, char *argv[])
{
	struct rdmach_launch_opts opts = { 0 };
	struct rdmach_launch_result res;
	unsigned long v;
	int c, ret;

	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};

	while ((c = getopt_long(argc, argv, "+n:t:kqh", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (parse_uint(optarg, 256, &v) || v < 1) {
				fprintf(stderr, "rdmach_run: -n wants a process count from 1 to 256, not \"%s\"\n",
					optarg);
				return 2;
			}
			opts.nprocs = (int)v;
			break;
		case 't':
			if (parse_uint(optarg, UINT_MAX, &v)) {
				fprintf(stderr, "rdmach_run: -t wants a timeout in seconds, not \"%s\"\n",
					optarg);
				return 2;
			}
			opts.timeout_s = (unsigned)v;
			break;
		case 'k':
			opts.keep_going = 1;
			break;
		case 'q':
			opts.quiet = 1;
			break;
		case 'h':
			fputs(run_manual, stdout);
			return 0;
		case 'V':
			printf("rdmach_run (rdmach) %s\n", RDMACH_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!opts.nprocs || optind >= argc) {
		fprintf(stderr, "rdmach_run: %s\n", !opts.nprocs ?
			"missing -n N" : "missing the program to run");
		usage(stderr);
		return 2;
	}
	ret = rdmach_launch(&opts, NULL, NULL, argv + optind, &res);
	if (ret < 0) {
		fprintf(stderr, "rdmach_run: cannot start %s: %s\n", argv[optind],
			strerror(-ret));
		return 1;
	}
	return ret && !res.exit_code ? 1 : res.exit_code;
}
