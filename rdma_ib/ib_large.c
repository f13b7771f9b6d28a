/* ib_large.c - the protocol of each large put, its knobs, tuning and
 * counters: see ib_large.h. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/knob.h"
#include "core/log.h"
#include "ib_dev.h"
#include "ib_large.h"
#include "mem/rcache.h"

enum { LG_K_LARGE, LG_K_SP_THRESHOLD, LG_K_SP_C0, LG_K_SP_Q, LG_K_SP_BLOCK,
       LG_K_SP_BUFS, LG_K_SP_BUF_SIZE, LG_K_SP_MEM_MAX, LG_K_SP_PEERS,
       LG_K_TUNE, LG_K_NUM };

static const struct rdmach_knob lg_knobs[LG_K_NUM] = {
	[LG_K_LARGE] = { "RDMACH_LARGE", RDMACH_KNOB_STRING, "auto", 0, 0,
		"protocol of large ib puts: auto (per message: zero-copy when "
		"the buffer is registered or reused, else the superpipeline) | "
		"zcopy | superpipeline | pipeline (the ring's copy)" },
	[LG_K_SP_THRESHOLD] = { "RDMACH_SPIPE_THRESHOLD", RDMACH_KNOB_SIZE,
		RDMACH_KNOB_AUTO, 1, 1ull << 40, "puts of at least this may go "
		"through the superpipeline (auto: where the model says it "
		"beats the ring's pipelined copy)" },
	[LG_K_SP_C0] = { "RDMACH_SPIPE_C0", RDMACH_KNOB_SIZE, RDMACH_KNOB_AUTO,
		1, 1ull << 30, "superpipeline: payload bytes of a message's "
		"first chunk (auto: B_copy x 2 lambda_net, whole blocks)" },
	[LG_K_SP_Q] = { "RDMACH_SPIPE_Q", RDMACH_KNOB_STRING, RDMACH_KNOB_AUTO,
		0, 0, "superpipeline: chunk growth factor, 1.0-16 (auto: "
		"B_copy / B_net clamped to 1.2-4)" },
	[LG_K_SP_BLOCK] = { "RDMACH_SPIPE_BLOCK", RDMACH_KNOB_SIZE,
		RDMACH_KNOB_AUTO, 64, 1u << 20, "superpipeline: bytes per "
		"block (one flag each; multiple of 64; auto: 4K or the MTU)" },
	[LG_K_SP_BUFS] = { "RDMACH_SPIPE_BUFS", RDMACH_KNOB_UINT, "3", 2, 4,
		"superpipeline: buffers the chunks fold over (3: triple "
		"buffering)" },
	[LG_K_SP_BUF_SIZE] = { "RDMACH_SPIPE_BUF_SIZE", RDMACH_KNOB_SIZE,
		RDMACH_KNOB_AUTO, 4096, 1u << 30, "superpipeline: bytes per "
		"buffer (auto: 64K-1M from the model); registered per "
		"connection: 2 x BUFS x this (staging + landing)" },
	[LG_K_SP_MEM_MAX] = { "RDMACH_SPIPE_MEM_MAX", RDMACH_KNOB_SIZE,
		RDMACH_KNOB_AUTO, 0, 1ull << 40, "superpipeline staging this "
		"process registers at most (connections beyond it use the "
		"other protocols; auto: 2G shared by the job's processes on "
		"this host, 256M at most: 16M each at 128 a host)" },
	[LG_K_SP_PEERS] = { "RDMACH_SPIPE_PEERS", RDMACH_KNOB_UINT,
		RDMACH_KNOB_AUTO, 0, 1u << 24, "peers that may send this "
		"process superpipeline messages, at most: the first connected "
		"(each gets a landing area, the sender's BUFS x BUF_SIZE, at "
		"its first); later ones send large messages zero-copy or "
		"through the ring (auto: 1024 shared by the job's processes on "
		"this host, 4 to 64 each: 8 at 128 a host)" },
	[LG_K_TUNE] = { "RDMACH_TUNE", RDMACH_KNOB_STRING, "auto", 0, 0,
		"machine figures for the model: auto (cache file, else measure "
		"at start-up and cache) | measure | off (built-in) | <file>" },
};
RDMACH_KNOB_TABLE(ib_large, lg_knobs);

const char *const ib_large_mode_names[IB_LARGE_MODES] = {
	[IB_LARGE_AUTO] = "auto",
	[IB_LARGE_ZCOPY] = "zcopy",
	[IB_LARGE_SPIPE] = "superpipeline",
	[IB_LARGE_PIPELINE] = "pipeline",
};

/* Learning (see ib_large.h). */
#define LG_MIN_SAMPLES 8	/* a class's figures mean something */
#define LG_DECAY_AT 256		/* halve a class's counts beyond this */

