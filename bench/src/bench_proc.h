/*
 * bench_proc.h - what the kernel says of this process, for the benchmarks
 * and test programs that report their memory (rdmach_startup,
 * channel/test/mpi_neighbors, test/test_ib_srq).
 */
#ifndef BENCH_PROC_H
#define BENCH_PROC_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A "Key:  N kB" line of /proc/self/FILE (status: VmPin; smaps_rollup:
 * Pss); -1 when absent. */
static inline long bench_proc_kb(const char *file, const char *key)
{
	char path[64], line[256];
	size_t n = strlen(key);
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/%s", file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (kb < 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			kb = strtol(line + n + 1, NULL, 10);
	fclose(f);
	return kb;
}

#endif /* BENCH_PROC_H */
