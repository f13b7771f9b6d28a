/* shm_seg.c - create, share and map the per-process receive segment. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
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

static int shm_seg_open_fd(struct shm_seg *seg)
{
	int fd = memfd_create("rdmach-shm", MFD_CLOEXEC);

	seg->name[0] = '\0';
	if (fd >= 0 && shm_memfd_shareable(fd))
		return fd;
	if (fd >= 0)
		close(fd);
	return shm_named_create(seg);
}

/* Offsets of the parts of a segment. */
struct shm_seg_layout {
	uint64_t ctrl_off, ring_off, line_off, bulk_off, pipe_off, pipe_stride;
	uint64_t populated, size;
};

static void shm_seg_plan(int nwriters, const struct shm_seg_geom *g,
			 struct shm_seg_layout *l)
{
	uint64_t flags = 0;

	l->ctrl_off = shm_align(sizeof(struct shm_seg_hdr) +
				(uint64_t)nwriters * sizeof(int32_t),
				sizeof(struct shm_ring_ctrl));
	l->ring_off = shm_align(l->ctrl_off + (uint64_t)nwriters *
				sizeof(struct shm_ring_ctrl), SHM_PAGE);
	l->line_off = l->ring_off + (uint64_t)nwriters * g->ring_size;
	l->bulk_off = shm_align(l->line_off + (uint64_t)nwriters *
				g->line_ring_size, SHM_PAGE);
	l->populated = l->bulk_off;
	l->pipe_off = l->bulk_off + (uint64_t)nwriters * g->bulk_ring_size;
	l->pipe_stride = 0;
	if (g->pipe_size) {
		flags = g->pipe_size / g->pipe_slot *
			sizeof(struct shm_pipe_flag);
		l->pipe_stride = shm_align(flags, SHM_PAGE) + g->pipe_size;
	}
	l->size = l->pipe_off + (uint64_t)nwriters * l->pipe_stride;
}

static void shm_seg_init_hdr(struct shm_seg *seg, int my_rank,
			     const int *writers, int nwriters,
			     const struct shm_seg_geom *g,
			     const struct shm_seg_layout *l)
{
	struct shm_seg_hdr *h = seg->base;
	int i;

	h->magic = SHM_SEG_MAGIC;
	h->version = SHM_SEG_VERSION;
	h->nslots = (uint32_t)nwriters;
	h->ring_size = g->ring_size;
	h->ctrl_off = l->ctrl_off;
	h->ring_off = l->ring_off;
	h->line_ring_size = g->line_ring_size;
	h->line_off = l->line_off;
	h->bulk_ring_size = g->bulk_ring_size;
	h->bulk_off = l->bulk_off;
	h->pipe_size = g->pipe_size;
	h->pipe_slot = g->pipe_size ? g->pipe_slot : 0;
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
		h->slot_rank[i] = writers[i];
		shm_seg_ctrl(seg, i)->writer_rank = writers[i];
	}
}

/* Map size bytes of fd, the first `populated` of them with their pages in
 * place (the header, control blocks, main and line rings: touched at
 * once), the bulk rings and copy areas on first use. */
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

int shm_seg_create(struct shm_seg *seg, int my_rank, const int *writers,
		   int nwriters, const struct shm_seg_geom *g)
{
	struct shm_seg_layout l;
	void *base;
	int fd, err;

	shm_seg_plan(nwriters, g, &l);
	fd = shm_seg_open_fd(seg);
	if (fd < 0)
		return fd;
	if (ftruncate(fd, (off_t)l.size) < 0) {
		err = -errno;
		rdmach_err("shm: cannot size the %" PRIu64 "-byte segment: %s",
			   l.size, strerror(errno));
		goto err_close;
	}
	/* populated by the owner (the reader), so the pages sit on its
	 * NUMA node; the pages of a bulk ring or a copy area come with
	 * their writer's first use */
	base = shm_seg_map(fd, l.size, l.populated);
	if (base == MAP_FAILED) {
		err = -errno;
		rdmach_err("shm: mmap of the %" PRIu64 "-byte segment failed: %s",
			   l.size, strerror(errno));
		goto err_close;
	}
	seg->base = base;
	seg->size = l.size;
	seg->fd = fd;
	shm_seg_init_hdr(seg, my_rank, writers, nwriters, g, &l);
	return 0;

err_close:
	close(fd);
	if (seg->name[0]) {
		shm_unlink(seg->name);
		seg->name[0] = '\0';
	}
	return err;
}