/* ---- knobs -------------------------------------------------------------- */

/* The superpipeline's memory at RDMACH_SPIPE_MEM_MAX and _PEERS=auto:
 * budgets of a host, which its processes share (pinned memory is the
 * node's), within bounds per process. */
#define LG_STAGE_HOST (2ull << 30)
#define LG_STAGE_MAX (256ull << 20)
#define LG_LAND_HOST 1024u
#define LG_LAND_MIN 4u
#define LG_LAND_MAX 64u

static uint64_t lg_auto_stage(unsigned int host_procs)
{
	uint64_t v = LG_STAGE_HOST / (host_procs ? host_procs : 1);

	return v < LG_STAGE_MAX ? v : LG_STAGE_MAX;
}

static unsigned int lg_auto_land(unsigned int host_procs)
{
	unsigned int v = LG_LAND_HOST / (host_procs ? host_procs : 1);

	return v < LG_LAND_MIN ? LG_LAND_MIN : v > LG_LAND_MAX ? LG_LAND_MAX : v;
}

/* A numeric knob; -ENODATA when unset or "auto" (core/knob.h). */
static int lg_knob(int i, uint64_t *v)
{
	return rdmach_knob_u64(&lg_knobs[i], v);
}

/* A knob's value, or at auto auto_v (*is_auto, if asked, says which). */
static int lg_knob_or(int i, uint64_t auto_v, uint64_t *v, int *is_auto)
{
	int r = lg_knob(i, v);

	if (is_auto)
		*is_auto = r == -ENODATA;
	if (r == -ENODATA)
		*v = auto_v;
	return r == -ENODATA ? 0 : r;
}

void ib_large_mem_report(FILE *out, unsigned int host_procs)
{
	uint64_t peers = 0, bufs = 0, size = 0, mem_max = 0;
	/* auto: the derivation's sizes, 64 KiB (rxe) to 1 MiB */
	int auto_size = lg_knob(LG_K_SP_BUF_SIZE, &size) == -ENODATA;
	uint64_t lo = auto_size ? 64 << 10 : size;

	if (lg_knob_or(LG_K_SP_PEERS, lg_auto_land(host_procs), &peers,
		       NULL) ||
	    lg_knob(LG_K_SP_BUFS, &bufs) ||
	    lg_knob_or(LG_K_SP_MEM_MAX, lg_auto_stage(host_procs), &mem_max,
		       NULL))
		return;
	fprintf(out, "# besides, with large messages (%u processes a host): "
		"superpipeline landing areas for %" PRIu64 " senders at most "
		"(RDMACH_SPIPE_PEERS), %" PRIu64 " buffers of %" PRIu64 " KiB "
		"each: %.1f MiB", host_procs, peers, bufs, lo >> 10,
		(double)(peers * bufs * lo) / (1 << 20));
	if (auto_size)	/* MiB: a buffer each */
		fprintf(out, " (%.1f with 1 MiB buffers)",
			(double)(peers * bufs));
	fprintf(out, "; its staging %.0f MiB at most (RDMACH_SPIPE_MEM_MAX); "
		"zero-copy: the user's buffers (registration cache)\n",
		(double)mem_max / (1 << 20));
}

