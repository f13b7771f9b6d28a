/*
 * fuzz_ib_cm_msg - rdma_ib's connection-manager message parser
 * (rdma_ib/ib_cm_msg.c), the bytes another process sends over the UD
 * QPs: the input, in a buffer of its exact size (a read past it is
 * caught), is parsed as a message to rank 1 of 4 of a fixed context, and
 * again as one to the receiver its own fields name (destination, its
 * nonce, version; the group's size from its MTU word), so that the checks
 * past them are reached.  A message that parses must be the input's bytes,
 * of the length, magic and version wanted, to the receiver from another
 * rank of the group, of flags a sender makes (which the handler reads
 * one kind per message); one whose address passes the range check holds
 * each field in its range.  A refused one leaves the output untouched and
 * gives a reason, and a version other than the receiver's is told apart
 * (-EPROTONOSUPPORT: ib_cm.c warns of it) exactly when the length and
 * magic are right.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdma_ib/ib_cm_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The receiver of the seed corpus (test/fuzz/corpus/fuzz_ib_cm_msg/). */
static const struct ib_cm_msg_want fuzz_want = {
	.rank = 1, .size = 4, .nonce = 0x0123456789abcdefull,
	.version = IB_CM_VERSION,
};

/* What the handler (ib_cm_handle) reads as one kind: an address of what
 * its sender knows (UP only with RTR), or one other flag alone. */
static int fuzz_flags_one_kind(uint16_t f)
{
	uint16_t other = f & (IB_CM_F_REJ | IB_CM_F_CLOSING);

	if (!other)
		return !(f & ~(IB_CM_F_RTR | IB_CM_F_UP)) &&
		       (!(f & IB_CM_F_UP) || (f & IB_CM_F_RTR));
	return f == other && !(other & (other - 1));
}

static void fuzz_check_addr(const struct ib_cm_msg *m)
{
	char why[96];

	memset(why, 0, sizeof(why));
	if (!ib_cm_msg_addr_check(m, why, sizeof(why))) {
		if (!m->qpn || m->qpn > 0xffffff || m->psn > 0xffffff ||
		    m->lid > 0xffff || m->mtu > IB_CM_MSG_MTU_MAX)
			abort();
	} else if (!memchr(why, '\0', sizeof(why)) ||
		   (strncmp(why, "QP number ", 10) && strncmp(why, "PSN ", 4) &&
		    strncmp(why, "LID ", 4) && strncmp(why, "MTU ", 4))) {
		abort();
	}
}

static void fuzz_one(const uint8_t *data, size_t size,
		     const struct ib_cm_msg_want *w)
{
	struct ib_cm_msg m, keep, in;
	char why[160];
	int ret, vers = 0;

	if (size == sizeof(in)) {
		memcpy(&in, data, sizeof(in));
		vers = in.magic == IB_CM_MAGIC && in.version != w->version;
	}
	memset(&keep, 0xa5, sizeof(keep));
	m = keep;
	memset(why, 0, sizeof(why));
	ret = ib_cm_msg_parse(data, size, w, &m, why, sizeof(why));
	if (!ret) {
		if (size != sizeof(m) || memcmp(&m, data, sizeof(m)) ||
		    m.magic != IB_CM_MAGIC || m.version != w->version ||
		    m.dst != w->rank || m.dst_nonce != w->nonce ||
		    m.src >= w->size || m.src == w->rank ||
		    !fuzz_flags_one_kind(m.flags))
			abort();
		fuzz_check_addr(&m);
	} else if (memcmp(&m, &keep, sizeof(m)) || !why[0] ||
		   !memchr(why, '\0', sizeof(why)) ||
		   (ret != -EPROTO && ret != -EPROTONOSUPPORT) ||
		   (ret == -EPROTONOSUPPORT) != vers) {
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ib_cm_msg_want w;
	struct ib_cm_msg in;

	fuzz_one(data, size, &fuzz_want);
	if (size == sizeof(in)) {
		memcpy(&in, data, sizeof(in));
		w.rank = in.dst;
		w.size = in.mtu;
		w.nonce = in.dst_nonce;
		w.version = in.version;
		fuzz_one(data, size, &w);
	}
	return 0;
}
