/*
 * shm_iface.c - the shared-memory transport as a whole (the cold part of
 * rdma_shm, prefix shm_): its operations table, knobs, open, publish,
 * connect (each connection's rings, copy areas, CMA probe, doorbell),
 * ready, progress, idle waits and close.  The bytes move in shm_ep.c:
 * rings in the receiver's memfd segment (shm_ring.h, shm_seg.h); large
 * puts pipelined through a copy area in that segment (shm_pipe.c: two
 * copies overlapped on two cores, in cache) or read in one copy by
 * cross-memory attach (shm_rndv.c: process_vm_readv), chosen per message
 * (shm_tx_want_cma); peer liveness by pidfd (shm_live.c).  No system
 * call on the put/get fast path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/knob.h"
#include "core/log.h"
#include "core/tl.h"
#include "shm_calib.h"
#include "shm_conn.h"
#include "shm_ep.h"
#include "shm_live.h"
#include "shm_mem.h"
#include "shm_pipe.h"
#include "shm_rndv.h"
#include "shm_seg.h"

enum { SHM_K_RING_SIZE, SHM_K_LINE_RING, SHM_K_BULK_RING, SHM_K_BULK_MIN,
       SHM_K_CHUNK, SHM_K_DEFERRED_CHUNK,
       SHM_K_CMA, SHM_K_CMA_THRESHOLD, SHM_K_PIPE, SHM_K_PIPE_THRESHOLD,
       SHM_K_PIPE_AREA, SHM_K_PIPE_CHUNK, SHM_K_PIPE_FIRST, SHM_K_PIPE_SPIN,
       SHM_K_CMA_USE, SHM_K_CMA_DUPLEX, SHM_K_CMA_DUPLEX_REUSED,
       SHM_K_CMA_DUPLEX_REUSED_MAX,
       SHM_K_CACHE_LIMIT, SHM_K_CALIB_MS, SHM_K_RECENT, SHM_K_LIVENESS_MS,
       SHM_K_WAKE, SHM_K_IDLE_RELEASE_MS, SHM_K_WARM_MAX, SHM_K_WARM_AFTER,
       SHM_K_COLD_CMA, SHM_K_NUM };

static const struct rdmach_knob shm_knobs[SHM_K_NUM] = {
	[SHM_K_RING_SIZE] = { "RDMACH_SHM_RING_SIZE", RDMACH_KNOB_SIZE,
		RDMACH_KNOB_AUTO, 4096, 256u << 20,
		"bytes of each incoming ring, one per local peer (power of two; "
		"auto: 64K while this host runs at most RDMACH_SHM_WARM_MAX + 1 "
		"of the job's processes, 16K beyond)",
		RDMACH_KNOB_POW2 },
	[SHM_K_LINE_RING] = { "RDMACH_SHM_LINE_RING", RDMACH_KNOB_SIZE,
		RDMACH_KNOB_AUTO, 2 * SHM_LINE, 1u << 20,
		"bytes of each incoming ring of one-line packets (<= 56-byte "
		"puts, and a cold writer's of up to 256 bytes; power of two "
		">= 128, 0 = none; auto: 1K while this host runs at most "
		"RDMACH_SHM_WARM_MAX + 1 of the job's processes, 512 beyond)",
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
	[SHM_K_IDLE_RELEASE_MS] = { "RDMACH_SHM_IDLE_RELEASE_MS",
		RDMACH_KNOB_UINT, "1000", 0, 3600000,
		"a peer's bulk ring and copy area that carried nothing for this "
		"long are given back to the system (their pages freed, taken "
		"again at the next use; 0: kept)" },
	[SHM_K_WARM_MAX] = { "RDMACH_SHM_WARM_MAX", RDMACH_KNOB_UINT, "8",
		0, 1u << 20,
		"local writers whose bulk ring and copy area in this process "
		"may hold pages at once; with more local processes than this, "
		"a writer starts without them (small packets take the line "
		"ring, deferred puts from RDMACH_SHM_COLD_CMA CMA, the rest the "
		"main ring) and earns them by RDMACH_SHM_WARM_AFTER, a pair "
		"idle for RDMACH_SHM_IDLE_RELEASE_MS gives them back" },
	[SHM_K_WARM_AFTER] = { "RDMACH_SHM_WARM_AFTER", RDMACH_KNOB_SIZE,
		"256K", 0, UINT64_MAX,
		"bytes a writer without bulk ring and copy area "
		"(RDMACH_SHM_WARM_MAX) sends through its main and line rings "
		"before it gets them, if fewer than the cap have them" },
	[SHM_K_COLD_CMA] = { "RDMACH_SHM_COLD_CMA", RDMACH_KNOB_SIZE, "4K",
		0, UINT64_MAX,
		"a writer without bulk ring and copy area (RDMACH_SHM_WARM_MAX, "
		"or idle) sends deferred puts of at least this many bytes by "
		"CMA, where the peer allows it: no ring pages for them (0: the "
		"ring)" },
};
RDMACH_KNOB_TABLE(shm, shm_knobs);

/* RDMACH_SHM_CACHE_LIMIT=auto: the measurement's largest working set, and
 * the value used where there is nobody to measure for (a lone process). */
