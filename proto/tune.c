/* tune.c - large-message performance model, derived settings, copy
 * measurement and the tuning cache file format: see tune.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/log.h"
#include "tune.h"

const uint64_t tune_copy_sizes[TUNE_COPY_NUM] = {
	[TUNE_COPY_SMALL] = 64u << 10,
	[TUNE_COPY_MID] = 1u << 20,
	[TUNE_COPY_LARGE] = 1u << 20,
};

#define TUNE_Q_MIN 1.2
#define TUNE_Q_MAX 4.0
#define TUNE_BUF_MIN (64u << 10)
#define TUNE_BUF_MAX (1u << 20)
#define TUNE_THR_MIN (64u << 10)	/* large begins where zero-copy's does */
#define TUNE_THR_MAX (1u << 20)
#define TUNE_GAP_SHARE 50.0	/* a chunk's write lasts >= 50 gaps (2%) */
#define TUNE_COPY_PIECE (4096u - SPIPE_WORDS)	/* a 4K block's payload */

void tune_machine_default(struct tune_machine *m)
{
	memset(m, 0, sizeof(*m));
	m->bcopy[TUNE_COPY_SMALL] = 8e9;
	m->bcopy[TUNE_COPY_MID] = 5e9;
	m->bcopy[TUNE_COPY_LARGE] = 3e9;
	m->lat_reg = 68e-6;
	m->breg = 20e9;
	m->lat_net = 1.5e-6;
	m->bnet = 1.5e9;
	m->gap = 0.3e-6;
}

static int tune_ok(double x)
{
	return isfinite(x) && x > 0;
}

int tune_machine_check(const struct tune_machine *m)
{
	int i;

	for (i = 0; i < TUNE_COPY_NUM; i++)
		if (!tune_ok(m->bcopy[i]))
			return -EINVAL;
	if (!tune_ok(m->lat_reg) || !tune_ok(m->breg) ||
	    !tune_ok(m->lat_net) || !tune_ok(m->bnet) ||
	    !isfinite(m->gap) || m->gap < 0)
		return -EINVAL;
	return 0;
}

/* B_copy for a copy of len bytes: the class it falls in. */
static double tune_bcopy(const struct tune_machine *m, uint64_t len)
{
	if (len <= tune_copy_sizes[TUNE_COPY_SMALL])
		return m->bcopy[TUNE_COPY_SMALL];
	if (len <= tune_copy_sizes[TUNE_COPY_MID])
		return m->bcopy[TUNE_COPY_MID];
	return m->bcopy[TUNE_COPY_LARGE];
}

static uint64_t tune_pow2_up(uint64_t x)
{
	uint64_t p = 1;

	while (p < x)
		p <<= 1;
	return p;
}

void tune_derive(const struct tune_machine *m, uint32_t mtu,
		 uint64_t ring_chunk, struct tune_settings *s)
{
	struct spipe_params *p = &s->sp;
	double q = m->bcopy[TUNE_COPY_LARGE] / m->bnet;
	uint64_t pay, c0, buf, len;

	memset(s, 0, sizeof(*s));
	p->block = (uint32_t)tune_pow2_up(mtu > 4096 ? mtu : 4096);
	pay = spipe_block_payload(p);
	c0 = (uint64_t)(m->bcopy[TUNE_COPY_SMALL] * 2 * m->lat_net);
	c0 = c0 < pay ? pay : (c0 + pay - 1) / pay * pay;
	if (q < TUNE_Q_MIN)
		q = TUNE_Q_MIN;
	if (q > TUNE_Q_MAX)
		q = TUNE_Q_MAX;
	p->q256 = (uint32_t)(q * SPIPE_Q_ONE + 0.5);
	buf = 8 * c0 / pay * p->block;
	if (TUNE_GAP_SHARE * m->gap * m->bnet > (double)buf)
		buf = (uint64_t)(TUNE_GAP_SHARE * m->gap * m->bnet);
	buf = tune_pow2_up(buf);
	if (buf < TUNE_BUF_MIN)
		buf = TUNE_BUF_MIN;
	if (buf > TUNE_BUF_MAX)
		buf = TUNE_BUF_MAX;
	if (buf < p->block)
		buf = p->block;
	p->buf_size = buf;
	p->nbufs = 3;
	p->c0 = c0 < spipe_buf_payload(p) ? c0 : spipe_buf_payload(p);
	s->sp_threshold = TUNE_THR_MAX;
	for (len = TUNE_THR_MIN; len <= TUNE_THR_MAX; len *= 2) {
		if (tune_t_spipe(m, p, len) <= tune_t_ring(m, len, ring_chunk)) {
			s->sp_threshold = len;
			break;
		}
	}
}

