/*
 * fuzz_oobval - decoders of a peer's out-of-band text: the %XX decoder
 * (core/oobval.c) and the escaping of foreign text for messages
 * (rdmach_log_esc, core/log.c).  The input, NUL-terminated in a buffer of
 * its exact size (so that a read past the NUL is caught), is decoded; what
 * decodes must encode and decode back to itself; any text escapes into a
 * buffer of every small size without a control character.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/oobval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_round_trip(const char *plain, size_t len)
{
	size_t cap = 3 * len + 1;
	char *enc = malloc(cap), *back = malloc(len + 1);

	if (!enc || !back)
		abort();
	rdmach_oobval_encode(plain, enc, cap);
	if (rdmach_oobval_decode(enc, back, len + 1) || strcmp(back, plain))
		abort();
	free(enc);
	free(back);
}

static void fuzz_esc(const char *s)
{
	char buf[64];
	size_t len, i;

	for (len = 0; len <= sizeof(buf); len += 7) {
		const char *e = rdmach_log_esc(s, buf, len);

		if (len && strlen(e) >= len)
			abort();
		for (i = 0; e[i]; i++)
			if ((unsigned char)e[i] < ' ' ||
			    (unsigned char)e[i] >= 0x7f)
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1), *out = malloc(size + 1);

	if (!in || !out)
		abort();
	memcpy(in, data, size);
	in[size] = '\0';
	if (!rdmach_oobval_decode(in, out, size + 1))
		fuzz_round_trip(out, strlen(out));
	fuzz_esc(in);
	free(in);
	free(out);
	return 0;
}
