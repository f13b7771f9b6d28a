/*
 * shm_fuzz.c - the driver of the rdma_shm receive harnesses (shm_fuzz.h):
 * the loads of rdma_shm/shm_peer.h answered from the fuzzer's input, and
 * one connection's receive side driven through shm_get, shm_peek and
 * shm_consume.  rdmach_conn_fail is the core's (core/rdmach.c, not linked
 * here): this one records the failure the same way, minus the log.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tl.h"
#include "rdma_shm/shm_conn.h"
#include "rdma_shm/shm_ep.h"
#include "rdma_shm/shm_rndv.h"
#include "shm_fuzz.h"

#define F_MAIN 4096u		/* ring sizes: the smallest that work */
#define F_LINES 256u
#define F_BULK 8192u
#define F_SLOT 1024u
#define F_SLOTS 4u
#define F_OPS 256		/* calls per input, at most */
#define F_SEEN 256		/* loads remembered per packet */
#define F_SRC (64u << 10)	/* what valid rendezvous segments point at */

static const uint8_t *f_in;	/* the input not yet used */
static size_t f_left;
static enum shm_fuzz_bias f_bias;
static struct shm_conn *f_sc;
static uint64_t f_rndv_total;	/* of the last rendezvous header made */
static uint8_t f_src[F_SRC];

/* Loads of this packet: a second load of any byte aborts. */
static struct { uintptr_t p; size_t n; } f_seen[F_SEEN];
static int f_nseen;

static uint64_t f_bytes(size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n && i < 8; i++)
		if (f_left) {
			v |= (uint64_t)*f_in++ << (8 * i);
			f_left--;
		}
	return v;
}

static void f_raw(void *out, size_t n)
{
	size_t k = n < f_left ? n : f_left;

	memcpy(out, f_in, k);
	memset((uint8_t *)out + k, 0, n - k);
	f_in += k;
	f_left -= k;
}

/* The header of a packet at a ring's head, shaped by the input. */
static uint64_t f_hdr(void)
{
	static const unsigned types[] = { RDMACH_PKT_DATA, RDMACH_PKT_PIPE,
					  RDMACH_PKT_RNDV };
	unsigned sel = (unsigned)f_bytes(1), t = (unsigned)f_bytes(1);
	uint32_t seq = f_sc->rx_seq, len = (uint32_t)f_bytes(2);
	unsigned type;

	if (!f_left && !sel)
		return 0;	/* input used up: nothing more comes */
	switch (sel % 8) {
	case 5: seq = 0; break;
	case 6: seq += 1 + (sel >> 3); break;
	case 7: seq = (uint32_t)f_bytes(4); break;
	default: break;
	}
	type = t < 192 ? types[f_bias] : t & 0xf;
	if (t < 192 && f_bias == SHM_FUZZ_DATA && t % 4 == 3)
		type = RDMACH_PKT_PAD;
	if (type == RDMACH_PKT_DATA)
		len %= 4200;	/* now and then past a ring's end */
	else if (type == RDMACH_PKT_PIPE && len % 4)
		len = sizeof(struct shm_pipe_pkt);
	else if (type == RDMACH_PKT_RNDV && len & 0x8000)
		len = (uint32_t)rdmach_rndv_size((len & 0x7fff) % 66);
	return shm_hdr_make(seq, type, len);
}

/* A rendezvous header: often 1..65 segments and a small total. */
static void f_rndv_hdr(struct rdmach_rndv_hdr *h)
{
	unsigned sel = (unsigned)f_bytes(1);

	if (sel >= 224) {
		f_raw(h, sizeof(*h));
		return;
	}
	h->id = f_bytes(1);
	h->total = f_rndv_total = f_bytes(2);
	h->nsegs = (uint32_t)f_bytes(1) % 66;
	h->flags = 0;
}

/* Its segments: in f_src and summing to its total, unless the input
 * says otherwise. */
static void f_rndv_segs(struct rdmach_rndv_seg *s, size_t n)
{
	uint64_t left = f_rndv_total;
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned sel = (unsigned)f_bytes(1);
		uint64_t len = i + 1 == n ? left : f_bytes(1);

		if (sel >= 240) {
			f_raw(&s[i], sizeof(s[i]));
			continue;
		}
		len = len > left ? left : len;
		if (len > F_SRC)
			len = F_SRC;
		s[i].addr = (uint64_t)(uintptr_t)(f_src + f_bytes(2) % (F_SRC - len + 1));
		s[i].len = len;
		s[i].key = 0;
		left -= len;
	}
}

