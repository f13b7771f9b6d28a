/*
 * test_ib_rec.c - rdma_ib's out-of-band record (rdma_ib/ib_rec.h), the
 * text a peer publishes for the connection manager, without a device:
 * records round-trip at every field's limit, and malformed ones (fields
 * that overflow or leave their range, trailing bytes, missing or empty
 * fields, an empty or overlong record, a bad GID) are refused with the
 * field named and nothing written.  Cases run under the test kit
 * (TST_UNIT, test/lib/tst.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/tst.h"

#ifdef RDMACH_HAVE_IB
#include "rdma_ib/ib_rec.h"

#define GID "fe80000000000000020c29fffe3a4b5c"

static int rec_same(const struct ib_rec *a, const struct ib_rec *b)
{
	return a->lid == b->lid && !memcmp(a->gid, b->gid, 16) &&
	       a->ud_qpn == b->ud_qpn && a->nonce == b->nonce &&
	       a->wire == b->wire && !strcmp(a->host, b->host);
}

static int rec_round(struct tst *t, const struct ib_rec *r)
{
	char buf[IB_REC_LEN_MAX + 1], why[160];
	struct ib_rec back;

	ib_rec_format(r, buf, sizeof(buf));
	TST_CHECK(t, strlen(buf) <= IB_REC_LEN_MAX, "\"%s\" is longer than "
		  "IB_REC_LEN_MAX (%d)", buf, IB_REC_LEN_MAX);
	why[0] = '\0';
	TST_CHECK(t, !ib_rec_parse(buf, &back, why, sizeof(why)),
		  "\"%s\" refused: %s", buf, why);
	TST_CHECK(t, rec_same(r, &back), "\"%s\" came back changed", buf);
	return 0;
}

static int t_round_trip(struct tst *t)
{
	struct ib_rec r;
	int i;

	memset(&r, 0, sizeof(r));
	r.ud_qpn = 1;
	snprintf(r.host, sizeof(r.host), "h");
	if (rec_round(t, &r))
		return -1;
	/* every field at its largest */
	r.lid = 0xffff;
	memset(r.gid, 0xff, sizeof(r.gid));
	r.ud_qpn = 0xffffff;
	r.nonce = UINT64_MAX;
	r.wire = UINT32_MAX;
	memset(r.host, 'x', sizeof(r.host) - 1);
	r.host[sizeof(r.host) - 1] = '\0';
	if (rec_round(t, &r))
		return -1;
	for (i = 0; i < 16; i++)
		r.gid[i] = (uint8_t)(i * 17 + 3);
	snprintf(r.host, sizeof(r.host), "node-1.cluster_A");
	r.nonce = 0x123456789abcdefull;
	if (rec_round(t, &r))
		return -1;
	/* a host name with what a record may not hold */
	snprintf(r.host, sizeof(r.host), "a b:c\n");
	ib_rec_host_clean(r.host);
	TST_CHECK(t, !strcmp(r.host, "a_b_c_"), "cleaned host \"%s\"", r.host);
	return rec_round(t, &r);
}

struct bad_rec {
	const char *s;
	const char *why;	/* what the reason must contain */
};

static const struct bad_rec bad_recs[] = {
	{ "", "empty" },
	{ "10000:" GID ":1:1:1:h", "field 1 (LID): above 0xffff" },
	{ "fffffffffffffffffffffffff:" GID ":1:1:1:h", "field 1 (LID): above" },
	{ " 1:" GID ":1:1:1:h", "field 1 (LID): not a hex number" },
	{ "+1:" GID ":1:1:1:h", "field 1 (LID): not a hex number" },
	{ "0x1:" GID ":1:1:1:h", "field 1 (LID): not a hex number" },
	{ ":" GID ":1:1:1:h", "field 1 (LID): not a hex number" },
	{ "1:" GID "0:1:1:1:h", "field 2 (GID): not 32 hex digits" },
	{ "1:fe80000000000000020c29fffe3a4b5:1:1:1:h", "field 2 (GID)" },
	{ "1:fe80000000000000020c29fffe3a4bzz:1:1:1:h", "field 2 (GID)" },
	{ "1::1:1:1:h", "field 2 (GID)" },
	{ "1:" GID ":0:1:1:h", "field 3 (UD QP number): below 0x1" },
	{ "1:" GID ":1000000:1:1:h", "field 3 (UD QP number): above 0xffffff" },
	{ "1:" GID ":-1:1:1:h", "field 3 (UD QP number): not a hex number" },
	{ "1:" GID ":1:10000000000000000:1:h", "field 4 (nonce): above" },
	{ "1:" GID ":1:1:100000000:h", "field 5 (wire version): above" },
	{ "1:" GID ":1:1:1 :h", "field 5 (wire version): not a hex number" },
	{ "1:" GID ":1:1:1:", "field 6 (host): empty" },
	{ "1:" GID ":1:1:1", "field 6 (host): missing" },
	{ "1:" GID ":1:1", "field 5 (wire version): missing" },
	{ "1:" GID ":1", "field 4 (nonce): missing" },
	{ "1:" GID, "field 3 (UD QP number): missing" },
	{ "1", "field 2 (GID): missing" },
	{ "1:" GID ":1:1:1:h:1", "field 6 (host): a character 0x3a" },
	{ "1:" GID ":1:1:1:h ", "field 6 (host): a character 0x20" },
	{ "1:" GID ":1:1:1:h\n", "field 6 (host): a character 0x0a" },
	{ "1:" GID ":1:1:1:h\x80", "field 6 (host): a character 0x80" },
	{ "1:" GID ":1:1:1:"
	  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	  "field 6 (host): longer than 63" },
	/* the string form of an endpoint address (12 fields) is no record */
	{ "1:" GID ":1:2:7f0000001000:7f0000003000:20000:1234:1:5:3:3",
	  "field 5 (wire version): above" },
};

