/*
 * fuzz_in.h - an input consumed byte by byte by a harness's driver
 * (zeros once it is used up).
 */
#ifndef RDMACH_FUZZ_IN_H
#define RDMACH_FUZZ_IN_H

#include <stddef.h>
#include <stdint.h>

struct fuzz_in {
	const uint8_t *p;
	size_t left;
};

static inline unsigned int fuzz_byte(struct fuzz_in *in)
{
	if (!in->left)
		return 0;
	in->left--;
	return *in->p++;
}

#endif /* RDMACH_FUZZ_IN_H */