/* ---- model ------------------------------------------------------------- */

double tune_t_reg(const struct tune_machine *m, uint64_t len)
{
	return m->lat_reg + (double)len / m->breg;
}

/* The stream's rate: the network, or the copy when that is slower. */
static double tune_rate(const struct tune_machine *m, uint64_t len)
{
	double c = tune_bcopy(m, len);

	return c < m->bnet ? c : m->bnet;
}

double tune_t_ring(const struct tune_machine *m, uint64_t len,
		   uint64_t chunk)
{
	uint64_t c = chunk < len ? chunk : len;
	double n = (double)((len + chunk - 1) / chunk);

	return (double)c / tune_bcopy(m, len) + n * m->gap + m->lat_net +
	       (double)len / tune_rate(m, len) +
	       (double)c / m->bcopy[TUNE_COPY_SMALL];
}

double tune_t_spipe(const struct tune_machine *m, const struct spipe_params *p,
		    uint64_t len)
{
	uint64_t pay = spipe_block_payload(p), cap = spipe_buf_payload(p);
	uint64_t c0 = (p->c0 + pay - 1) / pay * pay;
	double n = (double)spipe_chunks_for(p, len), wire, t, stall;

	if (c0 > cap)
		c0 = cap;
	if (c0 > len)
		c0 = len;
	/* every block carries 16 bytes of words */
	wire = (double)len * p->block / (double)pay;
	t = (double)c0 / tune_bcopy(m, len) + (n + 1) * m->gap + m->lat_net +
	    wire / tune_rate(m, len) +
	    (double)p->block / m->bcopy[TUNE_COPY_SMALL];
	/* folded: chunk g waits for g - N's ack when N - 1 full buffers on
	 * the wire last less than an ack's round trip */
	if (n > p->nbufs) {
		stall = 2 * m->lat_net + (double)cap / m->bcopy[TUNE_COPY_SMALL] -
			(double)(p->nbufs - 1) * (double)cap / m->bnet;
		if (stall > 0)
			t += stall * (n - p->nbufs);
	}
	return t;
}

double tune_t_zcopy(const struct tune_machine *m, uint64_t len, int nregs)
{
	return 3 * m->lat_net + m->gap + (double)len / m->bnet +
	       nregs * tune_t_reg(m, len);
}

/* ---- copy measurement ---------------------------------------------------- */

#define TUNE_HUGE (2u << 20)
#ifdef MADV_POPULATE_WRITE
#define TUNE_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define TUNE_MADV_POPULATE_WRITE 23	/* Linux 5.14 */
#endif

void *tune_region_alloc(void)
{
	size_t len = TUNE_REGION_BYTES + TUNE_HUGE;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t a;

	if (p == MAP_FAILED)
		return NULL;
	a = ((uintptr_t)p + TUNE_HUGE - 1) & ~(uintptr_t)(TUNE_HUGE - 1);
	/* the mapping's start goes into its tail (at least a page beyond
	 * the region), for free */
#ifdef MADV_HUGEPAGE
	madvise((void *)a, TUNE_REGION_BYTES, MADV_HUGEPAGE);
#endif
	/* the kernel's zeroing of the faulted pages is the only pass over
	 * them; a memset after it doubled the cost (Linux < 5.14: memset) */
	if (madvise((void *)a, TUNE_REGION_BYTES, TUNE_MADV_POPULATE_WRITE))
		memset((void *)a, 1, TUNE_REGION_BYTES);
	memcpy((void *)(a + TUNE_REGION_BYTES), &p, sizeof(p));
	return (void *)a;
}