#define SHM_CACHE_LIMIT_MAX (32u << 20)
#define SHM_CACHE_LIMIT_DEFAULT (4u << 20)

/* RDMACH_SHM_CMA_USE=auto: the copy area's rate as a fraction of one
 * memcpy's, from raw_shm_large (bench/src) on the 2-vCPU EPYC guest (1 MiB,
 * window of 64, SCHED_FIFO, README): in cache it moves 26-27 GB/s where
 * memcpy does 44 (the second core reads lines the first one has just
 * written), from memory 15-17 GB/s where memcpy does 13-17 (both copies
 * overlap; the area itself stays in cache). */
#define SHM_PIPE_HOT_PER_COPY 0.6
#define SHM_PIPE_COLD_PER_COPY 1.0

static const struct rdmach_tl_ops shm_ops;

static inline struct shm_tl *shm_tl_of(struct rdmach_tl *tl)
{
	return (struct shm_tl *)tl;
}

/* ---- wire-up ----------------------------------------------------------- */

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
		    (i == SHM_K_CACHE_LIMIT || i == SHM_K_PIPE_AREA ||
		     i == SHM_K_RING_SIZE))
			v[i] = 0;	/* auto: decided at publish or connect */
		else if (err == -ENODATA &&
			 (i == SHM_K_WAKE || i == SHM_K_LINE_RING))
			v[i] = UINT64_MAX;	/* auto: decided at publish */
		else if (err)
			return err;
	}
	err = shm_read_cma_use(tl);
	if (err)
		return err;
	tl->ring_size = v[SHM_K_RING_SIZE];	/* 0: auto (shm_publish) */
	tl->line_ring_size = v[SHM_K_LINE_RING];
	tl->bulk_ring_size = v[SHM_K_BULK_RING];
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
	tl->idle_release_ns = v[SHM_K_IDLE_RELEASE_MS] * 1000000u;
	tl->warm_max = v[SHM_K_WARM_MAX];
	tl->warm_after = v[SHM_K_WARM_AFTER];
	tl->cold_cma = v[SHM_K_COLD_CMA];
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
	tl->bell_on = on;
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

/* The main and line rings, now that the local processes (npeers, myself
 * included) are known: with more writers than get a bulk ring and copy
 * area (RDMACH_SHM_WARM_MAX), a cold pair's waiting puts of a few KiB
 * cycle through its main ring, so a smaller one bounds what the pairs
 * take (64 processes, every pair 256 KiB both ways through its main
 * ring: 346 MiB per node with 64 KiB rings, 154 with 16 KiB); and every
 * pair that talks cycles through its line ring, whose half still takes a
 * cold writer's packets of 256 bytes (64 processes: 2 MiB per node
 * less). */