static int lg_read_mode(struct ib_large *lg)
{
	const char *m = rdmach_knob_str(&lg_knobs[LG_K_LARGE]);
	int i;

	for (i = 0; i < IB_LARGE_MODES; i++) {
		if (!strcmp(m, ib_large_mode_names[i])) {
			lg->mode = (enum ib_large_mode)i;
			return 0;
		}
	}
	rdmach_err("RDMACH_LARGE=%s: use auto, zcopy, superpipeline or "
		   "pipeline", m);
	return -EINVAL;
}

/* The derived settings, then every knob that is set. */
static int lg_settings(struct ib_large *lg)
{
	struct spipe_params *p = &lg->sp;
	const char *qs = rdmach_knob_str(&lg_knobs[LG_K_SP_Q]);
	uint64_t v;
	int r;

	*p = lg->derived.sp;
	lg->sp_threshold = lg->derived.sp_threshold;
	if (!(r = lg_knob(LG_K_SP_BLOCK, &v)))
		p->block = (uint32_t)v;
	else if (r != -ENODATA)
		return r;
	if (!(r = lg_knob(LG_K_SP_BUF_SIZE, &v)))
		p->buf_size = v;
	else if (r != -ENODATA)
		return r;
	else	/* the derived size in whole blocks of a block knob */
		p->buf_size = (p->buf_size + p->block - 1) / p->block * p->block;
	if ((r = lg_knob(LG_K_SP_BUFS, &v)))
		return r;
	p->nbufs = (uint32_t)v;
	if (!(r = lg_knob(LG_K_SP_C0, &v)))
		p->c0 = v;
	else if (r != -ENODATA)
		return r;
	if (strcmp(qs, RDMACH_KNOB_AUTO)) {
		char *end;
		double q = strtod(qs, &end);

		if (end == qs || *end || !(q >= 1.0 && q <= 16.0)) {
			rdmach_err("RDMACH_SPIPE_Q=%s: a number from 1.0 to 16",
				   qs);
			return -EINVAL;
		}
		p->q256 = (uint32_t)(q * SPIPE_Q_ONE + 0.5);
	}
	if (!(r = lg_knob(LG_K_SP_THRESHOLD, &v)))
		lg->sp_threshold = v;
	else if (r != -ENODATA)
		return r;
	if (spipe_params_check(p)) {
		rdmach_err("superpipeline: block %u (RDMACH_SPIPE_BLOCK: a "
			   "multiple of 64), buffer %" PRIu64 " (RDMACH_SPIPE_"
			   "BUF_SIZE: whole blocks), %u buffers: not a valid "
			   "geometry", p->block, p->buf_size, p->nbufs);
		return -EINVAL;
	}
	if (p->c0 > spipe_buf_payload(p))
		p->c0 = spipe_buf_payload(p);
	/* until ib_large_host_procs: as if alone on the host */
	if ((r = lg_knob_or(LG_K_SP_MEM_MAX, lg_auto_stage(1), &lg->mem_max,
			    &lg->mem_auto)) ||
	    (r = lg_knob_or(LG_K_SP_PEERS, lg_auto_land(1), &v,
			    &lg->land_auto)))
		return r;
	lg->land_max = (unsigned int)v;
	return 0;
}

void ib_large_host_procs(struct ib_large *lg, unsigned int host_procs)
{
	if (lg->mem_auto)
		lg->mem_max = lg_auto_stage(host_procs);
	if (lg->land_auto)
		lg->land_max = lg_auto_land(host_procs);
	rdmach_info("ib: superpipeline staging %" PRIu64 " MiB at most "
		    "(RDMACH_SPIPE_MEM_MAX%s), landing areas for %u senders "
		    "(RDMACH_SPIPE_PEERS%s): %u processes on this host",
		    lg->mem_max >> 20, lg->mem_auto ? "=auto" : "",
		    lg->land_max, lg->land_auto ? "=auto" : "", host_procs);
}

