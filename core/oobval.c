/* oobval.c - %XX encoding of out-of-band values (see oobval.h). */
#include <errno.h>
#include <stdio.h>

#include "num.h"
#include "oobval.h"

static int oobval_needs_escape(unsigned char ch)
{
	return ch <= ' ' || ch >= 0x7f || ch == '%' || ch == '=';
}

void rdmach_oobval_encode(const char *s, char *out, size_t len)
{
	size_t n = 0;

	if (!len)
		return;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (!oobval_needs_escape(ch) && n + 1 < len) {
			out[n++] = (char)ch;
			continue;
		}
		if (!oobval_needs_escape(ch) || n + 3 >= len)
			break;
		n += (size_t)snprintf(out + n, len - n, "%%%02X", ch);
	}
	out[n] = '\0';
}

/* The byte an escape at in stands for, or -1; never looks past a NUL. */
static int oobval_escape(const char *in)
{
	int hi = rdmach_num_digit(in[1], 16);
	int lo = hi < 0 ? -1 : rdmach_num_digit(in[2], 16);

	return lo < 0 || (hi | lo) == 0 ? -1 : hi << 4 | lo;
}

/* Length of in decoded, or -EPROTO. */
static long oobval_decoded_len(const char *in)
{
	long n = 0;

	for (; *in; in++, n++) {
		if (*in != '%')
			continue;
		if (oobval_escape(in) < 0)
			return -EPROTO;
		in += 2;
	}
	return n;
}

int rdmach_oobval_decode(const char *in, char *out, size_t len)
{
	long n = oobval_decoded_len(in);

	if (n < 0)
		return (int)n;
	if ((size_t)n >= len)
		return -EMSGSIZE;
	for (; *in; in++) {
		if (*in == '%') {
			*out++ = (char)oobval_escape(in);
			in += 2;
		} else {
			*out++ = *in;
		}
	}
	*out = '\0';
	return 0;
}
