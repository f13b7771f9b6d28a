/* iov.h - a cursor over an iovec array, for gathering into rings and
 * scattering out of them.  Zero-length pieces are skipped. */
#ifndef RDMACH_CORE_IOV_H
#define RDMACH_CORE_IOV_H

#include <stddef.h>
#include <string.h>
#include <sys/uio.h>

struct rdmach_iovc {
	const struct iovec *iov;
	int cnt;
	int idx;		/* current piece */
	size_t off;		/* offset inside iov[idx] */
};

static inline void rdmach_iovc_init(struct rdmach_iovc *c,
				    const struct iovec *iov, int cnt)
{
	c->iov = iov;
	c->cnt = cnt;
	c->idx = 0;
	c->off = 0;
}

/* The bytes left in the cursor's current piece (empty pieces skipped):
 * their start in *base and their count, 0 at the end; *more is set when a
 * later piece follows.  The cursor does not move. */
static inline size_t rdmach_iovc_piece(const struct rdmach_iovc *c,
				       const void **base, int *more)
{
	size_t off = c->off;
	int i = c->idx;

	while (i < c->cnt && off >= c->iov[i].iov_len) {
		i++;
		off = 0;
	}
	if (i >= c->cnt)
		return 0;
	*base = (const char *)c->iov[i].iov_base + off;
	*more = i + 1 < c->cnt;
	return c->iov[i].iov_len - off;
}

/* Copy up to len bytes from the iovec into dst; returns bytes copied. */
size_t rdmach_iovc_gather(struct rdmach_iovc *c, void *dst, size_t len);
/* Copy up to len bytes from src into the iovec; returns bytes copied. */
size_t rdmach_iovc_scatter(struct rdmach_iovc *c, const void *src, size_t len);
/* Advance by len bytes (or to the end); returns bytes skipped. */
size_t rdmach_iovc_skip(struct rdmach_iovc *c, size_t len);
/* Fill out[] (at most max pieces) with the next len bytes as iovecs
 * without copying; returns the number of pieces, advances the cursor. */
int rdmach_iovc_slice(struct rdmach_iovc *c, size_t len, struct iovec *out,
		      int max, size_t *taken);

/* 0 and *total set, or -EINVAL (NULL iov with cnt > 0, cnt < 0, NULL base
 * with a length, sum beyond SSIZE_MAX). */
int rdmach_iov_check(const struct iovec *iov, int cnt, size_t *total);

#endif /* RDMACH_CORE_IOV_H */
