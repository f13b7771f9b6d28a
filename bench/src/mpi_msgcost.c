/*
 * mpi_msgcost - the work an MPI library does per small message, without
 * its waiting: rank 0 sends windows of -w messages (MPI_Isend each, then
 * MPI_Waitall) in measured_send(); rank 1 posts the window's receives
 * (MPI_Irecv each, then MPI_Waitall) in measured_recv() only once the
 * whole window is in shared memory, so its MPI_Waitall finds every message
 * there and never polls an empty queue; the next window starts once the
 * receiver is done.  The two ranks say "sent" and "received" through a
 * shared-memory word outside MPI, which no measurement sees.
 *
 * With -b the calls are the blocking ones of the latency benchmarks
 * (MPI_Send each, MPI_Recv each): CH3's eager-short path, one message
 * at a time.
 *
 * Run under callgrind by bench/host/run-msgcost.sh, which counts the
 * instructions inside measured_send and measured_recv (callgrind
 * --toggle-collect) and divides by the messages: a figure that does not
 * move with the host's speed, where timings here move by up to 3x.
 * Alone it only checks that it runs: `mpiexec -n 2 mpi_msgcost -m 8:8`.
 * Same-host ranks only (the side channel is a file in /dev/shm).
 */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mpi_bench.h"

#define MC_TAG 7
#define MC_SYNC_TIMEOUT_S 60

struct mc_sync {
	_Atomic long sent;	/* windows rank 0 has completed */
	_Atomic long received;	/* windows rank 1 has completed */
};

static struct mc_sync *mc_map(int rank)
{
	char path[64] = "/dev/shm/mpi_msgcost.XXXXXX";
	struct mc_sync *s;
	int fd = -1;

