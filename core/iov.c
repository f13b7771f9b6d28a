/* iov.c - iovec cursor and argument checks shared by every transport.
 * Gather, scatter, skip and slice are one walk over the cursor with a
 * different step for each contiguous piece. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "iov.h"

/* What to do with the next n bytes at base (done bytes into the walk):
 * 0 to take them and go on, non-zero to stop before them. */
typedef int (*iovc_step_fn)(char *base, size_t n, size_t done, void *arg);

/*
 * Advance the cursor over up to len bytes, piece by piece (zero-length
 * pieces skipped), calling step on each; returns bytes walked.  Always
 * inlined, so each caller gets its own loop with its step inlined too.
 */
static inline __attribute__((always_inline)) size_t
iovc_walk(struct rdmach_iovc *c, size_t len, iovc_step_fn step, void *arg)
{
	size_t done = 0;

	while (done < len && c->idx < c->cnt) {
		const struct iovec *p = &c->iov[c->idx];
		size_t n = p->iov_len - c->off;

		if (!n) {
			c->idx++;
			c->off = 0;
			continue;
		}
		if (n > len - done)
			n = len - done;
		if (step((char *)p->iov_base + c->off, n, done, arg))
			break;
		c->off += n;
		done += n;
	}
	return done;
}

static inline int iovc_gather_step(char *base, size_t n, size_t done,
				   void *dst)
{
	memcpy((char *)dst + done, base, n);
	return 0;
}

static inline int iovc_scatter_step(char *base, size_t n, size_t done,
				    void *src)
{
	memcpy(base, (const char *)src + done, n);
	return 0;
}

static inline int iovc_skip_step(char *base, size_t n, size_t done,
				 void *arg)
{
	return 0;
}

struct iovc_slice {
	struct iovec *out;
	int n, max;
};

static inline int iovc_slice_step(char *base, size_t n, size_t done,
				  void *arg)
{
	struct iovc_slice *s = arg;

	if (s->n == s->max)
		return 1;
	s->out[s->n].iov_base = base;
	s->out[s->n].iov_len = n;
	s->n++;
	return 0;
}

size_t rdmach_iovc_gather(struct rdmach_iovc *c, void *dst, size_t len)
{
	return iovc_walk(c, len, iovc_gather_step, dst);
}

size_t rdmach_iovc_scatter(struct rdmach_iovc *c, const void *src, size_t len)
{
	return iovc_walk(c, len, iovc_scatter_step, (void *)src);
}

size_t rdmach_iovc_skip(struct rdmach_iovc *c, size_t len)
{
	return iovc_walk(c, len, iovc_skip_step, NULL);
}

int rdmach_iovc_slice(struct rdmach_iovc *c, size_t len, struct iovec *out,
		      int max, size_t *taken)
{
	struct iovc_slice s = { out, 0, max };

	*taken = iovc_walk(c, len, iovc_slice_step, &s);
	return s.n;
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
