/*
 * num.h - unsigned numbers in text that comes from outside the process
 * (knobs, PMI replies, peers' out-of-band records), parsed strictly: digits
 * of one base only (no blank, sign or prefix, so no octal and no "0x"
 * here: a caller that takes one skips it), at least one, and a value
 * bounded by the caller, checked digit by digit (no overflow).
 */
#ifndef RDMACH_CORE_NUM_H
#define RDMACH_CORE_NUM_H

#include <stdint.h>

/* The value of digit c in base (10 or 16; hex digits of either case), or
 * -1 when c is none. */
int rdmach_num_digit(char c, unsigned int base);

/* The number in base (10 or 16) at s, at most max.  With end, it ends at
 * the first byte that is not a digit of base and *end is set to that byte;
 * without, that byte must be the string's end.  0 and *out (and *end)
 * set; -EINVAL for no digit or bytes after the number (end NULL),
 * -ERANGE for a value above max.  Nothing is written on failure. */
int rdmach_num(const char *s, unsigned int base, uint64_t max, uint64_t *out,
	       const char **end);

#endif /* RDMACH_CORE_NUM_H */
