/*
 * ib_rec.h - rdma_ib's out-of-band record (rdma_ib private, prefix
 * ib_rec_): what a rank publishes under "ib-<rank>" for the connection
 * manager (ib_cm.h), "lid:gid:udqpn:nonce:wire:host", the numbers in hex,
 * the host for messages.  A peer's record is text another process wrote
 * (through the launcher's key-value space): input, parsed strictly.
 * Verbs-free, at the bottom of the unit order (test/fuzz/fuzz_ib_rec and
 * test/test_ib_rec drive it without a device).
 */
#ifndef RDMACH_IB_REC_H
#define RDMACH_IB_REC_H

#include <stddef.h>
#include <stdint.h>

#define IB_REC_HOST_MAX 64		/* host name, NUL included */
/* The longest record: 4 + 32 + 6 + 16 + 8 hex digits, the host, 5 ':' */
#define IB_REC_LEN_MAX (66 + IB_REC_HOST_MAX - 1 + 5)

struct ib_rec {
	uint16_t lid;
	uint8_t gid[16];
	uint32_t ud_qpn;		/* 1 .. 2^24 - 1 */
	uint64_t nonce;			/* the publishing context's */
	uint32_t wire;			/* its IB_WIRE_VERSION */
	char host[IB_REC_HOST_MAX];	/* [A-Za-z0-9._-], not empty */
};

/* A GID as 32 lowercase hex digits and back (the record's form). */
void ib_rec_gid_hex(const uint8_t gid[16], char out[33]);
/* Exactly 32 hex digits at s, then ':' or the end.  0 and gid set, or
 * -EPROTO. */
int ib_rec_gid_unhex(const char *s, uint8_t gid[16]);

/* The record of r into buf (len bytes, IB_REC_LEN_MAX + 1 are enough);
 * r->host must be of the allowed characters (ib_rec_host_clean). */
void ib_rec_format(const struct ib_rec *r, char *buf, size_t len);
/* Replace what a record's host may not hold by '_' (an empty name:
 * "unknown"). */
void ib_rec_host_clean(char *host);

/* Parse a peer's record: exactly six fields, each in its range (LID 16
 * bits, GID 32 hex digits, UD QP number 1..2^24-1, nonce 64 bits, wire
 * version 32 bits, host 1..63 characters), nothing after.  0 and *r set;
 * -EPROTO with why (whylen bytes) naming the field and what is wrong. */
int ib_rec_parse(const char *s, struct ib_rec *r, char *why, size_t whylen);

#endif /* RDMACH_IB_REC_H */
