/*
 * shm.c - the shared-memory transport: rings in the receiver's memfd
 * segment (shm_ring.h, shm_seg.h); large puts either pipelined through a
 * copy area in that segment (two copies overlapped on two cores, in cache)
 * or read in one copy by cross-memory attach (process_vm_readv), chosen
 * per message (shm_tx_want_cma); peer liveness by pidfd.  No system call
 * on the put/get fast path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/iov.h"
#include "core/knob.h"
#include "core/log.h"
#include "proto/pkt.h"
#include "shm_calib.h"
#include "shm_ring.h"
#include "shm_seg.h"
#include "core/tl.h"

#define SHM_RECENT_MAX 16u

enum { SHM_K_RING_SIZE, SHM_K_LINE_RING, SHM_K_BULK_RING, SHM_K_BULK_MIN,
       SHM_K_CHUNK, SHM_K_DEFERRED_CHUNK,
       SHM_K_CMA, SHM_K_CMA_THRESHOLD, SHM_K_PIPE, SHM_K_PIPE_THRESHOLD,
       SHM_K_PIPE_AREA, SHM_K_PIPE_CHUNK, SHM_K_PIPE_FIRST, SHM_K_PIPE_SPIN,
       SHM_K_CMA_USE, SHM_K_CMA_DUPLEX, SHM_K_CMA_DUPLEX_REUSED,
       SHM_K_CMA_DUPLEX_REUSED_MAX,
       SHM_K_CACHE_LIMIT, SHM_K_CALIB_MS, SHM_K_RECENT, SHM_K_LIVENESS_MS,
       SHM_K_WAKE, SHM_K_NUM };

static const struct rdmach_knob shm_knobs[SHM_K_NUM] = {
	[SHM_K_RING_SIZE] = { "RDMACH_SHM_RING_SIZE", RDMACH_KNOB_SIZE, "64K",
		4096, 256u << 20,
		"bytes of each incoming ring, one per local peer (power of two)",
		RDMACH_KNOB_POW2 },
	[SHM_K_LINE_RING] = { "RDMACH_SHM_LINE_RING", RDMACH_KNOB_SIZE, "1K",
		2 * SHM_LINE, 1u << 20,
		"bytes of each incoming ring of one-line packets (<= 56-byte "
		"puts; power of two >= 128, 0 = none)",
		RDMACH_KNOB_POW2 | RDMACH_KNOB_ZERO_OFF },
	[SHM_K_BULK_RING] = { "RDMACH_SHM_BULK_RING", RDMACH_KNOB_SIZE, "256K",
		4096, 256u << 20,
		"bytes of each incoming ring of deferred puts' packets of "
		"RDMACH_SHM_BULK_MIN bytes or more (MPI send requests), "
		"allocated at its first use (power of two; 0, or not above "
		"RDMACH_SHM_RING_SIZE: none, the main ring takes them)",
		RDMACH_KNOB_POW2 | RDMACH_KNOB_ZERO_OFF },
	[SHM_K_BULK_MIN] = { "RDMACH_SHM_BULK_MIN", RDMACH_KNOB_SIZE, "4K", 64,
		256u << 20,
		"a deferred put's ring packets of at least this many bytes go "
		"to the bulk ring: many such messages in flight, the main ring "
		"kept small for the small ones" },
	[SHM_K_CHUNK] = { "RDMACH_SHM_CHUNK", RDMACH_KNOB_SIZE, "8K", 64,
		256u << 20,
		"largest ring packet: bigger puts are cut so both sides copy at "
		"once (at most a quarter of the main ring)" },
	[SHM_K_DEFERRED_CHUNK] = { "RDMACH_SHM_DEFERRED_CHUNK", RDMACH_KNOB_SIZE,
		"16K", 64, 256u << 20,
		"largest ring packet of a deferred put (rdmach_put_deferred: MPI "
		"send requests, which come in windows): fewer, larger packets "
		"where the copies of successive messages overlap anyway (not "
		"below RDMACH_SHM_CHUNK; at most a quarter of the ring a packet "
		"goes to, the bulk ring's from RDMACH_SHM_BULK_MIN)" },
	[SHM_K_CMA] = { "RDMACH_SHM_CMA", RDMACH_KNOB_BOOL, "1", 0, 1,
		"single-copy large puts by cross-memory attach (process_vm_readv)" },
	[SHM_K_CMA_THRESHOLD] = { "RDMACH_SHM_CMA_THRESHOLD", RDMACH_KNOB_SIZE,
		"256K", 1, UINT64_MAX,
		"puts of at least this many bytes may be read by the peer "
		"directly (with the copy area on: only when not cache-resident)" },
	[SHM_K_PIPE] = { "RDMACH_SHM_PIPE", RDMACH_KNOB_BOOL, "1", 0, 1,
		"large puts through a copy area per peer, both sides copying at once" },
	[SHM_K_PIPE_THRESHOLD] = { "RDMACH_SHM_PIPE_THRESHOLD", RDMACH_KNOB_SIZE,
		"32K", 1, UINT64_MAX,
		"puts of at least this many bytes go through the copy area" },
	[SHM_K_PIPE_AREA] = { "RDMACH_SHM_PIPE_AREA", RDMACH_KNOB_SIZE,
		RDMACH_KNOB_AUTO, 4096, 64u << 20,
		"bytes of each copy area, one per local peer, allocated at its "
		"first large put (power of two; auto: 512K while this host runs "
		"at most 16 of the job's processes, 256K beyond)",
		RDMACH_KNOB_POW2 },
	[SHM_K_PIPE_CHUNK] = { "RDMACH_SHM_PIPE_CHUNK", RDMACH_KNOB_SIZE, "32K",
		64, 64u << 20,
		"slot of the copy area: the largest chunk (power of two, "
		"area/64 .. area/2)", RDMACH_KNOB_POW2 },
	[SHM_K_PIPE_FIRST] = { "RDMACH_SHM_PIPE_FIRST", RDMACH_KNOB_SIZE, "32K",
		64, 64u << 20,
		"first chunk of a message; chunks double up to the slot, so the "
		"reader starts copying early" },
	[SHM_K_PIPE_SPIN] = { "RDMACH_SHM_PIPE_SPIN", RDMACH_KNOB_UINT, "0",
		0, 1000000,
		"polls a put (get) that has moved a chunk waits for the next free "
		"(full) slot before returning, so a message streams within one "
		"call while both sides are at it (0: return at once)" },
	[SHM_K_CMA_USE] = { "RDMACH_SHM_CMA_USE", RDMACH_KNOB_STRING, "auto",
		0, 0,
		"with the copy area, which large puts go by CMA: auto (where "
		"CMA moves bytes faster than the copy area would, hot or cold, "
		"as measured at start-up), cold (those not likely in cache), "
		"always, never" },
	[SHM_K_CMA_DUPLEX] = { "RDMACH_SHM_CMA_DUPLEX", RDMACH_KNOB_SIZE,
		"2M", 0, UINT64_MAX,
		"with RDMACH_SHM_CMA_USE=auto, a put whose completion the caller "
		"can defer (rdmach_put_deferred: MPI send requests) goes by CMA "
		"while the peer's large messages cross this side's: from a "
		"buffer one of the last RDMACH_SHM_RECENT large puts used, from "
		"RDMACH_SHM_CMA_DUPLEX_REUSED below "
		"RDMACH_SHM_CMA_DUPLEX_REUSED_MAX; from any other, from this "
		"size up (0: never)" },
	[SHM_K_CMA_DUPLEX_REUSED] = { "RDMACH_SHM_CMA_DUPLEX_REUSED",
		RDMACH_KNOB_SIZE, "128K", 1, UINT64_MAX,
		"the smallest deferred put from a reused buffer that goes by "
		"CMA while large messages cross (RDMACH_SHM_CMA_DUPLEX; the "
		"CMA threshold does not apply to it)" },
	[SHM_K_CMA_DUPLEX_REUSED_MAX] = { "RDMACH_SHM_CMA_DUPLEX_REUSED_MAX",
		RDMACH_KNOB_SIZE, "6M", 0, UINT64_MAX,
		"a deferred put from a reused buffer goes by CMA while large "
		"messages cross (RDMACH_SHM_CMA_DUPLEX_REUSED) only below "
		"this size, larger ones take the copy area; 0: no limit" },
	[SHM_K_CACHE_LIMIT] = { "RDMACH_SHM_CACHE_LIMIT", RDMACH_KNOB_SIZE,
		RDMACH_KNOB_AUTO, 4096, UINT64_MAX,
		"largest put that can be cache-resident (auto: the largest "
		"working set memcpy moves at >= 60% of its in-cache speed, "
		"measured at start-up by the lowest local rank)" },
	[SHM_K_CALIB_MS] = { "RDMACH_SHM_CALIB_MS", RDMACH_KNOB_UINT, "100",
		0, 60000,
		"time the start-up measurement behind the cache limit and the "
		"CMA choice may take; one that runs longer (a slow or emulated "
		"CPU) is dropped for the built-in choice (0: never measure)" },
	[SHM_K_RECENT] = { "RDMACH_SHM_RECENT", RDMACH_KNOB_UINT, "4", 0,
		SHM_RECENT_MAX,
		"a large put counts as cache-resident if its buffer is one of the "
		"last N large puts' (0: if it is not larger than the cache limit)" },
	[SHM_K_LIVENESS_MS] = { "RDMACH_SHM_LIVENESS_MS", RDMACH_KNOB_UINT,
		"2", 1, 60000,
		"an idle poll checks at most this often that the peer lives" },
	[SHM_K_WAKE] = { "RDMACH_SHM_WAKE", RDMACH_KNOB_BOOL, RDMACH_KNOB_AUTO,
		0, 1,
		"an idle wait (rdmach_wait) sleeps until a peer's put or get "
		"rings it, instead of for its whole timeout; costs every put a "
		"fence (auto: on when this host runs more of the job's "
		"processes than it has CPUs)" },
};
RDMACH_KNOB_TABLE(shm, shm_knobs);

/* RDMACH_SHM_CACHE_LIMIT=auto: the measurement's largest working set, and
 * the value used where there is nobody to measure for (a lone process). */
#define SHM_CACHE_LIMIT_MAX (32u << 20)
#define SHM_CACHE_LIMIT_DEFAULT (4u << 20)

/* RDMACH_SHM_PIPE_AREA=auto: 16 slots of 32 KiB move 1 MiB messages 4-15%
 * faster than 8 (more chunks in flight); with many local processes the
 * areas' memory and cache footprint (one per peer that sends large
 * messages) weigh more: 64 processes keep it at 16 MiB per process. */
#define SHM_PIPE_AREA_FEW (512u << 10)
#define SHM_PIPE_AREA_MANY (256u << 10)
#define SHM_PIPE_AREA_FEW_PROCS 16

/* RDMACH_SHM_CMA_USE=auto: the copy area's rate as a fraction of one
 * memcpy's, from bench/raw_shm_large on the 2-vCPU EPYC guest (1 MiB,
 * window of 64, SCHED_FIFO, README): in cache it moves 26-27 GB/s where
 * memcpy does 44 (the second core reads lines the first one has just
 * written), from memory 15-17 GB/s where memcpy does 13-17 (both copies
 * overlap; the area itself stays in cache). */
#define SHM_PIPE_HOT_PER_COPY 0.6
#define SHM_PIPE_COLD_PER_COPY 1.0

enum shm_cma_use { SHM_CMA_AUTO, SHM_CMA_COLD, SHM_CMA_ALWAYS, SHM_CMA_NEVER };

/* Rendezvous this process posted and the peer has not acknowledged. */
struct shm_rndv_tx {
	int active;
	int iovcnt;			/* pieces of the caller's iovec covered */
	uint64_t id;
	size_t bytes;
	struct iovec iov[RDMACH_RNDV_MAX_SEGS];
};

/* A ring as its writer sees it. */
struct shm_tx_ring {
	uint8_t *base;
	_Atomic uint64_t *tail;		/* the reader's count of bytes consumed */
	uint64_t size, mask;		/* size 0: no such ring */
	uint64_t head;			/* bytes written */
	uint64_t tail_seen;		/* last value read from *tail */
};

