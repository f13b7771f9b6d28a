/*
 * shm_seg.h - the receive segment of one process: a header, then one ring
 * control block, one main ring and one line ring per local peer (the
 * writer), self included, then one bulk ring and one copy area per local
 * peer (shm_ring.h: rings, flags and slots).
 *
 * Only the header and the control blocks are populated when the segment
 * is created or mapped; the pages of a writer's rings and copy area are
 * allocated when it first uses them (a memfd is sparse; the reader polls
 * no ring of a writer that has not said hello, shm_ring.h), so those of
 * peers that never send cost address space only.
 *
 * The segment is a memfd, never named in /dev/shm: peers open it through
 * /proc/<pid>/fd/<fd> during wire-up and the owner closes the fd once
 * everybody has mapped it, so the memory disappears with the last mapping,
 * crash or not.  Only when the memfd cannot be shared that way (e.g. a
 * non-dumpable process) does the owner use shm_open with a unique name,
 * unlinked as soon as the peers have mapped it.
 */
#ifndef RDMACH_SHM_SEG_H
#define RDMACH_SHM_SEG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm_ring.h"

#define SHM_SEG_MAGIC 0x52444d4143485348ull	/* "RDMACHSH" */
#define SHM_SEG_VERSION 8u
#define SHM_SEG_MAX_SLOTS 65536u	/* writers of one segment, at most */

struct shm_seg_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t nslots;
	uint64_t ring_size;	/* bytes of each ring, a power of two */
	uint64_t ctrl_off;	/* struct shm_ring_ctrl[nslots] */
	uint64_t ring_off;	/* ring i at ring_off + i * ring_size */
	uint64_t line_ring_size; /* bytes of each line ring (0: none) */
	uint64_t line_off;	/* line ring i at line_off + i * line_ring_size */
	uint64_t bulk_ring_size; /* bytes of each bulk ring (0: none) */
	uint64_t bulk_off;	/* bulk ring i at bulk_off + i * bulk_ring_size */
	uint64_t pipe_size;	/* bytes of each copy area's slots (0: none) */
	uint64_t pipe_slot;	/* bytes of one slot (the largest chunk) */
	uint64_t pipe_off;	/* copy area i at pipe_off + i * pipe_stride */
	uint64_t pipe_stride;	/* its flags page(s), then its slots */
	uint64_t populated;	/* bytes mapped with MAP_POPULATE (= ring_off) */
	/* measured by the local leader (shm_calib.h; 0: not measured) */
	uint64_t cache_limit;
	uint64_t copy_hot_mbs, copy_cold_mbs, cma_hot_mbs, cma_cold_mbs;
	uint64_t size;		/* whole segment */
	struct shm_bell bell;	/* the owner's doorbell (shm_ring.h) */
	int32_t owner_rank;
	int32_t owner_pid;
	int32_t slot_rank[];	/* writer rank of each slot */
};

/* Where the parts of a segment lie: a private copy, made by the owner at
 * creation and by a peer from a checked snapshot of the header when it
 * maps the segment, and never read from the segment again (every local
 * process can write the header). */
struct shm_seg_geo {
	uint32_t nslots;
	uint64_t ring_size, ctrl_off, ring_off;
	uint64_t line_ring_size, line_off;
	uint64_t bulk_ring_size, bulk_off;
	uint64_t pipe_size, pipe_slot, pipe_off, pipe_stride;
	uint64_t populated, size;
};

/* A mapping of some process's segment. */
struct shm_seg {
	void *base;
	size_t size;
	int fd;			/* owner only, until shm_seg_ready() */
	char name[64];		/* shm_open name, "" for a memfd */
	struct shm_seg_geo g;	/* the layout (private) */
	int32_t *slot_rank;	/* owner: writer rank of each slot (private;
				 * NULL in a peer's mapping) */
};

/* Sizes of what a segment holds per writer. */
struct shm_seg_geom {
	uint64_t ring_size;	/* main ring, a power of two */
	uint64_t line_ring_size; /* line ring, 0 or a power of two */
	uint64_t bulk_ring_size; /* bulk ring, 0 or a power of two */
	uint64_t pipe_size;	/* copy area slots, a multiple of pipe_slot (0: none) */
	uint64_t pipe_slot;	/* one slot */
};

/* The auto sizes of a writer's areas (shm_iface.c chooses them;
 * rdmach_info -m models them).  RDMACH_SHM_PIPE_AREA=auto: 16 slots of
 * 32 KiB move 1 MiB messages 4-15% faster than 8 (more chunks in
 * flight); with many local processes the areas' memory and cache
 * footprint (one per peer that sends large messages) weigh more: 64
 * processes keep it at 16 MiB per process. */