static void shm_ring_size_setup(struct shm_tl *tl, int npeers)
{
	tl->warm_cap = (uint64_t)npeers - 1 > tl->warm_max;
	if (!tl->ring_size)
		tl->ring_size = tl->warm_cap ? SHM_RING_MANY : SHM_RING_FEW;
	if (tl->line_ring_size == UINT64_MAX)
		tl->line_ring_size = tl->warm_cap ? SHM_LINE_RING_MANY : SHM_LINE_RING_FEW;
	/* one no larger than the main ring would keep no more in flight */
	if (tl->bulk_ring_size <= tl->ring_size)
		tl->bulk_ring_size = 0;
}

static int shm_publish(struct rdmach_tl *base, const int *peers, int npeers)
{
	struct shm_tl *tl = shm_tl_of(base);
	char key[32], val[192], seg[128];
	struct shm_seg_geom geom;
	int err;

	if (npeers == 0)
		return 0;
	shm_ring_size_setup(tl, npeers);
	shm_pipe_size_setup(tl, npeers);
	geom.ring_size = tl->ring_size;
	geom.line_ring_size = tl->line_ring_size;
	geom.bulk_ring_size = tl->bulk_ring_size;
	geom.pipe_size = tl->pipe_size;
	geom.pipe_slot = tl->pipe_slot;
	err = shm_seg_create(&tl->seg, base->ctx->rank, peers, npeers, &geom);
	if (err)
		return err;
	shm_mem_cold_start(tl);
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

/* pid:fd:size:name:magic_addr:magic (shm_publish) */
static int shm_parse_peer(const char *val, int peer, pid_t *pid,
			  uint64_t *maddr, uint64_t *magic)
{
	struct shm_seg_desc d;
	uint64_t a, m;
	const char *p;
	char esc[256];

	if (shm_seg_parse_desc(val, peer, &d, &p))
		return -EPROTO;
	if (*p++ != ':' || !(p = shm_seg_field(p, 16, UINT64_MAX, &a)) ||
	    *p++ != ':' || !(p = shm_seg_field(p, 16, UINT64_MAX, &m)) ||
	    *p) {
		rdmach_err("shm: rank %d published a malformed address \"%s\"",
			   peer, rdmach_log_esc(val, esc, sizeof(esc)));
		return -EPROTO;
	}
	*pid = d.pid;
	*maddr = a;
	*magic = m;
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
	r->tail_seen = 0 - size;	/* the first put asks: hello */
}

static void shm_rx_ring_init(struct shm_rx_ring *r, uint8_t *base,
			     _Atomic uint64_t *tail, uint64_t size)
{
	r->base = size ? base : shm_no_ring;
	r->tail = tail;
	r->mask = size ? size - 1 : 0;
}

/* Until the writer says hello to a ring (shm_ring.h), poll that ring's
 * hello word as its head: a ring's pages stay untouched until the first
 * packet into it. */
static void shm_rx_quiet(struct shm_conn *sc)
{
	int i;

	for (i = 0; i < SHM_NRINGS; i++) {
		sc->rx_base[i] = sc->rx[i].base;
		if (sc->rx[i].base != shm_no_ring)
			sc->rx[i].base =
				(uint8_t *)shm_ring_hello(sc->rx_ctrl, i);
	}
	sc->rx_quiet = 1;
}

/* My bulk ring in the peer's segment, if it has one that fits (the peer
 * may run with other knobs): packets of bulk_min bytes or more go there. */
static void shm_tx_bulk_init(struct shm_conn *sc, const struct shm_tl *tl,
			     const struct shm_seg *peer_seg, int tx_slot)
{
	const struct shm_seg_geo *ph = &peer_seg->g;
	uint64_t size = ph->bulk_ring_size;	/* checked: shm_seg_attach */

	if (size <= ph->ring_size)
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
	sc->large_min = tl->large_min;
}

static void shm_conn_setup_rings(struct shm_conn *sc, struct shm_tl *tl,
				 const struct shm_seg *peer_seg, int tx_slot,
				 int rx_slot)
{
	const struct shm_seg_geo *ph = &peer_seg->g;

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
	shm_rx_quiet(sc);
	sc->rx_seq = SHM_SEQ_FIRST;
	shm_pipe_init(&sc->rx_pipe, &tl->seg, rx_slot);
	if (tl->pipe_size)	/* RDMACH_SHM_PIPE=0: the writer's choice */
		shm_pipe_init(&sc->tx_pipe, peer_seg, tx_slot);
	else
		memset(&sc->tx_pipe, 0, sizeof(sc->tx_pipe));
}

/* Can this process read the peer's memory?  Then cma_ok (the peer's large
 * puts may come by CMA).  Tried at connect, and again in ready for a peer
 * that refused (last: say so): under Yama the peer names who may read it
 * in its own connect (shm_ptracer_setup), which may come after ours. */
static void shm_cma_setup(struct shm_conn *sc, struct shm_tl *tl, int last)
{
	int err;

	if (!tl->cma || sc->cma_ok)
		return;
	err = shm_cma_probe(sc->pid, sc->cma_addr, sc->cma_magic);
	if (err) {
		if (last)
			rdmach_info("shm: cannot read the memory of rank %d "
				    "(pid %d): %s; large messages from it are "
				    "copied through the ring (check ptrace "
				    "permissions / Yama ptrace_scope)",
				    sc->conn->peer, (int)sc->pid,
				    strerror(-err));
		return;
	}
	sc->cma_ok = 1;
	atomic_store_explicit(&sc->rx_ctrl->cma_ok, 1, memory_order_release);
}

static int shm_connect_peer(struct shm_tl *tl, int peer, struct shm_conn *sc)
{
	struct rdmach_ctx *ctx = tl->base.ctx;
	const struct shm_seg *pseg = &tl->seg;
	struct shm_seg peer_seg;
	char key[32], val[256];
	int tx_slot, rx_slot, err;

	shm_key(key, sizeof(key), peer);
	err = rdmach_oob_get(ctx, key, val, sizeof(val));
	if (err)
		return err;
	err = shm_parse_peer(val, peer, &sc->pid, &sc->cma_addr,
			     &sc->cma_magic);
	if (err)
		return err;
	sc->pidfd = -1;
	sc->self = peer == ctx->rank;
	if (sc->self) {
		tx_slot = shm_seg_slot(pseg, ctx->rank);
	} else {
		err = shm_seg_attach(&peer_seg, val, peer, ctx->rank,
				     &tx_slot);
		if (err)
			return err;
		sc->peer_base = peer_seg.base;
		sc->peer_size = peer_seg.size;
		pseg = &peer_seg;
		sc->pidfd = shm_pidfd_open(sc->pid);
	}
	rx_slot = shm_seg_slot(&tl->seg, peer);
	if (tx_slot < 0 || rx_slot < 0) {
		rdmach_err("shm: rank %d and rank %d disagree on the local "
			   "peer list", ctx->rank, peer);
		return -EPROTO;
	}
	shm_conn_setup_rings(sc, tl, pseg, tx_slot, rx_slot);
	shm_mem_conn_start(sc);
	if (!sc->self && shm_peer_load32(&shm_seg_hdr(pseg)->bell.on))
		sc->peer_bell = &shm_seg_hdr(pseg)->bell;
	return 0;
}

static void shm_conn_free(struct shm_conn *sc)
{
	shm_rndv_conn_close(sc);
	if (sc->pidfd >= 0)
		close(sc->pidfd);
	if (sc->peer_base)
		munmap(sc->peer_base, sc->peer_size);
	free(sc);
}

/* What is auto, from the leader's measurement in its segment header
 * (shm_measure_cache): the cache limit (else a fixed guess), and for hot
 * and cold puts whether CMA moves bytes faster than the copy area would
 * (else never: the copy area, which needs no system call). */
static void shm_choice_setup(struct shm_tl *tl, const int *peers, int npeers)
{
	int leader = shm_leader(peers, npeers), i;
	const struct shm_seg_hdr *leader_hdr = shm_seg_hdr(&tl->seg);
	struct shm_seg_hdr h;	/* the figures, loaded once (shm_peer.h) */

	for (i = 0; i < tl->npeers; i++)
		if (tl->conns[i]->conn->peer == leader && !tl->conns[i]->self)
			leader_hdr = tl->conns[i]->peer_base;
	shm_peer_snap(&h, leader_hdr, sizeof(h));
	if (!tl->cache_limit)
		tl->cache_limit = h.cache_limit ? h.cache_limit :
				  SHM_CACHE_LIMIT_DEFAULT;
	if (tl->cma_use != SHM_CMA_AUTO)
		return;
	tl->cma_hot = h.cma_hot_mbs >
		      SHM_PIPE_HOT_PER_COPY * (double)h.copy_hot_mbs;
	tl->cma_cold = h.cma_cold_mbs >
		       SHM_PIPE_COLD_PER_COPY * (double)h.copy_cold_mbs;
	rdmach_debug("shm: large puts by CMA when hot: %s, cold: %s",
		     tl->cma_hot ? "yes" : "no", tl->cma_cold ? "yes" : "no");
}

/* ---- who may read this process's memory (CMA under Yama) ------------- */

#define SHM_MAX_DEPTH 64	/* ancestors looked at, at most */

/* Yama's ptrace_scope is 1 (restricted: only a process's ancestors, or
 * the one it names with PR_SET_PTRACER, may read its memory)? */
static int shm_yama_restricted(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
	int v = -1;

	if (!f)
		return 0;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v == 1;
}

/* The parent of pid, or 0 (gone, or unreadable). */
static pid_t shm_ppid(pid_t pid)
{
	char path[64], buf[512], *p;
	int ppid = 0;
	char st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f)) {
		p = strrchr(buf, ')');	/* the name may hold anything */
		if (!p || sscanf(p + 1, " %c %d", &st, &ppid) != 2)
			ppid = 0;
	}
	fclose(f);
	return (pid_t)ppid;
}

