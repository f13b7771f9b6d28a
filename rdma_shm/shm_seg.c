/* shm_seg.c - create, share and map the per-process receive segment. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/num.h"
#include "shm_peer.h"
#include "shm_seg.h"

#define SHM_PAGE 4096u

static uint64_t shm_align(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* Can a peer open our memfd through /proc?  Not when this process is not
 * dumpable (setuid, PR_SET_DUMPABLE 0): /proc/<pid>/fd is then root's. */
static int shm_memfd_shareable(int fd)
{
	char path[64];
	int fd2;

	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
	fd2 = open(path, O_RDWR | O_CLOEXEC);
	if (fd2 < 0)
		return 0;
	close(fd2);
	return 1;
}

static int shm_named_create(struct shm_seg *seg)
{
	int fd;

	snprintf(seg->name, sizeof(seg->name), "/rdmach-%d-%" PRIx64,
		 (int)getpid(), rdmach_now_ns());
	fd = shm_open(seg->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		int err = -errno;

		rdmach_err("shm: shm_open(%s) failed: %s", seg->name,
			   strerror(errno));
		seg->name[0] = '\0';
		return err;
	}
	rdmach_info("shm: memfd cannot be shared through /proc; using %s "
		    "(unlinked once peers are connected)", seg->name);
	return fd;
}

/* A memfd that can be sealed against resizing (shm_seg_seal), else a
 * named segment, which cannot be: shm_seg_attach checks its size. */
static int shm_seg_open_fd(struct shm_seg *seg)
{
	int fd = memfd_create("rdmach-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	seg->name[0] = '\0';
	if (fd >= 0 && shm_memfd_shareable(fd))
		return fd;
	if (fd >= 0)
		close(fd);
	return shm_named_create(seg);
}

static void shm_seg_plan(int nwriters, const struct shm_seg_geom *g,
			 struct shm_seg_geo *l)
{
	uint64_t flags = 0;

	l->nslots = (uint32_t)nwriters;
	l->ring_size = g->ring_size;
	l->line_ring_size = g->line_ring_size;
	l->bulk_ring_size = g->bulk_ring_size;
	l->pipe_size = g->pipe_size;
	l->pipe_slot = g->pipe_size ? g->pipe_slot : 0;

	l->ctrl_off = shm_align(sizeof(struct shm_seg_hdr) +
				(uint64_t)nwriters * sizeof(int32_t),
				sizeof(struct shm_ring_ctrl));
	l->ring_off = shm_align(l->ctrl_off + (uint64_t)nwriters *
				sizeof(struct shm_ring_ctrl), SHM_PAGE);
	l->line_off = l->ring_off + (uint64_t)nwriters * g->ring_size;
	l->bulk_off = shm_align(l->line_off + (uint64_t)nwriters *
				g->line_ring_size, SHM_PAGE);
	l->populated = l->ring_off;
	l->pipe_off = l->bulk_off + (uint64_t)nwriters * g->bulk_ring_size;
	l->pipe_stride = 0;
	if (g->pipe_size) {
		flags = g->pipe_size / g->pipe_slot *
			sizeof(struct shm_pipe_flag);
		l->pipe_stride = shm_align(flags, SHM_PAGE) + g->pipe_size;
	}
	l->size = l->pipe_off + (uint64_t)nwriters * l->pipe_stride;
}

uint64_t shm_seg_start_bytes(int nwriters)
{
	struct shm_seg_geom g = { 0 };
	struct shm_seg_geo l;

	shm_seg_plan(nwriters, &g, &l);
	return l.populated;
}

static void shm_seg_init_hdr(struct shm_seg *seg, int my_rank,
			     const int *writers, int nwriters)
{
	struct shm_seg_hdr *h = seg->base;
	const struct shm_seg_geo *l = &seg->g;
	int i;

	h->magic = SHM_SEG_MAGIC;
	h->version = SHM_SEG_VERSION;
	h->nslots = l->nslots;
	h->ring_size = l->ring_size;
	h->ctrl_off = l->ctrl_off;
	h->ring_off = l->ring_off;
	h->line_ring_size = l->line_ring_size;
	h->line_off = l->line_off;
	h->bulk_ring_size = l->bulk_ring_size;
	h->bulk_off = l->bulk_off;
	h->pipe_size = l->pipe_size;
	h->pipe_slot = l->pipe_slot;
	h->pipe_off = l->pipe_off;
	h->pipe_stride = l->pipe_stride;
	h->populated = l->populated;
	h->cache_limit = 0;
	h->copy_hot_mbs = h->copy_cold_mbs = 0;
	h->cma_hot_mbs = h->cma_cold_mbs = 0;
	h->size = seg->size;
	h->owner_rank = my_rank;
	h->owner_pid = (int32_t)getpid();
	for (i = 0; i < nwriters; i++) {
		h->slot_rank[i] = seg->slot_rank[i] = writers[i];
		shm_seg_ctrl(seg, i)->writer_rank = writers[i];
	}
}

/* Neither shrink nor grow, ever: a peer that truncated the memfd would
 * make every process mapping it die of SIGBUS. */
static int shm_seg_seal(const struct shm_seg *seg, int fd)
{
	if (seg->name[0] || !fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK |
				   F_SEAL_GROW | F_SEAL_SEAL))
		return 0;
	rdmach_err("shm: cannot seal the segment against resizing: %s",
		   strerror(errno));
	return -errno;
}

