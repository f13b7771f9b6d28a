/*
 * ib_large.h - large puts over rdma_ib: which protocol carries each one,
 * and why (rdma_ib private, prefix ib_large_).  Three protocols:
 *   ring           the pipelined copy through the ring (ib_ep.c);
 *   zero-copy      RDMA read of the registered source (ib_zcopy.c);
 *   superpipeline  geometric chunks through pre-registered buffers
 *                  (ib_spipe.c, proto/spipe.h).
 * RDMACH_LARGE=zcopy|superpipeline|pipeline forces one (zcopy from
 * RDMACH_ZCOPY_THRESHOLD, the superpipeline from RDMACH_SPIPE_THRESHOLD,
 * the ring below them); auto (the default) decides per message:
 *
 *   1. the source is registered (a cache hit)             -> zero-copy
 *   2. it was sent before and is unchanged (a ghost,
 *      mem/rcache_ghost.h), and registrations in its size
 *      class do get reused                                 -> zero-copy
 *   3. it is new, but its size class mostly resends the
 *      same buffers (reuse predicted)                      -> zero-copy
 *   4. it is new and the model says registering (on both
 *      sides) costs less than the copy it avoids: T_zcopy
 *      with two registrations <= T_superpipeline           -> zero-copy
 *   5. otherwise                                           -> superpipeline
 *      (the ring below RDMACH_SPIPE_THRESHOLD)
 *
 * Learning, per size class (log2 of the length), decayed: sends of
 * buffers seen before vs new ones (rule 3), and the registrations the auto
 * choice made vs the cache hits that followed (the payoff of rules 2-4:
 * with 8 registrations or more and fewer hits than half of them, the
 * class registers no more and goes through the superpipeline, counted as
 * "no payoff"); a buffer sent a third time without a registration counts
 * as the hit a registration would have had, so a class that stopped
 * registering learns when its buffers come back.  An application that never
 * sends a buffer twice (allocate, send, free) thus never registers and
 * never fills the cache; one that reuses its buffers goes zero-copy from
 * the second send on.
 *
 * Tuning (ib_tune.h) supplies the machine's figures; the superpipeline's
 * geometry and threshold derive from them (proto/tune.h) unless a knob
 * sets them.
 */
#ifndef RDMACH_IB_LARGE_H
#define RDMACH_IB_LARGE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#include "rdmach.h"
#include "ib_tune.h"
#include "mem/rcache_ghost.h"
#include "proto/tune.h"

struct ib_dev;
struct ib_zc;

enum ib_large_mode {
	IB_LARGE_AUTO,
	IB_LARGE_ZCOPY,
	IB_LARGE_SPIPE,
	IB_LARGE_PIPELINE,
	IB_LARGE_MODES,
};

enum ib_large_proto { IB_PROTO_RING, IB_PROTO_ZCOPY, IB_PROTO_SPIPE };

/* Why (one counter each in rdmach_stats_t). */
enum ib_large_why {
	IB_WHY_HIT,		/* zero-copy: the source is registered */
	IB_WHY_REUSE,		/* zero-copy: sent before, unchanged */
	IB_WHY_PREDICTED,	/* zero-copy: new, its size class reuses */
	IB_WHY_MODEL,		/* zero-copy: new, registering is cheaper */
	IB_WHY_NEW,		/* superpipeline: new buffer */
	IB_WHY_NO_PAYOFF,	/* superpipeline: zero-copy was wanted (seen,
				 * or by the model), but registrations in its
				 * size class are not reused */
	IB_WHY_FORCED,		/* RDMACH_LARGE */
	IB_WHY_BELOW,		/* under a threshold: zero-copy's (or
				 * RDMACH_ZCOPY=0), so a copy protocol;
				 * the superpipeline's, so the ring */
	IB_WHY_FALLBACK,	/* ring: the chosen protocol could not run */
};

#define IB_LARGE_CLASSES 48

struct ib_large_class {
	uint32_t repeat, fresh;	/* sends of seen / new buffers */
	uint32_t regs, hits;	/* registrations auto made / hits */
};

struct ib_large {
	enum ib_large_mode mode;
	struct ib_tune tune;		/* the machine's figures */
	struct tune_settings derived;	/* from them */
	struct spipe_params sp;		/* in use: derived or knobs */
	uint64_t sp_threshold;
	uint64_t zc_threshold;		/* RDMACH_ZCOPY_THRESHOLD */
	int zc_enabled;			/* RDMACH_ZCOPY */
	uint64_t min;			/* smallest large put (UINT64_MAX: none) */
	uint64_t ring_chunk;		/* RDMACH_IB_CHUNK_SIZE */
	uint64_t mem_max, mem_used;	/* superpipeline staging, process */
	/* peers offered a landing area (RDMACH_SPIPE_PEERS): at most, so
	 * far, and those refused one */
	unsigned int land_max, land_offered, land_refused;
	int mem_auto, land_auto;	/* those two knobs are auto */
	struct rdmach_rcache_ghosts *ghosts;
	struct ib_large_class cls[IB_LARGE_CLASSES];
};

/* A decision, made before the protocol starts (a put that cannot start
 * now decides again on its retry). */
struct ib_large_choice {
	enum ib_large_proto proto;
	enum ib_large_why why;
	int probe;			/* enum rdmach_rcache_probe_result */
	unsigned int sends;		/* SEEN: times sent before */
};

/* Knobs, tuning, derivation.  zc_enabled/zc_threshold: the zero-copy
 * knobs.  0 or -EINVAL (a bad knob, logged). */
int ib_large_open(struct ib_large *lg, struct ib_dev *dev,
		  uint64_t ring_chunk, int zc_enabled, uint64_t zc_threshold);
void ib_large_close(struct ib_large *lg);

/* The protocol for a put of total (>= lg->min) bytes now.  rc: the
 * registration cache (NULL: no zero-copy); sp_room: the superpipeline can
 * start on this connection (buffers there or within RDMACH_SPIPE_MEM_MAX). */
void ib_large_choose(struct ib_large *lg, struct rdmach_rcache *rc,
		     int sp_room, const struct iovec *iov, int iovcnt,
		     size_t total, struct ib_large_choice *ch);

/* The chosen protocol started: remember the buffer, learn, count. */
void ib_large_started(struct ib_large *lg, const struct ib_large_choice *ch,
		      const struct iovec *iov, int iovcnt, size_t total,
		      rdmach_stats_t *st);

/* A put chose zero-copy or the superpipeline and could not run it (no
 * registration, no memory): it goes through the ring. */
void ib_large_fallback(size_t total, rdmach_stats_t *st);

/* What `rdmach_info --tune` prints: figures, settings, model. */
void ib_large_print(const struct ib_large *lg, FILE *out);
/* The superpipeline's limits at auto, now that the job's processes on
 * this host are known (before any connection). */
void ib_large_host_procs(struct ib_large *lg, unsigned int host_procs);
/* The superpipeline's registered memory at most, with the knobs as set,
 * host_procs a host (rdmach_info -c). */
void ib_large_mem_report(FILE *out, unsigned int host_procs);

extern const char *const ib_large_mode_names[IB_LARGE_MODES];

#endif /* RDMACH_IB_LARGE_H */