int shm_seg_describe(const struct shm_seg *seg, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%d:%d:%zu:%s", (int)getpid(), seg->fd,
			 seg->size, seg->name[0] ? seg->name : "-");

	return n < 0 || (size_t)n >= len ? -EOVERFLOW : 0;
}

static int shm_seg_open_peer(const char *desc, int peer_rank, size_t *sizep,
			     char *name, size_t namelen)
{
	char path[96], nm[64];
	int pid, fd, n;
	size_t size;

	n = sscanf(desc, "%d:%d:%zu:%63[^:]", &pid, &fd, &size, nm);
	if (n != 4) {
		rdmach_err("shm: rank %d published a malformed segment "
			   "address '%s'", peer_rank, desc);
		return -EPROTO;
	}
	if (strcmp(nm, "-") != 0) {
		snprintf(name, namelen, "%s", nm);
		fd = shm_open(nm, O_RDWR | O_CLOEXEC, 0);
		snprintf(path, sizeof(path), "%s", nm);
	} else {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
		fd = open(path, O_RDWR | O_CLOEXEC);
	}
	if (fd < 0) {
		int err = -errno;

		rdmach_err("shm: cannot open the segment of rank %d (pid %d) "
			   "at %s: %s%s", peer_rank, pid, path, strerror(errno),
			   errno == EACCES || errno == EPERM ?
			   " (different user, or the peer is not dumpable?)" :
			   errno == ENOENT ? " (peer in another pid namespace "
			   "or already gone?)" : "");
		return err;
	}
	*sizep = size;
	return fd;
}

int shm_seg_attach(struct shm_seg *seg, const char *desc, int peer_rank)
{
	struct shm_seg_hdr *h;
	struct stat st;
	size_t size = 0;
	void *base;
	int fd, err;

	memset(seg, 0, sizeof(*seg));
	seg->fd = -1;
	fd = shm_seg_open_peer(desc, peer_rank, &size, seg->name,
			       sizeof(seg->name));
	if (fd < 0)
		return fd;
	seg->name[0] = '\0';	/* the owner unlinks, not us */
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < size ||
	    size < sizeof(*h)) {
		rdmach_err("shm: the segment of rank %d is smaller than "
			   "published (%zu bytes)", peer_rank, size);
		err = -EPROTO;
		goto err_close;
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = -errno;
		rdmach_err("shm: cannot map the %zu-byte segment of rank %d: %s",
			   size, peer_rank, strerror(errno));
		goto err_close;
	}
	h = base;
	if (h->magic != SHM_SEG_MAGIC || h->version != SHM_SEG_VERSION ||
	    h->size != size || h->owner_rank != peer_rank ||
	    h->populated > size) {
		rdmach_err("shm: the segment of rank %d has a bad header "
			   "(magic %#" PRIx64 " version %u rank %d): mixed "
			   "rdmach versions?", peer_rank, h->magic, h->version,
			   h->owner_rank);
		err = -EPROTO;
		goto err_unmap;
	}
	/* the rings we write: their pages in place now, not at the first
	 * message (the bulk rings and copy areas stay sparse) */
	if (mmap(base, h->populated, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0) == MAP_FAILED) {
		err = -errno;
		rdmach_err("shm: cannot map the segment of rank %d: %s",
			   peer_rank, strerror(errno));
		goto err_unmap;
	}
	close(fd);
	seg->base = base;
	seg->size = size;
	return 0;

err_unmap:
	munmap(base, size);
err_close:
	close(fd);
	return err;
}

int shm_seg_slot(const struct shm_seg *seg, int writer_rank)
{
	const struct shm_seg_hdr *h = seg->base;
	uint32_t i;

	for (i = 0; i < h->nslots; i++)
		if (h->slot_rank[i] == writer_rank)
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
	seg->base = NULL;
	seg->size = 0;
}