/* A ring as its reader sees it. */
struct shm_rx_ring {
	uint8_t *base;
	_Atomic uint64_t *tail;
	uint64_t mask;
	uint64_t head;			/* bytes consumed */
	uint64_t released;		/* ... and given back (<= head) */
};

enum { SHM_MAIN, SHM_LINES, SHM_BULK, SHM_NRINGS }; /* rings of a direction */

/* A copy area (shm_ring.h) as its writer or its reader sees it. */
struct shm_pipe {
	struct shm_pipe_flag *flags;
	uint8_t *area;
	uint64_t slot;			/* bytes of a slot; 0: no copy area */
	uint64_t slot_mask;		/* slots - 1 (a power of two) */
	uint64_t next;			/* chunks written (tx) / taken (rx) */
	uint64_t left;			/* tx: bytes of the message to copy in */
	uint64_t chunk;			/* tx: size of its next chunk */
	int first;			/* tx: its first chunk is next */
	uint64_t off;			/* rx: bytes of the current chunk taken */
};

struct shm_conn {
	struct rdmach_conn *conn;
	struct shm_tl *tl;
	pid_t pid;
	int self;			/* a pipe to myself */
	int pidfd;			/* -1 for self or without pidfd */
	struct shm_seg peer_seg;	/* the peer's segment (unused for self) */

	/* send side: my rings in the peer's segment */
	struct shm_tx_ring tx[SHM_NRINGS];
	struct shm_ring_ctrl *tx_ctrl;
	uint64_t one_pkt_max;		/* largest put of one packet, no CMA */
	uint64_t chunk, chunk_deferred;	/* largest packet payload of a put,
					 * of a deferred put (the rings'
					 * sizes cap the knobs') */
	uint64_t bulk_min;		/* data packets from this size go to
					 * tx[SHM_BULK] (UINT64_MAX: none) */
	uint32_t tx_seq;		/* next packet's sequence number */
	uint64_t next_rndv_id;
	struct shm_rndv_tx rndv;
	struct shm_pipe tx_pipe;	/* my copy area in the peer's segment */

	/* receive side: the peer's rings in my segment */
	struct shm_rx_ring rx[SHM_NRINGS];
	struct shm_ring_ctrl *rx_ctrl;
	uint32_t rx_seq;		/* sequence number expected next */
	uint64_t rx_off;		/* bytes of the current packet consumed */
	uint64_t rx_held;		/* ... of all rings, not given back yet */
	struct shm_pipe rx_pipe;	/* the peer's copy area in my segment */

	unsigned duplex;		/* shm_rx_large_start */
	struct shm_bell *peer_bell;	/* the peer's doorbell, if it is on */

	/* liveness */
	uint32_t idle_polls;		/* sends that found the ring full */
	uint32_t rx_idle_polls;		/* gets that found nothing */
	uint64_t next_check_ns;
};

static const struct rdmach_tl_ops shm_ops;

struct shm_tl {
	struct rdmach_tl base;
	struct shm_seg seg;		/* my receive segment */
	struct shm_conn **conns;	/* [npeers] */
	int npeers;
	uint64_t ring_size, line_ring_size, cma_threshold, liveness_ns;
	uint64_t bulk_ring_size, bulk_min;
	uint64_t chunk, chunk_deferred;	/* RDMACH_SHM_CHUNK, _DEFERRED_CHUNK */
	uint64_t calib_ns;		/* RDMACH_SHM_CALIB_MS */
	int cma;
	volatile uint64_t cma_magic;	/* peers read it to probe CMA */
	/* copy area */
	uint64_t pipe_size, pipe_slot, pipe_first, pipe_threshold;
	int pipe_size_auto;		/* RDMACH_SHM_PIPE_AREA=auto */
	uint32_t pipe_spin;
	uint64_t cache_limit;		/* 0 until known (auto: after connect) */
	enum shm_cma_use cma_use;
	int cma_hot, cma_cold;		/* CMA for a hot / cold large put */
	uint64_t cma_duplex;		/* RDMACH_SHM_CMA_DUPLEX, 0: off */
	uint64_t cma_duplex_reused;	/* RDMACH_SHM_CMA_DUPLEX_REUSED */
	uint64_t cma_duplex_reused_max;	/* ..._MAX, UINT64_MAX: no limit */
	uint64_t rndv_min;		/* smallest rendezvous: the CMA
					 * threshold, or cma_duplex_reused
					 * if lower and cma_duplex is on */
	uint64_t large_min;		/* smallest put that is not ring packets */
	/* buffers of the last large puts (a ring of `recent` entries) */
	unsigned recent, recent_pos;
	uintptr_t recent_buf[SHM_RECENT_MAX];
	int wake;			/* RDMACH_SHM_WAKE: -1 auto, 0, 1 */
};

#define SHM_MIN_PARTIAL 2048u	/* smallest data packet cut by a full ring */
#define SHM_IDLE_POLLS 64u	/* idle polls between clock reads */

static inline struct shm_tl *shm_tl_of(struct rdmach_tl *tl)
{
	return (struct shm_tl *)tl;
}

/* memcpy without the call for what fits in one ring line with its header
 * (most messages of an MPI program): two overlapping moves of a
 * power-of-two size.  Longer copies go to memcpy: a 64-byte payload
 * copied inline (16-byte moves, one of them split across the packet's
 * two lines) made MPI_Alltoall of 32 B per pair 0.74 us against 0.62 us
 * with memcpy (2 ranks). */
static inline void shm_copy(void *dst, const void *src, size_t len)
{
	char *d = dst;
	const char *s = src;

	if (len > SHM_LINE - SHM_HDR) {
		memcpy(d, s, len);
	} else if (len >= 32) {
		memcpy(d, s, 32);
		memcpy(d + len - 32, s + len - 32, 32);
	} else if (len >= 16) {
		memcpy(d, s, 16);
		memcpy(d + len - 16, s + len - 16, 16);
	} else if (len >= 8) {
		memcpy(d, s, 8);
		memcpy(d + len - 8, s + len - 8, 8);
	} else if (len >= 4) {
		memcpy(d, s, 4);
		memcpy(d + len - 4, s + len - 4, 4);
	} else {
		while (len--)
			*d++ = *s++;
	}
}

/* The payload of a one-packet put into the ring at dst: one piece, or
 * the common pair (CH3's header and a small payload) by direct copies,
 * anything else by the cursor walk (MPI_Isend of 8 B: ~80 fewer
 * instructions than the walk, bench/run-msgcost.sh). */
static inline void shm_gather_pkt(uint8_t *dst, const struct iovec *iov,
				  int iovcnt, size_t total)
{
	struct rdmach_iovc c;

	if (iovcnt == 1) {
		shm_copy(dst, iov[0].iov_base, total);
	} else if (iovcnt == 2) {
		size_t first = iov[0].iov_len;

		shm_copy(dst, iov[0].iov_base, first);
		shm_copy(dst + first, iov[1].iov_base, total - first);
	} else {
		rdmach_iovc_init(&c, iov, iovcnt);
		rdmach_iovc_gather(&c, dst, total);
	}
}

/* Cursor copies with the common case (the current piece holds it all)
 * inline; same cursor semantics as core/iov.c. */
static inline size_t shm_gather(struct rdmach_iovc *c, void *dst, size_t len)
{
	if (c->idx < c->cnt && c->iov[c->idx].iov_len - c->off >= len) {
		shm_copy(dst, (const char *)c->iov[c->idx].iov_base + c->off, len);
		c->off += len;
		return len;
	}
	return rdmach_iovc_gather(c, dst, len);
}

static inline size_t shm_scatter(struct rdmach_iovc *c, const void *src,
				 size_t len)
{
	if (c->idx < c->cnt && c->iov[c->idx].iov_len - c->off >= len) {
		shm_copy((char *)c->iov[c->idx].iov_base + c->off, src, len);
		c->off += len;
		return len;
	}
	return rdmach_iovc_scatter(c, src, len);
}

/* ---- liveness ---------------------------------------------------------- */

static int shm_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

/* A zombie (dead, not yet reaped) still answers kill(pid, 0). */
static int shm_proc_is_zombie(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	int zombie = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 1;
	if (fgets(buf, sizeof(buf), f)) {
		p = strrchr(buf, ')');
		zombie = p && (p[2] == 'Z' || p[2] == 'X');
	}
	fclose(f);
	return zombie;
}

static int shm_peer_dead(const struct shm_conn *sc)
{
	struct pollfd pfd;

	if (sc->self)
		return 0;
	if (sc->pidfd >= 0) {
		pfd.fd = sc->pidfd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		return poll(&pfd, 1, 0) > 0;
	}
	if (kill(sc->pid, 0) < 0 && errno == ESRCH)
		return 1;
	return shm_proc_is_zombie(sc->pid);
}

/* Time for a liveness probe?  Reads the clock; a probe every liveness_ns. */
static int shm_peer_check_due(struct shm_conn *sc)
{
	uint64_t now = rdmach_now_ns();

	if (now < sc->next_check_ns)
		return 0;
	sc->next_check_ns = now + sc->tl->liveness_ns;
	return 1;
}

/* Rate-limited check, for idle polls: a clock read every SHM_IDLE_POLLS
 * calls, a liveness probe every liveness_ns. */
static int shm_idle_peer_dead(struct shm_conn *sc)
{
	if (++sc->idle_polls % SHM_IDLE_POLLS)
		return 0;
	return shm_peer_check_due(sc) && shm_peer_dead(sc);
}

static int shm_fail_dead(struct shm_conn *sc, const char *when)
{
	return rdmach_conn_fail(sc->conn, -ECONNRESET,
				"shm: peer rank %d (pid %d) died %s",
				sc->conn->peer, (int)sc->pid, when);
}

/* ---- doorbell (shm_ring.h: the contract) ------------------------------- */

static long shm_futex(_Atomic uint32_t *word, int op, uint32_t val,
		      const struct timespec *timeout)
{
	/* not FUTEX_PRIVATE_FLAG: the word is shared between processes */
	return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0);
}

static void shm_bell_wake(struct shm_bell *b)
{
	atomic_fetch_add_explicit(&b->seq, 1, memory_order_release);
	shm_futex(&b->seq, FUTEX_WAKE, INT_MAX, NULL);
}

static __attribute__((noinline)) void shm_bell_ring_on(struct shm_bell *b)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&b->sleepers, memory_order_relaxed))
		shm_bell_wake(b);
}

/* I changed something the peer may be asleep waiting for. */
static inline void shm_bell_ring(const struct shm_conn *sc)
{
	if (sc->peer_bell)
		shm_bell_ring_on(sc->peer_bell);
}

/* ---- receive ----------------------------------------------------------- */

static inline uint64_t shm_load_hdr(const uint8_t *p)
{
	return atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)p,
				    memory_order_acquire);
}

/* Header at the head of ring r (the packet expected next if its sequence
 * number is rx_seq). */
static inline uint64_t shm_rx_head_hdr(const struct shm_rx_ring *r)
{
	return shm_load_hdr(r->base + (r->head & r->mask));
}

/* The ring whose head holds packet rx_seq, its header in *h; NULL while
 * that packet has not arrived.  The line ring is looked at first: it has
 * the messages a waiter is waiting for. */
static inline struct shm_rx_ring *shm_rx_next(struct shm_conn *sc,
					      uint64_t *h)
{
	struct shm_rx_ring *r = &sc->rx[SHM_LINES];
	uint64_t x = shm_rx_head_hdr(r);

	if (shm_hdr_seq(x) != sc->rx_seq) {
		r = &sc->rx[SHM_MAIN];
		x = shm_rx_head_hdr(r);
		if (shm_hdr_seq(x) != sc->rx_seq) {
			r = &sc->rx[SHM_BULK];
			x = shm_rx_head_hdr(r);
			if (shm_hdr_seq(x) != sc->rx_seq)
				return NULL;
		}
	}
	*h = x;
	return r;
}

