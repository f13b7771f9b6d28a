/*
 * raw_shm_pingpong - the physical floor under the shared-memory transport:
 * two processes (fork) ping-pong through one MAP_SHARED|MAP_ANONYMOUS
 * mapping with nothing but a sequence flag per direction.  Prints one-way
 * latency (half the round trip) in the OSU format.
 *
 *   size 0:        the flag alone (one cache line each way);
 *   size 1..56:    payload in the flag's cache line (e.g. the 8-byte row);
 *   larger:        the payload already sits in a shared buffer, the reader
 *                  copies it out once (the single-copy floor); with -2 the
 *                  writer copies it in first (the floor of a two-copy
 *                  protocol through a bounce buffer).
 *
 *   raw_shm_pingpong [-m 0:4M] [-i N] [-I N] [-x N] [-X N] [-b N] [-p CPU,CPU] [-P] [-r N] [-2] [-v]
 *   -p A,B pins the processes to CPUs A and B; -P pins to the first two
 *   CPUs this process may use.  -r N: each message's flag (and inline
 *   payload) goes to the next of N lines, a ring, as in rdma_shm's rings,
 *   instead of one fixed line per direction: the cost of a ring's walk
 *   through memory, with no other code (rdma_shm/README.md, line ring).
 *
 * Memory ordering: the writer fills the payload then stores the flag with
 * release semantics; the reader loads the flag with acquire semantics and
 * only then reads the payload.  A buffer is rewritten only after its reader
 * has answered, so no payload is overwritten while being read.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"

#define RAW_LINE	64
#define RAW_INLINE	(RAW_LINE - sizeof(uint64_t))

/* A flag and the payload that fits beside it. */
struct raw_line {
	uint64_t seq;
	uint8_t inl[RAW_INLINE];
};

/* One direction: the flag line, padded to two lines so that the adjacent
 * line prefetcher does not couple the two directions. */
struct raw_dir {
	struct raw_line line;
	uint8_t pad[RAW_LINE];
} __attribute__((aligned(2 * RAW_LINE)));

struct raw_shared {
	struct raw_dir dir[2];		/* [0]: ping, [1]: pong */
};

struct raw {
	struct raw_shared *sh;
	uint8_t *data[2];		/* large payloads, one per direction */
	struct raw_line *ring[2];	/* -r: flag lines, one ring per direction */
	unsigned nlines;		/* lines per ring (0: the fixed line) */
	pid_t peer_pid;			/* child for the parent, parent for the child */
	int rank;
	int copy_in;			/* -2 or -v: the writer copies large payloads in */
	uint64_t seq;			/* last flag value used, both directions */
};

/* The line that carries flag value seq in direction dir (each direction
 * sees every other value of the shared count). */
static struct raw_line *raw_flag_line(const struct raw *r, int dir,
				      uint64_t seq)
{
	if (!r->nlines)
		return &r->sh->dir[dir].line;
	return &r->ring[dir][(seq >> 1) % r->nlines];
}

static void raw_send(struct raw *r, int dir, const void *src, size_t size)
{
	uint64_t seq = ++r->seq;
	struct raw_line *d = raw_flag_line(r, dir, seq);

	if (size <= RAW_INLINE)
		memcpy(d->inl, src, size);
	else if (r->copy_in)
		memcpy(r->data[dir], src, size);
	__atomic_store_n(&d->seq, seq, __ATOMIC_RELEASE);
}

/* A peer that died would leave us spinning forever: look now and then. */
static void raw_check_peer(const struct raw *r)
{
	int st;

	if (r->rank == 1 ? getppid() != r->peer_pid :
	    waitpid(r->peer_pid, &st, WNOHANG) != 0) {
		fprintf(stderr, "raw_shm_pingpong[rank %d]: peer process %d "
			"is gone\n", r->rank, (int)r->peer_pid);
		exit(1);
	}
}

