/*
 * test_ib_cm_msg.c - rdma_ib's connection-manager message
 * (rdma_ib/ib_cm_msg.h), without a device: every kind a sender makes
 * (an address with each of its flag sets, a refusal, a request to close
 * and both answers) parses as it was sent, from the group's first and
 * last rank; a message of another length, magic, version, destination,
 * context, of a source out of the group or the receiver itself, or of
 * flags no sender makes is refused with why and nothing written; the
 * address fields are taken at their limits and refused past them, the
 * field named.  Cases run under the test kit (TST_UNIT, test/lib/tst.h).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lib/tst.h"

#ifdef RDMACH_HAVE_IB
#include "rdma_ib/ib_cm_msg.h"

#define CM_NONCE 0x0123456789abcdefull

/* The receiver: rank 1 of 4. */
static const struct ib_cm_msg_want cm_want = {
	.rank = 1, .size = 4, .nonce = CM_NONCE, .version = IB_CM_VERSION,
};

/* A message from rank 0 to the receiver as ib_cm_fill makes it: the
 * fixed fields, and for an address (flags without IB_CM_F_REJ and the
 * closing ones) an endpoint's. */
static void cm_msg(struct ib_cm_msg *m, uint16_t flags)
{
	memset(m, 0, sizeof(*m));
	m->magic = IB_CM_MAGIC;
	m->version = IB_CM_VERSION;
	m->dst = 1;
	m->src_nonce = 0xfedcba9876543210ull;
	m->dst_nonce = CM_NONCE;
	m->flags = flags;
	if (flags & (IB_CM_F_REJ | IB_CM_F_CLOSING))
		return;
	m->ring = 0x7f3a2c400000ull;
	m->ctrl = 0x7f3a2c410000ull;
	m->ring_size = 65536;
	m->qpn = 0x11;
	m->psn = 0x5a3c21;
	m->rkey = 0x1a2b;
	m->wire = 2;
	m->mtu = 3;
	m->mode = 3;
	m->caps = 7;
	m->lid = 7;
}

static int cm_takes(struct tst *t, const struct ib_cm_msg *m,
		    const struct ib_cm_msg_want *w)
{
	struct ib_cm_msg out;
	char why[160] = "";

	TST_CHECK(t, !ib_cm_msg_parse(m, sizeof(*m), w, &out, why,
				      sizeof(why)),
		  "flags 0x%x from rank %u refused: %s", m->flags, m->src, why);
	TST_CHECK(t, !memcmp(&out, m, sizeof(out)), "flags 0x%x: the message "
		  "came out changed", m->flags);
	return 0;
}

static int t_kinds(struct tst *t)
{
	static const uint16_t kinds[] = {
		0, IB_CM_F_RTR, IB_CM_F_RTR | IB_CM_F_UP, IB_CM_F_REJ,
		IB_CM_F_CLOSE, IB_CM_F_CLOSED, IB_CM_F_BUSY,
	};
	struct ib_cm_msg_want w = cm_want;
	struct ib_cm_msg m;
	char why[96] = "";
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		cm_msg(&m, kinds[i]);
		m.gen = 0xffff;		/* any generation and attempt */
		m.psn = kinds[i] & IB_CM_F_CLOSING ? 0xffffffffu : m.psn;
		if (cm_takes(t, &m, &w))
			return -1;
		m.src = 3;		/* the group's last rank */
		if (cm_takes(t, &m, &w))
			return -1;
	}
	cm_msg(&m, 0);
	TST_CHECK0(t, ib_cm_msg_addr_check(&m, why, sizeof(why)));
	/* the receiver rank 0, the sender the last of a group of 2^32 - 1 */
	w.rank = 0;
	w.size = UINT32_MAX;
	m.dst = 0;
	m.src = UINT32_MAX - 1;
	return cm_takes(t, &m, &w);
}