/* A packet of ring r was read: move on.  Its space goes back to the
 * writer later, in shm_rx_release. */
static void shm_rx_consume(struct shm_conn *sc, struct shm_rx_ring *r,
			   uint64_t span)
{
	r->head += span;
	sc->rx_held += span;
	sc->rx_seq = shm_seq_next(sc->rx_seq);
	sc->rx_off = 0;
}

/* Consumed space not given back to the writer yet? */
static inline int shm_rx_holds(const struct shm_conn *sc)
{
	return sc->rx_held != 0;
}

/* Return consumed space to the writer: zero every line start in it (lap
 * guard, see shm_ring.h), then publish the tail.  Done when a get finds
 * nothing (the reader is idle: the stores cost nobody time) or when a
 * quarter of the ring is held back; never on the path from a packet's
 * arrival to the reader's next put, where a store to a line the writer
 * still shares would hold back the reader's own header store (x86 stores
 * become visible in order). */
static void shm_rx_release_ring(struct shm_conn *sc, struct shm_rx_ring *r)
{
	uint64_t off = r->released;

	while (off != r->head) {	/* at most twice: up to the end, then on */
		uint64_t pos = off & r->mask, n = r->head - off;
		uint8_t *p = r->base + pos, *end;

		if (n > r->mask + 1 - pos)
			n = r->mask + 1 - pos;
		for (end = p + n; p != end; p += SHM_LINE)
			atomic_store_explicit((_Atomic uint64_t *)(void *)p, 0,
					      memory_order_relaxed);
		off += n;
	}
	sc->rx_held -= r->head - r->released;
	r->released = r->head;
	atomic_store_explicit(r->tail, r->head, memory_order_release);
	sc->conn->stats.credit_updates_sent++;
}

static void shm_rx_release(struct shm_conn *sc)
{
	int i;

	for (i = 0; i < SHM_NRINGS; i++)
		if (sc->rx[i].released != sc->rx[i].head)
			shm_rx_release_ring(sc, &sc->rx[i]);
}

/* Give ring r's space back once a quarter of it is held (a reader that
 * never finds its rings empty would otherwise starve the writer). */
static inline void shm_rx_release_held_ring(struct shm_conn *sc,
					    struct shm_rx_ring *r)
{
	if (r->head - r->released > (r->mask + 1) / 4)
		shm_rx_release_ring(sc, r);
}

static inline void shm_rx_release_held(struct shm_conn *sc)
{
	int i;

	for (i = 0; i < SHM_NRINGS; i++)
		shm_rx_release_held_ring(sc, &sc->rx[i]);
}

static int shm_rx_corrupt(struct shm_conn *sc, const struct shm_rx_ring *r,
			  uint64_t h, const char *why)
{
	return rdmach_conn_fail(sc->conn, -EPROTO,
				"shm: corrupt packet from rank %d at %s ring "
				"offset %" PRIu64 " (header %#" PRIx64 "): %s",
				sc->conn->peer,
				r == &sc->rx[SHM_LINES] ? "line" :
				r == &sc->rx[SHM_BULK] ? "bulk" : "main",
				r->head & r->mask, h, why);
}

/* Has the peer read every rendezvous posted so far (none: ids from 1)? */
static int shm_rndv_all_read(const struct shm_conn *sc)
{
	return sc->next_rndv_id <= 1 ||
	       atomic_load_explicit(&sc->tx_ctrl->acked_id,
				    memory_order_acquire) + 1 >= sc->next_rndv_id;
}

/* A large message of the peer starts: did it cross one of mine (a copy
 * area message being copied in, a rendezvous not yet read)?  Then large
 * messages go both ways at once, and deferred puts may take CMA even
 * when hot (shm_tx_want_cma), until SHM_DUPLEX_HOLD of the peer's large
 * messages in a row have crossed none: with several reads in flight
 * some find mine all read, and a side that flips between CMA and the
 * copy area loses to both (MPI bibw 1 MiB 27 GB/s against 38).  The
 * peer sees this side's state in the ring's crossing flag. */
#define SHM_DUPLEX_HOLD 16u

static void shm_rx_large_start(struct shm_conn *sc)
{
	unsigned was = sc->duplex;

	if (sc->tx_pipe.left || !shm_rndv_all_read(sc))
		sc->duplex = SHM_DUPLEX_HOLD;
	else if (sc->duplex)
		sc->duplex--;
	if (!was != !sc->duplex)
		atomic_store_explicit(&sc->tx_ctrl->crossing, !!sc->duplex,
				      memory_order_relaxed);
}

/* Large messages go both ways: this side or the peer has seen them cross
 * (either one suffices, so that both choose alike). */
static int shm_duplex(const struct shm_conn *sc)
{
	return sc->duplex ||
	       atomic_load_explicit(&sc->rx_ctrl->crossing,
				    memory_order_relaxed);
}

/* Remote pieces for bytes [off, off + len) of a rendezvous. */
static int shm_rndv_remote(const struct rdmach_rndv_hdr *r, uint64_t off,
			   size_t len, struct iovec *out)
{
	uint32_t i;
	int n = 0;

	for (i = 0; i < r->nsegs && len; i++) {
		uint64_t l = r->seg[i].len;

		if (off >= l) {
			off -= l;
			continue;
		}
		out[n].iov_base = (void *)(uintptr_t)(r->seg[i].addr + off);
		out[n].iov_len = l - off < len ? l - off : len;
		len -= out[n].iov_len;
		off = 0;
		n++;
	}
	return n;
}

/* Read what fits of a rendezvous into the caller's iovec.  Returns bytes
 * read (>= 0) or a negative errno. */
static ssize_t shm_rx_rndv_read(struct shm_conn *sc,
				const struct rdmach_rndv_hdr *r,
				struct rdmach_iovc *c, size_t room)
{
	struct iovec liov[RDMACH_RNDV_MAX_SEGS], riov[RDMACH_RNDV_MAX_SEGS];
	struct rdmach_iovc save = *c;
	size_t want = r->total - sc->rx_off, taken;
	ssize_t n;
	int nl, nr;

	if (want > room)
		want = room;
	nl = rdmach_iovc_slice(c, want, liov, RDMACH_RNDV_MAX_SEGS, &taken);
	nr = shm_rndv_remote(r, sc->rx_off, taken, riov);
	n = process_vm_readv(sc->pid, liov, (unsigned long)nl, riov,
			     (unsigned long)nr, 0);
	sc->conn->stats.zcopy_reads++;
	if (n < 0) {
		int e = errno;

		*c = save;
		if (e == ESRCH)
			return shm_fail_dead(sc, "during a zero-copy read");
		return rdmach_conn_fail(sc->conn, -e,
					"shm: cross-memory read of %zu bytes "
					"from rank %d (pid %d) failed: %s",
					taken, sc->conn->peer, (int)sc->pid,
					strerror(e));
	}
	if ((size_t)n < taken) {	/* a fault part-way: retry the rest */
		*c = save;
		rdmach_iovc_skip(c, (size_t)n);
	}
	sc->rx_off += (uint64_t)n;
	return n;
}

/* A rendezvous at the head of the ring: read into the iovec, acknowledge
 * once all of it is read.  Returns bytes delivered or a negative errno;
 * *fin is set when the packet is consumed. */