static void raw_recv(struct raw *r, int dir, void *dst, size_t size)
{
	uint64_t want = ++r->seq;
	struct raw_line *d = raw_flag_line(r, dir, want);
	unsigned spins = 0;

	while (__atomic_load_n(&d->seq, __ATOMIC_ACQUIRE) != want)
		if (++spins % (1u << 24) == 0)
			raw_check_peer(r);
	if (size <= RAW_INLINE)
		memcpy(dst, d->inl, size);
	else
		memcpy(dst, r->data[dir], size);
}

static void raw_check(const struct raw *r, const void *buf, size_t size,
		      unsigned seed, long iter)
{
	long bad = bench_check(buf, size, seed);

	if (bad < 0)
		return;
	fprintf(stderr, "raw_shm_pingpong[rank %d]: DATA MISMATCH: size %zu, "
		"iteration %ld, byte %ld\n", r->rank, size, iter, bad);
	exit(1);
}

/* One size on both ranks; rank 0 returns the one-way latency in us. */
static double raw_run(struct raw *r, const struct bench_opts *o, char *sbuf,
		      char *rbuf, size_t size)
{
	long i, iters, warmup;
	struct bench_clock clk = { .n = 0, .per_batch = 1 };

	bench_iters(o, size, &iters, &warmup);
	for (i = 0; i < warmup + iters; i++) {
		if (r->rank == 0) {
			if (i >= warmup)
				bench_clock_tick(&clk, o, iters, i - warmup);
			if (o->validate)
				bench_fill(sbuf, size, (unsigned)(2 * i));
			raw_send(r, 0, sbuf, size);
			raw_recv(r, 1, rbuf, size);
			if (o->validate)
				raw_check(r, rbuf, size, (unsigned)(2 * i + 1), i);
		} else {
			raw_recv(r, 0, rbuf, size);
			if (o->validate) {
				raw_check(r, rbuf, size, (unsigned)(2 * i), i);
				bench_fill(sbuf, size, (unsigned)(2 * i + 1));
			}
			raw_send(r, 1, sbuf, size);
		}
	}
	bench_clock_tick(&clk, o, iters, iters);
	return bench_clock_result(&clk) / 2.0;
}

/* CPUs for -P: the first two this process may run on. */
static int raw_pick_cpus(int cpus[2])
{
	cpu_set_t set;
	int c, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -errno;
	for (c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n == 2 ? 0 : -ENODEV;
}

static void raw_pin(int rank, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		fprintf(stderr, "raw_shm_pingpong[rank %d]: cannot pin to CPU %d: %s\n",
			rank, cpu, strerror(errno));
		exit(1);
	}
}

static void raw_usage(FILE *f)
{
	fprintf(f, "usage: raw_shm_pingpong [-m MIN:MAX] [-i N] [-I N] [-x N] "
		"[-X N] [-b N] [-p CPU,CPU | -P] [-r N] [-2] [-v]\n"
		"  -b N  median of N batches (see rdmach_latency -h)\n"
		"  -r N  walk a ring of N flag lines per direction instead of "
		"one fixed line\n"
		"  -2    above 56 B the writer copies in too (two-copy floor)\n");
}