static int t_malformed(struct tst *t)
{
	struct ib_rec r, keep;
	char why[160];
	size_t i;

	memset(&keep, 0x5a, sizeof(keep));
	for (i = 0; i < sizeof(bad_recs) / sizeof(bad_recs[0]); i++) {
		const struct bad_rec *b = &bad_recs[i];
		int ret;

		r = keep;
		why[0] = '\0';
		ret = ib_rec_parse(b->s, &r, why, sizeof(why));
		TST_CHECK(t, ret == -EPROTO, "\"%s\": %s, not -EPROTO", b->s,
			  tst_errname(ret));
		TST_CHECK(t, strstr(why, b->why), "\"%s\": reason \"%s\", not "
			  "\"%s\"", b->s, why, b->why);
		TST_CHECK(t, !memcmp(&r, &keep, sizeof(r)), "\"%s\": the "
			  "record was written", b->s);
	}
	return 0;
}

/* Longer than any record: refused before a field is looked at. */
static int t_overlong(struct tst *t)
{
	char s[IB_REC_LEN_MAX + 64], why[160];
	struct ib_rec r;

	memset(s, '1', sizeof(s) - 1);
	s[sizeof(s) - 1] = '\0';
	TST_CHECK_EQ(t, ib_rec_parse(s, &r, why, sizeof(why)), -EPROTO);
	TST_CHECK(t, strstr(why, "longer than"), "reason \"%s\"", why);
	/* a reason cut to a small buffer stays a string */
	TST_CHECK_EQ(t, ib_rec_parse("1:" GID ":0:1:1:h", &r, why, 8),
		     -EPROTO);
	TST_CHECK(t, strlen(why) == 7, "reason of %zu bytes", strlen(why));
	return 0;
}

static int t_gid(struct tst *t)
{
	uint8_t g[16], back[16];
	char hex[33];
	int i;

	for (i = 0; i < 16; i++)
		g[i] = (uint8_t)(0xf0 ^ i * 29);
	ib_rec_gid_hex(g, hex);
	TST_CHECK(t, strlen(hex) == 32, "hex of %zu digits", strlen(hex));
	TST_CHECK0(t, ib_rec_gid_unhex(hex, back));
	TST_CHECK(t, !memcmp(g, back, 16), "GID changed on the way back");
	TST_CHECK0(t, ib_rec_gid_unhex("FE80000000000000020C29FFFE3A4B5C",
				       back));
	TST_CHECK(t, back[0] == 0xfe && back[15] == 0x5c, "upper case");
	TST_CHECK_EQ(t, ib_rec_gid_unhex("fe80", back), -EPROTO);
	return 0;
}

static const struct tst_case cases[] = {
	{ "rec_round_trip", 1, t_round_trip, TST_UNIT, NULL, { 0 } },
	{ "rec_malformed", 1, t_malformed, TST_UNIT, NULL, { 0 } },
	{ "rec_overlong", 1, t_overlong, TST_UNIT, NULL, { 0 } },
	{ "rec_gid", 1, t_gid, TST_UNIT, NULL, { 0 } },
};
#else
static int t_no_ib(struct tst *t)
{
	return tst_skip(t, "built without ib");
}

static const struct tst_case cases[] = {
	{ "rec", 1, t_no_ib, TST_UNIT, NULL, { 0 } },
};
#endif

int main(int argc, char **argv)
{
	return tst_main(argc, argv, cases,
			(int)(sizeof(cases) / sizeof(cases[0])));
}