static ssize_t shm_rx_rndv(struct shm_conn *sc, struct shm_rx_ring *ring,
			   uint8_t *p, uint32_t len, struct rdmach_iovc *c,
			   size_t room, int *fin)
{
	const struct rdmach_rndv_hdr *r = (const void *)(p + SHM_HDR);
	size_t done = 0;
	ssize_t n;

	if (len < sizeof(*r) || r->nsegs == 0 ||
	    r->nsegs > RDMACH_RNDV_MAX_SEGS || len != rdmach_rndv_size(r->nsegs))
		return shm_rx_corrupt(sc, ring, shm_load_hdr(p),
				      "bad rendezvous");
	*fin = 0;
	while (sc->rx_off < r->total && done < room) {
		n = shm_rx_rndv_read(sc, r, c, room - done);
		if (n < 0)
			return n;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	if (sc->rx_off == r->total) {
		uint64_t id = r->id;

		shm_rx_consume(sc, ring, shm_pkt_span(len));
		atomic_store_explicit(&sc->rx_ctrl->acked_id, id,
				      memory_order_release);
		sc->conn->stats.packets_received++;
		*fin = 1;
	}
	return (ssize_t)done;
}

/* ---- copy area ----------------------------------------------------------- */

static inline void shm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* The flag f of the next slot, once it is (full ? non-zero : zero): at
 * once, or -- when this call has already moved a chunk, so the peer is at
 * the same message -- after up to RDMACH_SHM_PIPE_SPIN polls.  Returns
 * the flag's value; the caller checks it. */
static inline uint64_t shm_pipe_wait(const struct shm_tl *tl,
				     struct shm_pipe_flag *f, int full,
				     size_t moved)
{
	uint64_t v = atomic_load_explicit(&f->len, memory_order_acquire);
	uint32_t spins = moved ? tl->pipe_spin : 0;

	while ((v != 0) != full && spins--) {
		shm_cpu_relax();
		v = atomic_load_explicit(&f->len, memory_order_acquire);
	}
	return v;
}

static inline struct shm_pipe_flag *shm_pipe_flag(const struct shm_pipe *pp)
{
	return &pp->flags[pp->next & pp->slot_mask];
}

static inline uint8_t *shm_pipe_slot(const struct shm_pipe *pp)
{
	return pp->area + (pp->next & pp->slot_mask) * pp->slot;
}

/* Bytes of the chunk in the reader's next slot, 0 while it is empty. */
static inline uint64_t shm_rx_pipe_ready(const struct shm_conn *sc)
{
	return atomic_load_explicit(&shm_pipe_flag(&sc->rx_pipe)->len,
				    memory_order_acquire);
}

/* A PIPE packet at the head of the ring: copy out the chunks that have
 * come, into the iovec; a partial get keeps its place in the chunk.
 * Returns bytes delivered or a negative errno; *fin is set when the
 * message is complete (the packet is then consumed). */
static ssize_t shm_rx_pipe(struct shm_conn *sc, struct shm_rx_ring *ring,
			   uint8_t *p, uint32_t len, struct rdmach_iovc *c,
			   size_t room, int *fin)
{
	struct shm_pipe *pp = &sc->rx_pipe;
	struct shm_pipe_pkt pkt;
	size_t done = 0;

	memcpy(&pkt, p + SHM_HDR, sizeof(pkt));
	if (len != sizeof(pkt) || !pp->slot || !pkt.total)
		return shm_rx_corrupt(sc, ring, shm_load_hdr(p),
				      "bad copy-area packet");
	*fin = 0;
	while (sc->rx_off < pkt.total && done < room) {
		struct shm_pipe_flag *f = shm_pipe_flag(pp);
		uint64_t n = shm_pipe_wait(sc->tl, f, 1, done);
		size_t k;

		if (!n)
			break;
		if (n > pp->slot || n > pkt.total - (sc->rx_off - pp->off))
			return shm_rx_corrupt(sc, ring, shm_load_hdr(p),
					      "copy-area chunk too long");
		k = n - pp->off < room - done ? n - pp->off : room - done;
		k = shm_scatter(c, shm_pipe_slot(pp) + pp->off, k);
		pp->off += k;
		sc->rx_off += k;
		done += k;
		if (pp->off == n) {	/* after the last load from the slot */
			atomic_store_explicit(&f->len, 0, memory_order_release);
			pp->next++;
			pp->off = 0;
		}
	}
	if (sc->rx_off == pkt.total) {
		shm_rx_consume(sc, ring, shm_pkt_span(len));
		sc->conn->stats.packets_received++;
		*fin = 1;
	}
	return (ssize_t)done;
}

/* A copy-area message is at the head but its next chunk has not come:
 * every SHM_IDLE_POLLS such polls, has the writer finalized or died?
 * The flags are read before the slot is looked at again, so a chunk
 * written before the close/death is still delivered. */
static __attribute__((noinline)) ssize_t shm_rx_pipe_idle(struct shm_conn *sc)
{
	if (++sc->rx_idle_polls % SHM_IDLE_POLLS)
		return 0;
	if (atomic_load_explicit(&sc->rx_ctrl->writer_closed,
				 memory_order_acquire))
		return shm_rx_pipe_ready(sc) ? 0 : -ESHUTDOWN;
	if (shm_peer_check_due(sc) && shm_peer_dead(sc))
		return shm_rx_pipe_ready(sc) ? 0 :
		       shm_fail_dead(sc, "in the middle of a large message");
	return 0;
}

/* Deliver what has arrived; got: bytes this get delivered before.  A get
 * that has delivered something stops at a rendezvous it cannot take whole:
 * the caller's next get, for the rest, reads it in one cross-memory read
 * rather than two (a CH3 header's small buffer then the payload's).
 * Returns bytes (>= 0) or a negative errno. */
static ssize_t shm_rx_drain(struct shm_conn *sc, struct rdmach_iovc *c,
			    size_t total, size_t got)
{
	size_t done = 0;
	ssize_t ret = 0;

	while (done < total) {
		uint64_t h;
		struct shm_rx_ring *r = shm_rx_next(sc, &h);
		uint8_t *p;
		uint32_t len;
		uint64_t room;
		int fin;

		if (!r)
			break;
		len = shm_hdr_len(h);
		p = r->base + (r->head & r->mask);
		room = r->mask + 1 - (r->head & r->mask);
		if (shm_hdr_type(h) == RDMACH_PKT_PAD) {
			shm_rx_consume(sc, r, room);
			continue;
		}
		if (shm_pkt_span(len) > room) {
			ret = shm_rx_corrupt(sc, r, h,
					     "packet past the ring end");
			break;
		}
		if (shm_hdr_type(h) == RDMACH_PKT_DATA) {
			size_t n = shm_scatter(c, p + SHM_HDR + sc->rx_off,
					       len - sc->rx_off);

			done += n;
			sc->rx_off += n;
			if (sc->rx_off < len)
				break;
			shm_rx_consume(sc, r, shm_pkt_span(len));
			sc->conn->stats.packets_received++;
		} else if (shm_hdr_type(h) == RDMACH_PKT_RNDV ||
			   shm_hdr_type(h) == RDMACH_PKT_PIPE) {
			if (!sc->rx_off && done + got &&
			    shm_hdr_type(h) == RDMACH_PKT_RNDV &&
			    rdmach_rndv_total(p + SHM_HDR, len) > total - done)
				break;
			if (!sc->rx_off)
				shm_rx_large_start(sc);
			ret = shm_hdr_type(h) == RDMACH_PKT_PIPE ?
			      shm_rx_pipe(sc, r, p, len, c, total - done, &fin) :
			      shm_rx_rndv(sc, r, p, len, c, total - done, &fin);
			if (ret < 0)
				break;
			done += (size_t)ret;
			ret = 0;
			if (fin)
				continue;
			if (!done && shm_hdr_type(h) == RDMACH_PKT_PIPE)
				ret = shm_rx_pipe_idle(sc);
			break;
		} else {
			ret = shm_rx_corrupt(sc, r, h, "unknown packet type");
			break;
		}
	}
	shm_rx_release_held(sc);
	if (ret < 0 && done == 0)
		return ret;
	return (ssize_t)done;
}

/* Nothing at the head of the ring: give consumed space back, and every
 * SHM_IDLE_POLLS such polls (shm_get counts them) ask: has the stream
 * ended?  The flags are read before a final drain, so bytes
 * sent before the close/death are never lost. */
static __attribute__((noinline)) ssize_t
shm_rx_idle(struct shm_conn *sc, const struct iovec *iov, int iovcnt,
	    size_t total)
{
	struct rdmach_iovc c;
	ssize_t n;

	if (shm_rx_holds(sc)) {
		shm_rx_release(sc);
		shm_bell_ring(sc);
		if (sc->rx_idle_polls % SHM_IDLE_POLLS)
			return 0;
	}
	rdmach_iovc_init(&c, iov, iovcnt);
	if (atomic_load_explicit(&sc->rx_ctrl->writer_closed,
				 memory_order_acquire)) {
		n = shm_rx_drain(sc, &c, total, 0);
		return n ? n : -ESHUTDOWN;
	}
	if (shm_peer_check_due(sc) && shm_peer_dead(sc)) {
		n = shm_rx_drain(sc, &c, total, 0);
		return n ? n : shm_fail_dead(sc, "(nothing left to read)");
	}
	return 0;
}

/* Packet rx_seq is at the head of ring r (header h). */
static __attribute__((noinline)) ssize_t
shm_rx_arrived(struct shm_conn *sc, struct shm_rx_ring *r, uint64_t h,
	       const struct iovec *iov, int iovcnt, size_t total)
{
	uint32_t len = shm_hdr_len(h);
	uint64_t off = r->head & r->mask, span = shm_pkt_span(len);
	size_t left = len - sc->rx_off;
	struct rdmach_iovc c;
	ssize_t n;

	/* the rest of a data packet that fits the first piece (most
	 * messages), or the part of it a one-piece get takes (the CH3
	 * channel's header buffer meeting a longer message, then the
	 * payload's get) */
	if (shm_hdr_type(h) == RDMACH_PKT_DATA && span <= r->mask + 1 - off &&
	    (left <= iov[0].iov_len || iovcnt == 1)) {
		if (left > iov[0].iov_len) {
			shm_copy(iov[0].iov_base,
				 r->base + off + SHM_HDR + sc->rx_off,
				 iov[0].iov_len);
			sc->rx_off += iov[0].iov_len;
			return (ssize_t)iov[0].iov_len;
		}
		shm_copy(iov[0].iov_base, r->base + off + SHM_HDR + sc->rx_off,
			 left);
		shm_rx_consume(sc, r, span);
		sc->conn->stats.packets_received++;
		if (left == total || !shm_rx_next(sc, &h)) {
			shm_rx_release_held_ring(sc, r);
			return (ssize_t)left;
		}
		rdmach_iovc_init(&c, iov, iovcnt);
		c.off = left;	/* more has come: the general loop goes on */
		n = shm_rx_drain(sc, &c, total - left, left);
		return n < 0 ? (ssize_t)left : (ssize_t)left + n;
	}
	rdmach_iovc_init(&c, iov, iovcnt);
	return shm_rx_drain(sc, &c, total, 0);
}

/* Kept small (no register saves): the empty poll is the hot loop of every
 * waiter, a load and a compare per ring. */
static ssize_t shm_get(struct rdmach_conn *conn, const struct iovec *iov,
		       int iovcnt, size_t total)
{
	struct shm_conn *sc = conn->priv;
	uint64_t h;
	struct shm_rx_ring *r = shm_rx_next(sc, &h);
	ssize_t n;

	if (r) {
		n = shm_rx_arrived(sc, r, h, iov, iovcnt, total);
		shm_bell_ring(sc);	/* space, a slot or an ack for the writer */
		return n;
	}
	if (shm_rx_holds(sc) || ++sc->rx_idle_polls % SHM_IDLE_POLLS == 0)
		return shm_rx_idle(sc, iov, iovcnt, total);
	return 0;
}

/* rdmach_peek: the rest of the data packet at the head, where it lies.
 * Idle work (space to give back, the periodic close and liveness check)
 * is left to a get, -ENOMSG; so are control packets (large messages). */
static ssize_t shm_peek(struct rdmach_conn *conn, const void **buf)
{
	struct shm_conn *sc = conn->priv;
	uint64_t h;
	struct shm_rx_ring *r = shm_rx_next(sc, &h);

	if (r) {
		if (shm_hdr_type(h) != RDMACH_PKT_DATA)
			return -ENOMSG;
		*buf = r->base + (r->head & r->mask) + SHM_HDR + sc->rx_off;
		return (ssize_t)(shm_hdr_len(h) - sc->rx_off);
	}
	/* the get that follows counts this poll */
	if (shm_rx_holds(sc) || (sc->rx_idle_polls + 1) % SHM_IDLE_POLLS == 0)
		return -ENOMSG;
	sc->rx_idle_polls++;
	return 0;
}

/* rdmach_consume: n bytes of the packet shm_peek showed are read. */
static int shm_consume(struct rdmach_conn *conn, size_t n)
{
	struct shm_conn *sc = conn->priv;
	uint64_t h;
	struct shm_rx_ring *r = shm_rx_next(sc, &h);
	uint32_t len;

	if (!r || shm_hdr_type(h) != RDMACH_PKT_DATA)
		return -EINVAL;
	len = shm_hdr_len(h);
	if (n > len - sc->rx_off)
		return -EINVAL;
	sc->rx_off += n;
	if (sc->rx_off == len) {
		shm_rx_consume(sc, r, shm_pkt_span(len));
		sc->conn->stats.packets_received++;
		shm_rx_release_held_ring(sc, r);
	}
	shm_bell_ring(sc);	/* space for the writer */
	return 0;
}

/* ---- send -------------------------------------------------------------- */

/* Free bytes of ring r after a fresh look at the reader's tail. */
static __attribute__((noinline)) uint64_t
shm_tx_space_refresh(struct shm_conn *sc, struct shm_tx_ring *r)
{
	uint64_t tail = atomic_load_explicit(r->tail, memory_order_acquire);

	if (tail != r->tail_seen) {
		r->tail_seen = tail;
		sc->conn->stats.credit_updates_received++;
	}
	return r->size - (r->head - r->tail_seen);
}

/* Free bytes of ring r, refreshing the cached tail when that says
 * < need (inline: every put asks). */
static inline uint64_t shm_tx_space(struct shm_conn *sc, struct shm_tx_ring *r,
				    uint64_t need)
{
	uint64_t space = r->size - (r->head - r->tail_seen);

	return space >= need ? space : shm_tx_space_refresh(sc, r);
}

/* Publish the packet at p, its payload written; it takes span bytes of
 * ring r. */
static inline void shm_tx_post(struct shm_conn *sc, struct shm_tx_ring *r,
			       uint8_t *p, unsigned type, uint32_t len,
			       uint64_t span)
{
	atomic_store_explicit((_Atomic uint64_t *)(void *)p,
			      shm_hdr_make(sc->tx_seq, type, len),
			      memory_order_release);
	sc->tx_seq = shm_seq_next(sc->tx_seq);
	r->head += span;
}

/* Nothing could be sent: report the reader's close or death. */
static ssize_t shm_tx_stalled(struct shm_conn *sc)
{
	sc->conn->stats.ring_full_stalls++;
	if (shm_idle_peer_dead(sc))
		return shm_fail_dead(sc, "(its ring is full)");
	return 0;
}

/* The ring for a data packet of len bytes (the line ring aside): the
 * bulk ring takes those of a deferred put (messages in a window) from
 * bulk_min; a ping-pong's messages stay in the main ring, whose lines
 * come round again sooner. */
static inline struct shm_tx_ring *shm_tx_data_ring(struct shm_conn *sc,
						   uint64_t len, int deferred)
{
	return &sc->tx[deferred && len >= sc->bulk_min ? SHM_BULK : SHM_MAIN];
}

/* Copy through the main ring (and the bulk ring for a deferred put), in
 * packets of at most chunk bytes. */
static ssize_t shm_tx_copy(struct shm_conn *sc, const struct iovec *iov,
			   int iovcnt, size_t total, uint64_t chunk,
			   int deferred)
{
	struct rdmach_iovc c;
	size_t done = 0;

	rdmach_iovc_init(&c, iov, iovcnt);
	while (done < total) {
		uint64_t want = total - done < chunk ? total - done : chunk;
		struct shm_tx_ring *r = shm_tx_data_ring(sc, want, deferred);
		uint64_t need = shm_pkt_span(want);
		uint64_t pos = r->head & r->mask;
		uint64_t contig = r->size - pos;
		uint64_t room = shm_tx_space(sc, r, need < contig ?
						     need : contig);
		uint8_t *p = r->base + pos;

		if (room > contig)
			room = contig;
		if (room < need) {
			/* Cut the packet at the ring end, or when the ring
			 * is nearly full if a useful amount fits. */
			if (room < contig &&
			    room < (need < SHM_MIN_PARTIAL ? need : SHM_MIN_PARTIAL))
				break;
			want = room - SHM_HDR;
		}
		shm_gather(&c, p + SHM_HDR, want);
		shm_tx_post(sc, r, p, RDMACH_PKT_DATA, (uint32_t)want,
			    shm_pkt_span(want));
		sc->conn->stats.packets_sent++;
		done += want;
	}
	if (done == 0)
		return shm_tx_stalled(sc);
	if (done < total)
		sc->conn->stats.ring_full_stalls++;
	return (ssize_t)done;
}

/* The piece of an iovec that holds most of its bytes: the buffer whose
 * place in the cache decides. */
static uintptr_t shm_main_buf(const struct iovec *iov, int iovcnt)
{
	size_t best = 0;
	uintptr_t buf = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		if (iov[i].iov_len > best) {
			best = iov[i].iov_len;
			buf = (uintptr_t)iov[i].iov_base;
		}
	return buf;
}

/* Was buf the buffer of one of the last large puts? */
static int shm_recent_buf(const struct shm_tl *tl, uintptr_t buf)
{
	unsigned i;

	for (i = 0; i < tl->recent; i++)
		if (tl->recent_buf[i] == buf)
			return 1;
	return 0;
}

/* A large put starts (by CMA or the copy area): note its buffer.  Only
 * then, not when the choice is made: a put retried for ring room would
 * otherwise find its own buffer recent. */
static void shm_recent_note(struct shm_tl *tl, const struct iovec *iov,
			    int iovcnt)
{
	uintptr_t buf;

	if (!tl->recent)
		return;
	buf = shm_main_buf(iov, iovcnt);
	if (shm_recent_buf(tl, buf))
		return;
	tl->recent_buf[tl->recent_pos] = buf;
	tl->recent_pos = (tl->recent_pos + 1) % tl->recent;
}

/* Fill a rendezvous' segments from the n pieces of iov it covers (empty
 * ones skipped; n from rdmach_rndv_pieces). */
static void shm_rndv_cover(const struct iovec *iov, int n,
			   struct rdmach_rndv_hdr *r, size_t *bytes)
{
	size_t sum = 0;
	int i;

	r->nsegs = 0;
	for (i = 0; i < n; i++) {
		if (!iov[i].iov_len)
			continue;
		r->seg[r->nsegs].addr = (uint64_t)(uintptr_t)iov[i].iov_base;
		r->seg[r->nsegs].len = iov[i].iov_len;
		r->seg[r->nsegs].key = 0;
		r->nsegs++;
		sum += iov[i].iov_len;
	}
	*bytes = sum;
}


/* Post a rendezvous control packet for what iov's first pieces cover
 * (a small first piece as data before it: RDMACH_RNDV_HEAD_MAX): returns those
 * bytes (> 0; the rendezvous is sc->next_rndv_id - 1 and *covered the
 * pieces), 0 when the ring has no room yet (retry), -EAGAIN if they are
 * too few to be worth it, or a negative errno. */
static ssize_t shm_tx_rndv_post(struct shm_conn *sc, const struct iovec *iov,
				int iovcnt, int *covered)
{
	struct {
		struct rdmach_rndv_hdr h;
		struct rdmach_rndv_seg s[RDMACH_RNDV_MAX_SEGS];
	} ctl;
	struct shm_tx_ring *r = &sc->tx[SHM_MAIN];
	size_t head = rdmach_rndv_head_len(iov, iovcnt), bytes;
	uint64_t pos, contig, need, len, hspan = head ? shm_pkt_span(head) : 0;
	int cnt = rdmach_rndv_pieces(iovcnt, head);

	shm_rndv_cover(iov + !!head, cnt, &ctl.h, &bytes);
	cnt += !!head;
	if (bytes < sc->tl->rndv_min)
		return -EAGAIN;
	len = rdmach_rndv_size(ctl.h.nsegs);
	need = hspan + shm_pkt_span(len);
	pos = r->head & r->mask;
	contig = r->size - pos;
	if (contig < need) {
		if (shm_tx_space(sc, r, contig + need) < contig + need)
			return shm_tx_stalled(sc);
		shm_tx_post(sc, r, r->base + pos, RDMACH_PKT_PAD, 0, contig);
		pos = 0;
	} else if (shm_tx_space(sc, r, need) < need) {
		return shm_tx_stalled(sc);
	}
	if (head) {
		memcpy(r->base + pos + SHM_HDR, iov[0].iov_base, head);
		shm_tx_post(sc, r, r->base + pos, RDMACH_PKT_DATA,
			    (uint32_t)head, hspan);
		sc->conn->stats.packets_sent++;
		pos += hspan;
	}
	ctl.h.id = sc->next_rndv_id++;
	ctl.h.total = bytes;
	ctl.h.flags = 0;
	memcpy(r->base + pos + SHM_HDR, &ctl, len);
	shm_tx_post(sc, r, r->base + pos, RDMACH_PKT_RNDV, (uint32_t)len,
		    need - hspan);
	sc->conn->stats.packets_sent++;
	shm_recent_note(sc->tl, iov, cnt);
	*covered = cnt;
	return (ssize_t)(head + bytes);
}

/* A put that waits for its rendezvous: returns 0 once it is posted (the
 * put is retried until the peer has read it), -EAGAIN if too small. */
static ssize_t shm_tx_rndv_start(struct shm_conn *sc, const struct iovec *iov,
				 int iovcnt)
{
	ssize_t n;
	int cnt;

	n = shm_tx_rndv_post(sc, iov, iovcnt, &cnt);
	if (n <= 0)
		return n;
	sc->rndv.active = 1;
	sc->rndv.id = sc->next_rndv_id - 1;
	sc->rndv.bytes = (size_t)n;
	sc->rndv.iovcnt = cnt;
	memcpy(sc->rndv.iov, iov, (size_t)cnt * sizeof(*iov));
	return 0;
}

static int shm_rndv_acked(const struct shm_conn *sc)
{
	return atomic_load_explicit(&sc->tx_ctrl->acked_id,
				    memory_order_acquire) >= sc->rndv.id;
}

/* Retry of a put with a rendezvous outstanding. */
static ssize_t shm_tx_rndv_poll(struct shm_conn *sc, const struct iovec *iov,
				int iovcnt)
{
	if (iovcnt < sc->rndv.iovcnt ||
	    memcmp(iov, sc->rndv.iov, (size_t)sc->rndv.iovcnt * sizeof(*iov))) {
		rdmach_err("shm: put to rank %d retried with a different "
			   "iovec while a zero-copy put of %zu bytes is pending",
			   sc->conn->peer, sc->rndv.bytes);
		return -EINVAL;
	}
	if (!shm_rndv_acked(sc)) {
		if (shm_idle_peer_dead(sc))
			return shm_fail_dead(sc, "before reading a zero-copy put");
		return 0;
	}
	sc->rndv.active = 0;
	sc->conn->stats.zcopy_msgs++;
	sc->conn->stats.zcopy_bytes += sc->rndv.bytes;
	return (ssize_t)sc->rndv.bytes;
}

/* The ring a put of one packet of len bytes (need with its header, in
 * whole lines) goes to now: the line ring if it is one line and there is
 * room there, else the main or the bulk ring (shm_tx_data_ring) if the
 * packet fits before its end and in the space the cached tail shows;
 * NULL sends the put the general way. */
static inline struct shm_tx_ring *shm_tx_ring_for(struct shm_conn *sc,
						  uint64_t len, uint64_t need,
						  int deferred)
{
	struct shm_tx_ring *r = &sc->tx[SHM_LINES];

	if (need == SHM_LINE && r->size && shm_tx_space(sc, r, need) >= need)
		return r;
	r = shm_tx_data_ring(sc, len, deferred);
	if (need > r->size - (r->head & r->mask) ||
	    shm_tx_space(sc, r, need) < need)
		return NULL;
	return r;
}

/* Start a message of total bytes through the copy area: its PIPE packet
 * (in the line ring when there is room: it is one line).  Only once the
 * next slot is free, so that a put that commits bytes also takes some.
 * 0, or -EAGAIN when there is no room yet. */
static int shm_tx_pipe_start(struct shm_conn *sc, uint64_t total)
{
	struct shm_pipe *pp = &sc->tx_pipe;
	struct shm_pipe_pkt pkt = { .total = total };
	struct shm_tx_ring *r;
	uint8_t *p;

	if (atomic_load_explicit(&shm_pipe_flag(pp)->len, memory_order_acquire))
		return -EAGAIN;
	r = shm_tx_ring_for(sc, sizeof(pkt), SHM_LINE, 0);
	if (!r)
		return -EAGAIN;
	p = r->base + (r->head & r->mask);
	memcpy(p + SHM_HDR, &pkt, sizeof(pkt));
	shm_tx_post(sc, r, p, RDMACH_PKT_PIPE, sizeof(pkt), SHM_LINE);
	sc->conn->stats.packets_sent++;
	sc->conn->stats.pipelined_msgs++;
	pp->left = total;
	pp->first = 1;
	pp->chunk = sc->tl->pipe_first < pp->slot ? sc->tl->pipe_first : pp->slot;
	return 0;
}

/* Copying into a slot (page-aligned) runs at a quarter of its speed on
 * this EPYC when the slot is 16-512 bytes ahead of the source modulo 4 KiB
 * (loads wait on aliased stores still in flight): MPI's 1 MiB messages, a
 * 40-byte header in front of a page-aligned buffer, moved 7 GB/s instead
 * of 27-29.  So a message's first chunk ends where a short leading piece
 * (a header) ends, and a chunk is trimmed so that the next one's source
 * is clear of that window.  n: the chunk's planned length. */
#define SHM_ALIAS_LO 16u
#define SHM_ALIAS_HI 512u
#define SHM_LEADING_MAX 4096u

static uint64_t shm_pipe_cut(const struct shm_pipe *pp,
			     const struct rdmach_iovc *c, uint64_t n)
{
	const void *base = NULL;
	int more = 0;
	uint64_t rem = rdmach_iovc_piece(c, &base, &more), dist;

	if (pp->first && rem < n && rem < SHM_LEADING_MAX && more)
		return rem;
	if (rem <= n)
		return n;
	dist = (0 - ((uintptr_t)base + n)) & 4095u;
	if (dist > SHM_ALIAS_LO && dist < SHM_ALIAS_HI &&
	    n > 2 * SHM_ALIAS_HI)
		n -= SHM_ALIAS_HI - dist;
	return n;
}

/* Copy the next bytes of the current copy-area message (starting one if
 * none is under way) into every free slot, in chunks that double from
 * RDMACH_SHM_PIPE_FIRST to the slot size.  Returns the bytes taken. */
static ssize_t shm_tx_pipe(struct shm_conn *sc, const struct iovec *iov,
			   int iovcnt, size_t total)
{
	struct shm_pipe *pp = &sc->tx_pipe;
	struct rdmach_iovc c;
	size_t done = 0, take;

	if (!pp->left) {
		if (shm_tx_pipe_start(sc, total))
			return shm_tx_stalled(sc);
		shm_recent_note(sc->tl, iov, iovcnt);
	}
	take = total < pp->left ? total : pp->left;
	rdmach_iovc_init(&c, iov, iovcnt);
	while (done < take) {
		struct shm_pipe_flag *f = shm_pipe_flag(pp);
		uint64_t n = take - done < pp->chunk ? take - done : pp->chunk;

		if (shm_pipe_wait(sc->tl, f, 0, done))
			break;
		n = shm_pipe_cut(pp, &c, n);
		pp->first = 0;
		shm_gather(&c, shm_pipe_slot(pp), n);
		atomic_store_explicit(&f->len, n, memory_order_release);
		pp->next++;
		done += n;
		pp->chunk = 2 * pp->chunk < pp->slot ? 2 * pp->chunk : pp->slot;
	}
	pp->left -= done;
	if (done == 0)
		return shm_tx_stalled(sc);
	return (ssize_t)done;
}

/*
 * A large put: cross-memory attach (one copy, by the reader, after the
 * kernel has pinned the writer's pages) or the copy area (two copies,
 * overlapped, through memory that stays in cache)?  Which is faster
 * depends on where the bytes are: a put is hot (likely in the writer's
 * cache) when it is not larger than the cache limit and, with
 * RDMACH_SHM_RECENT, its buffer was put recently (a reused buffer), cold
 * otherwise; for each of the two, RDMACH_SHM_CMA_USE=auto takes the way
 * the start-up measurement found faster (shm_choice_setup).  A
 * deferred put while large messages go both ways takes CMA
 * (RDMACH_SHM_CMA_DUPLEX): one copy per side, several reads in flight,
 * where the copy area makes each core copy twice.  From a reused buffer
 * that pays from RDMACH_SHM_CMA_DUPLEX_REUSED, below the CMA threshold
 * (MPI bibw with one buffer, 128 KiB: 1.23x the copy area, 9 interleaved
 * rounds, 64 KiB 0.81x; 256 KiB-4 MiB: 1.02-1.58x, 7 rounds) up to
 * RDMACH_SHM_CMA_DUPLEX_REUSED_MAX (8-64 MiB: median 1.13x the copy area
 * while the host ran fast, 0.68-1.00x while it ran slow; the default lies
 * under 8 MiB and above 4 MiB with MPI's header); from
 * a new buffer only from RDMACH_SHM_CMA_DUPLEX up (cache-cold MPI bibw by
 * CMA at 256 KiB/512 KiB/1 MiB: 0.48/0.69/0.55x the copy area, the last
 * in three 5-7-round runs; from 2 MiB even or ahead up to 16 MiB).
 */
static int shm_tx_want_cma(struct shm_conn *sc, const struct iovec *iov,
			   int iovcnt, size_t total, int deferred)
{
	struct shm_tl *tl = sc->tl;
	int reused = -1;		/* unknown without RDMACH_SHM_RECENT */

	if (!tl->cma || total < tl->rndv_min ||
	    !atomic_load_explicit(&sc->tx_ctrl->cma_ok, memory_order_relaxed))
		return 0;
	if (tl->recent)
		reused = shm_recent_buf(tl, shm_main_buf(iov, iovcnt));
	if (deferred && tl->cma_duplex && shm_duplex(sc) &&
	    (reused == 1 ? total >= tl->cma_duplex_reused &&
			   total < tl->cma_duplex_reused_max :
			   total >= tl->cma_duplex))
		return 1;
	if (total < tl->cma_threshold)
		return 0;
	if (!sc->tx_pipe.slot || total < tl->pipe_threshold)
		return 1;
	if (tl->cma_hot == tl->cma_cold)
		return tl->cma_hot;
	return total <= tl->cache_limit && reused ? tl->cma_hot : tl->cma_cold;
}

/* The rendezvous of a deferred put: posted, its id the ticket; returns
 * like shm_tx_rndv_post. */
static ssize_t shm_tx_rndv_defer(struct shm_conn *sc, const struct iovec *iov,
				 int iovcnt, uint64_t *ticket)
{
	ssize_t n;
	int cnt;

	n = shm_tx_rndv_post(sc, iov, iovcnt, &cnt);
	if (n > 0) {
		*ticket = sc->next_rndv_id - 1;
		sc->conn->stats.zcopy_msgs++;
		sc->conn->stats.zcopy_bytes += (uint64_t)n;
	}
	return n;
}

/* Everything but a one-packet put.  ticket: NULL for rdmach_put (a
 * rendezvous waits for its reader), else rdmach_put_deferred's. */
static __attribute__((noinline)) ssize_t
shm_put_general(struct shm_conn *sc, const struct iovec *iov, int iovcnt,
		size_t total, uint64_t *ticket)
{
	ssize_t n;

	if (atomic_load_explicit(&sc->tx_ctrl->reader_closed,
				 memory_order_acquire)) {
		if (sc->rndv.active && shm_rndv_acked(sc))
			return shm_tx_rndv_poll(sc, iov, iovcnt);
		return -EPIPE;
	}
	if (sc->rndv.active)
		return shm_tx_rndv_poll(sc, iov, iovcnt);
	if (sc->tx_pipe.left)
		return shm_tx_pipe(sc, iov, iovcnt, total);
	if (total >= sc->tl->large_min) {
		if (shm_tx_want_cma(sc, iov, iovcnt, total, ticket != NULL)) {
			n = ticket ? shm_tx_rndv_defer(sc, iov, iovcnt, ticket) :
				     shm_tx_rndv_start(sc, iov, iovcnt);
			if (n != -EAGAIN)
				return n;
		}
		if (sc->tx_pipe.slot && total >= sc->tl->pipe_threshold)
			return shm_tx_pipe(sc, iov, iovcnt, total);
	}
	return shm_tx_copy(sc, iov, iovcnt, total,
			   ticket ? sc->chunk_deferred : sc->chunk,
			   ticket != NULL);
}

/* Most messages: one packet (no rendezvous) into the ring
 * shm_tx_ring_for picks; everything else, and a closed reader, go the
 * general way (ticket: as for shm_put_general). */
static inline __attribute__((always_inline)) ssize_t
shm_put_one(struct rdmach_conn *conn, const struct iovec *iov, int iovcnt,
	    size_t total, uint64_t *ticket)
{
	struct shm_conn *sc = conn->priv;
	uint64_t need = shm_pkt_span(total);
	struct shm_tx_ring *r;
	uint8_t *p;
	ssize_t n;

	if (total > sc->one_pkt_max || sc->rndv.active || sc->tx_pipe.left ||
	    !(r = shm_tx_ring_for(sc, total, need, ticket != NULL)) ||
	    atomic_load_explicit(&sc->tx_ctrl->reader_closed,
				 memory_order_acquire)) {
		n = shm_put_general(sc, iov, iovcnt, total, ticket);
		shm_bell_ring(sc);
		return n;
	}
	p = r->base + (r->head & r->mask);
	shm_gather_pkt(p + SHM_HDR, iov, iovcnt, total);
	shm_tx_post(sc, r, p, RDMACH_PKT_DATA, (uint32_t)total, need);
	sc->conn->stats.packets_sent++;
	shm_bell_ring(sc);
	return (ssize_t)total;
}

static ssize_t shm_put(struct rdmach_conn *conn, const struct iovec *iov,
		       int iovcnt, size_t total)
{
	return shm_put_one(conn, iov, iovcnt, total, NULL);
}

/* rdmach_put_deferred: shm_put, except that a rendezvous returns at once
 * with its id as the ticket, ring packets may be larger
 * (RDMACH_SHM_DEFERRED_CHUNK) and those from RDMACH_SHM_BULK_MIN go to
 * the bulk ring: MPI send requests come in windows, where the copies of
 * successive messages overlap anyway, fewer packets cost less (MPI_Isend
 * window of 16 KiB: 1.03-1.12x the bandwidth, 1.09-1.14x both ways) and
 * a larger ring keeps more messages in flight. */
static ssize_t shm_put_deferred(struct rdmach_conn *conn,
				const struct iovec *iov, int iovcnt,
				size_t total, uint64_t *ticket)
{
	struct shm_conn *sc = conn->priv;
	ssize_t n;

	if (total <= sc->one_pkt_max)
		return shm_put_one(conn, iov, iovcnt, total, ticket);
	n = shm_put_general(sc, iov, iovcnt, total, ticket);
	shm_bell_ring(sc);
	return n;
}

static int shm_put_done(struct rdmach_conn *conn, uint64_t *done)
{
	struct shm_conn *sc = conn->priv;

	*done = atomic_load_explicit(&sc->tx_ctrl->acked_id,
				     memory_order_acquire);
	if (*done + 1 >= sc->next_rndv_id)
		return 0;
	if (conn->err)
		return conn->err;
	if (shm_idle_peer_dead(sc))
		return shm_fail_dead(sc, "before reading a zero-copy put");
	if (atomic_load_explicit(&sc->tx_ctrl->reader_closed,
				 memory_order_acquire))
		return rdmach_conn_fail(conn, -EPIPE, "shm: rank %d finalized "
					"before reading a zero-copy put",
					conn->peer);
	return 1;
}

/* ---- wire-up ----------------------------------------------------------- */

static int shm_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* The copy-area knobs: powers of two, 2..SHM_PIPE_MAX_SLOTS slots. */
static int shm_read_pipe_knobs(struct shm_tl *tl, const uint64_t *v)
{
	uint64_t area = v[SHM_K_PIPE_AREA], slot = v[SHM_K_PIPE_CHUNK];

	tl->pipe_size_auto = !area;
	if (!area && shm_pow2(slot)) {	/* auto; shm_pipe_size_setup */
		area = SHM_PIPE_AREA_FEW;
		if (area < 2 * slot)
			area = 2 * slot;
		if (area / slot > SHM_PIPE_MAX_SLOTS)
			area = slot * SHM_PIPE_MAX_SLOTS;
	}
	if (!shm_pow2(area) || !shm_pow2(slot) || slot > area / 2 ||
	    area / slot > SHM_PIPE_MAX_SLOTS) {
		rdmach_err("shm: RDMACH_SHM_PIPE_AREA=%" PRIu64 " and "
			   "RDMACH_SHM_PIPE_CHUNK=%" PRIu64 " must be powers "
			   "of two making 2..%u slots", area, slot,
			   SHM_PIPE_MAX_SLOTS);
		return -EINVAL;
	}
	tl->pipe_size = v[SHM_K_PIPE] ? area : 0;
	tl->pipe_slot = slot;
	tl->pipe_first = v[SHM_K_PIPE_FIRST];
	tl->pipe_threshold = v[SHM_K_PIPE_THRESHOLD];
	tl->pipe_spin = (uint32_t)v[SHM_K_PIPE_SPIN];
	tl->recent = (unsigned)v[SHM_K_RECENT];
	tl->large_min = UINT64_MAX;
	if (tl->pipe_size)
		tl->large_min = tl->pipe_threshold;
	if (tl->cma && tl->rndv_min < tl->large_min)
		tl->large_min = tl->rndv_min;
	return 0;
}

static int shm_read_cma_use(struct shm_tl *tl)
{
	static const char *const names[] = {
		[SHM_CMA_AUTO] = "auto", [SHM_CMA_COLD] = "cold",
		[SHM_CMA_ALWAYS] = "always", [SHM_CMA_NEVER] = "never",
	};
	const char *v = rdmach_knob_str(&shm_knobs[SHM_K_CMA_USE]);
	unsigned i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(v, names[i])) {
			tl->cma_use = (enum shm_cma_use)i;
			tl->cma_hot = tl->cma_use == SHM_CMA_ALWAYS;
			tl->cma_cold = tl->cma_use == SHM_CMA_ALWAYS ||
				       tl->cma_use == SHM_CMA_COLD;
			return 0;
		}
	rdmach_err("shm: RDMACH_SHM_CMA_USE=%s is none of auto, cold, "
		   "always, never", v);
	return -EINVAL;
}

