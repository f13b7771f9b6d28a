/*
 * fuzz_ib_rec - rdma_ib's out-of-band record parser (rdma_ib/ib_rec.c),
 * the text a peer publishes for the connection manager: the input,
 * NUL-terminated in a buffer of its exact size (a read past the NUL is
 * caught), is parsed; a record that parses must hold every field in its
 * range and format to a text that parses back to itself; a refused one
 * leaves the output untouched and gives a reason that names a field or
 * the length; the GID decoder alone likewise.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdma_ib/ib_rec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_check_ok(const struct ib_rec *r)
{
	char buf[IB_REC_LEN_MAX + 1], why[160];
	struct ib_rec back;
	size_t n = strlen(r->host), i;

	if (!r->ud_qpn || r->ud_qpn > 0xffffff || !n ||
	    n >= IB_REC_HOST_MAX)
		abort();
	for (i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789._-", r->host[i]))
			abort();
	ib_rec_format(r, buf, sizeof(buf));
	if (ib_rec_parse(buf, &back, why, sizeof(why)) ||
	    back.lid != r->lid || memcmp(back.gid, r->gid, 16) ||
	    back.ud_qpn != r->ud_qpn || back.nonce != r->nonce ||
	    back.wire != r->wire || strcmp(back.host, r->host))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), why[160];
	struct ib_rec r, keep;
	uint8_t gid[16] = { 0 }, gid0[16] = { 0 };

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	memset(&keep, 0xa5, sizeof(keep));
	r = keep;
	if (!ib_rec_parse(s, &r, why, sizeof(why))) {
		fuzz_check_ok(&r);
	} else if (memcmp(&r, &keep, sizeof(r)) || !memchr(why, '\0',
							    sizeof(why)) ||
		   (strncmp(why, "field ", 6) && strcmp(why, "empty") &&
		    strncmp(why, "longer than", 11))) {
		abort();
	}
	if (ib_rec_gid_unhex(s, gid) && memcmp(gid, gid0, 16))
		abort();
	free(s);
	return 0;
}