	if (rank == 0) {
		fd = mkstemp(path);
		if (fd < 0 || ftruncate(fd, sizeof(*s))) {
			perror("mpi_msgcost: /dev/shm");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
	if (rank == 1)
		fd = open(path, O_RDWR);
	s = fd < 0 ? MAP_FAILED :
	    mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s == MAP_FAILED) {
		perror("mpi_msgcost: mapping the side channel");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	close(fd);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		unlink(path);
	return s;
}

/* Wait, outside MPI, until *word reaches want; bounded. */
static void mc_wait(_Atomic long *word, long want, const char *what)
{
	double deadline = bench_now_us() + MC_SYNC_TIMEOUT_S * 1e6;

	while (atomic_load_explicit(word, memory_order_acquire) < want) {
		if (bench_now_us() > deadline) {
			fprintf(stderr, "mpi_msgcost: no \"%s\" for window %ld "
				"within %d s\n", what, want, MC_SYNC_TIMEOUT_S);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		sched_yield();
	}
}

static inline __attribute__((always_inline)) void
mc_send(char *buf, int n, int w, MPI_Request *rq, MPI_Status *st)
{
	for (int i = 0; i < w; i++)
		MPI_Isend(buf, n, MPI_CHAR, 1, MC_TAG, MPI_COMM_WORLD, &rq[i]);
	MPI_Waitall(w, rq, st);
}

static inline __attribute__((always_inline)) void
mc_recv(char *buf, int n, int w, MPI_Request *rq, MPI_Status *st)
{
	for (int i = 0; i < w; i++)
		MPI_Irecv(buf, n, MPI_CHAR, 0, MC_TAG, MPI_COMM_WORLD, &rq[i]);
	MPI_Waitall(w, rq, st);
}

static inline __attribute__((always_inline)) void
mc_send_blocking(char *buf, int n, int w, MPI_Request *rq, MPI_Status *st)
{
	(void)rq;
	(void)st;
	for (int i = 0; i < w; i++)
		MPI_Send(buf, n, MPI_CHAR, 1, MC_TAG, MPI_COMM_WORLD);
}

static inline __attribute__((always_inline)) void
mc_recv_blocking(char *buf, int n, int w, MPI_Request *rq, MPI_Status *st)
{
	(void)rq;
	for (int i = 0; i < w; i++)
		MPI_Recv(buf, n, MPI_CHAR, 0, MC_TAG, MPI_COMM_WORLD, st);
}

/* The counted windows and the warm-up ones: the same code, two names
 * (run-msgcost.sh counts inside measured_*).  st: a real array, not
 * MPI_STATUSES_IGNORE, which gcc 12 mistakes for an empty one (as in
 * mpi_bw). */
#define MC_WINDOW(name, body)                                               \
	static __attribute__((noinline, noclone)) void                      \
	name(char *buf, int n, int w, MPI_Request *rq, MPI_Status *st)       \
	{                                                                   \
		body(buf, n, w, rq, st);                                    \
	}
MC_WINDOW(measured_send, mc_send)
MC_WINDOW(measured_recv, mc_recv)
MC_WINDOW(warm_send, mc_send)
MC_WINDOW(warm_recv, mc_recv)
MC_WINDOW(measured_send_blocking, mc_send_blocking)
MC_WINDOW(measured_recv_blocking, mc_recv_blocking)
MC_WINDOW(warm_send_blocking, mc_send_blocking)
MC_WINDOW(warm_recv_blocking, mc_recv_blocking)

typedef void mc_window_fn(char *, int, int, MPI_Request *, MPI_Status *);

static void mc_run(int rank, struct mc_sync *s, long *done, char *buf, size_t size,
		   int w, long warmup, long rounds, int blocking,
		   MPI_Request *rq, MPI_Status *st)
{
	mc_window_fn *warm = rank == 0 ? (blocking ? warm_send_blocking : warm_send) :
				(blocking ? warm_recv_blocking : warm_recv);
	mc_window_fn *measured = rank == 0 ?
		(blocking ? measured_send_blocking : measured_send) :
		(blocking ? measured_recv_blocking : measured_recv);

	for (long r = 0; r < warmup + rounds; r++) {
		long k = ++*done;

		if (rank == 0) {
			mc_wait(&s->received, k - 1, "received");
			(r < warmup ? warm : measured)(buf, (int)size, w, rq, st);
			atomic_store_explicit(&s->sent, k, memory_order_release);
		} else {
			mc_wait(&s->sent, k, "sent");
			(r < warmup ? warm : measured)(buf, (int)size, w, rq, st);
			atomic_store_explicit(&s->received, k, memory_order_release);
		}
	}
	mc_wait(rank == 0 ? &s->received : &s->sent, *done,
		rank == 0 ? "received" : "sent");
}

static void mc_usage(const char *prog, FILE *f)
{
	fprintf(f, "usage: mpiexec -n 2 %s [-m MIN:MAX] [-w W] [-i ROUNDS] [-x WARMUP] [-b]\n"
		"  -m MIN:MAX  message sizes, powers of two (default 1:1K; at most 4K)\n"
		"  -w W        messages per window (default 16; W x size <= 32 KiB)\n"
		"  -i ROUNDS   counted windows per size (default 20)\n"
		"  -x WARMUP   warm-up windows per size (default 5)\n"
		"  -b          blocking calls: MPI_Send and MPI_Recv instead of\n"
		"              MPI_Isend / MPI_Irecv + MPI_Waitall\n"
		"Counts come from bench/host/run-msgcost.sh (callgrind); alone the\n"
		"program only runs the windows.\n", prog);
}

static void mc_parse(int argc, char **argv, struct bench_opts *o, int *blocking)
{
	const char *slash = strrchr(argv[0], '/');
	int c;

	memset(o, 0, sizeof(*o));
	o->prog = slash ? slash + 1 : argv[0];
	o->min_size = 1;
	o->max_size = 1024;
	o->window = 16;
	o->iters = 20;
	o->warmup = 5;
	*blocking = 0;
	while ((c = getopt(argc, argv, "m:w:i:x:bh")) != -1) {
		switch (c) {
		case 'm':
			if (bench_parse_range(optarg, &o->min_size, &o->max_size)) {
				fprintf(stderr, "bad size range '%s' (e.g. 1:1K)\n", optarg);
				exit(2);
			}
			break;
		case 'w': o->window = (int)bench_parse_count(optarg, "-w"); break;
		case 'i': o->iters = bench_parse_count(optarg, "-i"); break;
		case 'x': o->warmup = bench_parse_count(optarg, "-x"); break;
		case 'b': *blocking = 1; break;
		case 'h': mc_usage(o->prog, stdout); exit(0);
		default: mc_usage(o->prog, stderr); exit(2);
		}
	}
	if (optind != argc || o->window < 1 || o->iters < 1 || o->max_size > 4096 ||
	    o->window * (o->max_size + 64) > 32768) {
		mc_usage(o->prog, stderr);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct mc_sync *s;
	MPI_Request *rq;
	MPI_Status *st;
	char lib[128];
	char *buf;
	long done = 0;
	int rank, blocking;

	mc_parse(argc, argv, &o, &blocking);
	rank = mb_start(&argc, &argv, &o);
	s = mc_map(rank);
	rq = calloc((size_t)o.window, sizeof(*rq));
	st = calloc((size_t)o.window, sizeof(*st));
	buf = bench_alloc(o.max_size);
	if (!rq || !st) {
		fprintf(stderr, "mpi_msgcost: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	mb_library(lib, sizeof(lib));
	if (rank == 0)
		printf("# mpi_msgcost (%s): windows of %d messages (%s), %ld "
		       "counted per size after %ld warm-up\n# Size  Messages\n",
		       lib, o.window, blocking ? "MPI_Send / MPI_Recv" :
		       "MPI_Isend / MPI_Irecv + MPI_Waitall", o.iters, o.warmup);
	for (size_t size = o.min_size; size <= o.max_size; size = size ? 2 * size : 1) {
		mc_run(rank, s, &done, buf, size, o.window, o.warmup, o.iters,
		       blocking, rq, st);
		if (rank == 0)
			printf("%-10zu %18ld\n", size, o.iters * o.window);
	}
	munmap(s, sizeof(*s));
	free(rq);
	free(st);
	free(buf);
	MPI_Finalize();
	return 0;
}
