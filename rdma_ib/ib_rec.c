/* ib_rec.c - rdma_ib's out-of-band record: see ib_rec.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ib_rec.h"
#include "core/num.h"

enum { IB_REC_LID, IB_REC_GID, IB_REC_QPN, IB_REC_NONCE, IB_REC_WIRE,
       IB_REC_HOST, IB_REC_FIELDS };

/* Each field's name (for messages) and, for a number, its range. */
static const struct ib_rec_field {
	const char *name;
	uint64_t min, max;
} ib_rec_fields[IB_REC_FIELDS] = {
	[IB_REC_LID] = { "LID", 0, 0xffff },
	[IB_REC_GID] = { "GID", 0, 0 },
	[IB_REC_QPN] = { "UD QP number", 1, 0xffffff },
	[IB_REC_NONCE] = { "nonce", 0, UINT64_MAX },
	[IB_REC_WIRE] = { "wire version", 0, UINT32_MAX },
	[IB_REC_HOST] = { "host", 0, 0 },
};

void ib_rec_gid_hex(const uint8_t gid[16], char out[33])
{
	int i;

	for (i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", gid[i]);
}

int ib_rec_gid_unhex(const char *s, uint8_t gid[16])
{
	uint8_t t[16];
	int i;

	/* digit by digit: a NUL is no digit, so nothing past it is read */
	for (i = 0; i < 32; i++) {
		int d = rdmach_num_digit(s[i], 16);

		if (d < 0)
			return -EPROTO;
		if (i & 1)
			t[i / 2] = (uint8_t)(t[i / 2] << 4 | d);
		else
			t[i / 2] = (uint8_t)d;
	}
	if (s[32] != ':' && s[32] != '\0')
		return -EPROTO;
	memcpy(gid, t, sizeof(t));
	return 0;
}

static int ib_rec_host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

void ib_rec_host_clean(char *host)
{
	char *p;

	if (!*host)
		snprintf(host, IB_REC_HOST_MAX, "unknown");
	for (p = host; *p; p++)	/* a record is one token */
		if (!ib_rec_host_char(*p))
			*p = '_';
}

void ib_rec_format(const struct ib_rec *r, char *buf, size_t len)
{
	char gid[33];

	ib_rec_gid_hex(r->gid, gid);
	snprintf(buf, len, "%x:%s:%x:%" PRIx64 ":%x:%s", r->lid, gid,
		 r->ud_qpn, r->nonce, r->wire, r->host);
}

static int ib_rec_bad(char *why, size_t whylen, int f, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int ib_rec_bad(char *why, size_t whylen, int f, const char *fmt, ...)
{
	char what[96];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(why, whylen, "field %d (%s): %s", f + 1,
		 ib_rec_fields[f].name, what);
	return -EPROTO;
}

/* Field f, a hex number, at p: its value in *v, the byte after it in
 * *end. */
static int ib_rec_num(const char *p, int f, uint64_t *v, const char **end,
		      char *why, size_t whylen)
{
	const struct ib_rec_field *d = &ib_rec_fields[f];
	int ret = rdmach_num(p, 16, d->max, v, end);

	if (ret == -ERANGE)
		return ib_rec_bad(why, whylen, f, "above 0x%" PRIx64, d->max);
	if (ret || (**end != ':' && **end != '\0'))
		return ib_rec_bad(why, whylen, f, "not a hex number");
	if (*v < d->min)
		return ib_rec_bad(why, whylen, f, "below 0x%" PRIx64, d->min);
	return 0;
}

/* The host: allowed characters up to the end of the record. */
static int ib_rec_host(const char *p, char *host, char *why, size_t whylen)
{
	size_t n = 0;

	while (ib_rec_host_char(p[n]) && n < IB_REC_HOST_MAX)
		n++;
	if (!n)
		return ib_rec_bad(why, whylen, IB_REC_HOST, "empty");
	if (n == IB_REC_HOST_MAX)
		return ib_rec_bad(why, whylen, IB_REC_HOST, "longer than %d "
				  "characters", IB_REC_HOST_MAX - 1);
	if (p[n])
		return ib_rec_bad(why, whylen, IB_REC_HOST, "a character 0x%02x "
				  "that is not a letter, digit, '.', '-' or "
				  "'_' (or more fields)", (unsigned char)p[n]);
	memcpy(host, p, n);
	host[n] = '\0';
	return 0;
}

/* Field f at p into t (v: the numbers); *end: the byte after it. */
static int ib_rec_field(const char *p, int f, struct ib_rec *t, uint64_t *v,
			const char **end, char *why, size_t whylen)
{
	if (f == IB_REC_HOST) {
		*end = p + strlen(p);
		return ib_rec_host(p, t->host, why, whylen);
	}
	if (f != IB_REC_GID)
		return ib_rec_num(p, f, &v[f], end, why, whylen);
	if (ib_rec_gid_unhex(p, t->gid))
		return ib_rec_bad(why, whylen, f, "not 32 hex digits");
	*end = p + 32;
	return 0;
}

int ib_rec_parse(const char *s, struct ib_rec *r, char *why, size_t whylen)
{
	uint64_t v[IB_REC_FIELDS] = { 0 };
	size_t len = strnlen(s, IB_REC_LEN_MAX + 1);
	struct ib_rec t;
	const char *p = s;
	int f;

	if (!len) {
		snprintf(why, whylen, "empty");
		return -EPROTO;
	}
	if (len > IB_REC_LEN_MAX) {
		snprintf(why, whylen, "longer than %d bytes", IB_REC_LEN_MAX);
		return -EPROTO;
	}
	memset(&t, 0, sizeof(t));
	for (f = 0; f < IB_REC_FIELDS; f++) {
		if (f && *p++ != ':')
			return ib_rec_bad(why, whylen, f, "missing");
		if (ib_rec_field(p, f, &t, v, &p, why, whylen))
			return -EPROTO;
	}
	t.lid = (uint16_t)v[IB_REC_LID];
	t.ud_qpn = (uint32_t)v[IB_REC_QPN];
	t.nonce = v[IB_REC_NONCE];
	t.wire = (uint32_t)v[IB_REC_WIRE];
	*r = t;
	return 0;
}
