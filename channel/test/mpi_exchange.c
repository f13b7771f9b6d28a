/*
 * mpi_exchange.c - byte-exact MPI traffic through the CH3 channel: every
 * pair of ranks exchanges messages of sizes 0..8 MB (eager, rendezvous,
 * rdmach pipelined and zero-copy paths) with blocking, non-blocking,
 * synchronous, wildcard-source and strided-datatype sends, many messages in
 * flight at once.  Each byte is checked.  Prints "No Errors" on success
 * (the MPICH test-suite convention) and exits non-zero on any mismatch.
 *
 *   mpiexec -n 4 ./mpi_exchange [max_bytes]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_pattern.h"

/* check() of a receive buffer of n bytes and its guard byte after them
 * (0xee): nothing written past the message. */
static void check_guarded(const unsigned char *buf, size_t n, int src, int dst, int seq,
			  const char *what)
{
	check(buf, n, src, dst, seq, what);
	if (buf[n] != 0xee && errors++ < 10)
		fprintf(stderr, "rank %d: %s: overrun past %zu bytes\n", dst, what, n);
}

/* All-pairs non-blocking exchange of `size` bytes, `depth` messages per
 * pair in flight. */
static void all_pairs(int rank, int np, size_t size, int depth, int sync)
{
	int nreq = 2 * np * depth, k = 0;
	MPI_Request *req = malloc(sizeof(*req) * nreq);
	MPI_Status *st = malloc(sizeof(*st) * nreq);
	unsigned char **sbuf = malloc(sizeof(*sbuf) * np * depth);
	unsigned char **rbuf = malloc(sizeof(*rbuf) * np * depth);

	for (int p = 0; p < np; p++) {
		for (int d = 0; d < depth; d++) {
			int i = p * depth + d;

			rbuf[i] = malloc(size + 1);
			sbuf[i] = malloc(size + 1);
			memset(rbuf[i], 0xee, size + 1);
			fill(sbuf[i], size, rank, p, d);
			MPI_Irecv(rbuf[i], (int)size, MPI_BYTE, p, d, MPI_COMM_WORLD, &req[k++]);
		}
	}
	for (int p = 0; p < np; p++) {
		for (int d = 0; d < depth; d++) {
			int i = p * depth + d;

			if (sync)
				MPI_Issend(sbuf[i], (int)size, MPI_BYTE, p, d, MPI_COMM_WORLD,
					   &req[k++]);
			else
				MPI_Isend(sbuf[i], (int)size, MPI_BYTE, p, d, MPI_COMM_WORLD,
					  &req[k++]);
		}
	}
	MPI_Waitall(k, req, st);
	for (int p = 0; p < np; p++) {
		for (int d = 0; d < depth; d++) {
			int i = p * depth + d;

			check_guarded(rbuf[i], size, p, rank, d, sync ? "issend" : "isend");
			free(rbuf[i]);
			free(sbuf[i]);
		}
	}
	free(req);
	free(st);
	free(sbuf);
	free(rbuf);
}

/* Ring shift with MPI_ANY_SOURCE receives and blocking sends. */
static void ring_any_source(int rank, int np, size_t size)
{
	unsigned char *s = malloc(size + 1), *r = malloc(size + 1);
	int next = (rank + 1) % np, prev = (rank + np - 1) % np;
	MPI_Request rq;
	MPI_Status st;

	fill(s, size, rank, next, 99);
	MPI_Irecv(r, (int)size, MPI_BYTE, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &rq);
	MPI_Send(s, (int)size, MPI_BYTE, next, 99, MPI_COMM_WORLD);
	MPI_Wait(&rq, &st);
	if (st.MPI_SOURCE != prev && errors++ < 10)
		fprintf(stderr, "rank %d: any-source got %d, expected %d\n", rank,
			st.MPI_SOURCE, prev);
	check(r, size, prev, rank, 99, "any-source");
	free(s);
	free(r);
}

/* Messages of mixed sizes back to back from every rank to the next, all
 * in flight at once, some received before they arrive and some after:
 * the receiver's read-ahead changes between a header's worth (after a
 * large payload) and its whole staging buffer (after a small one) inside
 * one stream. */
