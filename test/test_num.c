/*
 * test_num.c - the strict bounded number parser every parser of outside
 * text uses (core/num.h): bases, bounds at and past every limit without
 * overflow, what ends a number, and that nothing is written on failure.
 * Cases run under the test kit (TST_UNIT, test/lib/tst.h).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "core/num.h"
#include "lib/tst.h"

struct num_case {
	const char *s;
	unsigned int base;
	uint64_t max;
	int ret;		/* expected */
	uint64_t v;		/* expected value when ret is 0 */
};

static const struct num_case num_cases[] = {
	{ "0", 10, 0, 0, 0 },
	{ "65535", 10, 0xffff, 0, 0xffff },
	{ "65536", 10, 0xffff, -ERANGE, 0 },
	{ "18446744073709551615", 10, UINT64_MAX, 0, UINT64_MAX },
	{ "18446744073709551616", 10, UINT64_MAX, -ERANGE, 0 },
	{ "99999999999999999999999", 10, UINT64_MAX, -ERANGE, 0 },
	{ "ffffffffffffffff", 16, UINT64_MAX, 0, UINT64_MAX },
	{ "10000000000000000", 16, UINT64_MAX, -ERANGE, 0 },
	{ "FfFfFf", 16, 0xffffff, 0, 0xffffff },
	{ "1000000", 16, 0xffffff, -ERANGE, 0 },
	{ "9", 10, 5, -ERANGE, 0 },		/* one digit above max */
	{ "0100000", 10, UINT64_MAX, 0, 100000 },	/* no octal */
	{ "0x10", 16, UINT64_MAX, -EINVAL, 0 },	/* no prefix */
	{ "", 10, UINT64_MAX, -EINVAL, 0 },
	{ " 1", 10, UINT64_MAX, -EINVAL, 0 },
	{ "+1", 10, UINT64_MAX, -EINVAL, 0 },
	{ "-0", 10, UINT64_MAX, -EINVAL, 0 },
	{ "1 ", 10, UINT64_MAX, -EINVAL, 0 },
	{ "12a", 10, UINT64_MAX, -EINVAL, 0 },
	{ "12g", 16, UINT64_MAX, -EINVAL, 0 },
	{ "1", 8, UINT64_MAX, -EINVAL, 0 },	/* bases 10 and 16 only */
};

static int t_num_bounds(struct tst *t)
{
	size_t i;

	for (i = 0; i < sizeof(num_cases) / sizeof(num_cases[0]); i++) {
		const struct num_case *c = &num_cases[i];
		uint64_t v = 77;
		int ret = rdmach_num(c->s, c->base, c->max, &v, NULL);

		TST_CHECK(t, ret == c->ret, "\"%s\" base %u max %llu: %s, "
			  "not %s", c->s, c->base, (unsigned long long)c->max,
			  tst_errname(ret), tst_errname(c->ret));
		TST_CHECK(t, ret ? v == 77 : v == c->v, "\"%s\": value %llu",
			  c->s, (unsigned long long)v);
	}
	return 0;
}

/* With end: the number stops at the first byte that is no digit. */
static int t_num_end(struct tst *t)
{
	const char *s = "1f:rest", *end = NULL;
	uint64_t v = 0;

	TST_CHECK0(t, rdmach_num(s, 16, UINT64_MAX, &v, &end));
	TST_CHECK(t, v == 0x1f && end == s + 2, "1f: %llu, end +%d",
		  (unsigned long long)v, (int)(end - s));
	TST_CHECK0(t, rdmach_num(s, 10, UINT64_MAX, &v, &end));
	TST_CHECK(t, v == 1 && end == s + 1, "1 (decimal): %llu, end +%d",
		  (unsigned long long)v, (int)(end - s));
	end = NULL;
	TST_CHECK_EQ(t, rdmach_num(":1", 16, UINT64_MAX, &v, &end), -EINVAL);
	TST_CHECK(t, end == NULL, "end written on failure");
	TST_CHECK_EQ(t, rdmach_num("fff:", 16, 0xff, &v, &end), -ERANGE);
	TST_CHECK(t, end == NULL, "end written on failure");
	TST_CHECK(t, rdmach_num_digit('a', 10) < 0 &&
		  rdmach_num_digit('F', 16) == 15 &&
		  rdmach_num_digit('\0', 16) < 0, "digit values");
	return 0;
}

static const struct tst_case cases[] = {
	{ "num_bounds", 1, t_num_bounds, TST_UNIT, NULL, { 0 } },
	{ "num_end", 1, t_num_end, TST_UNIT, NULL, { 0 } },
};

int main(int argc, char **argv)
{
	return tst_main(argc, argv, cases,
			(int)(sizeof(cases) / sizeof(cases[0])));
}