/* pid and its ancestors, pid first, into a (at most SHM_MAX_DEPTH). */
static int shm_ancestors(pid_t pid, pid_t *a)
{
	int n = 0;

	while (pid > 0 && n < SHM_MAX_DEPTH) {
		a[n++] = pid;
		if (pid == 1)
			break;
		pid = shm_ppid(pid);
	}
	return n;
}

/* Where peer pid's ancestry meets mine (mine[0..n)): the index in mine,
 * or -1 below init (no common ancestor but init, which would admit every
 * process). */
static int shm_meet(pid_t pid, const pid_t *mine, int n)
{
	pid_t theirs[SHM_MAX_DEPTH];
	int m = shm_ancestors(pid, theirs), i, j;

	for (j = 0; j < m; j++)
		for (i = 0; i < n; i++)
			if (theirs[j] == mine[i])
				return mine[i] == 1 ? -1 : i;
	return -1;
}

/* CMA on and Yama restricted: name as the one process that may read this
 * process's memory the closest common ancestor of this process and its
 * local peers (Hydra's proxy, slurmstepd, rdmach_run): Yama admits it and
 * its descendants, the peers.  A peer that shares none with this process
 * below init cannot be admitted: it will copy this side's large puts
 * through the rings (said once, here).  Set at connect, once the peers'
 * pids are known and before the fence after which they probe. */
