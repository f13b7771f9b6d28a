/*
 * rdmach_run - a tiny mpiexec for one host: start N copies of a program
 * under rdmach_launch's built-in PMI-1 server.
 *
 *   rdmach_run -n N [-t timeout_s] [-k] [-q] prog [args...]
 *
 * Exit status: 0 when every rank exits 0; else the first failing rank's
 * exit code (128+signal when it was killed), the code a rank passed to PMI
 * abort, 124 on timeout; 2 on bad arguments, 1 when the launch failed.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmach_launch.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rdmach_run -n N [-t timeout_s] [-k] [-q] prog [args...]\n"
		"  -n N   number of processes (1..256)\n"
		"  -t S   kill every rank after S seconds (exit status 124)\n"
		"  -k     keep going: a failed rank does not kill the others\n"
		"  -q     do not report failed ranks on stderr\n"
		"Ranks get PMI_FD, PMI_RANK, PMI_SIZE (PMI-1, as under Hydra's mpiexec).\n"
		"Environment: RDMACH_LAUNCH_KILL_GRACE_MS (default 2000): SIGTERM-to-SIGKILL grace.\n");
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

	while ((c = getopt(argc, argv, "+n:t:kqh")) != -1) {
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
			usage(stdout);
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