void tune_region_free(void *region)
{
	uint8_t *p;

	if (!region)
		return;
	memcpy(&p, (uint8_t *)region + TUNE_REGION_BYTES, sizeof(p));
	munmap(p, TUNE_REGION_BYTES + TUNE_HUGE);
}

/* len bytes in pieces of a default block's payload, as the superpipeline
 * copies (under an emulated CPU, glibc's copy of one 16 KiB-1 MiB piece
 * can be tens of times slower than the same bytes in 4 KiB pieces). */
static void tune_copy_pieces(uint8_t *dst, const uint8_t *src, uint64_t len)
{
	uint64_t off, n;

	for (off = 0; off < len; off += n) {
		n = len - off < TUNE_COPY_PIECE ? len - off : TUNE_COPY_PIECE;
		memcpy(dst + off, src + off, n);
	}
}

/* Write len bytes at p back to memory and drop them from every cache
 * level, where a process can (x86-64, AArch64); elsewhere the copy that
 * follows stays cache-warm. */
static void tune_evict(const uint8_t *p, uint64_t len)
{
	uint64_t off;

	for (off = 0; off < len; off += 64) {
#if defined(__x86_64__)
		__builtin_ia32_clflush(p + off);
#elif defined(__aarch64__)
		__asm__ __volatile__("dc civac, %0" : : "r"(p + off) : "memory");
#endif
	}
#if defined(__x86_64__)
	__builtin_ia32_mfence();
#elif defined(__aarch64__)
	__asm__ __volatile__("dsb ish" : : : "memory");
#endif
}

void tune_measure_copy(struct tune_machine *m, void *region, double budget_s)
{
	static const int reps[TUNE_COPY_NUM] = { 8, 4, 2 };
	uint64_t big = TUNE_REGION_BYTES / 2;
	double start = rdmach_now_s();
	uint8_t *src = region, *dst = src + big;
	int i, r;

	for (i = 0; i < TUNE_COPY_NUM; i++) {
		uint64_t len = tune_copy_sizes[i];
		double best = 0;

		/* the first copy counts too (cold code and caches only make
		 * it slower); more while the budget lasts, the best kept */
		for (r = 0; r < reps[i]; r++) {
			double t0, dt;

			if (i == TUNE_COPY_LARGE) {
				tune_evict(src, len);
				tune_evict(dst, len);
			}
			t0 = rdmach_now_s();
			tune_copy_pieces(dst, src, len);
			/* keep the copy: the compiler may not drop it */
			__asm__ __volatile__("" : : "r"(dst) : "memory");
			dt = rdmach_now_s() - t0;
			if (dt > 0 && (best == 0 || dt < best))
				best = dt;
			if (rdmach_now_s() - start > budget_s * (i + 1) / TUNE_COPY_NUM)
				break;
		}
		if (best > 0)
			m->bcopy[i] = (double)len / best;
	}
}

/* ---- cache file ---------------------------------------------------------- */

/* A value fit for "key=value\n": printable, no newline. */
static void tune_clean(char *s)
{
	char *p;

	for (p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
}

static void tune_cpu_model(char *out, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];

	snprintf(out, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');

		if (strncmp(line, "model name", 10) || !c)
			continue;
		c++;
		while (*c == ' ' || *c == '\t')
			c++;
		c[strcspn(c, "\n")] = '\0';
		snprintf(out, len, "%s", c);
		break;
	}
	fclose(f);
}

void tune_key_local(struct tune_key *k, const char *device, unsigned int port)
{
	struct utsname u;

	memset(k, 0, sizeof(*k));
	snprintf(k->device, sizeof(k->device), "%s", device);
	k->port = port;
	if (!uname(&u))
		snprintf(k->kernel, sizeof(k->kernel), "%s", u.release);
	tune_cpu_model(k->cpu, sizeof(k->cpu));
	if (gethostname(k->host, sizeof(k->host) - 1))
		snprintf(k->host, sizeof(k->host), "unknown");
	tune_clean(k->device);
	tune_clean(k->kernel);
	tune_clean(k->cpu);
	tune_clean(k->host);
}