static void shm_ptracer_setup(struct shm_tl *tl)
{
	pid_t mine[SHM_MAX_DEPTH];
	int n, i, at, top = -1;

	if (!tl->cma || !shm_yama_restricted())
		return;
	n = shm_ancestors(getpid(), mine);
	for (i = 0; i < tl->npeers; i++) {
		struct shm_conn *sc = tl->conns[i];

		if (sc->self)
			continue;
		at = shm_meet(sc->pid, mine, n);
		if (at < 0) {
			rdmach_info("shm: rank %d (pid %d) shares no ancestor "
				    "with this process below init: it cannot "
				    "read this process's memory (Yama "
				    "ptrace_scope 1); large puts to it go "
				    "through the rings", sc->conn->peer,
				    (int)sc->pid);
			continue;
		}
		if (at > top)
			top = at;
	}
	if (top <= 0)	/* none, or each peer descends from me */
		return;
	if (prctl(PR_SET_PTRACER, (unsigned long)mine[top], 0, 0, 0)) {
		rdmach_info("shm: PR_SET_PTRACER(%d) failed: %s", (int)mine[top],
			    strerror(errno));
		return;
	}
	tl->ptracer = mine[top];
	rdmach_debug("shm: memory readable by pid %d and its descendants",
		     (int)mine[top]);
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
		tl->conns[tl->npeers++] = sc;
		err = shm_connect_peer(tl, peers[i], sc);
		if (err)
			return err;
		sc->conn->priv = sc;
		rdmach_conn_up(sc->conn, base);
	}
	shm_choice_setup(tl, peers, npeers);
	shm_ptracer_setup(tl);
	for (i = 0; i < tl->npeers; i++)
		shm_cma_setup(tl->conns[i], tl, 0);
	return 0;
}