static int shm_read_knobs(struct shm_tl *tl)
{
	uint64_t v[SHM_K_NUM];
	int i, err;

	for (i = 0; i < SHM_K_NUM; i++) {
		if (shm_knobs[i].type == RDMACH_KNOB_STRING)
			continue;
		err = rdmach_knob_u64(&shm_knobs[i], &v[i]);
		if (err == -ENODATA &&
		    (i == SHM_K_CACHE_LIMIT || i == SHM_K_PIPE_AREA))
			v[i] = 0;	/* auto: decided at publish or connect */
		else if (err == -ENODATA && i == SHM_K_WAKE)
			v[i] = UINT64_MAX;	/* auto: decided at publish */
		else if (err)
			return err;
	}
	err = shm_read_cma_use(tl);
	if (err)
		return err;
	tl->ring_size = v[SHM_K_RING_SIZE];
	tl->line_ring_size = v[SHM_K_LINE_RING];
	/* one no larger than the main ring would keep no more in flight */
	tl->bulk_ring_size = v[SHM_K_BULK_RING] > tl->ring_size ?
			     v[SHM_K_BULK_RING] : 0;
	tl->bulk_min = v[SHM_K_BULK_MIN];
	tl->chunk = v[SHM_K_CHUNK];
	tl->chunk_deferred = v[SHM_K_DEFERRED_CHUNK];
	tl->cma = (int)v[SHM_K_CMA];
	tl->cma_threshold = v[SHM_K_CMA_THRESHOLD];
	tl->cma_duplex = tl->cma_use == SHM_CMA_AUTO ? v[SHM_K_CMA_DUPLEX] : 0;
	tl->cma_duplex_reused = v[SHM_K_CMA_DUPLEX_REUSED];
	tl->cma_duplex_reused_max = v[SHM_K_CMA_DUPLEX_REUSED_MAX] ?
				    v[SHM_K_CMA_DUPLEX_REUSED_MAX] : UINT64_MAX;
	tl->rndv_min = tl->cma_duplex && tl->cma_duplex_reused <
		       tl->cma_threshold ? tl->cma_duplex_reused :
					   tl->cma_threshold;
	tl->cache_limit = v[SHM_K_CACHE_LIMIT];
	tl->liveness_ns = v[SHM_K_LIVENESS_MS] * 1000000u;
	tl->calib_ns = v[SHM_K_CALIB_MS] * 1000000u;
	tl->wake = v[SHM_K_WAKE] == UINT64_MAX ? -1 : (int)v[SHM_K_WAKE];
	return shm_read_pipe_knobs(tl, v);
}

