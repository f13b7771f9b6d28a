/* iov.c - iovec cursor and argument checks shared by every transport. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "iov.h"

/* Next non-empty piece, or NULL at the end; leaves idx/off on it. */
static const struct iovec *iovc_piece(struct rdmach_iovc *c)
{
	while (c->idx < c->cnt) {
		if (c->off < c->iov[c->idx].iov_len)
			return &c->iov[c->idx];
		c->idx++;
		c->off = 0;
	}
	return NULL;
}

size_t rdmach_iovc_gather(struct rdmach_iovc *c, void *dst, size_t len)
{
	const struct iovec *p;
	size_t done = 0;

	while (done < len && (p = iovc_piece(c))) {
		size_t n = p->iov_len - c->off;

		if (n > len - done)
			n = len - done;
		memcpy((char *)dst + done, (const char *)p->iov_base + c->off,
		       n);
		c->off += n;
		done += n;
	}
	return done;
}

size_t rdmach_iovc_scatter(struct rdmach_iovc *c, const void *src, size_t len)
{
	const struct iovec *p;
	size_t done = 0;

	while (done < len && (p = iovc_piece(c))) {
		size_t n = p->iov_len - c->off;

		if (n > len - done)
			n = len - done;
		memcpy((char *)p->iov_base + c->off, (const char *)src + done,
		       n);
		c->off += n;
		done += n;
	}
	return done;
}

size_t rdmach_iovc_skip(struct rdmach_iovc *c, size_t len)
{
	const struct iovec *p;
	size_t done = 0;

	while (done < len && (p = iovc_piece(c))) {
		size_t n = p->iov_len - c->off;

		if (n > len - done)
			n = len - done;
		c->off += n;
		done += n;
	}
	return done;
}

int rdmach_iovc_slice(struct rdmach_iovc *c, size_t len, struct iovec *out,
		      int max, size_t *taken)
{
	const struct iovec *p;
	size_t done = 0;
	int n = 0;

	while (done < len && n < max && (p = iovc_piece(c))) {
		size_t k = p->iov_len - c->off;

		if (k > len - done)
			k = len - done;
		out[n].iov_base = (char *)p->iov_base + c->off;
		out[n].iov_len = k;
		n++;
		c->off += k;
		done += k;
	}
	*taken = done;
	return n;
}

int rdmach_iov_check(const struct iovec *iov, int cnt, size_t *total)
{
	size_t sum = 0;
	int i;

	if (cnt < 0 || (cnt > 0 && !iov))
		return -EINVAL;
	for (i = 0; i < cnt; i++) {
		size_t len = iov[i].iov_len;

		if (len && !iov[i].iov_base)
			return -EINVAL;
		if (len > (size_t)SSIZE_MAX - sum)
			return -EINVAL;
		sum += len;
	}
	*total = sum;
	return 0;
}