static void raw_parse(int argc, char **argv, struct bench_opts *o, int cpus[2],
		      int *copy_in, unsigned *nlines)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->kind = BENCH_LATENCY;
	o->prog = "raw_shm_pingpong";
	o->iters = 100000;	/* cheap: more iterations, steadier floor */
	o->iters_large = 1000;
	o->warmup = 10000;
	o->warmup_large = 20;
	o->max_size = BENCH_MAX_SIZE;
	o->batches = 1;
	cpus[0] = cpus[1] = -1;
	*copy_in = 0;
	*nlines = 0;
	while ((c = getopt(argc, argv, "m:i:I:x:X:b:p:Pr:2vh")) != -1) {
		switch (c) {
		case 'm':
			if (bench_parse_range(optarg, &o->min_size, &o->max_size)) {
				fprintf(stderr, "bad size range '%s'\n", optarg);
				exit(2);
			}
			break;
		case 'i': o->iters = bench_parse_count(optarg, "-i"); break;
		case 'I': o->iters_large = bench_parse_count(optarg, "-I"); break;
		case 'x': o->warmup = bench_parse_count(optarg, "-x"); break;
		case 'X': o->warmup_large = bench_parse_count(optarg, "-X"); break;
		case 'p':
			if (sscanf(optarg, "%d,%d", &cpus[0], &cpus[1]) != 2 ||
			    cpus[0] < 0 || cpus[1] < 0) {
				fprintf(stderr, "bad -p '%s' (e.g. -p 0,1)\n", optarg);
				exit(2);
			}
			break;
		case 'P':
			if (raw_pick_cpus(cpus)) {
				fprintf(stderr, "-P: fewer than 2 CPUs available\n");
				exit(2);
			}
			break;
		case 'b': o->batches = (int)bench_parse_count(optarg, "-b"); break;
		case 'r':
			*nlines = (unsigned)bench_parse_count(optarg, "-r");
			if (*nlines > (1u << 20)) {
				fprintf(stderr, "-r: at most %u lines\n", 1u << 20);
				exit(2);
			}
			break;
		case '2': *copy_in = 1; break;
		case 'v': o->validate = 1; *copy_in = 1; break;
		case 'h': raw_usage(stdout); exit(0);
		default: raw_usage(stderr); exit(2);
		}
	}
	if (optind != argc || o->iters < 1 || o->iters_large < 1 ||
	    o->batches < 1 || o->batches > BENCH_MAX_BATCHES) {
		raw_usage(stderr);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct raw r = { 0 };
	char detail[128];
	size_t map_len, data_len, ring_len, size;
	char *sbuf, *rbuf;
	int cpus[2], st;
	void *map;
	pid_t pid;

	raw_parse(argc, argv, &o, cpus, &r.copy_in, &r.nlines);
	data_len = (o.max_size + 4095) & ~(size_t)4095;
	ring_len = ((size_t)r.nlines * RAW_LINE + 4095) & ~(size_t)4095;
	map_len = 4096 + 2 * data_len + 2 * ring_len;
	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		perror("raw_shm_pingpong: mmap");
		return 1;
	}
	memset(map, 0, map_len);	/* fault every page in before timing */
	r.sh = map;
	r.data[0] = (uint8_t *)map + 4096;
	r.data[1] = r.data[0] + data_len;
	r.ring[0] = (struct raw_line *)(void *)(r.data[1] + data_len);
	r.ring[1] = (struct raw_line *)(void *)(r.data[1] + data_len + ring_len);
	sbuf = bench_alloc(o.max_size);
	rbuf = bench_alloc(o.max_size);

	snprintf(detail, sizeof(detail), "flag %s in a shared mapping, %s "
		 "above %zu B, %s", r.nlines ? "ring" : "line",
		 r.copy_in ? "copy in + copy out" : "one copy out", RAW_INLINE,
		 cpus[0] < 0 ? "not pinned" : "pinned");
	bench_print_header(&o, "raw shm", detail);
	fflush(stdout);

	pid = fork();
	if (pid < 0) {
		perror("raw_shm_pingpong: fork");
		return 1;
	}
	r.rank = pid == 0;
	r.peer_pid = pid == 0 ? getppid() : pid;
	if (cpus[0] >= 0)
		raw_pin(r.rank, cpus[r.rank]);

	for (size = o.min_size; size <= o.max_size; size = bench_next_size(size)) {
		double us = raw_run(&r, &o, sbuf, rbuf, size);

		if (r.rank == 0)
			bench_print_row(size, us);
	}
	if (r.rank == 1)
		_exit(0);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "raw_shm_pingpong: the child failed\n");
		return 1;
	}
	free(sbuf);
	free(rbuf);
	munmap(map, map_len);
	return 0;
}
