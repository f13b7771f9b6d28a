/* spipe.c - superpipeline schedule, block format and folding: see spipe.h. */
#include <string.h>

#include "peer.h"
#include "spipe.h"

static inline void spipe_store(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

int spipe_params_check(const struct spipe_params *p)
{
	if (p->block < SPIPE_BLOCK_MIN || p->block > SPIPE_BLOCK_MAX ||
	    p->block % 64 || p->nbufs < SPIPE_BUFS_MIN ||
	    p->nbufs > SPIPE_BUFS_MAX || p->buf_size < p->block ||
	    p->buf_size > SPIPE_BUF_MAX || p->buf_size % p->block ||
	    !p->c0 || p->q256 < SPIPE_Q_ONE || p->q256 > SPIPE_Q_MAX)
		return -EINVAL;
	return 0;
}

/* The schedule's target rounded up to whole blocks, at most a buffer. */
static uint64_t spipe_sched_len(const struct spipe_params *p, uint64_t target)
{
	uint64_t pay = spipe_block_payload(p);
	uint64_t len = (target + pay - 1) / pay * pay;

	return len < spipe_buf_payload(p) ? len : spipe_buf_payload(p);
}

/* The schedule's next target after a chunk of target bytes. */
static uint64_t spipe_sched_grow(const struct spipe_params *p, uint64_t target)
{
	uint64_t cap = spipe_buf_payload(p);

	if (target >= cap)
		return cap;
	target = target * p->q256 / SPIPE_Q_ONE;
	return target < cap ? target : cap;
}

uint64_t spipe_chunks_for(const struct spipe_params *p, uint64_t len)
{
	uint64_t n = 0, target = p->c0, cap = spipe_buf_payload(p), c;

	while (len) {
		c = spipe_sched_len(p, target);
		if (c >= cap) {		/* full buffers from here on */
			n += (len + cap - 1) / cap;
			break;
		}
		len -= c < len ? c : len;
		target = spipe_sched_grow(p, target);
		n++;
	}
	return n;
}

/* ---- sender ------------------------------------------------------------ */

void spipe_tx_init(struct spipe_tx *tx, const struct spipe_params *p)
{
	memset(tx, 0, sizeof(*tx));
	tx->p = *p;
	tx->g = 1;
	tx->next_id = 1;
}

int spipe_tx_open(struct spipe_tx *tx, uint64_t total,
		  struct rdmach_spipe_hdr *hdr)
{
	if (tx->left)
		return -EBUSY;
	if (!total)
		return -EINVAL;
	tx->id = tx->next_id++;
	tx->total = tx->left = total;
	tx->next_len = tx->p.c0;
	memset(hdr, 0, sizeof(*hdr));
	hdr->id = tx->id;
	hdr->total = total;
	hdr->first_chunk = tx->g;
	hdr->buf_size = tx->p.buf_size;
	hdr->c0 = tx->p.c0;
	hdr->block = tx->p.block;
	hdr->nbufs = tx->p.nbufs;
	hdr->q256 = tx->p.q256;
	return 0;
}

uint64_t spipe_tx_next_len(const struct spipe_tx *tx, uint64_t avail)
{
	uint64_t len = spipe_sched_len(&tx->p, tx->next_len);

	if (len > tx->left)
		len = tx->left;
	return len < avail ? len : avail;
}

void spipe_tx_build(struct spipe_tx *tx, uint8_t *area,
		    struct rdmach_iovc *src, uint64_t avail,
		    struct spipe_chunk *out)
{
	const struct spipe_params *p = &tx->p;
	uint64_t len = spipe_tx_next_len(tx, avail), pay = spipe_block_payload(p);
	uint8_t *blk = area + spipe_buf_off(p, tx->g);
	uint64_t left = len;

	out->g = tx->g;
	out->off = spipe_buf_off(p, tx->g);
	out->len = len;
	out->bytes = 0;
	while (left) {
		uint64_t n = left < pay ? left : pay;

		rdmach_iovc_gather(src, blk, n);
		left -= n;
		spipe_store(blk + p->block - SPIPE_WORDS,
			    n | (left ? 0 : SPIPE_LAST));
		spipe_store(blk + p->block - 8, tx->g);
		blk += p->block;
		out->bytes += p->block;
	}
	tx->g++;
	tx->left -= len;
	tx->next_len = spipe_sched_grow(p, tx->next_len);
}

int spipe_tx_ack(struct spipe_tx *tx, uint64_t acked)
{
	if (acked > tx->posted)
		return -EPROTO;
	if (acked > tx->acked)
		tx->acked = acked;
	return 0;
}

/* ---- receiver ---------------------------------------------------------- */

void spipe_rx_init(struct spipe_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
	rx->g = 1;
}

int spipe_rx_begin(struct spipe_rx *rx, const void *pkt, uint32_t len,
		   int *fresh)
{
	struct rdmach_spipe_hdr h;
	struct spipe_params p;

	*fresh = 0;
	if (len != sizeof(h))
		return -EPROTO;
	memcpy(&h, pkt, sizeof(h));
	if (h.id == rx->id && rx->id)
		return 0;		/* the same message, a later get */
	p.block = h.block;
	p.nbufs = h.nbufs;
	p.buf_size = h.buf_size;
	p.c0 = h.c0;
	p.q256 = h.q256;
	if (spipe_params_check(&p) || !h.total || h.id <= rx->id ||
	    h.first_chunk != rx->g || rx->off || rx->blk || h.flags)
		return -EPROTO;
	if (!rx->have_params) {
		rx->p = p;
		rx->have_params = 1;
		*fresh = 1;
	} else if (p.block != rx->p.block || p.nbufs != rx->p.nbufs ||
		   p.buf_size != rx->p.buf_size) {
		return -EPROTO;
	}
	rx->p.c0 = p.c0;
	rx->p.q256 = p.q256;
	rx->id = h.id;
	rx->total = h.total;
	rx->delivered = 0;
	return 0;
}

int spipe_rx_peek(const struct spipe_rx *rx, const uint8_t *area,
		  struct spipe_block *b)
{
	const struct spipe_params *p = &rx->p;
	const uint8_t *blk;
	uint64_t info, len;

	if ((uint64_t)(rx->blk + 1) * p->block > p->buf_size)
		return -EPROTO;		/* a chunk without its last block */
	blk = area + spipe_buf_off(p, rx->g) + (uint64_t)rx->blk * p->block;
	if (proto_peer_load64_acq(blk + p->block - 8) != rx->g)
		return 0;
	info = proto_peer_load64(blk + p->block - SPIPE_WORDS);
	len = info & SPIPE_LEN_MASK;
	if (!len || len > spipe_block_payload(p) ||
	    (info & ~(SPIPE_LEN_MASK | SPIPE_LAST)))
		return -EPROTO;
	b->payload = blk;
	b->len = (uint32_t)len;
	b->last = !!(info & SPIPE_LAST);
	return 1;
}

int64_t spipe_rx_take(struct spipe_rx *rx, const uint8_t *area,
		      struct rdmach_iovc *dst, uint64_t room, uint64_t *ack)
{
	struct spipe_block b;
	uint64_t done = 0;
	int r;

	*ack = 0;
	while (done < room && rx->delivered < rx->total) {
		uint64_t want, n;

		r = spipe_rx_peek(rx, area, &b);
		if (!r)
			break;
		/* deliver what came before the error; the next call fails */
		if (r < 0)
			return done ? (int64_t)done : r;
		/* a block read in parts is loaded again: its length must
		 * still cover what was read of it (else the difference wraps,
		 * and a message over 4 GiB let it pass) */
		if (b.len <= rx->off ||
		    b.len - rx->off > rx->total - rx->delivered)
			return done ? (int64_t)done : -EPROTO;	/* beyond */
		want = b.len - rx->off;
		if (want > room - done)
			want = room - done;
		n = rdmach_iovc_scatter(dst, b.payload + rx->off, want);
		done += n;
		rx->delivered += n;
		rx->off += (uint32_t)n;
		if (n < want)
			break;		/* the iovec is full */
		if (rx->off < b.len)
			break;		/* room ends inside the block */
		rx->off = 0;
		if (!b.last) {
			rx->blk++;
			continue;
		}
		*ack = rx->acked = rx->g;
		rx->g++;
		rx->blk = 0;
		proto_peer_epoch();	/* the next chunk may fold onto it */
	}
	/* a message ends with a chunk's last block */
	if (rx->delivered == rx->total && (rx->blk || rx->off))
		return -EPROTO;
	return (int64_t)done;
}
