/*
 * fuzz_ib_spipe - the superpipeline's receiver (proto/spipe.c) over a
 * landing area the peer writes: a control packet (built by the real
 * sender, then with input-chosen fields rewritten), chunks the real
 * sender builds and "lands", and words of the landing area the peer
 * overwrites at input-chosen offsets, also between two parts of one
 * block's read; the receiver takes into destinations of input-chosen
 * sizes, each a heap block of its exact size (ASan: a copy past a block or
 * past the destination is caught).  What it delivers must stay within the
 * message the packet announced.  Loads of the landing area are counted
 * per take and chunk (peer_count.h): loading a word twice there fails.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test/fuzz/fuzz_in.h"
#include "test/fuzz/peer_count.h"
#include "proto/spipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t fuzz_word(struct fuzz_in *in)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | fuzz_byte(in);
	return v;
}

/* The control packet: the sender's, with fields the input rewrites. */
static void fuzz_hdr(struct fuzz_in *in, struct rdmach_spipe_hdr *h)
{
	unsigned int mask = fuzz_byte(in);

	if (mask & 1)
		h->total = fuzz_word(in);
	if (mask & 2)
		h->block = (uint32_t)fuzz_word(in);
	if (mask & 4)
		h->buf_size = fuzz_word(in);
	if (mask & 8)
		h->nbufs = fuzz_byte(in);
	if (mask & 16)
		h->first_chunk = fuzz_byte(in);
	if (mask & 32)
		h->id = fuzz_byte(in);
}

static void fuzz_poke(struct fuzz_in *in, uint8_t *land, uint64_t len)
{
	uint64_t off = ((uint64_t)fuzz_byte(in) << 8 | fuzz_byte(in)) * 8 %
		       len;
	uint64_t v = fuzz_byte(in) & 1 ? fuzz_byte(in) : fuzz_word(in);

	memcpy(land + off, &v, 8);
}

static void fuzz_chunk(struct fuzz_in *in, struct spipe_tx *tx, uint8_t *stage,
		       uint8_t *land, const uint8_t *src, uint64_t *sent)
{
	struct spipe_chunk ch;
	struct rdmach_iovc c;
	struct iovec v;
	uint64_t len = 1 + fuzz_byte(in) * 16;

	if (!spipe_tx_writable(tx) || !tx->left)
		return;
	if (len > tx->left)
		len = tx->left;
	v.iov_base = (void *)(uintptr_t)(src + *sent % 4096);
	v.iov_len = len;
	rdmach_iovc_init(&c, &v, 1);
	spipe_tx_build(tx, stage, &c, len, &ch);
	spipe_tx_posted(tx, ch.g);
	spipe_tx_completed(tx, ch.g);
	memcpy(land + ch.off, stage + ch.off, ch.bytes);
	*sent += ch.len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct spipe_params p = { 256, 3, 2048, 480, 384 };
	struct fuzz_in in = { data, size };
	uint64_t area = spipe_area_bytes(&p), sent = 0, got = 0, total;
	uint8_t *stage = calloc(1, area), *land = calloc(1, area);
	uint8_t *src = calloc(1, 4096 + 4096);
	struct rdmach_spipe_hdr h;
	struct spipe_tx tx;
	struct spipe_rx rx;
	int steps, fresh;

	if (!stage || !land || !src)
		abort();
	spipe_tx_init(&tx, &p);
	spipe_rx_init(&rx);
	total = 1 + ((uint64_t)fuzz_byte(&in) << 8 | fuzz_byte(&in)) * 4;
	if (spipe_tx_open(&tx, total, &h))
		goto out;
	fuzz_hdr(&in, &h);
	/* a geometry other than the buffers we have is refused here: ours
	 * is the one the landing area would be allocated with */
	if (spipe_rx_begin(&rx, &h, sizeof(h), &fresh) ||
	    rx.p.block != p.block || rx.p.nbufs != p.nbufs ||
	    rx.p.buf_size != p.buf_size)
		goto out;
	for (steps = 0; steps < 256 && in.left; steps++) {
		unsigned int op = fuzz_byte(&in) % 3;
		uint64_t room, ack;
		struct rdmach_iovc c;
		struct iovec v;
		uint8_t *dst;
		int64_t n;

		if (op == 0) {
			fuzz_chunk(&in, &tx, stage, land, src, &sent);
			continue;
		}
		if (op == 1) {
			fuzz_poke(&in, land, area);
			continue;
		}
		room = 1 + fuzz_byte(&in) * 8;
		dst = malloc(room);
		if (!dst)
			abort();
		v.iov_base = dst;
		v.iov_len = room;
		rdmach_iovc_init(&c, &v, 1);
		peer_count_begin();
		n = spipe_rx_take(&rx, land, &c, room, &ack);
		free(dst);
		if (n < 0)
			break;
		got += (uint64_t)n;
		if ((uint64_t)n > room || got > rx.total)
			abort();
		if (ack && spipe_tx_ack(&tx, ack))
			break;
	}
out:
	free(stage);
	free(land);
	free(src);
	return 0;
}