static void mixed_stream(int rank, int np)
{
	static const size_t sizes[] = { 3000, 1, 40000, 64, 1100, 0, 9000, 200,
					2049, 2047, 100000, 16, 5000, 5000, 1023 };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	int next = (rank + 1) % np, prev = (rank + np - 1) % np;
	unsigned char *s[N], *r[N];
	MPI_Request req[2 * N];
	MPI_Status st[2 * N];
	int k = 0;

	for (int i = 0; i < N; i++) {
		s[i] = malloc(sizes[i] + 1);
		r[i] = malloc(sizes[i] + 1);
		memset(r[i], 0xee, sizes[i] + 1);
		fill(s[i], sizes[i], rank, next, 50 + i);
		if (i % 2 == 0)	/* posted before the data comes */
			MPI_Irecv(r[i], (int)sizes[i], MPI_BYTE, prev, 50 + i,
				  MPI_COMM_WORLD, &req[k++]);
	}
	for (int i = 0; i < N; i++)
		MPI_Isend(s[i], (int)sizes[i], MPI_BYTE, next, 50 + i, MPI_COMM_WORLD,
			  &req[k++]);
	for (int i = 1; i < N; i += 2)	/* unexpected by now, most of them */
		MPI_Irecv(r[i], (int)sizes[i], MPI_BYTE, prev, 50 + i, MPI_COMM_WORLD,
			  &req[k++]);
	MPI_Waitall(k, req, st);
	for (int i = 0; i < N; i++) {
		check_guarded(r[i], sizes[i], prev, rank, 50 + i, "mixed");
		free(s[i]);
		free(r[i]);
	}
}

/* Strided (non-contiguous) vector both ways: every other 8-byte block. */
static void strided(int rank, int np, size_t size)
{
	int blocks = (int)(size / 8);
	int next = (rank + 1) % np, prev = (rank + np - 1) % np;
	MPI_Datatype vec;
	unsigned char *s, *r, *packed;

	if (blocks == 0)
		return;
	s = malloc(2 * size);
	r = malloc(2 * size);
	packed = malloc(size);
	MPI_Type_vector(blocks, 8, 16, MPI_BYTE, &vec);
	MPI_Type_commit(&vec);
	fill(packed, size, rank, next, 7);
	for (int b = 0; b < blocks; b++)
		memcpy(s + 16 * b, packed + 8 * b, 8);
	memset(r, 0, 2 * size);
	MPI_Sendrecv(s, 1, vec, next, 7, r, 1, vec, prev, 7, MPI_COMM_WORLD,
		     MPI_STATUS_IGNORE);
	for (int b = 0; b < blocks; b++)
		memcpy(packed + 8 * b, r + 16 * b, 8);
	check(packed, (size_t)blocks * 8, prev, rank, 7, "strided");
	MPI_Type_free(&vec);
	free(s);
	free(r);
	free(packed);
}

int main(int argc, char **argv)
{
	size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : 8u << 20;
	int rank, np, total;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);

	for (size_t size = 0; size <= max; size = size ? size * 4 : 1) {
		int depth = size <= 65536 ? 8 : 2;

		all_pairs(rank, np, size, depth, 0);
		all_pairs(rank, np, size, 1, 1);
		ring_any_source(rank, np, size);
		strided(rank, np, size);
		/* odd sizes hit partial ring packets */
		all_pairs(rank, np, size + 3, 1, 0);
	}
	for (int i = 0; i < 10; i++)
		mixed_stream(rank, np);
	/* 1 MB buffers malloc-ed (mmap-ed) and freed again and again: the
	 * same addresses come back with new pages (registration cache
	 * invalidation) */
	for (int i = 0; i < 20; i++)
		all_pairs(rank, np, 1 << 20, 1, 0);

	MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		if (total)
			printf("Found %d errors\n", total);
		else
			printf(" No Errors\n");
	}
	MPI_Finalize();
	return total ? 1 : 0;
}