/* Map size bytes of fd, the first `populated` of them with their pages in
 * place (the header and the control blocks: touched at once), the rings
 * and copy areas on a pair's first use. */
static void *shm_seg_map(int fd, uint64_t size, uint64_t populated)
{
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (base == MAP_FAILED)
		return base;
	if (populated && mmap(base, populated, PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0) ==
	    MAP_FAILED) {
		int e = errno;

		munmap(base, size);
		errno = e;
		return MAP_FAILED;
	}
	return base;
}

#define SHM_MPOL_PREFERRED 1	/* <numaif.h>, without libnuma */

/* Pages of the segment on the owner's NUMA node, whoever touches them
 * first (a memfd's policy is the file's: it holds for the writers'
 * faults too): the reader polls them, and the writers' first packets
 * allocate them.  Best effort: a kernel without NUMA says ENOSYS. */
static void shm_seg_bind_local(void *base, uint64_t size)
{
	unsigned cpu, node;
	unsigned long mask;

	if (syscall(SYS_getcpu, &cpu, &node, NULL) || node >= 8 * sizeof(mask))
		return;
	mask = 1ul << node;
	if (syscall(SYS_mbind, base, (unsigned long)size, SHM_MPOL_PREFERRED,
		    &mask, 8 * sizeof(mask), 0))
		rdmach_debug("shm: mbind of the segment to node %u: %s", node,
			     strerror(errno));
}

int shm_seg_create(struct shm_seg *seg, int my_rank, const int *writers,
		   int nwriters, const struct shm_seg_geom *g)
{
	struct shm_seg_geo l;
	void *base;
	int fd, err;

	shm_seg_plan(nwriters, g, &l);
	seg->slot_rank = calloc((size_t)nwriters, sizeof(*seg->slot_rank));
	if (!seg->slot_rank)
		return -ENOMEM;
	fd = shm_seg_open_fd(seg);
	if (fd < 0) {
		err = fd;
		goto err_free;
	}
	if (ftruncate(fd, (off_t)l.size) < 0) {
		err = -errno;
		rdmach_err("shm: cannot size the %" PRIu64 "-byte segment: %s",
			   l.size, strerror(errno));
		goto err_close;
	}
	err = shm_seg_seal(seg, fd);
	if (err)
		goto err_close;
	/* header and control blocks populated by the owner (the reader),
	 * so they sit on its NUMA node; the pages of rings and copy areas
	 * come with their writer's first packet (shm_ring.h, hello), on
	 * the owner's node too (shm_seg_bind_local) */
	base = shm_seg_map(fd, l.size, l.populated);
	if (base == MAP_FAILED) {
		err = -errno;
		rdmach_err("shm: mmap of the %" PRIu64 "-byte segment failed: %s",
			   l.size, strerror(errno));
		goto err_close;
	}
	shm_seg_bind_local(base, l.size);
	seg->base = base;
	seg->size = l.size;
	seg->fd = fd;
	seg->g = l;
	shm_seg_init_hdr(seg, my_rank, writers, nwriters);
	return 0;

err_close:
	close(fd);
	if (seg->name[0]) {
		shm_unlink(seg->name);
		seg->name[0] = '\0';
	}
err_free:
	free(seg->slot_rank);
	seg->slot_rank = NULL;
	return err;
}

