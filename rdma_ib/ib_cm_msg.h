/*
 * ib_cm_msg.h - the connection manager's message (rdma_ib private,
 * prefix ib_cm_msg_): the 104 bytes a rank sends another over the UD QPs
 * (ib_cm.h), in wire format, and their parser.  A message is bytes from
 * the fabric: input, checked whole before the connection manager reads a
 * field.  Verbs-free, at the bottom of the unit order with ib_rec
 * (test/fuzz/fuzz_ib_cm_msg and test/test_ib_cm_msg drive it without a
 * device); what needs the peer's record or the transport (the sender's
 * nonce and QP) stays in ib_cm.c.  The protocol: rdma_ib/README.md,
 * "Wire-up and the connection manager".
 */
#ifndef RDMACH_IB_CM_MSG_H
#define RDMACH_IB_CM_MSG_H

#include <stddef.h>
#include <stdint.h>

#define IB_CM_MAGIC 0x4d434452u		/* "RDCM" read little-endian */
#define IB_CM_VERSION 3		/* 2: IB_CM_F_REJ; 3: closing idle
				 * connections, and their generations */

/* Flags of a message: what its sender knows. */
#define IB_CM_F_RTR 0x1u	/* its QP is connected to yours */
#define IB_CM_F_UP 0x2u		/* it has your IB_CM_F_RTR: no answer due */
#define IB_CM_F_REJ 0x4u	/* its end failed (no address follows):
				 * yours fails */
/* Closing an idle connection (RDMACH_IB_QPS_MAX, or the device's QPs
 * all taken): the asking end stops sending and asks; the other closes
 * its end if it is quiet too and each end got all the other put, and
 * says so, or says it keeps it.  Both ends then count one more
 * generation: a message of an older one is stale.  A request carries
 * its attempt number (psn), which the answer repeats: a request kept
 * once is kept again (a copy retransmitted before the sender resumed
 * carries counts that are old now), and a BUSY answers one attempt. */
#define IB_CM_F_CLOSE 0x8u	/* close it? ring, ctrl: the sender's bytes
				 * put and got on it */
#define IB_CM_F_CLOSED 0x10u	/* answer: closed here (or before) */
#define IB_CM_F_BUSY 0x20u	/* answer: not idle here, it stays */
#define IB_CM_F_CLOSING (IB_CM_F_CLOSE | IB_CM_F_CLOSED | IB_CM_F_BUSY)

/* The largest MTU code an address may carry: IBV_MTU_4096's (ib_cm.c
 * asserts it, this unit has no verbs). */
#define IB_CM_MSG_MTU_MAX 5

struct ib_cm_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;
	uint32_t src, dst;		/* ranks */
	uint64_t src_nonce, dst_nonce;	/* the two contexts */
	uint64_t ring, ctrl, ring_size;	/* the sender's endpoint */
	uint32_t qpn, psn, rkey, wire, mtu;
	uint16_t mode, gen;		/* gen: the connection's generation */
	uint32_t caps, lid;
	uint8_t gid[16];
} __attribute__((packed));

#define IB_CM_MSG_LEN 104
_Static_assert(sizeof(struct ib_cm_msg) == IB_CM_MSG_LEN,
	       "ib_cm_msg is wire format");

/* What the receiver of a message expects of it. */
struct ib_cm_msg_want {
	uint32_t rank;		/* the receiver's: the destination */
	uint32_t size;		/* its group's: the source is a rank below */
	uint64_t nonce;		/* its context's: the destination's nonce */
	uint16_t version;	/* the protocol it speaks (IB_CM_VERSION, or
				 * RDMACH_IB_CM_VERSION's) */
};

/* Parse a received message: len bytes at buf, what follows the UD
 * receive's GRH.  Checked in this order: the length (IB_CM_MSG_LEN) and
 * the magic, the version (-EPROTONOSUPPORT: a peer of another protocol,
 * which the caller may name), then -EPROTO for a destination or its
 * nonce not the receiver's, a source not a rank of the group or the
 * receiver itself, or flags no sender makes (an address with IB_CM_F_RTR
 * and IB_CM_F_UP or fewer, or one of IB_CM_F_REJ, _CLOSE, _CLOSED,
 * _BUSY alone).  0 and *m set; a negative errno with why (whylen bytes)
 * saying what is wrong. */
int ib_cm_msg_parse(const void *buf, size_t len,
		    const struct ib_cm_msg_want *w, struct ib_cm_msg *m,
		    char *why, size_t whylen);

/* Are the fields of m's address that hold fewer bits than their word in
 * their ranges (QP number 1..2^24-1, PSN 24 bits, LID 16 bits, MTU at
 * most IB_CM_MSG_MTU_MAX)?  The others hold any value, or are compared
 * with the receiver's own by ib_cm.c.  0, or -EPROTO with why naming the
 * field and its value. */
int ib_cm_msg_addr_check(const struct ib_cm_msg *m, char *why,
			 size_t whylen);

#endif /* RDMACH_IB_CM_MSG_H */
