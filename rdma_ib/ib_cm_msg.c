/* ib_cm_msg.c - the connection manager's message: see ib_cm_msg.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ib_cm_msg.h"

/* The flags a sender makes (ib_cm.c's ib_cm_fill): an address with what
 * it knows (UP only once it has the peer's RTR, so with its own), or one
 * of the other kinds alone.  The handler reads one kind per message: a
 * combination added there must be added here, or it is refused. */
static const uint16_t ib_cm_msg_flags[] = {
	0, IB_CM_F_RTR, IB_CM_F_RTR | IB_CM_F_UP,
	IB_CM_F_REJ, IB_CM_F_CLOSE, IB_CM_F_CLOSED, IB_CM_F_BUSY,
};

/* The 32-bit fields of a message's address that hold less, and their
 * ranges. */
static const struct ib_cm_msg_range {
	const char *name;
	size_t off;
	uint32_t min, max;
} ib_cm_msg_ranges[] = {
	{ "QP number", offsetof(struct ib_cm_msg, qpn), 1, 0xffffff },
	{ "PSN", offsetof(struct ib_cm_msg, psn), 0, 0xffffff },
	{ "LID", offsetof(struct ib_cm_msg, lid), 0, 0xffff },
	{ "MTU", offsetof(struct ib_cm_msg, mtu), 0, IB_CM_MSG_MTU_MAX },
};

#define IB_CM_MSG_N(a) (sizeof(a) / sizeof((a)[0]))

static int ib_cm_msg_flags_known(uint16_t flags)
{
	size_t i;

	for (i = 0; i < IB_CM_MSG_N(ib_cm_msg_flags); i++)
		if (flags == ib_cm_msg_flags[i])
			return 1;
	return 0;
}

int ib_cm_msg_parse(const void *buf, size_t len,
		    const struct ib_cm_msg_want *w, struct ib_cm_msg *m,
		    char *why, size_t whylen)
{
	struct ib_cm_msg t;

	if (len != sizeof(t)) {
		snprintf(why, whylen, "%zu bytes, not %zu", len, sizeof(t));
		return -EPROTO;
	}
	/* a copy: the checks and the handler read what was checked */
	memcpy(&t, buf, sizeof(t));
	if (t.magic != IB_CM_MAGIC) {
		snprintf(why, whylen, "magic 0x%08x, not 0x%08x", t.magic,
			 IB_CM_MAGIC);
		return -EPROTO;
	}
	if (t.version != w->version) {
		/* ib_cm.c's warning prints it */
		snprintf(why, whylen, "protocol version %u from rank %u; this "
			 "rdmach speaks %u", t.version, t.src, w->version);
		return -EPROTONOSUPPORT;
	}
	if (t.dst != w->rank) {
		snprintf(why, whylen, "to rank %u, not this one (%u)", t.dst,
			 w->rank);
		return -EPROTO;
	}
	if (t.src >= w->size || t.src == w->rank) {
		snprintf(why, whylen, "from rank %u (this rank %u of %u)",
			 t.src, w->rank, w->size);
		return -EPROTO;
	}
	if (t.dst_nonce != w->nonce) {
		snprintf(why, whylen, "to another context of this rank (nonce "
			 "0x%016" PRIx64 ")", t.dst_nonce);
		return -EPROTO;
	}
	if (!ib_cm_msg_flags_known(t.flags)) {
		snprintf(why, whylen, "flags 0x%04x, a combination no sender "
			 "makes", t.flags);
		return -EPROTO;
	}
	*m = t;
	return 0;
}

int ib_cm_msg_addr_check(const struct ib_cm_msg *m, char *why,
			 size_t whylen)
{
	size_t i;

	for (i = 0; i < IB_CM_MSG_N(ib_cm_msg_ranges); i++) {
		const struct ib_cm_msg_range *r = &ib_cm_msg_ranges[i];
		uint32_t v;

		memcpy(&v, (const uint8_t *)m + r->off, sizeof(v));
		if (v < r->min || v > r->max) {
			snprintf(why, whylen, "%s %u is not in %u..%u",
				 r->name, v, r->min, r->max);
			return -EPROTO;
		}
	}
	return 0;
}
