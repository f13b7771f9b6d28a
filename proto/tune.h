/*
 * tune.h - the performance model of large-message protocols (Denis,
 * Euro-Par 2011, eq. 1-9) and the settings derived from a machine's
 * measured parameters, without verbs.  rdma_ib (ib_tune.c) measures
 * registration and the network on its device, tune_measure_copy() the
 * memory copy; tune_derive() turns the figures into the superpipeline's
 * C0, q, block and buffer size and its threshold; the tune_t_*() model
 * times drive the per-message choice (ib_large.c) and the predictions
 * `rdmach_info --tune` prints.  The cache file format (tune_format /
 * tune_parse) lets later runs skip the measurement.
 *
 * Units: seconds and bytes per second (doubles).
 */
#ifndef RDMACH_PROTO_TUNE_H
#define RDMACH_PROTO_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "spipe.h"

/* What B_copy is measured on (cache effects, Denis fig. 1): a copy that
 * stays in the first caches, a 1 MiB one from cache, and the same 1 MiB
 * from and to memory (both ends flushed from every cache first: a large
 * message's source is not in cache, whatever the cache's size; cheaper at
 * start-up than a working set larger than the last-level cache, whose
 * pages would have to be faulted in). */
enum { TUNE_COPY_SMALL, TUNE_COPY_MID, TUNE_COPY_LARGE, TUNE_COPY_NUM };
extern const uint64_t tune_copy_sizes[TUNE_COPY_NUM];

#define TUNE_VERSION 3	/* 3: bcopy_large from memory */

struct tune_machine {
	double bcopy[TUNE_COPY_NUM];	/* memcpy bandwidth at each size */
	double lat_reg, breg;		/* T_reg(L) = lat_reg + L / breg */
	double lat_net, bnet;		/* one-way latency, RDMA write bw */
	double gap;			/* per-write gap g (post to post) */
	double measure_s;		/* how long the measurement took */
};

/* What the machine's parameters give (each may still be set by a knob). */
struct tune_settings {
	struct spipe_params sp;		/* block, nbufs, buf_size, c0, q256 */
	uint64_t sp_threshold;		/* smallest put for the superpipeline */
};

/* What identifies the machine a cache file was measured on. */
struct tune_key {
	char device[64];
	unsigned int port;
	char kernel[128];		/* uname -r */
	char cpu[128];			/* /proc/cpuinfo model name */
	char host[128];
};

/* Built-in figures (RDMACH_TUNE=off, or a measurement that failed): the
 * order of magnitude of Denis' cluster (68 us + 20 GB/s registration,
 * copies at a few GB/s, a DDR link). */
void tune_machine_default(struct tune_machine *m);

/* 0 if every figure is positive and finite, else -EINVAL. */
int tune_machine_check(const struct tune_machine *m);

/*
 * Derive the settings (Denis section 4):
 *   block   the larger of 4 KiB and the path MTU (a page, whole packets);
 *   C0      B_copy(small) x 2 lambda_net: the first chunk is copied while
 *           a rendezvous round trip would be in flight; whole blocks;
 *   q       B_copy(large) / B_net, clamped to 1.2..4: chunk i+1 is copied
 *           while chunk i is on the wire;
 *   buffer  room for the growth (8 C0) and for a write long enough that
 *           the per-chunk gap costs under 2%, power of two, 64K..1M;
 *   N       3 (triple buffering);
 *   threshold  the smallest power of two from 64K to 1M where the model's
 *           superpipeline beats the pipelined copy through the ring with
 *           chunk `ring_chunk`.
 */
void tune_derive(const struct tune_machine *m, uint32_t mtu,
		 uint64_t ring_chunk, struct tune_settings *s);

/* ---- the model: one-way time of a message of len bytes ------------------ */

/* Registration: lat_reg + len / breg. */
double tune_t_reg(const struct tune_machine *m, uint64_t len);
/* Pipelined copy through the ring in chunks of `chunk` (eq. 1): the first
 * chunk's copy, a gap per chunk, the wire, the last chunk's copy-out. */
double tune_t_ring(const struct tune_machine *m, uint64_t len,
		   uint64_t chunk);
/* Superpipeline (eq. 8-9, folded): the first chunk's copy (no rendezvous
 * to hide it behind once the landing area is known), a gap per chunk,
 * the wire at the slower of network and copy, one block's copy-out. */
double tune_t_spipe(const struct tune_machine *m, const struct spipe_params *p,
		    uint64_t len);
/* Zero-copy by RDMA read: control packet, read request and data; plus
 * nregs registrations of len bytes (0: both sides hit the cache, 2: both
 * register). */
double tune_t_zcopy(const struct tune_machine *m, uint64_t len, int nregs);

/* ---- measurement and the cache file ----------------------------------- */

/* A scratch region for the measurements: 2 x the largest copy size,
 * transparent huge pages where the kernel has them (page faults of fresh
 * memory would cost more than the measurement), every page touched.
 * NULL if out of memory. */
#define TUNE_REGION_BYTES (2 * (1u << 20))
void *tune_region_alloc(void);
void tune_region_free(void *region);

/* Measure bcopy[] in region (tune_region_alloc) within about budget_s:
 * copies of 64K, 1M and 1M (from memory) made the superpipeline's way, in
 * pieces of a 4 KiB block's payload. */
void tune_measure_copy(struct tune_machine *m, void *region, double budget_s);

/* The key of this host for device/port (uname, /proc/cpuinfo). */
void tune_key_local(struct tune_key *k, const char *device, unsigned int port);

/* Cache file text for m measured under key k; bytes written (excluding
 * the NUL) or -ENOSPC. */
int tune_format(const struct tune_machine *m, const struct tune_key *k,
		char *buf, size_t len);
/* Parse a cache file: 0 and *m set; -ESTALE when it was measured under
 * another key or format version; -EINVAL when malformed. */
int tune_parse(const char *text, const struct tune_key *k,
	       struct tune_machine *m);

#endif /* RDMACH_PROTO_TUNE_H */