static uint64_t lg_min(const struct ib_large *lg)
{
	uint64_t zc = lg->zc_enabled ? lg->zc_threshold : UINT64_MAX;

	switch (lg->mode) {
	case IB_LARGE_ZCOPY:
		return zc;
	case IB_LARGE_SPIPE:
		return lg->sp_threshold;
	default:	/* auto; pipeline: the same puts, counted as forced */
		return zc < lg->sp_threshold ? zc : lg->sp_threshold;
	}
}

int ib_large_open(struct ib_large *lg, struct ib_dev *dev,
		  uint64_t ring_chunk, int zc_enabled, uint64_t zc_threshold)
{
	int ret;

	memset(lg, 0, sizeof(*lg));
	lg->ring_chunk = ring_chunk;
	lg->zc_enabled = zc_enabled;
	lg->zc_threshold = zc_threshold;
	ret = lg_read_mode(lg);
	if (ret)
		return ret;
	/* only what the mode can use is worth start-up time */
	if (lg->mode == IB_LARGE_ZCOPY || lg->mode == IB_LARGE_PIPELINE)
		ib_tune_run(dev, "off", &lg->tune);
	else
		ib_tune_run(dev, rdmach_knob_str(&lg_knobs[LG_K_TUNE]),
			    &lg->tune);
	tune_derive(&lg->tune.m, 128u << ((unsigned)dev->active_mtu & 7),
		    ring_chunk, &lg->derived);
	ret = lg_settings(lg);
	if (ret)
		return ret;
	lg->min = lg_min(lg);
	ret = rdmach_rcache_ghosts_create(0, &lg->ghosts);
	if (ret)
		return ret;
	rdmach_debug("ib: large puts %s from %" PRIu64 " bytes; tuning %s "
		     "(%.1f ms); superpipeline from %" PRIu64 ": C0 %" PRIu64
		     ", q %.2f, block %u, %u x %" PRIu64 " bytes",
		     ib_large_mode_names[lg->mode], lg->min, lg->tune.source,
		     lg->tune.elapsed_s * 1e3, lg->sp_threshold, lg->sp.c0,
		     lg->sp.q256 / (double)SPIPE_Q_ONE, lg->sp.block,
		     lg->sp.nbufs, lg->sp.buf_size);
	return 0;
}

void ib_large_close(struct ib_large *lg)
{
	rdmach_rcache_ghosts_destroy(lg->ghosts);
	lg->ghosts = NULL;
}

/* ---- the choice ------------------------------------------------------------ */

static int lg_class(size_t total)
{
	int c = 0;

	while (c < IB_LARGE_CLASSES - 1 && ((uint64_t)2 << c) <= total)
		c++;
	return c;
}

/* HIT, SEEN or NEW for the bulk of the iovec: the pieces of at least an
 * eighth of it (a small header beside the payload does not decide), the
 * worst of them. */
static int lg_probe(struct ib_large *lg, struct rdmach_rcache *rc,
		    const struct iovec *iov, int iovcnt, size_t total,
		    unsigned int *sends)
{
	int i, worst = RDMACH_RCACHE_HIT, any = 0, pass;

	*sends = UINT32_MAX;
	for (pass = 0; pass < 2 && !any; pass++) {
		for (i = 0; i < iovcnt && worst != RDMACH_RCACHE_NEW; i++) {
			int r;

			if (!iov[i].iov_len ||
			    (!pass && iov[i].iov_len < total / 8))
				continue;
			any = 1;
			r = rdmach_rcache_probe(rc, lg->ghosts, iov[i].iov_base,
						iov[i].iov_len);
			if (r < worst)
				worst = r;
			if (r == RDMACH_RCACHE_SEEN) {
				unsigned int n = rdmach_rcache_ghost_sends(
					lg->ghosts, iov[i].iov_base,
					iov[i].iov_len);

				if (n < *sends)
					*sends = n;
			}
		}
	}
	if (worst != RDMACH_RCACHE_SEEN)
		*sends = 0;
	return worst;
}

