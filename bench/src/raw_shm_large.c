/*
 * raw_shm_large - the physical floors under rdma_shm's large messages, with
 * no rdmach code: two processes (fork) move messages of one size
 *
 *   -M cma    the reader process_vm_readv's the writer's buffer (one copy,
 *             pages pinned by the kernel on every call);
 *   -M pipe   the writer copies chunks into a shared area of slots, the
 *             reader copies them out as they come (two copies, overlapped
 *             on two cores); chunks grow from -f FIRST, doubling, to the
 *             slot size -c CHUNK; -a AREA bytes of slots;
 *   -M memcpy one process copies (the one-copy limit; no second process).
 *
 * Tests: bandwidth (window of -w messages, then a reply; MB/s, 10^6 B/s) or,
 * with -l, one-way latency of a ping-pong (us).  -C POOL: cache-cold, every
 * message from/to the next slice of a POOL-byte pool on each side (walked
 * in order), instead of one reused buffer.  OSU output format.
 *
 *   raw_shm_large [-M cma|pipe|memcpy] [-l] [-m MIN:MAX] [-w 64] [-a 256K]
 *                 [-c 32K] [-f 4K] [-C POOL] [-i N] [-I N] [-b N] [-P] [-v]
 *
 * Memory ordering: a slot's flag word holds the length of the chunk in it
 * (0 = empty); the writer stores it with release after the payload, the
 * reader loads it with acquire, copies out, then stores 0 with release.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"

#define RL_LINE 64
#define RL_MAX_SLOTS 256

enum rl_mode { RL_CMA, RL_PIPE, RL_MEMCPY };

struct rl_flag {
	uint64_t v;
	uint8_t pad[2 * RL_LINE - 8];
} __attribute__((aligned(2 * RL_LINE)));

struct rl_shared {
	struct rl_flag msg[2];		/* per direction: seq of a message posted (cma) */
	struct rl_flag done[2];		/* per direction: seq read (cma) */
	struct rl_flag addr[2];		/* per direction: address of the message (cma) */
	struct rl_flag slot[2][RL_MAX_SLOTS]; /* pipe: chunk length, 0 = empty */
};

struct rl {
	struct rl_shared *sh;
	uint8_t *area[2];		/* pipe: slots per direction */
	pid_t pid[2];			/* the two processes */
	int rank;
	enum rl_mode mode;
	size_t slot_size, first;
	unsigned nslots;
	unsigned next_slot[2];		/* pipe: next slot per direction */
	uint64_t seq[2];		/* cma: messages per direction */
};

static void rl_wait(const uint64_t *p, uint64_t want, int eq)
{
	while ((__atomic_load_n(p, __ATOMIC_ACQUIRE) == want) != eq)
		__builtin_ia32_pause();
}

static void rl_send(struct rl *r, int dir, const char *src, size_t size)
{
	size_t off = 0, chunk = r->first;

	if (r->mode == RL_CMA) {
		uint64_t s = ++r->seq[dir];

		r->sh->addr[dir].v = (uint64_t)(uintptr_t)src;
		__atomic_store_n(&r->sh->msg[dir].v, s, __ATOMIC_RELEASE);
		rl_wait(&r->sh->done[dir].v, s, 1);
		return;
	}
	while (off < size) {
		unsigned i = r->next_slot[dir]++ % r->nslots;
		uint64_t *f = &r->sh->slot[dir][i].v;
		size_t n = size - off < chunk ? size - off : chunk;

		rl_wait(f, 0, 1);
		memcpy(r->area[dir] + i * r->slot_size, src + off, n);
		__atomic_store_n(f, n, __ATOMIC_RELEASE);
		off += n;
		if (chunk * 2 <= r->slot_size)
			chunk *= 2;
	}
}

static void rl_recv(struct rl *r, int dir, char *dst, size_t size)
{
	size_t off = 0;

	if (r->mode == RL_CMA) {
		uint64_t s = ++r->seq[dir];
		struct iovec l = { dst, size }, rem;

		rl_wait(&r->sh->msg[dir].v, s, 1);
		rem.iov_base = (void *)(uintptr_t)r->sh->addr[dir].v;
		rem.iov_len = size;
		if (process_vm_readv(r->pid[dir], &l, 1, &rem, 1, 0) !=
		    (ssize_t)size) {
			perror("raw_shm_large: process_vm_readv");
			exit(1);
		}
		__atomic_store_n(&r->sh->done[dir].v, s, __ATOMIC_RELEASE);
		return;
	}
	while (off < size) {
		unsigned i = r->next_slot[dir]++ % r->nslots;
		uint64_t *f = &r->sh->slot[dir][i].v, n;

		while (!(n = __atomic_load_n(f, __ATOMIC_ACQUIRE)))
			__builtin_ia32_pause();
		memcpy(dst + off, r->area[dir] + i * r->slot_size, n);
		__atomic_store_n(f, 0, __ATOMIC_RELEASE);
		off += n;
	}
}

/* The buffer of message k: one reused buffer, or the k-th slice of a pool. */
static char *rl_buf(char *base, size_t pool, size_t size, long k)
{
	size_t per;

	if (!pool)
		return base;
	per = pool / size;
	return base + (size_t)(k % (long)per) * size;
}