static int shm_open_tl(struct rdmach_ctx *ctx, struct rdmach_tl **tlp)
{
	struct shm_tl *tl;
	int err;

	tl = calloc(1, sizeof(*tl));
	if (!tl)
		return -ENOMEM;
	tl->base.ops = &shm_ops;
	tl->base.ctx = ctx;
	tl->seg.fd = -1;
	err = shm_read_knobs(tl);
	if (err)
		goto err_free;
	if (ctx->peer_timeout_ns && tl->liveness_ns > ctx->peer_timeout_ns / 2)
		tl->liveness_ns = ctx->peer_timeout_ns / 2;
	/* Let peers read our memory with process_vm_readv under Yama's
	 * ptrace_scope=1 (harmless when Yama is absent). */
	if (tl->cma)
		prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	tl->cma_magic = rdmach_now_ns() ^ ((uint64_t)getpid() << 32) ^
			0x9e3779b97f4a7c15ull;
	*tlp = &tl->base;
	return 0;

err_free:
	free(tl);
	return err;
}

static void shm_key(char *key, size_t len, int rank)
{
	snprintf(key, len, "shm-%d", rank);
}

/* The lowest local rank (the leader) measures the cache limit for all,
 * when it is auto and the choice it serves can arise; the others read it
 * from the leader's segment header at connect (shm_cache_limit_setup). */