/* Registrations in this class get reused (or too few to tell). */
static int lg_payoff(const struct ib_large_class *c)
{
	return c->regs < LG_MIN_SAMPLES || 2 * c->hits >= c->regs;
}

/* Most sends in this class resend a buffer. */
static int lg_predicted(const struct ib_large_class *c)
{
	return c->repeat + c->fresh >= LG_MIN_SAMPLES &&
	       c->repeat >= 3 * c->fresh;
}

void ib_large_choose(struct ib_large *lg, struct rdmach_rcache *rc,
		     int sp_room, const struct iovec *iov, int iovcnt,
		     size_t total, struct ib_large_choice *ch)
{
	int zc = rc && lg->zc_enabled && total >= lg->zc_threshold;
	int sp = sp_room && total >= lg->sp_threshold;
	const struct ib_large_class *c = &lg->cls[lg_class(total)];
	const struct tune_machine *m = &lg->tune.m;
	int model;

	ch->probe = RDMACH_RCACHE_NEW;
	ch->sends = 0;
	ch->why = IB_WHY_FORCED;
	switch (lg->mode) {
	case IB_LARGE_ZCOPY:
		ch->proto = zc ? IB_PROTO_ZCOPY : IB_PROTO_RING;
		return;
	case IB_LARGE_SPIPE:
		ch->proto = sp ? IB_PROTO_SPIPE : IB_PROTO_RING;
		return;
	case IB_LARGE_PIPELINE:
		ch->proto = IB_PROTO_RING;
		return;
	default:
		break;
	}
	ch->probe = lg_probe(lg, zc ? rc : NULL, iov, iovcnt, total,
			     &ch->sends);
	if (!zc) {	/* under the zero-copy threshold, or RDMACH_ZCOPY=0 */
		ch->proto = sp ? IB_PROTO_SPIPE : IB_PROTO_RING;
		ch->why = IB_WHY_BELOW;
		return;
	}
	ch->proto = IB_PROTO_ZCOPY;
	if (ch->probe == RDMACH_RCACHE_HIT) {
		ch->why = IB_WHY_HIT;
		return;
	}
	if (ch->probe == RDMACH_RCACHE_SEEN && lg_payoff(c)) {
		ch->why = IB_WHY_REUSE;
		return;
	}
	if (ch->probe == RDMACH_RCACHE_NEW && lg_predicted(c) &&
	    lg_payoff(c)) {
		ch->why = IB_WHY_PREDICTED;
		return;
	}
	model = ch->probe == RDMACH_RCACHE_NEW &&
		tune_t_zcopy(m, total, 2) <=
		(sp ? tune_t_spipe(m, &lg->sp, total) :
		      tune_t_ring(m, total, lg->ring_chunk));
	if (model && lg_payoff(c)) {
		ch->why = IB_WHY_MODEL;
		return;
	}
	if (sp) {
		/* zero-copy was wanted (seen, or cheaper by the model) but the
		 * registrations of this size are not reused: no more of them,
		 * the cache is not filled with buffers sent once */
		ch->proto = IB_PROTO_SPIPE;
		ch->why = ch->probe == RDMACH_RCACHE_SEEN || model ?
			  IB_WHY_NO_PAYOFF : IB_WHY_NEW;
		return;
	}
	/* seen, registrations do not pay: the ring's copy (under the
	 * superpipeline's threshold) */
	ch->proto = IB_PROTO_RING;
	ch->why = IB_WHY_BELOW;
}

static void lg_decay(uint32_t *a, uint32_t *b)
{
	if (*a + *b > LG_DECAY_AT) {
		*a /= 2;
		*b /= 2;
	}
}

