/* pattern.c - a data pattern keyed by (stream seed, stream offset): every
 * 8-byte word of a stream is splitmix64(seed + word index), so a lost,
 * duplicated or reordered byte anywhere is caught, and a receiver can check
 * any slice without the sender's help. */
#include <string.h>

#include "tst.h"

static uint64_t pat_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t tst_rand(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return pat_mix(*state);
}

uint64_t tst_rand_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + tst_rand(state) % (hi - lo + 1);
}

uint64_t tst_seed(uint64_t test_id, int from, int to)
{
	return pat_mix(test_id * 1000003u + (uint64_t)from * 1009u +
		       (uint64_t)to) | 1;
}

uint8_t tst_pat_byte(uint64_t seed, uint64_t off)
{
	return (uint8_t)(pat_mix(seed + (off >> 3)) >> ((off & 7) * 8));
}

/* Little-endian word layout, independent of the host's byte order. */
static void pat_word_bytes(uint64_t w, uint8_t out[8])
{
	int i;

	for (i = 0; i < 8; i++)
		out[i] = (uint8_t)(w >> (i * 8));
}

void tst_pat_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
	uint8_t w[8];
	size_t i = 0;

	while (i < len && ((off + i) & 7))
		buf[i] = tst_pat_byte(seed, off + i), i++;
	for (; i + 8 <= len; i += 8) {
		pat_word_bytes(pat_mix(seed + ((off + i) >> 3)), w);
		memcpy(buf + i, w, 8);
	}
	for (; i < len; i++)
		buf[i] = tst_pat_byte(seed, off + i);
}

size_t tst_pat_check(const uint8_t *buf, size_t len, uint64_t seed,
		     uint64_t off)
{
	uint8_t w[8];
	size_t i = 0, j;

	while (i < len && ((off + i) & 7)) {
		if (buf[i] != tst_pat_byte(seed, off + i))
			return i;
		i++;
	}
	for (; i + 8 <= len; i += 8) {
		pat_word_bytes(pat_mix(seed + ((off + i) >> 3)), w);
		if (memcmp(buf + i, w, 8)) {
			for (j = 0; j < 8; j++)
				if (buf[i + j] != w[j])
					return i + j;
		}
	}
	for (; i < len; i++)
		if (buf[i] != tst_pat_byte(seed, off + i))
			return i;
	return len;
}