static int shm_leader(const int *peers, int npeers)
{
	int i, min = peers[0];

	for (i = 1; i < npeers; i++)
		if (peers[i] < min)
			min = peers[i];
	return min;
}

static void shm_measure_cache(struct shm_tl *tl, const int *peers, int npeers)
{
	struct shm_seg_hdr *h = shm_seg_hdr(&tl->seg);
	struct shm_calib m;
	int err;

	if ((tl->cache_limit && tl->cma_use != SHM_CMA_AUTO) || !tl->cma ||
	    !tl->pipe_size || npeers < 2 || !tl->calib_ns ||
	    shm_leader(peers, npeers) != tl->base.ctx->rank)
		return;
	err = shm_calib_measure(SHM_CACHE_LIMIT_MAX, tl->calib_ns, &m);
	if (err) {
		rdmach_info("shm: start-up measurement %s: built-in cache limit, "
			    "large puts through the copy area",
			    err == -ETIME ? "over RDMACH_SHM_CALIB_MS" :
			    rdmach_strerror(err));
		return;
	}
	rdmach_info("shm: measured: cache limit %" PRIu64 " KiB; memcpy %.1f "
		    "GB/s in cache, %.1f beyond; process_vm_readv %.1f / %.1f",
		    m.cache_limit >> 10, m.copy_hot, m.copy_cold, m.cma_hot,
		    m.cma_cold);
	h->copy_hot_mbs = (uint64_t)(m.copy_hot * 1000);
	h->copy_cold_mbs = (uint64_t)(m.copy_cold * 1000);
	h->cma_hot_mbs = (uint64_t)(m.cma_hot * 1000);
	h->cma_cold_mbs = (uint64_t)(m.cma_cold * 1000);
	h->cache_limit = m.cache_limit;
}

/* RDMACH_SHM_WAKE=auto: sleep on the doorbell when the local processes
 * (npeers, myself included) outnumber the CPUs, where a waiter that spins
 * or sleeps a timer's slack holds back the peer it waits for. */
static void shm_bell_setup(struct shm_tl *tl, int npeers)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int on = tl->wake >= 0 ? tl->wake : cpus > 0 && npeers > cpus;

	shm_seg_hdr(&tl->seg)->bell.on = (uint32_t)on;
	rdmach_debug("shm: idle waits %s woken by peers", on ? "are" : "are not");
}

/* RDMACH_SHM_PIPE_AREA=auto, now that the local processes (npeers, myself
 * included) are known: the smaller area on a crowded host, if it still
 * makes two slots. */
static void shm_pipe_size_setup(struct shm_tl *tl, int npeers)
{
	if (tl->pipe_size_auto && npeers > SHM_PIPE_AREA_FEW_PROCS &&
	    tl->pipe_size > SHM_PIPE_AREA_MANY &&
	    SHM_PIPE_AREA_MANY >= 2 * tl->pipe_slot)
		tl->pipe_size = SHM_PIPE_AREA_MANY;
	if (tl->pipe_size)
		rdmach_info("shm: copy area %" PRIu64 " KiB per local peer "
			    "(%d local processes)", tl->pipe_size >> 10,
			    npeers);
}

static int shm_publish(struct rdmach_tl *base, const int *peers, int npeers)
{
	struct shm_tl *tl = shm_tl_of(base);
	char key[32], val[192], seg[128];
	struct shm_seg_geom geom;
	int err;

	if (npeers == 0)
		return 0;
	shm_pipe_size_setup(tl, npeers);
	geom.ring_size = tl->ring_size;
	geom.line_ring_size = tl->line_ring_size;
	geom.bulk_ring_size = tl->bulk_ring_size;
	geom.pipe_size = tl->pipe_size;
	geom.pipe_slot = tl->pipe_slot;
	err = shm_seg_create(&tl->seg, base->ctx->rank, peers, npeers, &geom);
	if (err)
		return err;
	shm_bell_setup(tl, npeers);
	shm_measure_cache(tl, peers, npeers);
	err = shm_seg_describe(&tl->seg, seg, sizeof(seg));
	if (err)
		return err;
	snprintf(val, sizeof(val), "%s:%" PRIx64 ":%" PRIx64, seg,
		 (uint64_t)(uintptr_t)&tl->cma_magic, tl->cma_magic);
	shm_key(key, sizeof(key), base->ctx->rank);
	return rdmach_oob_put(base->ctx, key, val);
}

/* Can this process read the peer's memory?  Read its published magic. */
static int shm_cma_probe(pid_t pid, uint64_t addr, uint64_t magic)
{
	uint64_t got = 0;
	struct iovec l = { &got, sizeof(got) };
	struct iovec r = { (void *)(uintptr_t)addr, sizeof(got) };

	if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(got))
		return errno ? -errno : -EIO;
	return got == magic ? 0 : -EIO;
}

static int shm_parse_peer(const char *val, int peer, pid_t *pid,
			  uint64_t *maddr, uint64_t *magic)
{
	const char *p = val;
	int i, ipid;

	/* pid:fd:size:name:magic_addr:magic */
	for (i = 0; i < 4 && p; i++)
		p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL;
	if (!p || sscanf(val, "%d:", &ipid) != 1 ||
	    sscanf(p, "%" SCNx64 ":%" SCNx64, maddr, magic) != 2) {
		rdmach_err("shm: rank %d published a malformed address '%s'",
			   peer, val);
		return -EPROTO;
	}
	*pid = ipid;
	return 0;
}

/* A line or bulk ring nobody writes (RDMACH_SHM_LINE_RING=0,
 * RDMACH_SHM_BULK_RING=0): its head reads 0, never a packet number. */
static _Alignas(SHM_LINE) uint8_t shm_no_ring[SHM_LINE];

static void shm_tx_ring_init(struct shm_tx_ring *r, uint8_t *base,
			     _Atomic uint64_t *tail, uint64_t size)
{
	r->base = base;
	r->tail = tail;
	r->size = size;
	r->mask = size ? size - 1 : 0;
}

static void shm_rx_ring_init(struct shm_rx_ring *r, uint8_t *base,
			     _Atomic uint64_t *tail, uint64_t size)
{
	r->base = size ? base : shm_no_ring;
	r->tail = tail;
	r->mask = size ? size - 1 : 0;
}

/* The copy area of writer slot in seg; none if seg has none or its
 * header does not describe one that fits. */
static void shm_pipe_init(struct shm_pipe *pp, const struct shm_seg *seg,
			  int slot)
{
	const struct shm_seg_hdr *h = shm_seg_hdr(seg);

	memset(pp, 0, sizeof(*pp));
	if (!h->pipe_size || !shm_pow2(h->pipe_slot) ||
	    !shm_pow2(h->pipe_size) || h->pipe_size / h->pipe_slot < 2 ||
	    h->pipe_size / h->pipe_slot > SHM_PIPE_MAX_SLOTS ||
	    h->pipe_stride < h->pipe_size + h->pipe_size / h->pipe_slot *
	    sizeof(struct shm_pipe_flag) ||
	    h->pipe_off + (uint64_t)(slot + 1) * h->pipe_stride > seg->size)
		return;
	pp->flags = shm_seg_pipe_flags(seg, slot);
	pp->area = shm_seg_pipe_area(seg, slot);
	pp->slot = h->pipe_slot;
	pp->slot_mask = h->pipe_size / h->pipe_slot - 1;
}

/* My bulk ring in the peer's segment, if it has one that fits (the peer
 * may run with other knobs): packets of bulk_min bytes or more go there. */
static void shm_tx_bulk_init(struct shm_conn *sc, const struct shm_tl *tl,
			     const struct shm_seg *peer_seg, int tx_slot)
{
	const struct shm_seg_hdr *ph = shm_seg_hdr(peer_seg);
	uint64_t size = ph->bulk_ring_size;

	if (!shm_pow2(size) || size <= ph->ring_size || ph->bulk_off % SHM_LINE ||
	    ph->bulk_off + (uint64_t)(tx_slot + 1) * size > peer_seg->size)
		size = 0;
	shm_tx_ring_init(&sc->tx[SHM_BULK], size ?
			 shm_seg_bulk_ring(peer_seg, tx_slot) : NULL,
			 &sc->tx_ctrl->bulk_tail, size);
	sc->bulk_min = size ? tl->bulk_min : UINT64_MAX;
}

/* A packet size knob as the payload of a full packet: at most a quarter
 * of the ring (>= 4 packets in flight), header included (whole lines). */
static uint64_t shm_chunk_payload(uint64_t chunk, uint64_t ring_size)
{
	return (chunk < ring_size / 4 ? chunk : ring_size / 4) - SHM_HDR;
}

/* The largest packets of a put and of a deferred put, from the knobs and
 * the sizes of the peer's rings (its knobs may differ from mine).  The
 * packets of a deferred put from bulk_min go to the bulk ring: a quarter
 * of that ring caps them, as long as those under bulk_min fit a quarter
 * of the main ring. */
