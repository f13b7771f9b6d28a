/*
 * fuzz_knob - the knob value parser (core/knob.c: rdmach_knob_u64) on any
 * text, through the environment as a user sets it, for each kind of knob:
 * a size (power of two), a number where 0 means off, a boolean and an
 * "auto" number.  A value it accepts must obey the knob's rules, and plain
 * decimal text must read as decimal (a leading 0 is no octal).
 */
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/knob.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FK_SIZE, FK_UINT, FK_BOOL, FK_AUTO, FK_NUM };

static const struct rdmach_knob fuzz_knobs[FK_NUM] = {
	[FK_SIZE] = { "RDMACH_FUZZ_SIZE", RDMACH_KNOB_SIZE, "64K", 4096,
		      1ull << 40, "a size", RDMACH_KNOB_POW2 },
	[FK_UINT] = { "RDMACH_FUZZ_UINT", RDMACH_KNOB_UINT, "100", 5,
		      1000000, "a number, 0 off", RDMACH_KNOB_ZERO_OFF },
	[FK_BOOL] = { "RDMACH_FUZZ_BOOL", RDMACH_KNOB_BOOL, "1", 0, 1,
		      "a boolean", 0 },
	[FK_AUTO] = { "RDMACH_FUZZ_AUTO", RDMACH_KNOB_UINT, RDMACH_KNOB_AUTO,
		      0, UINT64_MAX, "auto or a number", 0 },
};
RDMACH_KNOB_TABLE(fuzz, fuzz_knobs);

#define FUZZ_VALUE_MAX 4096
/* NAME=value for putenv: setenv would keep every old string (glibc), and
 * the fuzzer's memory would grow without end. */
static char fuzz_env[FK_NUM][32 + FUZZ_VALUE_MAX + 1];

/* Digits only, short enough not to overflow: the decimal value. */
static int fuzz_decimal(const char *s, uint64_t *v)
{
	size_t n = strspn(s, "0123456789");

	if (!n || s[n] || n > 19)
		return 0;
	*v = strtoull(s, NULL, 10);
	return 1;
}

static void fuzz_check(int i, const char *s)
{
	const struct rdmach_knob *k = &fuzz_knobs[i];
	uint64_t v = 12345, dec;
	int ret;

	snprintf(fuzz_env[i], sizeof(fuzz_env[i]), "%s=%s", k->name, s);
	putenv(fuzz_env[i]);
	ret = rdmach_knob_u64(k, &v);
	unsetenv(k->name);
	if (ret == -ENODATA && !strcmp(k->deflt, RDMACH_KNOB_AUTO))
		return;
	if (ret) {
		if (ret != -EINVAL || v != 12345)
			abort();	/* refused: -EINVAL, *out untouched */
		return;
	}
	if (!*s)
		abort();	/* an empty value is refused */
	if (k->type == RDMACH_KNOB_BOOL ? v > 1 :
	    (v < k->min || v > k->max) &&
	    !(v == 0 && (k->rules & RDMACH_KNOB_ZERO_OFF)))
		abort();
	if ((k->rules & RDMACH_KNOB_POW2) && (v & (v - 1)))
		abort();
	if (k->type != RDMACH_KNOB_BOOL && fuzz_decimal(s, &dec) && v != dec)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;
	int i;

	if (size > FUZZ_VALUE_MAX)
		return 0;
	s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	for (i = 0; i < FK_NUM; i++)
		fuzz_check(i, s);
	free(s);
	return 0;
}