void ib_large_started(struct ib_large *lg, const struct ib_large_choice *ch,
		      const struct iovec *iov, int iovcnt, size_t total,
		      rdmach_stats_t *st)
{
	struct ib_large_class *c = &lg->cls[lg_class(total)];
	int i;

	switch (ch->why) {
	case IB_WHY_HIT: st->why_hit++; break;
	case IB_WHY_REUSE: st->why_reuse++; break;
	case IB_WHY_PREDICTED: st->why_predicted++; break;
	case IB_WHY_MODEL: st->why_model++; break;
	case IB_WHY_NEW: st->why_new++; break;
	case IB_WHY_NO_PAYOFF: st->why_no_payoff++; break;
	case IB_WHY_FORCED: st->why_forced++; break;
	case IB_WHY_BELOW: st->why_below++; break;
	case IB_WHY_FALLBACK: st->why_fallback++; break;
	}
	if (ch->proto == IB_PROTO_RING) {
		st->large_ring_msgs++;
		st->large_ring_bytes += total;
	}
	if (lg->mode != IB_LARGE_AUTO)
		return;
	if (ch->probe == RDMACH_RCACHE_NEW)
		c->fresh++;
	else
		c->repeat++;
	lg_decay(&c->repeat, &c->fresh);
	if (ch->probe == RDMACH_RCACHE_HIT)
		c->hits++;
	else if (ch->proto == IB_PROTO_ZCOPY)
		c->regs++;
	else if (ch->probe == RDMACH_RCACHE_SEEN && ch->sends >= 2)
		c->hits++;	/* registered at its second send, a hit now */
	lg_decay(&c->regs, &c->hits);
	/* a registration covers it now, but it may be evicted: a ghost
	 * keeps it "seen" either way */
	if (ch->probe != RDMACH_RCACHE_HIT)
		for (i = 0; i < iovcnt; i++)
			if (iov[i].iov_len >= total / 8 && iov[i].iov_len)
				rdmach_rcache_ghost_note(lg->ghosts,
							 iov[i].iov_base,
							 iov[i].iov_len);
}

void ib_large_fallback(size_t total, rdmach_stats_t *st)
{
	st->why_fallback++;
	st->large_ring_msgs++;
	st->large_ring_bytes += total;
}

/* ---- rdmach_info --tune ----------------------------------------------------- */

static void lg_row(FILE *out, const char *knob, const char *what,
		   const char *value)
{
	const char *env = getenv(knob);

	fprintf(out, "%-24s %-14s %s%s\n", knob, value, what,
		env && *env && strcmp(env, RDMACH_KNOB_AUTO) ?
		" (set by the environment)" : "");
}

static double lg_mbs(uint64_t len, double t)
{
	return t > 0 ? (double)len / t / 1e6 : 0;
}