static void shm_tx_chunks(struct shm_conn *sc, const struct shm_tl *tl)
{
	uint64_t main_size = sc->tx[SHM_MAIN].size;
	uint64_t deferred_ring = main_size;

	if (sc->tx[SHM_BULK].size &&
	    sc->bulk_min - 1 <= shm_chunk_payload(main_size, main_size))
		deferred_ring = sc->tx[SHM_BULK].size;
	sc->chunk = shm_chunk_payload(tl->chunk, main_size);
	sc->chunk_deferred = shm_chunk_payload(tl->chunk_deferred,
					       deferred_ring);
	if (sc->chunk_deferred < sc->chunk)	/* one packet takes up to chunk */
		sc->chunk_deferred = sc->chunk;
	sc->one_pkt_max = sc->chunk;
	if (tl->large_min <= sc->one_pkt_max)
		sc->one_pkt_max = tl->large_min - 1;
}

static void shm_conn_setup_rings(struct shm_conn *sc, struct shm_tl *tl,
				 const struct shm_seg *peer_seg, int tx_slot,
				 int rx_slot)
{
	const struct shm_seg_hdr *ph = shm_seg_hdr(peer_seg);

	sc->tx_ctrl = shm_seg_ctrl(peer_seg, tx_slot);
	shm_tx_ring_init(&sc->tx[SHM_MAIN], shm_seg_ring(peer_seg, tx_slot),
			 &sc->tx_ctrl->tail, ph->ring_size);
	shm_tx_ring_init(&sc->tx[SHM_LINES],
			 shm_seg_line_ring(peer_seg, tx_slot),
			 &sc->tx_ctrl->line_tail, ph->line_ring_size);
	shm_tx_bulk_init(sc, tl, peer_seg, tx_slot);
	shm_tx_chunks(sc, tl);
	sc->tx_seq = SHM_SEQ_FIRST;
	sc->next_rndv_id = 1;
	sc->rx_ctrl = shm_seg_ctrl(&tl->seg, rx_slot);
	shm_rx_ring_init(&sc->rx[SHM_MAIN], shm_seg_ring(&tl->seg, rx_slot),
			 &sc->rx_ctrl->tail, tl->ring_size);
	shm_rx_ring_init(&sc->rx[SHM_LINES],
			 shm_seg_line_ring(&tl->seg, rx_slot),
			 &sc->rx_ctrl->line_tail, tl->line_ring_size);
	shm_rx_ring_init(&sc->rx[SHM_BULK], shm_seg_bulk_ring(&tl->seg, rx_slot),
			 &sc->rx_ctrl->bulk_tail, tl->bulk_ring_size);
	sc->rx_seq = SHM_SEQ_FIRST;
	shm_pipe_init(&sc->rx_pipe, &tl->seg, rx_slot);
	if (tl->pipe_size)	/* RDMACH_SHM_PIPE=0: the writer's choice */
		shm_pipe_init(&sc->tx_pipe, peer_seg, tx_slot);
	else
		memset(&sc->tx_pipe, 0, sizeof(sc->tx_pipe));
}

static void shm_cma_setup(struct shm_conn *sc, struct shm_tl *tl,
			  uint64_t maddr, uint64_t magic)
{
	int err;

	if (!tl->cma)
		return;
	err = shm_cma_probe(sc->pid, maddr, magic);
	if (err) {
		rdmach_info("shm: cannot read the memory of rank %d (pid %d): "
			    "%s; large messages from it are copied through "
			    "the ring (check ptrace permissions / Yama "
			    "ptrace_scope)", sc->conn->peer, (int)sc->pid,
			    strerror(-err));
		return;
	}
	atomic_store_explicit(&sc->rx_ctrl->cma_ok, 1, memory_order_release);
}

static int shm_connect_peer(struct shm_tl *tl, int peer, struct shm_conn *sc)
{
	struct rdmach_ctx *ctx = tl->base.ctx;
	const struct shm_seg *pseg = &tl->seg;
	char key[32], val[256];
	uint64_t maddr, magic;
	int tx_slot, rx_slot, err;

	shm_key(key, sizeof(key), peer);
	err = rdmach_oob_get(ctx, key, val, sizeof(val));
	if (err)
		return err;
	err = shm_parse_peer(val, peer, &sc->pid, &maddr, &magic);
	if (err)
		return err;
	sc->pidfd = -1;
	sc->self = peer == ctx->rank;
	if (!sc->self) {
		err = shm_seg_attach(&sc->peer_seg, val, peer);
		if (err)
			return err;
		pseg = &sc->peer_seg;
		sc->pidfd = shm_pidfd_open(sc->pid);
	}
	tx_slot = shm_seg_slot(pseg, ctx->rank);
	rx_slot = shm_seg_slot(&tl->seg, peer);
	if (tx_slot < 0 || rx_slot < 0) {
		rdmach_err("shm: rank %d and rank %d disagree on the local "
			   "peer list", ctx->rank, peer);
		return -EPROTO;
	}
	shm_conn_setup_rings(sc, tl, pseg, tx_slot, rx_slot);
	shm_cma_setup(sc, tl, maddr, magic);
	if (!sc->self && shm_seg_hdr(pseg)->bell.on)
		sc->peer_bell = &shm_seg_hdr(pseg)->bell;
	return 0;
}

static void shm_conn_free(struct shm_conn *sc)
{
	if (sc->pidfd >= 0)
		close(sc->pidfd);
	shm_seg_detach(&sc->peer_seg);
	free(sc);
}

/* What is auto, from the leader's measurement in its segment header
 * (shm_measure_cache): the cache limit (else a fixed guess), and for hot
 * and cold puts whether CMA moves bytes faster than the copy area would
 * (else never: the copy area, which needs no system call). */
static void shm_choice_setup(struct shm_tl *tl, const int *peers, int npeers)
{
	int leader = shm_leader(peers, npeers), i;
	const struct shm_seg *seg = &tl->seg;
	const struct shm_seg_hdr *h;

	for (i = 0; i < tl->npeers; i++)
		if (tl->conns[i]->conn->peer == leader && !tl->conns[i]->self)
			seg = &tl->conns[i]->peer_seg;
	h = shm_seg_hdr(seg);
	if (!tl->cache_limit)
		tl->cache_limit = h->cache_limit ? h->cache_limit :
				  SHM_CACHE_LIMIT_DEFAULT;
	if (tl->cma_use != SHM_CMA_AUTO)
		return;
	tl->cma_hot = h->cma_hot_mbs >
		      SHM_PIPE_HOT_PER_COPY * (double)h->copy_hot_mbs;
	tl->cma_cold = h->cma_cold_mbs >
		       SHM_PIPE_COLD_PER_COPY * (double)h->copy_cold_mbs;
	rdmach_debug("shm: large puts by CMA when hot: %s, cold: %s",
		     tl->cma_hot ? "yes" : "no", tl->cma_cold ? "yes" : "no");
}

static int shm_connect(struct rdmach_tl *base, const int *peers, int npeers)
{
	struct shm_tl *tl = shm_tl_of(base);
	struct rdmach_ctx *ctx = base->ctx;
	int i, err;

	if (npeers == 0)
		return 0;
	tl->conns = calloc((size_t)npeers, sizeof(*tl->conns));
	if (!tl->conns)
		return -ENOMEM;
	for (i = 0; i < npeers; i++) {
		struct shm_conn *sc = calloc(1, sizeof(*sc));

		if (!sc)
			return -ENOMEM;
		sc->tl = tl;
		sc->conn = &ctx->conns[peers[i]];
		sc->pidfd = -1;
		sc->peer_seg.fd = -1;
		tl->conns[tl->npeers++] = sc;
		err = shm_connect_peer(tl, peers[i], sc);
		if (err)
			return err;
		sc->conn->priv = sc;
		sc->conn->tl = base;
	}
	shm_choice_setup(tl, peers, npeers);
	return 0;
}

static int shm_ready(struct rdmach_tl *base)
{
	shm_seg_ready(&shm_tl_of(base)->seg);
	return 0;
}

static int shm_progress(struct rdmach_tl *base)
{
	struct shm_tl *tl = shm_tl_of(base);
	int i, ret = 0;

	for (i = 0; i < tl->npeers; i++) {
		struct shm_conn *sc = tl->conns[i];

		if (sc->conn->err) {
			if (!ret)
				ret = sc->conn->err;
			continue;
		}
		if (!shm_rndv_all_read(sc) && shm_idle_peer_dead(sc) && !ret)
			ret = shm_fail_dead(sc, "before reading a zero-copy put");
	}
	return ret;
}

/* My doorbell, or NULL when it is off or there is no segment (no local
 * peer: nothing to wait for). */
static struct shm_bell *shm_my_bell(struct shm_tl *tl)
{
	struct shm_bell *b;

	if (!tl->npeers)
		return NULL;
	b = &shm_seg_hdr(&tl->seg)->bell;
	return b->on ? b : NULL;
}

/* Idle waits (tl.h). */
static int shm_wait_arm(struct rdmach_tl *base, uint32_t *token)
{
	struct shm_bell *b = shm_my_bell(shm_tl_of(base));

	if (!b)
		return 0;
	atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
	*token = atomic_load_explicit(&b->seq, memory_order_acquire);
	return 1;
}

static void shm_wait(struct rdmach_tl *base, uint32_t token,
		     uint64_t timeout_ns)
{
	struct shm_bell *b = &shm_seg_hdr(&shm_tl_of(base)->seg)->bell;
	struct timespec ts = rdmach_timespec_ns(timeout_ns);

	if (timeout_ns)
		shm_futex(&b->seq, FUTEX_WAIT, token, &ts);
	atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
}

static void shm_wake(struct rdmach_tl *base)
{
	struct shm_bell *b = shm_my_bell(shm_tl_of(base));

	if (b)
		shm_bell_wake(b);
}

/* Finalize: give pending rendezvous until the deadline to be read. */
static void shm_close_drain(struct shm_tl *tl, uint64_t deadline_ns)
{
	struct timespec ts = { 0, 50000 };
	int i, pending;

	do {
		pending = 0;
		for (i = 0; i < tl->npeers; i++) {
			struct shm_conn *sc = tl->conns[i];

			if (shm_rndv_all_read(sc) || sc->conn->err ||
			    shm_peer_dead(sc) ||
			    atomic_load_explicit(&sc->tx_ctrl->reader_closed,
						 memory_order_acquire))
				continue;
			pending++;
		}
		if (pending)
			nanosleep(&ts, NULL);
	} while (pending && rdmach_now_ns() < deadline_ns);
	if (pending)
		rdmach_warn("shm: finalize: %d zero-copy put(s) not read by "
			    "their peer before the deadline", pending);
}

static int shm_close(struct rdmach_tl *base, uint64_t deadline_ns)
{
	struct shm_tl *tl = shm_tl_of(base);
	int i;

	shm_close_drain(tl, deadline_ns);
	for (i = 0; i < tl->npeers; i++) {
		struct shm_conn *sc = tl->conns[i];

		if (sc->tx_ctrl)
			atomic_store_explicit(&sc->tx_ctrl->writer_closed, 1,
					      memory_order_release);
		if (sc->rx_ctrl)
			atomic_store_explicit(&sc->rx_ctrl->reader_closed, 1,
					      memory_order_release);
		shm_bell_ring(sc);
		if (sc->conn->priv == sc)
			sc->conn->priv = NULL;
		shm_conn_free(sc);
	}
	free(tl->conns);
	shm_seg_detach(&tl->seg);
	free(tl);
	return 0;
}

static const struct rdmach_tl_ops shm_ops = {
	.name = "shm",
	.id = RDMACH_TL_SHM,
	.same_host_only = 1,
	.open = shm_open_tl,
	.publish = shm_publish,
	.connect = shm_connect,
	.ready = shm_ready,
	.put = shm_put,
	.get = shm_get,
	.put_deferred = shm_put_deferred,
	.put_done = shm_put_done,
	.peek = shm_peek,
	.consume = shm_consume,
	.progress = shm_progress,
	.wait_arm = shm_wait_arm,
	.wait = shm_wait,
	.wake = shm_wake,
	.close = shm_close,
};
RDMACH_TL_REGISTER(shm_ops);
