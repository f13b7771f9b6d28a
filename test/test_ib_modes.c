/*
 * test_ib_modes.c - rdma_ib specifics over a real device (Soft-RoCE VM or
 * native): every RDMACH_IB_MODE moves data byte-exact, the chunk schedule
 * and ring-end cuts at awkward sizes, delayed versus eager tail updates
 * (counted), the pipelined path being taken, and reading in place in
 * each mode.  Skips without a device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tst.h"
#ifdef RDMACH_HAVE_IB
#include "core/log.h"
#include "rdma_ib/ib_ep.h"
#endif

struct ib_case {
	const char *mode;
	const char *ring;
	const char *chunk;
	int one_way;		/* 0 -> 1 only, for counting credits */
	size_t min_call, max_call;
};

static int ibt_connect(struct tst *t, const struct ib_case *ic)
{
	if (!tst_have_ib_device())
		return tst_skip(t, "no RDMA device");
	setenv("RDMACH_TRANSPORT", "ib", 1);
	setenv("RDMACH_IB_MODE", ic->mode, 1);
	setenv("RDMACH_IB_RING_SIZE", ic->ring, 1);
	setenv("RDMACH_IB_CHUNK_SIZE", ic->chunk, 1);
	if (tst_connect(t, &t->ctx))
		return tst_fail(t, "init/connect over ib failed");
	return 0;
}

/* Streams both ways (or 0 -> 1), then the receiver's counters. */
static int ibt_stream(struct tst *t, const struct ib_case *ic, uint64_t bytes,
		      const size_t *sizes, int nsizes, rdmach_stats_t *st)
{
	struct tst_shape sh = { .min_call = ic->min_call,
				.max_call = ic->max_call, .min_pieces = 1,
				.max_pieces = 4, .gaps = 1, .sizes = sizes,
				.nsizes = nsizes };
	struct tst_stream s[2];
	int peer = 1 - t->rank, n = 0, ret;
	rdmach_conn_t *c = tst_conn(t, peer);

	if (!c)
		return -1;
	if (!ic->one_way || t->rank == 0)
		tst_stream_init(&s[n++], c, peer, 1,
				tst_seed(7, t->rank, peer), bytes, &sh);
	if (!ic->one_way || t->rank == 1)
		tst_stream_init(&s[n++], c, peer, 0,
				tst_seed(7, peer, t->rank), bytes, &sh);
	ret = tst_run(t, s, n);
	while (n--)
		tst_stream_free(&s[n]);
	if (!ret && rdmach_conn_stats(c, st))
		ret = tst_fail(t, "rdmach_conn_stats failed");
	if (!ret && strcmp(rdmach_conn_transport(c), "ib"))
		ret = tst_fail(t, "connection runs over %s, not ib",
			       rdmach_conn_transport(c));
	return ret;
}

static int ibt_mode(struct tst *t)
{
	const struct ib_case *ic = t->c->arg;
	rdmach_stats_t st;
	int ret = ibt_connect(t, ic);

	if (ret)
		return ret;
	ret = ibt_stream(t, ic, tst_scaled(8u << 20, 1u << 20), NULL, 0, &st);
	if (ret)
		return ret;
	if (!strcmp(ic->mode, "pipeline"))
		TST_CHECK(t, st.pipelined_msgs > 0, "pipeline mode: no put "
			  "went through the pipeline");
	else
		TST_CHECK(t, st.pipelined_msgs == 0, "%s mode: %llu pipelined "
			  "puts", ic->mode,
			  (unsigned long long)st.pipelined_msgs);
	TST_CHECK(t, st.packets_received > 0 && st.packets_sent > 0,
		  "no packets counted");
	return 0;
}

/* Sizes around the chunk (4K), the alignment (64) and the ring (16K). */
static int ibt_chunks(struct tst *t)
{
	static const size_t sizes[] = { 4095, 4096, 4097, 1, 8191, 8192, 8193,
					40, 41, 16360, 16384, 16385, 12289,
					65537, 104, 105, 3 };
	const struct ib_case *ic = t->c->arg;
	rdmach_stats_t st;
	int ret = ibt_connect(t, ic);

	if (ret)
		return ret;
	return ibt_stream(t, ic, tst_scaled(4u << 20, 512u << 10), sizes,
			  (int)(sizeof(sizes) / sizeof(sizes[0])), &st);
}

/* One way, small puts: delayed mode sends an explicit tail update about
 * once per half ring, eager (basic) mode after every get that consumed. */
static int ibt_credits(struct tst *t)
{
	const struct ib_case *ic = t->c->arg;
	int eager = !strcmp(ic->mode, "basic");
	rdmach_stats_t st;
	int ret = ibt_connect(t, ic);

	if (ret)
		return ret;
	ret = ibt_stream(t, ic, tst_scaled(4u << 20, 1u << 20), NULL, 0, &st);
	if (ret || t->rank != 1)
		return ret;
	tst_log(t, "%s: %llu packets, %llu gets, %llu tail updates", ic->mode,
		(unsigned long long)st.packets_received,
		(unsigned long long)st.msgs_got,
		(unsigned long long)st.credit_updates_sent);
	TST_CHECK(t, st.credit_updates_sent > 0, "no tail update was sent");
	if (eager)
		TST_CHECK(t, st.credit_updates_sent * 2 >= st.msgs_got,
			  "eager: %llu updates for %llu gets",
			  (unsigned long long)st.credit_updates_sent,
			  (unsigned long long)st.msgs_got);
	else
		TST_CHECK(t, st.credit_updates_sent * 8 <= st.packets_received,
			  "delayed: %llu updates for %llu packets",
			  (unsigned long long)st.credit_updates_sent,
			  (unsigned long long)st.packets_received);
	return 0;
}