/* Is p the head of one of the receive rings? */
static int f_at_head(const volatile void *p, uintptr_t off)
{
	int i;

	for (i = 0; i < SHM_NRINGS; i++) {
		const struct shm_rx_ring *r = &f_sc->rx[i];

		if ((uintptr_t)p == (uintptr_t)(r->base + (r->head & r->mask)) + off)
			return 1;
	}
	return 0;
}

static int f_is_flag(const volatile void *p)
{
	uintptr_t a = (uintptr_t)p, f = (uintptr_t)f_sc->rx_pipe.flags;

	return a >= f && a < f + F_SLOTS * sizeof(struct shm_pipe_flag);
}

static void f_shape(const volatile void *p, void *out, size_t n)
{
	uint64_t v;

	if (n == 8 && f_at_head(p, 0)) {
		v = f_hdr();
	} else if (n == 8 && f_at_head(p, SHM_HDR)) {	/* a PIPE packet's total */
		v = f_bytes(1) < 224 ? f_bytes(2) : f_bytes(8);
	} else if (n == 8 && f_is_flag(p)) {
		unsigned sel = (unsigned)f_bytes(1);

		v = sel < 96 ? 0 : sel < 240 ? f_bytes(2) % (F_SLOT + 64) :
		    f_bytes(8);
	} else if (n == sizeof(struct rdmach_rndv_hdr)) {
		f_rndv_hdr(out);
		return;
	} else if (n && n % sizeof(struct rdmach_rndv_seg) == 0) {
		f_rndv_segs(out, n / sizeof(struct rdmach_rndv_seg));
		return;
	} else {
		f_raw(out, n);
		return;
	}
	memcpy(out, &v, n);
}

void shm_peer_fuzz_load(const volatile void *p, void *out, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	int i;

	for (i = 0; i < f_nseen; i++)
		if (a < f_seen[i].p + f_seen[i].n && f_seen[i].p < a + n) {
			fprintf(stderr, "shm_fuzz: %zu bytes at %p loaded twice "
				"for one packet (first %zu at %p)\n", n,
				(const void *)p, f_seen[i].n,
				(void *)f_seen[i].p);
			abort();
		}
	if (f_nseen < F_SEEN) {
		f_seen[f_nseen].p = a;
		f_seen[f_nseen++].n = n;
	}
	f_shape(p, out, n);
}

void shm_peer_fuzz_miss(const volatile void *p)
{
	int i;

	for (i = f_nseen - 1; i >= 0; i--)
		if (f_seen[i].p == (uintptr_t)p) {
			f_seen[i] = f_seen[--f_nseen];
			return;
		}
}

void shm_peer_fuzz_epoch(void)
{
	f_nseen = 0;
}

int rdmach_conn_fail(struct rdmach_conn *conn, int err, const char *fmt, ...)
{
	char msg[256];	/* formatted, as the core does, and dropped */
	va_list ap;

	if (!conn->err) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		conn->err = err;
	}
	return err;
}

/* ---- the connection ---------------------------------------------------- */

struct f_conn {
	struct rdmach_ctx ctx;
	struct rdmach_conn conn;
	struct shm_tl tl;
	struct shm_conn *sc;
	struct shm_ring_ctrl *rx_ctrl, *tx_ctrl;
	uint8_t *ring[SHM_NRINGS];
};

static const uint64_t f_ring_size[SHM_NRINGS] = { F_MAIN, F_LINES, F_BULK };