int shm_seg_describe(const struct shm_seg *seg, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%d:%d:%zu:%s", (int)getpid(), seg->fd,
			 seg->size, seg->name[0] ? seg->name : "-");

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : 0;
}

const char *shm_seg_field(const char *p, unsigned int base, uint64_t max,
			  uint64_t *v)
{
	const char *end;
	uint64_t n;

	if (rdmach_num(p, base, max, &n, &end) ||
	    (*end != ':' && *end != '\0'))
		return NULL;
	*v = n;
	return end;
}

/* "-", or a name as shm_named_create makes them: '/' then [A-Za-z0-9-]. */
static const char *shm_seg_name(const char *p, char *name, size_t len)
{
	size_t n = strcspn(p, ":");

	if (!n || n >= len)
		return NULL;
	if (!(n == 1 && p[0] == '-') &&
	    (p[0] != '/' || n < 2 ||
	     strspn(p + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789-") != n - 1))
		return NULL;
	memcpy(name, p, n);
	name[n] = '\0';
	return p + n;
}

int shm_seg_parse_desc(const char *desc, int peer_rank, struct shm_seg_desc *d,
		       const char **rest)
{
	struct shm_seg_desc out;
	uint64_t pid, fd, size;
	const char *p = desc;
	char esc[256];

	if ((p = shm_seg_field(p, 10, INT32_MAX, &pid)) && *p++ == ':' &&
	    (p = shm_seg_field(p, 10, INT32_MAX, &fd)) && *p++ == ':' &&
	    (p = shm_seg_field(p, 10, SIZE_MAX >> 1, &size)) && *p++ == ':' &&
	    (p = shm_seg_name(p, out.name, sizeof(out.name))) && pid > 0) {
		out.pid = (int)pid;
		out.fd = (int)fd;
		out.size = (size_t)size;
		*d = out;
		*rest = p;
		return 0;
	}
	rdmach_err("shm: rank %d published a malformed segment address \"%s\"",
		   peer_rank, rdmach_log_esc(desc, esc, sizeof(esc)));
	return -EPROTO;
}

static int shm_seg_open_peer(const char *desc, int peer_rank, size_t *sizep,
			     char *name, size_t namelen)
{
	struct shm_seg_desc d;
	const char *rest;
	char path[96];
	int fd, err;

	err = shm_seg_parse_desc(desc, peer_rank, &d, &rest);
	if (err)
		return err;
	if (strcmp(d.name, "-") != 0) {
		snprintf(name, namelen, "%s", d.name);
		fd = shm_open(d.name, O_RDWR | O_CLOEXEC, 0);
		snprintf(path, sizeof(path), "%s", d.name);
	} else {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", d.pid, d.fd);
		fd = open(path, O_RDWR | O_CLOEXEC);
	}
	if (fd < 0) {
		err = -errno;
		rdmach_err("shm: cannot open the segment of rank %d (pid %d) "
			   "at %s: %s%s", peer_rank, d.pid, path, strerror(errno),
			   errno == EACCES || errno == EPERM ?
			   " (different user, or the peer is not dumpable?)" :
			   errno == ENOENT ? " (peer in another pid namespace "
			   "or already gone?)" : "");
		return err;
	}
	*sizep = d.size;
	return fd;
}

/* A memfd must be sealed against shrinking and growing (shm_seg_seal); a
 * named segment cannot be, and must be at least its published size. */
static int shm_seg_check_fd(int fd, int named, size_t size, int peer_rank)
{
	struct stat st;
	int seals;

	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != size ||
	    size < sizeof(struct shm_seg_hdr)) {
		rdmach_err("shm: the segment of rank %d is not of its published "
			   "size (%zu bytes)", peer_rank, size);
		return -EPROTO;
	}
	if (named)
		return 0;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
	    (F_SEAL_SHRINK | F_SEAL_GROW)) {
		rdmach_err("shm: the segment of rank %d is not sealed against "
			   "resizing (seals %#x)", peer_rank, seals);
		return -EPROTO;
	}
	return 0;
}

/* n parts of each bytes from off lie within size bytes (no overflow). */
static int shm_seg_fits(uint64_t off, uint64_t n, uint64_t each, uint64_t size)
{
	return off <= size && each <= size && (!each || n <= (size - off) / each);
}

/* ring: a power of two of at least min bytes (or 0 where may_lack), n of
 * them from a line boundary within size. */
static int shm_seg_rings_fit(uint64_t off, uint64_t n, uint64_t ring,
			     uint64_t min, int may_lack, uint64_t size)
{
	if (!ring)
		return may_lack;
	return shm_pow2(ring) && ring >= min && !(off % SHM_LINE) &&
	       shm_seg_fits(off, n, ring, size);
}

/* The layout a peer's header describes, checked against the mapping:
 * what a writer finds there it writes into.  A bulk ring that does not
 * fit is none (the peer may run with other knobs); the copy area is
 * checked by shm_pipe_init. */
static const char *shm_seg_geo_bad(const struct shm_seg_hdr *h, size_t size)
{
	uint64_t n = h->nslots;

	if (!n || n > SHM_SEG_MAX_SLOTS)
		return "nslots";
	if (h->ctrl_off % sizeof(struct shm_ring_ctrl) ||
	    h->ctrl_off < offsetof(struct shm_seg_hdr, slot_rank) +
	    n * sizeof(int32_t) ||
	    !shm_seg_fits(h->ctrl_off, n, sizeof(struct shm_ring_ctrl), size))
		return "ctrl_off";
	if (!shm_seg_rings_fit(h->ring_off, n, h->ring_size, 4 * SHM_LINE, 0,
			       size))
		return "ring_off/ring_size";
	if (!shm_seg_rings_fit(h->line_off, n, h->line_ring_size, 2 * SHM_LINE,
			       1, size))
		return "line_off/line_ring_size";
	if (h->populated > size)
		return "populated";
	return NULL;
}

static void shm_seg_geo_from(struct shm_seg_geo *g, const struct shm_seg_hdr *h)
{
	g->nslots = h->nslots;
	g->ring_size = h->ring_size;
	g->ctrl_off = h->ctrl_off;
	g->ring_off = h->ring_off;
	g->line_ring_size = h->line_ring_size;
	g->line_off = h->line_off;
	g->bulk_ring_size = h->bulk_ring_size;
	g->bulk_off = h->bulk_off;
	if (!shm_seg_rings_fit(h->bulk_off, h->nslots, h->bulk_ring_size, 1, 1,
			       h->size))
		g->bulk_ring_size = 0;
	g->pipe_size = h->pipe_size;
	g->pipe_slot = h->pipe_slot;
	g->pipe_off = h->pipe_off;
	g->pipe_stride = h->pipe_stride;
	g->populated = h->populated;
	g->size = h->size;
}

/* The slot of writer_rank in the slot table of a peer's segment (each
 * entry loaded once), or -1.  Only that slot is kept: the table is N
 * entries, in each of N segments a process maps. */
static int shm_seg_find_slot(const void *base, uint32_t nslots,
			     int writer_rank)
{
	const int32_t *table = (const int32_t *)(const void *)
		((const uint8_t *)base + offsetof(struct shm_seg_hdr, slot_rank));
	uint32_t i;

	for (i = 0; i < nslots; i++)
		if ((int32_t)shm_peer_load32(&table[i]) == writer_rank)
			return (int)i;
	return -1;
}

/* Read the header of a peer's segment at base once, check it, keep it,
 * and find writer_rank's slot. */
static int shm_seg_adopt(struct shm_seg *seg, void *base, size_t size,
			 int peer_rank, int writer_rank, int *slot)
{
	struct shm_seg_hdr h;
	const char *bad;
	int i;

	shm_peer_snap(&h, base, sizeof(h));
	if (h.magic != SHM_SEG_MAGIC || h.version != SHM_SEG_VERSION ||
	    h.size != size || h.owner_rank != peer_rank) {
		rdmach_err("shm: the segment of rank %d has a bad header "
			   "(magic %#" PRIx64 " version %u rank %d size %" PRIu64
			   "): mixed rdmach versions?", peer_rank, h.magic,
			   h.version, h.owner_rank, h.size);
		return -EPROTO;
	}
	bad = shm_seg_geo_bad(&h, size);
	if (bad) {
		rdmach_err("shm: the segment of rank %d has a bad header: %s "
			   "out of its %zu bytes (nslots %u ring_off %#" PRIx64
			   " ring_size %#" PRIx64 " line_off %#" PRIx64
			   " line_ring_size %#" PRIx64 " ctrl_off %#" PRIx64 ")",
			   peer_rank, bad, size, h.nslots, h.ring_off,
			   h.ring_size, h.line_off, h.line_ring_size,
			   h.ctrl_off);
		return -EPROTO;
	}
	i = shm_seg_find_slot(base, h.nslots, writer_rank);
	if (i < 0) {
		rdmach_err("shm: the segment of rank %d has no slot for rank "
			   "%d: the two disagree on the local peer list",
			   peer_rank, writer_rank);
		return -EPROTO;
	}
	shm_seg_geo_from(&seg->g, &h);
	*slot = i;
	return 0;
}

int shm_seg_attach(struct shm_seg *seg, const char *desc, int peer_rank,
		   int writer_rank, int *slot)
{
	size_t size = 0;
	void *base;
	int fd, err, i;

	memset(seg, 0, sizeof(*seg));
	seg->fd = -1;
	fd = shm_seg_open_peer(desc, peer_rank, &size, seg->name,
			       sizeof(seg->name));
	if (fd < 0)
		return fd;
	err = shm_seg_check_fd(fd, seg->name[0] != '\0', size, peer_rank);
	seg->name[0] = '\0';	/* the owner unlinks, not us */
	if (err)
		goto err_close;
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = -errno;
		rdmach_err("shm: cannot map the %zu-byte segment of rank %d: %s",
			   size, peer_rank, strerror(errno));
		goto err_close;
	}
	err = shm_seg_adopt(seg, base, size, peer_rank, writer_rank, &i);
	if (err)
		goto err_unmap;
	/* the rings we write: their pages in place now, not at the first
	 * message (the bulk rings and copy areas stay sparse) */
	if (mmap(base, seg->g.populated, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0) == MAP_FAILED) {
		err = -errno;
		rdmach_err("shm: cannot map the segment of rank %d: %s",
			   peer_rank, strerror(errno));
		goto err_unmap;
	}
	close(fd);
	seg->base = base;
	seg->size = size;
	*slot = i;
	return 0;

err_unmap:
	munmap(base, size);
err_close:
	close(fd);
	return err;
}

int shm_seg_slot(const struct shm_seg *seg, int writer_rank)
{
	uint32_t i;

	for (i = 0; i < seg->g.nslots; i++)
		if (seg->slot_rank[i] == writer_rank)
			return (int)i;
	return -1;
}

void shm_seg_ready(struct shm_seg *seg)
{
	if (seg->fd >= 0) {
		close(seg->fd);
		seg->fd = -1;
	}
	if (seg->name[0]) {
		shm_unlink(seg->name);
		seg->name[0] = '\0';
	}
}

void shm_seg_detach(struct shm_seg *seg)
{
	shm_seg_ready(seg);
	if (seg->base)
		munmap(seg->base, seg->size);
	free(seg->slot_rank);
	seg->slot_rank = NULL;
	seg->base = NULL;
	seg->size = 0;
}