/* Reading in place (rdmach_peek / rdmach_consume, tst_peek_pair) of
 * small messages, wrapping the ring every few of them, with replies put
 * between peeks and consumes; basic mode has no peek (-EOPNOTSUPP, read
 * by gets). */
static int ibt_peek(struct tst *t)
{
	static const size_t sizes[] = { 1, 24, 57, 1000, 3000, 513, 2000, 7,
					100, 1500, 64, 4000 };
	const struct ib_case *ic = t->c->arg;
	uint64_t total = tst_scaled(2u << 20, 512u << 10);
	long in_place;
	int ret = ibt_connect(t, ic);

	if (ret)
		return ret;
	ret = tst_peek_pair(t, sizes, (int)(sizeof(sizes) / sizeof(sizes[0])),
			    total, total / 8, &in_place);
	if (ret || t->rank == 0)
		return ret;
	if (!strcmp(ic->mode, "basic"))
		TST_CHECK(t, in_place == -1, "basic mode: %ld reads in place",
			  in_place);
	else	/* some 600 messages at the least volume */
		TST_CHECK(t, in_place >= 100, "%s mode: only %ld reads in "
			  "place", ic->mode, in_place);
	return 0;
}

/* Only the ring and the ctrl words are the peer's to write: rank 1 writes
 * 8 bytes into rank 0's staging mirror with the key of rank 0's ring (the
 * same buffer), and the adapter must refuse it (a remote access error:
 * rank 1's connection fails).  While one registration covered ring,
 * staging and ctrl, the write landed. */
static int ibt_staging_closed(struct tst *t)
{
#ifdef RDMACH_HAVE_IB
	const struct ib_case *ic = t->c->arg;
	struct rdmach_conn *c;
	struct ib_conn *ib;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	uint64_t until;
	char b[64];
	struct iovec v = { b, sizeof(b) };
	int ret = ibt_connect(t, ic);

	if (ret)
		return ret;
	if (t->rank == 1) {
		c = tst_conn(t, 0);
		ib = c->priv;
		ib->ctrl->out[0] = 0x5a5a5a5a5a5a5a5aull;
		sge.addr = (uintptr_t)ib->ctrl->out;
		sge.length = 8;
		sge.lkey = ib->mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)c->peer;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		/* staging: from ring size + a page on, and [ring size,
		 * 2 x ring size) before; 64 bytes in is staging in both */
		wr.wr.rdma.remote_addr = ib->r_ring + ib->tx.size + 4096 + 64;
		wr.wr.rdma.rkey = ib->rkey;
		TST_CHECK(t, !ibv_post_send(ib->qp, &wr, &bad),
			  "ibv_post_send failed");
		until = rdmach_now_ns() + 5000000000ull;
		while (!c->err && rdmach_now_ns() < until)
			(void)rdmach_get(c, &v, 1);
		TST_CHECK(t, c->err, "rank 0's staging took a write with "
			  "its ring's key");
		tst_log(t, "%s", rdmach_conn_error(c));
	}
	tst_barrier(t);
	return 0;
#else
	return tst_skip(t, "built without verbs");
#endif
}

static const struct ib_case c_basic = { "basic", "64K", "16K", 0, 1, 200000 };
static const struct ib_case c_piggy = { "piggyback", "64K", "16K", 0, 1,
					200000 };
static const struct ib_case c_pipe = { "pipeline", "64K", "8K", 0, 1, 200000 };
static const struct ib_case c_chunks = { "pipeline", "16K", "4K", 0, 0, 0 };
static const struct ib_case c_chunks_p = { "piggyback", "16K", "4K", 0, 0, 0 };
static const struct ib_case c_cred_d = { "pipeline", "64K", "16K", 1, 64,
					 1024 };
static const struct ib_case c_cred_e = { "basic", "64K", "16K", 1, 64, 1024 };
static const struct ib_case c_tiny = { "pipeline", "4K", "1K", 0, 1, 10000 };

static const struct tst_case cases[] = {
	{ "ib_mode_basic", 2, ibt_mode, TST_NO_CTX, &c_basic, { 0 } },
	{ "ib_mode_piggyback", 2, ibt_mode, TST_NO_CTX, &c_piggy, { 0 } },
	{ "ib_mode_pipeline", 2, ibt_mode, TST_NO_CTX, &c_pipe, { 0 } },
	{ "ib_tiny_ring", 2, ibt_mode, TST_NO_CTX, &c_tiny, { 0 } },
	{ "ib_chunk_boundaries", 2, ibt_chunks, TST_NO_CTX, &c_chunks, { 0 } },
	{ "ib_chunk_boundaries_piggyback", 2, ibt_chunks, TST_NO_CTX,
	  &c_chunks_p, { 0 } },
	{ "ib_peek_basic", 2, ibt_peek, TST_NO_CTX, &c_basic, { 0 } },
	{ "ib_peek_piggyback", 2, ibt_peek, TST_NO_CTX, &c_chunks_p, { 0 } },
	{ "ib_peek_tiny_ring", 2, ibt_peek, TST_NO_CTX, &c_tiny, { 0 } },
	{ "ib_credits_delayed", 2, ibt_credits, TST_NO_CTX, &c_cred_d, { 0 } },
	{ "ib_credits_eager", 2, ibt_credits, TST_NO_CTX, &c_cred_e, { 0 } },
	{ "ib_staging_closed", 2, ibt_staging_closed, TST_NO_CTX, &c_pipe,
	  { 0 } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, cases, (int)(sizeof(cases) / sizeof(cases[0])));
}