static int f_open(struct f_conn *f)
{
	struct shm_conn *sc;
	int i;

	memset(f, 0, sizeof(*f));
	f->sc = sc = calloc(1, sizeof(*sc));
	f->rx_ctrl = aligned_alloc(SHM_LINE, sizeof(*f->rx_ctrl));
	f->tx_ctrl = aligned_alloc(SHM_LINE, sizeof(*f->tx_ctrl));
	sc->rx_pipe.flags = aligned_alloc(SHM_LINE, F_SLOTS *
					  sizeof(struct shm_pipe_flag));
	sc->rx_pipe.area = malloc(F_SLOTS * F_SLOT);
	if (!sc || !f->rx_ctrl || !f->tx_ctrl || !sc->rx_pipe.flags ||
	    !sc->rx_pipe.area)
		return -1;
	memset(f->rx_ctrl, 0, sizeof(*f->rx_ctrl));
	memset(f->tx_ctrl, 0, sizeof(*f->tx_ctrl));
	memset(sc->rx_pipe.flags, 0, F_SLOTS * sizeof(struct shm_pipe_flag));
	memset(sc->rx_pipe.area, 0x5a, F_SLOTS * F_SLOT);
	for (i = 0; i < SHM_NRINGS; i++) {
		f->ring[i] = aligned_alloc(SHM_LINE, f_ring_size[i]);
		if (!f->ring[i])
			return -1;
		memset(f->ring[i], 0xa5, f_ring_size[i]);
		sc->rx[i].base = f->ring[i];
		sc->rx[i].mask = f_ring_size[i] - 1;
	}
	sc->rx[SHM_MAIN].tail = &f->rx_ctrl->tail;
	sc->rx[SHM_LINES].tail = &f->rx_ctrl->line_tail;
	sc->rx[SHM_BULK].tail = &f->rx_ctrl->bulk_tail;
	sc->rx_pipe.slot = F_SLOT;
	sc->rx_pipe.slot_mask = F_SLOTS - 1;
	f->tl.liveness_ns = 1000000;
	f->conn.ctx = &f->ctx;
	f->conn.peer = 1;
	f->conn.priv = sc;
	sc->conn = &f->conn;
	sc->tl = &f->tl;
	sc->self = 1;		/* no liveness system calls */
	sc->pidfd = -1;
	sc->pid = getpid();	/* rendezvous read this process */
	sc->rx_ctrl = f->rx_ctrl;
	sc->tx_ctrl = f->tx_ctrl;
	sc->rx_seq = SHM_SEQ_FIRST;
	sc->tx_seq = SHM_SEQ_FIRST;
	return 0;
}

static void f_close(struct f_conn *f)
{
	int i;

	if (f->sc) {
		shm_rndv_conn_close(f->sc);
		shm_rndv_tl_close(&f->tl);
		free(f->sc->rx_pipe.flags);
		free(f->sc->rx_pipe.area);
	}
	for (i = 0; i < SHM_NRINGS; i++)
		free(f->ring[i]);
	free(f->rx_ctrl);
	free(f->tx_ctrl);
	free(f->sc);
}

/* ---- the calls ----------------------------------------------------------- */

static uint8_t f_buf[3 * F_BULK];

/* A get of up to 3 bulk rings' bytes, in one or two pieces: 0 to go on,
 * 1 to stop (an error ends the connection). */
static int f_get(struct rdmach_conn *conn, size_t len, int two)
{
	struct iovec iov[2] = { { f_buf, len }, { f_buf + len, 0 } };
	size_t total = len;
	ssize_t n;

	if (two) {
		iov[0].iov_len = len / 3;
		iov[1].iov_base = f_buf + len / 3;
		iov[1].iov_len = len - len / 3;
	}
	n = shm_get(conn, iov, two ? 2 : 1, total);
	if (n > (ssize_t)total)
		abort();
	return n < 0;
}

/* peek, then consume some of what it showed (or too much) */
static int f_peek(struct rdmach_conn *conn, unsigned sel)
{
	const void *buf = NULL;
	ssize_t n = shm_peek(conn, &buf);
	volatile const uint8_t *b = buf;
	size_t k;

	if (n < 0)
		return n != -ENOMSG;
	if (n == 0)
		return 0;
	(void)b[0];		/* ASan: both ends lie in a ring */
	(void)b[n - 1];
	k = sel % 4 == 0 ? (size_t)n + 1 : (size_t)n * (sel % 4) / 3;
	if ((shm_consume(conn, k) == 0) != (k <= (size_t)n))
		abort();	/* too much must be refused, the rest taken */
	return 0;
}

int shm_fuzz_run(const uint8_t *data, size_t size, enum shm_fuzz_bias bias)
{
	struct f_conn f;
	int op;

	f_in = data;
	f_left = size;
	f_bias = bias;
	f_nseen = 0;
	if (f_open(&f))
		abort();
	f_sc = f.sc;
	for (op = 0; op < F_OPS && f_left && !f.conn.err; op++) {
		unsigned sel = (unsigned)f_bytes(1);
		size_t len = (size_t)f_bytes(2) % sizeof(f_buf);

		if (sel < 160 ? f_get(&f.conn, len, sel & 1) :
		    sel < 220 ? f_peek(&f.conn, sel) :
		    f_get(&f.conn, 1 + sel % 8, 0))
			break;
	}
	f_close(&f);
	return 0;
}
