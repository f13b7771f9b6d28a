/*
 * oobval.h - text carried in out-of-band values (PMI-1 splits a line at
 * blanks and keys at '='): bytes outside '!'..'~', and '%' and '=', travel
 * as %XX.  A peer's value is input: the decoder checks every escape.
 */
#ifndef RDMACH_CORE_OOBVAL_H
#define RDMACH_CORE_OOBVAL_H

#include <stddef.h>

/* Encode s into out (len bytes, NUL included); a byte whose escape no
 * longer fits ends the text there. */
void rdmach_oobval_encode(const char *s, char *out, size_t len);
/* Decode in into out (len bytes, NUL included).  0; -EPROTO for a '%' not
 * followed by two hex digits, or an escaped NUL; -EMSGSIZE when out is
 * too small.  out is written only on success. */
int rdmach_oobval_decode(const char *in, char *out, size_t len);

#endif /* RDMACH_CORE_OOBVAL_H */