/* What a refused message's field is made, and the reason's words. */
struct cm_bad {
	const char *what;
	size_t len;		/* 0: the message's */
	size_t off, size;	/* the field at off, size bytes ... */
	uint64_t v;		/* ... set to v */
	int ret;
	const char *why;
};

#define CM_F(f) offsetof(struct ib_cm_msg, f), \
	sizeof(((struct ib_cm_msg *)0)->f)

static const struct cm_bad cm_bads[] = {
	{ "one byte", 1, CM_F(magic), IB_CM_MAGIC, -EPROTO,
	  "1 bytes, not 104" },
	{ "short", 103, CM_F(magic), IB_CM_MAGIC, -EPROTO, "103 bytes" },
	{ "long", 105, CM_F(magic), IB_CM_MAGIC, -EPROTO, "105 bytes" },
	{ "magic", 0, CM_F(magic), 0x52444d43, -EPROTO, "magic 0x52444d43" },
	{ "version 2", 0, CM_F(version), 2, -EPROTONOSUPPORT,
	  "protocol version 2 from rank 0; this rdmach speaks 3" },
	{ "version 4", 0, CM_F(version), 4, -EPROTONOSUPPORT,
	  "protocol version 4" },
	{ "to rank 2", 0, CM_F(dst), 2, -EPROTO, "to rank 2, not this one" },
	{ "from itself", 0, CM_F(src), 1, -EPROTO, "from rank 1" },
	{ "from rank 4", 0, CM_F(src), 4, -EPROTO, "from rank 4" },
	{ "from rank 2^32-1", 0, CM_F(src), UINT32_MAX, -EPROTO,
	  "from rank 4294967295" },
	{ "old context", 0, CM_F(dst_nonce), CM_NONCE ^ 1, -EPROTO,
	  "to another context" },
	{ "UP alone", 0, CM_F(flags), IB_CM_F_UP, -EPROTO, "flags 0x0002" },
	{ "RTR|REJ", 0, CM_F(flags), IB_CM_F_RTR | IB_CM_F_REJ, -EPROTO,
	  "flags 0x0005" },
	{ "CLOSE|BUSY", 0, CM_F(flags), IB_CM_F_CLOSE | IB_CM_F_BUSY, -EPROTO,
	  "flags 0x0028" },
	{ "CLOSED|BUSY", 0, CM_F(flags), IB_CM_F_CLOSED | IB_CM_F_BUSY,
	  -EPROTO, "flags 0x0030" },
	{ "REJ|CLOSE", 0, CM_F(flags), IB_CM_F_REJ | IB_CM_F_CLOSE, -EPROTO,
	  "flags 0x000c" },
	{ "unknown bit", 0, CM_F(flags), 0x40, -EPROTO, "flags 0x0040" },
	{ "top bit", 0, CM_F(flags), 0x8001, -EPROTO, "flags 0x8001" },
	/* the length before the magic */
	{ "short, bad magic", 50, CM_F(magic), 0, -EPROTO, "50 bytes" },
};

/* Field off of the message at buf, size bytes, to v. */
static void cm_set(uint8_t *buf, size_t off, size_t size, uint64_t v)
{
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;

	if (size == 2)
		memcpy(buf + off, &v16, 2);
	else if (size == 4)
		memcpy(buf + off, &v32, 4);
	else
		memcpy(buf + off, &v, 8);
}