#define SHM_PIPE_AREA_FEW (512u << 10)
#define SHM_PIPE_AREA_MANY (256u << 10)
#define SHM_PIPE_AREA_FEW_PROCS 16
#define SHM_RING_FEW (64u << 10)	/* RDMACH_SHM_RING_SIZE=auto */
#define SHM_RING_MANY (16u << 10)
#define SHM_LINE_RING_FEW 1024u	/* RDMACH_SHM_LINE_RING=auto */
#define SHM_LINE_RING_MANY 512u

/* Bytes of a segment with nwriters slots that are populated at start-up:
 * the header, the slot table and the control blocks. */
uint64_t shm_seg_start_bytes(int nwriters);

/* Create my segment with one slot per writer rank. */
int shm_seg_create(struct shm_seg *seg, int my_rank, const int *writers,
		   int nwriters, const struct shm_seg_geom *g);
/* "pid:fd:size:name" for the oob exchange (name "-" for a memfd). */
int shm_seg_describe(const struct shm_seg *seg, char *buf, size_t len);

/* A peer's description, parsed strictly: a pid > 0, an fd >= 0 and a size
 * in decimal, a name "-" or as shm_named_create makes them. */
struct shm_seg_desc {
	int pid, fd;
	size_t size;
	char name[64];
};

/* A field of a published address: a number in base (10 or 16) of at most
 * max, ended by ':' or the end of the string (core/num.h).  What follows
 * it, and *v set; NULL when malformed. */
const char *shm_seg_field(const char *p, unsigned int base, uint64_t max,
			  uint64_t *v);
/* Parse the "pid:fd:size:name" that starts desc; *rest is set to what
 * follows the name (end of string or ':').  -EPROTO, logged with the
 * value escaped, when it is malformed. */
int shm_seg_parse_desc(const char *desc, int peer_rank, struct shm_seg_desc *d,
		       const char **rest);
/* Map a peer's segment from its description: checks its seals and size,
 * and its header (layout within the mapping; shm_seg_geo); *slot is the
 * slot there of writer_rank (a rank without one is refused). */
int shm_seg_attach(struct shm_seg *seg, const char *desc, int peer_rank,
		   int writer_rank, int *slot);
/* Owner, after every peer attached: drop the fd / unlink the name. */
void shm_seg_ready(struct shm_seg *seg);
void shm_seg_detach(struct shm_seg *seg);

/* Is v a power of two (sizes from knobs and from a peer's segment)? */
static inline int shm_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static inline struct shm_seg_hdr *shm_seg_hdr(const struct shm_seg *seg)
{
	return seg->base;
}

/* Slot of writer_rank in my own segment, or -1. */
int shm_seg_slot(const struct shm_seg *seg, int writer_rank);

static inline struct shm_ring_ctrl *shm_seg_ctrl(const struct shm_seg *seg,
						 int slot)
{
	const struct shm_seg_geo *h = &seg->g;

	return (struct shm_ring_ctrl *)((char *)seg->base + h->ctrl_off) + slot;
}

static inline uint8_t *shm_seg_ring(const struct shm_seg *seg, int slot)
{
	const struct shm_seg_geo *h = &seg->g;

	return (uint8_t *)seg->base + h->ring_off + (size_t)slot * h->ring_size;
}

static inline uint8_t *shm_seg_line_ring(const struct shm_seg *seg, int slot)
{
	const struct shm_seg_geo *h = &seg->g;

	return (uint8_t *)seg->base + h->line_off +
	       (size_t)slot * h->line_ring_size;
}

static inline uint8_t *shm_seg_bulk_ring(const struct shm_seg *seg, int slot)
{
	const struct shm_seg_geo *h = &seg->g;

	return (uint8_t *)seg->base + h->bulk_off +
	       (size_t)slot * h->bulk_ring_size;
}

/* The flags of writer slot's copy area (shm_ring.h). */
static inline struct shm_pipe_flag *shm_seg_pipe_flags(const struct shm_seg *seg,
							int slot)
{
	const struct shm_seg_geo *h = &seg->g;

	return (struct shm_pipe_flag *)((uint8_t *)seg->base + h->pipe_off +
					(size_t)slot * h->pipe_stride);
}

/* The first byte of its slots. */
static inline uint8_t *shm_seg_pipe_area(const struct shm_seg *seg, int slot)
{
	const struct shm_seg_geo *h = &seg->g;

	return (uint8_t *)shm_seg_pipe_flags(seg, slot) + h->pipe_stride -
	       h->pipe_size;
}

#endif /* RDMACH_SHM_SEG_H */