/* After the fence that follows connect: every peer has named who may read
 * its memory (shm_ptracer_setup), so a CMA probe that failed at connect
 * is tried once more. */
static int shm_ready(struct rdmach_tl *base)
{
	struct shm_tl *tl = shm_tl_of(base);
	int i;

	shm_seg_ready(&tl->seg);
	for (i = 0; i < tl->npeers; i++)
		shm_cma_setup(tl->conns[i], tl, 1);
	return 0;
}

/* Memory per pair (RDMACH_STATS): which of my receive rings a writer
 * used, and the bulk rings and copy areas given back idle. */
static void shm_print_stats(struct rdmach_tl *base, FILE *out)
{
	struct shm_tl *tl = shm_tl_of(base);

	fprintf(out, "# shm memory: rings of %llu of %d local writers (this "
		"process included) in use, %llu releases of idle bulk rings "
		"and copy areas, %llu used again; warm writers (bulk ring and "
		"copy area) %llu now, %llu at most, cap %s%llu, %llu "
		"promotions, %llu demotions; %llu rendezvous descriptors (the "
		"most in flight at once)\n",
		(unsigned long long)tl->rings_used, tl->npeers,
		(unsigned long long)tl->releases,
		(unsigned long long)tl->repopulations,
		(unsigned long long)tl->warm_now,
		(unsigned long long)tl->warm_peak,
		tl->warm_cap ? "" : "not reached: ",
		(unsigned long long)tl->warm_max,
		(unsigned long long)tl->promotions,
		(unsigned long long)tl->demotions,
		(unsigned long long)tl->rndv_mems);
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
	return tl->bell_on ? b : NULL;	/* mine, not the header's word */
}

/* Idle waits (tl.h). */
static int shm_wait_arm(struct rdmach_tl *base, uint32_t *token)
{
	struct shm_bell *b = shm_my_bell(shm_tl_of(base));

	if (!b)
		return 0;
	*token = shm_bell_arm(b);
	return 1;
}

static void shm_wait(struct rdmach_tl *base, uint32_t token,
		     uint64_t timeout_ns)
{
	shm_bell_sleep(&shm_seg_hdr(&shm_tl_of(base)->seg)->bell, token,
		       timeout_ns);
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
			    shm_peer_probe32(&sc->tx_ctrl->reader_closed))
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
	shm_rndv_tl_close(tl);
	shm_seg_detach(&tl->seg);
	if (tl->ptracer)	/* nobody reads this memory any more */
		prctl(PR_SET_PTRACER, 0, 0, 0, 0);
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
	.print_stats = shm_print_stats,
	.wait_arm = shm_wait_arm,
	.wait = shm_wait,
	.wake = shm_wake,
	.close = shm_close,
};
RDMACH_TL_REGISTER(shm_ops);
