/*
 * mpi_pattern.h - the byte pattern of the MPI test programs: what rank src
 * sends rank dst as message seq, filled and checked byte by byte (the first
 * ten differences printed, counted in errors).
 */
#ifndef MPI_PATTERN_H
#define MPI_PATTERN_H

#include <stddef.h>
#include <stdio.h>

static int errors;

static unsigned char pattern(int src, int dst, int seq, size_t i)
{
	return (unsigned char)(src * 31 + dst * 7 + seq * 13 + i * 101 + (i >> 8));
}

static void fill(unsigned char *buf, size_t n, int src, int dst, int seq)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = pattern(src, dst, seq, i);
}

static void check(const unsigned char *buf, size_t n, int src, int dst, int seq,
		  const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] != pattern(src, dst, seq, i)) {
			if (errors++ < 10)
				fprintf(stderr, "rank %d: %s from %d seq %d: byte %zu of %zu is "
					"%u, expected %u\n", dst, what, src, seq, i, n,
					buf[i], pattern(src, dst, seq, i));
			return;
		}
	}
}

#endif /* MPI_PATTERN_H */