static int t_refused(struct tst *t)
{
	uint8_t buf[sizeof(struct ib_cm_msg) + 8];
	struct ib_cm_msg m, out, keep;
	char why[160];
	size_t i;

	memset(&keep, 0x5a, sizeof(keep));
	for (i = 0; i < sizeof(cm_bads) / sizeof(cm_bads[0]); i++) {
		const struct cm_bad *b = &cm_bads[i];
		size_t len = b->len ? b->len : sizeof(m);
		int ret;

		cm_msg(&m, 0);
		memset(buf, 0, sizeof(buf));
		memcpy(buf, &m, sizeof(m));
		cm_set(buf, b->off, b->size, b->v);
		out = keep;
		why[0] = '\0';
		ret = ib_cm_msg_parse(buf, len, &cm_want, &out, why,
				      sizeof(why));
		TST_CHECK(t, ret == b->ret, "%s: %s, not %s", b->what,
			  tst_errname(ret), tst_errname(b->ret));
		TST_CHECK(t, strstr(why, b->why), "%s: reason \"%s\", not "
			  "\"%s\"", b->what, why, b->why);
		TST_CHECK(t, !memcmp(&out, &keep, sizeof(out)), "%s: the "
			  "message was written", b->what);
	}
	/* the magic before the version: not a peer of another protocol */
	cm_msg(&m, 0);
	m.magic = 0;
	m.version = 2;
	TST_CHECK_EQ(t, ib_cm_msg_parse(&m, sizeof(m), &cm_want, &out, why,
					sizeof(why)), -EPROTO);
	/* a reason cut to a small buffer stays a string */
	TST_CHECK_EQ(t, ib_cm_msg_parse(&m, sizeof(m), &cm_want, &out, why, 8),
		     -EPROTO);
	TST_CHECK(t, strlen(why) == 7, "reason of %zu bytes", strlen(why));
	return 0;
}

static int t_addr(struct tst *t)
{
	static const struct {
		size_t off;
		uint32_t v;
		const char *why;
	} bad[] = {
		{ offsetof(struct ib_cm_msg, qpn), 0, "QP number 0 is not in "
		  "1..16777215" },
		{ offsetof(struct ib_cm_msg, qpn), 0x1000000, "QP number "
		  "16777216" },
		{ offsetof(struct ib_cm_msg, psn), 0x1000000, "PSN 16777216 "
		  "is not in 0..16777215" },
		{ offsetof(struct ib_cm_msg, lid), 0x10000, "LID 65536 is not "
		  "in 0..65535" },
		{ offsetof(struct ib_cm_msg, mtu), IB_CM_MSG_MTU_MAX + 1,
		  "MTU 6 is not in 0..5" },
		{ offsetof(struct ib_cm_msg, mtu), UINT32_MAX, "MTU 4294967295" },
	};
	struct ib_cm_msg m;
	char why[96];
	size_t i;

	cm_msg(&m, 0);
	m.qpn = 1;
	m.psn = 0;
	m.lid = 0;
	m.mtu = 0;
	TST_CHECK0(t, ib_cm_msg_addr_check(&m, why, sizeof(why)));
	m.qpn = 0xffffff;
	m.psn = 0xffffff;
	m.lid = 0xffff;
	m.mtu = IB_CM_MSG_MTU_MAX;
	TST_CHECK0(t, ib_cm_msg_addr_check(&m, why, sizeof(why)));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cm_msg(&m, 0);
		memcpy((uint8_t *)&m + bad[i].off, &bad[i].v, 4);
		why[0] = '\0';
		TST_CHECK_EQ(t, ib_cm_msg_addr_check(&m, why, sizeof(why)),
			     -EPROTO);
		TST_CHECK(t, strstr(why, bad[i].why), "reason \"%s\", not "
			  "\"%s\"", why, bad[i].why);
	}
	return 0;
}

static const struct tst_case cases[] = {
	{ "cm_msg_kinds", 1, t_kinds, TST_UNIT, NULL, { 0 } },
	{ "cm_msg_refused", 1, t_refused, TST_UNIT, NULL, { 0 } },
	{ "cm_msg_addr", 1, t_addr, TST_UNIT, NULL, { 0 } },
};
#else
static int t_no_ib(struct tst *t)
{
	return tst_skip(t, "built without ib");
}

static const struct tst_case cases[] = {
	{ "cm_msg", 1, t_no_ib, TST_UNIT, NULL, { 0 } },
};
#endif

int main(int argc, char **argv)
{
	return tst_main(argc, argv, cases,
			(int)(sizeof(cases) / sizeof(cases[0])));
}
