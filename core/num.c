/* num.c - strict bounded numbers (see num.h). */
#include <errno.h>

#include "num.h"

int rdmach_num_digit(char c, unsigned int base)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (base == 16 && c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (base == 16 && c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int rdmach_num(const char *s, unsigned int base, uint64_t max, uint64_t *out,
	       const char **end)
{
	const char *p = s;
	uint64_t v = 0;
	int d;

	if (base != 10 && base != 16)
		return -EINVAL;
	for (; (d = rdmach_num_digit(*p, base)) >= 0; p++) {
		/* v * base + d > max, without overflowing */
		if ((uint64_t)d > max || v > (max - (uint64_t)d) / base)
			return -ERANGE;
		v = v * base + (uint64_t)d;
	}
	if (p == s || (!end && *p))
		return -EINVAL;
	if (end)
		*end = p;
	*out = v;
	return 0;
}