static double rl_run(struct rl *r, const struct bench_opts *o, char *sbuf,
		     char *rbuf, size_t pool, size_t size, int lat)
{
	struct bench_clock clk = { .n = 0, .per_batch = 1 };
	long i, iters, warmup, k = 0;
	char ack[8];
	int j;

	bench_iters(o, size, &iters, &warmup);
	for (i = 0; i < warmup + iters; i++) {
		if (r->rank == 0 && i >= warmup)
			bench_clock_tick(&clk, o, iters, i - warmup);
		if (r->mode == RL_MEMCPY) {
			for (j = 0; j < o->window; j++, k++)
				memcpy(rl_buf(rbuf, pool, size, k),
				       rl_buf(sbuf, pool, size, k), size);
			continue;
		}
		if (lat) {
			char *s = rl_buf(sbuf, pool, size, k);
			char *d = rl_buf(rbuf, pool, size, k++);

			if (r->rank == 0) {
				rl_send(r, 0, s, size);
				rl_recv(r, 1, d, size);
			} else {
				rl_recv(r, 0, d, size);
				rl_send(r, 1, s, size);
			}
			continue;
		}
		for (j = 0; j < o->window; j++, k++) {
			if (r->rank == 0) {
				char *s = rl_buf(sbuf, pool, size, k);

				if (o->validate)
					bench_fill(s, size, (unsigned)k);
				rl_send(r, 0, s, size);
			} else {
				char *d = rl_buf(rbuf, pool, size, k);

				rl_recv(r, 0, d, size);
				if (o->validate && bench_check(d, size,
							(unsigned)k) >= 0) {
					fprintf(stderr, "raw_shm_large: "
						"DATA MISMATCH size %zu\n", size);
					exit(1);
				}
			}
		}
		if (r->rank == 0)
			rl_recv(r, 1, ack, 8);
		else
			rl_send(r, 1, ack, 8);
	}
	bench_clock_tick(&clk, o, iters, iters);
	if (r->rank)
		return 0;
	return lat ? bench_clock_result(&clk) / 2.0 :
		     (double)size * o->window / bench_clock_result(&clk);
}

/* "256K", "1G": bytes (no cap, unlike -m). */
static size_t rl_size_opt(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (end == s || *end) {
		fprintf(stderr, "raw_shm_large: bad size '%s'\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct rl r = { .mode = RL_PIPE, .slot_size = 32768, .first = 4096 };
	size_t area = 256 * 1024, pool = 0, size, blen;
	int c, lat = 0, pin = 0, validate = 0;
	char *sbuf, *rbuf, *args[64];
	int nargs = 0;

	/* our options first; the rest go to bench_parse */
	args[nargs++] = argv[0];
	while ((c = getopt(argc, argv, "M:la:c:f:C:m:i:I:x:X:w:b:Pv")) != -1) {
		switch (c) {
		case 'M':
			r.mode = !strcmp(optarg, "cma") ? RL_CMA :
				 !strcmp(optarg, "memcpy") ? RL_MEMCPY : RL_PIPE;
			break;
		case 'l': lat = 1; break;
		case 'a': area = rl_size_opt(optarg); break;
		case 'c': r.slot_size = rl_size_opt(optarg); break;
		case 'f': r.first = rl_size_opt(optarg); break;
		case 'C': pool = rl_size_opt(optarg); break;
		case 'P': pin = 1; break;
		case 'v': validate = 1; break;
		default:
			if (nargs < 60) {
				char opt[3] = { '-', (char)c, 0 };

				args[nargs++] = strdup(opt);
				args[nargs++] = optarg;
			}
		}
	}
	args[nargs] = NULL;
	optind = 1;
	bench_parse(nargs, args, lat ? BENCH_LATENCY : BENCH_BW, &o);
	o.validate = validate;
	if (!o.min_size)
		o.min_size = 1;
	r.nslots = (unsigned)(area / r.slot_size);
	if (r.nslots < 1 || r.nslots > RL_MAX_SLOTS || r.first > r.slot_size) {
		fprintf(stderr, "raw_shm_large: bad -a/-c/-f\n");
		return 2;
	}
	r.sh = mmap(NULL, sizeof(*r.sh) + 2 * area, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (r.sh == MAP_FAILED)
		return 1;
	r.area[0] = (uint8_t *)(r.sh + 1);
	r.area[1] = r.area[0] + area;
	blen = pool ? pool : o.max_size;
	/* pid[dir]: the writer of direction dir (0: rank 0, 1: rank 1) */
	r.pid[0] = getpid();
	if (r.mode != RL_MEMCPY) {
		pid_t child = fork();

		if (child < 0)
			return 1;
		r.rank = child == 0;
		r.pid[1] = child ? child : getpid();
	}
	if (pin) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(r.rank, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	sbuf = bench_alloc(blen);
	rbuf = bench_alloc(blen);
	if (r.rank == 0) {
		printf("# raw %s %s Test (%s, slots %u x %zu, first %zu, "
		       "%s)\n", r.mode == RL_CMA ? "cma" : r.mode == RL_PIPE ?
		       "pipe" : "memcpy", lat ? "Latency" : "Bandwidth",
		       pool ? "cache-cold pool" : "reused buffer", r.nslots,
		       r.slot_size, r.first, lat ? "one-way" : "window");
		printf(lat ? "# Size          Latency (us)\n" :
			     "# Size      Bandwidth (MB/s)\n");
	}
	for (size = o.min_size; size <= o.max_size; size *= 2) {
		double v;

		if (pool && pool < size)
			break;
		v = rl_run(&r, &o, sbuf, rbuf, pool, size, lat);
		if (r.rank == 0)
			bench_print_row(size, v);
	}
	if (r.rank == 1)
		_exit(0);
	if (r.mode != RL_MEMCPY)
		waitpid(r.pid[1], NULL, 0);
	return 0;
}