void ib_large_print(const struct ib_large *lg, FILE *out)
{
	const struct tune_machine *m = &lg->tune.m;
	const struct spipe_params *p = &lg->sp;
	char v[64];
	uint64_t len;

	fprintf(out, "# machine figures: %s", lg->tune.source);
	if (!strcmp(lg->tune.source, "measured"))
		fprintf(out, " in %.1f ms (scratch memory %.1f, copies %.1f, "
			"registration %.1f, RDMA writes %.1f)",
			m->measure_s * 1e3, lg->tune.step_s[0] * 1e3,
			lg->tune.step_s[1] * 1e3, lg->tune.step_s[2] * 1e3,
			lg->tune.step_s[3] * 1e3);
	else if (!strcmp(lg->tune.source, "cache file"))
		fprintf(out, " (measured in %.1f ms when written)",
			m->measure_s * 1e3);
	fprintf(out, "%s%s\n", lg->tune.file[0] ? "; file " : "",
		lg->tune.file);
	fprintf(out, "B_copy(64K)       %10.3f GB/s\n", m->bcopy[0] / 1e9);
	fprintf(out, "B_copy(1M)        %10.3f GB/s\n", m->bcopy[1] / 1e9);
	fprintf(out, "B_copy(1M memory) %10.3f GB/s\n", m->bcopy[2] / 1e9);
	fprintf(out, "lambda_reg        %10.2f us\n", m->lat_reg * 1e6);
	fprintf(out, "B_reg             %10.3f GB/s\n", m->breg / 1e9);
	fprintf(out, "lambda_net        %10.2f us\n", m->lat_net * 1e6);
	fprintf(out, "B_net             %10.2f MB/s\n", m->bnet / 1e6);
	fprintf(out, "g (gap per write) %10.3f us\n", m->gap * 1e6);
	fprintf(out, "# settings (derived unless set)\n");
	lg_row(out, "RDMACH_LARGE", "", ib_large_mode_names[lg->mode]);
	snprintf(v, sizeof(v), "%" PRIu64, lg->sp_threshold);
	lg_row(out, "RDMACH_SPIPE_THRESHOLD", "bytes", v);
	snprintf(v, sizeof(v), "%" PRIu64, p->c0);
	lg_row(out, "RDMACH_SPIPE_C0", "bytes", v);
	snprintf(v, sizeof(v), "%.3f", p->q256 / (double)SPIPE_Q_ONE);
	lg_row(out, "RDMACH_SPIPE_Q", "", v);
	snprintf(v, sizeof(v), "%u", p->block);
	lg_row(out, "RDMACH_SPIPE_BLOCK", "bytes", v);
	snprintf(v, sizeof(v), "%u", p->nbufs);
	lg_row(out, "RDMACH_SPIPE_BUFS", "", v);
	snprintf(v, sizeof(v), "%" PRIu64, p->buf_size);
	lg_row(out, "RDMACH_SPIPE_BUF_SIZE", "bytes", v);
	snprintf(v, sizeof(v), "%" PRIu64, lg->zc_threshold);
	lg_row(out, "RDMACH_ZCOPY_THRESHOLD", lg->zc_enabled ? "bytes" :
	       "bytes (RDMACH_ZCOPY=0: off)", v);
	fprintf(out, "registered per connection: %.2f MiB (staging %u x %"
		PRIu64 " + landing %u x %" PRIu64 ", allocated at its first "
		"superpipeline message)\n",
		2.0 * (double)spipe_area_bytes(p) / 1048576, p->nbufs,
		p->buf_size, p->nbufs, p->buf_size);
	fprintf(out, "# model: one-way bandwidth (MB/s) of one message; "
		"chunks in the superpipeline\n");
	fprintf(out, "%-10s %9s %9s %7s %9s %9s %9s  %s\n", "# bytes",
		"ring", "spipe", "chunks", "zc-hit", "zc-1reg", "zc-2reg",
		"auto on a new buffer");
	for (len = 16u << 10; len <= (16u << 20); len *= 2) {
		double sp = tune_t_spipe(m, p, len);
		double z2 = tune_t_zcopy(m, len, 2);
		const char *a = "ring";

		if (lg->zc_enabled && len >= lg->zc_threshold &&
		    z2 <= (len >= lg->sp_threshold ? sp :
			   tune_t_ring(m, len, lg->ring_chunk)))
			a = "zcopy (model)";
		else if (len >= lg->sp_threshold)
			a = "superpipeline";
		fprintf(out, "%-10" PRIu64 " %9.2f %9.2f %7" PRIu64
			" %9.2f %9.2f %9.2f  %s\n", len,
			lg_mbs(len, tune_t_ring(m, len, lg->ring_chunk)),
			lg_mbs(len, sp), spipe_chunks_for(p, len),
			lg_mbs(len, tune_t_zcopy(m, len, 0)),
			lg_mbs(len, tune_t_zcopy(m, len, 1)),
			lg_mbs(len, z2), a);
	}
}
