/*
 * mpi_neighbors.c - traffic between neighbours only, then optionally between
 * every pair: which connections does an MPI job make?  Each rank exchanges
 * messages of 8 B .. 1 MiB (eager, rendezvous, pipelined and zero-copy
 * paths) with its left and right neighbour in a ring, every byte checked;
 * with "alltoall" an MPI_Alltoall of 4 KiB per pair follows; "pairs256k"
 * adds 16 of 16 KiB (every pair has sent 256 KiB: what a pair's memory
 * costs once it has really talked).  No other
 * communication (no collective in the neighbour phase), so that under
 * RDMACH_CONNECT=demand with RDMACH_STATS=1 each rank's "# connections:"
 * line at MPI_Finalize shows the pairs the program used and no more.
 * Each rank prints "rank R: ok" and exits 0, or names what differed and
 * exits 1.  With MPI_NEIGHBORS_RESOURCES=1 each rank also prints, after
 * each phase, what the kernel holds for it: its RC QPs and memory
 * registrations (`rdma resource show qp|mr`, run between MPI calls, when
 * no connection of this process can be made) and its pinned memory
 * (VmPin):
 *     rank R after PHASE: rc_qps N mrs M mr_bytes B vmpin_kb K
 * With MPI_NEIGHBORS_HOLD_MS=T each rank sleeps T ms, calling nothing,
 * after MPI_Init and after each phase, and half-way prints its
 * proportional set size (bench/host/run-mpi-mem.sh sums them), and each
 * rank says how long its MPI_Init took:
 *     rank R at PHASE: pss K kB
 *     rank R init_ms T
 *
 *   mpiexec -n 8 ./mpi_neighbors [alltoall|pairs256k]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BYTES (1 << 20)
#define ROUNDS 3

#include "mpi_pattern.h"
#include "../../bench/src/bench_proc.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Lines of `rdma resource show what` naming this process, with the
 * "mrlen" values summed into *bytes; -1 when the tool gives nothing. */
static long kernel_count(const char *what, const char *must, long *bytes)
{
	char cmd[64], line[1024], pid[32];
	long n = 0;
	int any = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>/dev/null", what);
	snprintf(pid, sizeof(pid), " pid %d ", (int)getpid());
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *len = strstr(line, " mrlen ");

		any = 1;
		if (!strstr(line, pid) || (must && !strstr(line, must)))
			continue;
		n++;
		if (bytes && len)
			*bytes += strtol(len + 7, NULL, 10);
	}
	return pclose(f) == 0 && any ? n : -1;
}

/* The KiB of the line "key: N kB" in /proc/self/file; -1 if the kernel
 * does not say. */
static void resources(int rank, const char *phase)
{
	long mr_bytes = 0, qps, mrs;

	if (!getenv("MPI_NEIGHBORS_RESOURCES"))
		return;
	qps = kernel_count("qp", "type RC", NULL);
	mrs = kernel_count("mr", NULL, &mr_bytes);
	printf("rank %d after %s: rc_qps %ld mrs %ld mr_bytes %ld vmpin_kb %ld\n",
	       rank, phase, qps, mrs, mr_bytes, bench_proc_kb("status", "VmPin"));
	fflush(stdout);
}

/* MPI_NEIGHBORS_HOLD_MS=T: T ms calling nothing, its PSS read half-way */
static void hold(int rank, const char *phase)
{
	const char *ms = getenv("MPI_NEIGHBORS_HOLD_MS");
	useconds_t half;

	if (!ms)
		return;
	half = (useconds_t)atoi(ms) * 500;
	usleep(half);
	/* its proportional set size: shared pages divided among the
	 * processes that map them */
	printf("rank %d at %s: pss %ld kB\n", rank, phase,
	       bench_proc_kb("smaps_rollup", "Pss"));
	fflush(stdout);
	usleep(half);
}

/* Both neighbours at once, each size a few rounds. */
static void neighbours(int rank, int np, unsigned char *bufs[4])
{
	int left = (rank + np - 1) % np, right = (rank + 1) % np, seq = 0;
	MPI_Request req[4];
	MPI_Status st[4];

	for (size_t n = 8; n <= MAX_BYTES; n *= 8) {
		for (int r = 0; r < ROUNDS; r++, seq++) {
			fill(bufs[0], n, rank, left, seq);
			fill(bufs[1], n, rank, right, seq);
			MPI_Irecv(bufs[2], (int)n, MPI_BYTE, left, seq, MPI_COMM_WORLD, &req[0]);
			MPI_Irecv(bufs[3], (int)n, MPI_BYTE, right, seq, MPI_COMM_WORLD, &req[1]);
			MPI_Isend(bufs[0], (int)n, MPI_BYTE, left, seq, MPI_COMM_WORLD, &req[2]);
			MPI_Isend(bufs[1], (int)n, MPI_BYTE, right, seq, MPI_COMM_WORLD, &req[3]);
			MPI_Waitall(4, req, st);
			check(bufs[2], n, left, rank, seq, "from the left");
			check(bufs[3], n, right, rank, seq, "from the right");
		}
	}
}

/* rounds all-to-alls of n bytes per pair, the rounds' patterns apart */
static void all_to_all(int rank, int np, size_t n, int rounds, int seq)
{
	unsigned char *out = malloc(n * np), *in = malloc(n * np);

	if (!out || !in) {
		fprintf(stderr, "rank %d: no memory\n", rank);
		exit(1);
	}
	for (int r = 0; r < rounds; r++, seq++) {
		for (int p = 0; p < np; p++)
			fill(out + p * n, n, rank, p, seq);
		MPI_Alltoall(out, (int)n, MPI_BYTE, in, (int)n, MPI_BYTE,
			     MPI_COMM_WORLD);
		for (int p = 0; p < np; p++)
			check(in + p * n, n, p, rank, seq, "alltoall");
	}
	free(out);
	free(in);
}

int main(int argc, char **argv)
{
	unsigned char *bufs[4];
	double t0 = now_ms();	/* MPI_Wtime needs MPI_Init */
	int rank, np;

	MPI_Init(&argc, &argv);
	t0 = now_ms() - t0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	if (getenv("MPI_NEIGHBORS_HOLD_MS"))
		printf("rank %d init_ms %.1f\n", rank, t0);
	hold(rank, "init");
	for (int i = 0; i < 4; i++) {
		bufs[i] = malloc(MAX_BYTES);
		if (!bufs[i]) {
			fprintf(stderr, "rank %d: no memory\n", rank);
			return 1;
		}
	}
	neighbours(rank, np, bufs);
	resources(rank, "neighbours");
	hold(rank, "neighbours");
	if (argc > 1 && (!strcmp(argv[1], "alltoall") ||
			 !strcmp(argv[1], "pairs256k"))) {
		all_to_all(rank, np, 4096, 1, 1000);
		resources(rank, "alltoall");
		hold(rank, "alltoall");
	}
	if (argc > 1 && !strcmp(argv[1], "pairs256k")) {
		all_to_all(rank, np, 16384, 16, 2000);
		resources(rank, "pairs256k");
		hold(rank, "pairs256k");
	}
	for (int i = 0; i < 4; i++)
		free(bufs[i]);
	if (errors)
		fprintf(stderr, "rank %d: %d errors\n", rank, errors);
	else
		printf("rank %d: ok\n", rank);
	fflush(stdout);
	MPI_Finalize();
	return errors ? 1 : 0;
}