int tune_format(const struct tune_machine *m, const struct tune_key *k,
		char *buf, size_t len)
{
	int n = snprintf(buf, len,
		"# rdmach tuning cache: the machine's figures for the large-"
		"message model\n"
		"# (rdma_ib/README.md, RDMACH_TUNE); remove it to measure "
		"again\n"
		"version=%d\ndevice=%s\nport=%u\nkernel=%s\ncpu=%s\nhost=%s\n"
		"bcopy_small=%.9g\nbcopy_mid=%.9g\nbcopy_large=%.9g\n"
		"lat_reg=%.9g\nbreg=%.9g\nlat_net=%.9g\nbnet=%.9g\n"
		"gap=%.9g\nmeasure_s=%.9g\n",
		TUNE_VERSION, k->device, k->port, k->kernel, k->cpu, k->host,
		m->bcopy[TUNE_COPY_SMALL], m->bcopy[TUNE_COPY_MID],
		m->bcopy[TUNE_COPY_LARGE], m->lat_reg, m->breg, m->lat_net,
		m->bnet, m->gap, m->measure_s);

	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
	return n;
}

struct tune_field {
	const char *name;
	double *v;
};

int tune_parse(const char *text, const struct tune_key *k,
	       struct tune_machine *out)
{
	struct tune_machine m;
	struct tune_field f[] = {
		{ "bcopy_small", &m.bcopy[TUNE_COPY_SMALL] },
		{ "bcopy_mid", &m.bcopy[TUNE_COPY_MID] },
		{ "bcopy_large", &m.bcopy[TUNE_COPY_LARGE] },
		{ "lat_reg", &m.lat_reg }, { "breg", &m.breg },
		{ "lat_net", &m.lat_net }, { "bnet", &m.bnet },
		{ "gap", &m.gap }, { "measure_s", &m.measure_s },
	};
	const size_t nf = sizeof(f) / sizeof(f[0]);
	unsigned int seen = 0, keys = 0;
	char port[16];
	const char *line = text;
	int stale = 0;
	size_t i;

	memset(&m, 0, sizeof(m));
	snprintf(port, sizeof(port), "%u", k->port);
	while (line && *line) {
		const char *nl = strchr(line, '\n'), *eq = strchr(line, '=');
		size_t ll = nl ? (size_t)(nl - line) : strlen(line);
		char key[32], val[160];

		if (*line != '#' && ll && (!eq || eq > line + ll))
			return -EINVAL;
		if (*line == '#' || !ll) {
			line = nl ? nl + 1 : NULL;
			continue;
		}
		if ((size_t)(eq - line) >= sizeof(key) ||
		    ll - (size_t)(eq - line) - 1 >= sizeof(val))
			return -EINVAL;
		memcpy(key, line, (size_t)(eq - line));
		key[eq - line] = '\0';
		memcpy(val, eq + 1, ll - (size_t)(eq - line) - 1);
		val[ll - (size_t)(eq - line) - 1] = '\0';
		line = nl ? nl + 1 : NULL;
		if (!strcmp(key, "version")) {
			stale |= atoi(val) != TUNE_VERSION;
			keys |= 1;
		} else if (!strcmp(key, "device")) {
			stale |= strcmp(val, k->device) != 0;
			keys |= 2;
		} else if (!strcmp(key, "port")) {
			stale |= strcmp(val, port) != 0;
			keys |= 4;
		} else if (!strcmp(key, "kernel")) {
			stale |= strcmp(val, k->kernel) != 0;
			keys |= 8;
		} else if (!strcmp(key, "cpu")) {
			stale |= strcmp(val, k->cpu) != 0;
			keys |= 16;
		} else if (!strcmp(key, "host")) {
			stale |= strcmp(val, k->host) != 0;
			keys |= 32;
		} else {
			for (i = 0; i < nf && strcmp(key, f[i].name); i++)
				;
			if (i < nf) {
				char *end;

				*f[i].v = strtod(val, &end);
				if (end == val || *end)
					return -EINVAL;
				seen |= 1u << i;
			}
			/* unknown keys: a later version's extras */
		}
	}
	if (keys != 63 || stale)
		return -ESTALE;
	if (seen != (1u << nf) - 1 || tune_machine_check(&m))
		return -EINVAL;
	*out = m;
	return 0;
}
