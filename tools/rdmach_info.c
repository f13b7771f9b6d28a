/* rdmach_info - print the build's version, its transports and every
 * RDMACH_* knob with its default and the value set in this environment
 * (like ucx_info -v / -c); --tune: the large-message tuning of the ib
 * device (rdma_ib/ib_tune.h); --markdown: the knob reference as a Markdown
 * table (doc/knobs.md's generated block, `make knobs-doc`).  `rdmach_info
 * --help` is its manual page. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/knob.h"
#include "core/tl.h"
#include "rdmach.h"
#include "rdma_shm/shm_seg.h"
#ifdef RDMACH_HAVE_IB
#include "rdma_ib/ib_tune.h"
#endif

/* --tune: measured figures, derived settings and the model's predictions
 * for the device the RDMACH_IB_* knobs select (RDMACH_TUNE applies). */
static int info_tune(void)
{
#ifdef RDMACH_HAVE_IB
	int ret = ib_tune_report(stdout);

	if (ret)
		fprintf(stderr, "rdmach_info --tune: no usable RDMA device "
			"(%s)\n", rdmach_strerror(ret));
	return ret ? 1 : 0;
#else
	fprintf(stderr, "rdmach_info --tune: built without ib\n");
	return 1;
#endif
}

/* Registered memory per process against peers and rings, as the knobs
 * set now (RDMACH_CONNECT, RDMACH_IB_*): rdma_ib/README.md's model. */
static void info_memory(void)
{
#ifdef RDMACH_HAVE_IB
	const struct rdmach_knob *k = rdmach_knob_find("RDMACH_CONNECT");
	const struct rdmach_knob *m = rdmach_knob_find("RDMACH_CONNECT_ALL_MAX");
	const char *c = k ? rdmach_knob_str(k) : "all";
	uint64_t above = UINT64_MAX;	/* all */

	/* the rule rdmach_connect applies (core/rdmach.c) */
	if (c && !strcmp(c, "demand"))
		above = 0;
	else if (c && !strcmp(c, "auto") && m && rdmach_knob_u64(m, &above))
		return;		/* a bad value: said so by name */
	ib_mem_report(stdout, above);
#endif
}

#ifndef RDMACH_VERSION
#define RDMACH_VERSION "unknown"
#endif

/* Bounds of the "rdmach_tls" section (RDMACH_TL_REGISTER, core/tl.h). */
extern const struct rdmach_tl_ops *const __start_rdmach_tls[]
	__attribute__((visibility("hidden")));
extern const struct rdmach_tl_ops *const __stop_rdmach_tls[]
	__attribute__((visibility("hidden")));

/* Bounds of the "rdmach_knob_tables" section (RDMACH_KNOB_TABLE,
 * core/knob.h): the library is one relocatable object, so every module's
 * table is in this program. */
extern const struct rdmach_knob_table *const __start_rdmach_knob_tables[]
	__attribute__((visibility("hidden")));
extern const struct rdmach_knob_table *const __stop_rdmach_knob_tables[]
	__attribute__((visibility("hidden")));

/* A size as a user writes it: 64K, 2M, 1G; UINT64_MAX: no limit. */
static void md_size(char *buf, size_t len, uint64_t v)
{
	static const char suffix[] = "GMK";
	int i;

	if (v == UINT64_MAX) {
		snprintf(buf, len, "no limit");
		return;
	}
	for (i = 0; i < 3; i++) {
		unsigned shift = 30 - 10 * i;

		if (v && !(v & ((1ull << shift) - 1))) {
			snprintf(buf, len, "%llu%c",
				 (unsigned long long)(v >> shift), suffix[i]);
			return;
		}
	}
	snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* Markdown table text: '|' and '<' escaped, newlines as spaces. */
static void md_text(const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputs("\\|", stdout);
		else if (*s == '<')
			fputs("&lt;", stdout);
		else if (*s == '\n')
			putchar(' ');
		else
			putchar(*s);
	}
}

/* --markdown: every knob of every table, in the order `-c` lists them:
 * name, module, default, accepted values, meaning (the tables' help). */
static void info_markdown(void)
{
	const struct rdmach_knob_table *const *t;
	char lo[32], hi[32];
	int i;

	printf("| knob | module | default | values | meaning |\n");
	printf("|---|---|---|---|---|\n");
	for (t = __start_rdmach_knob_tables; t < __stop_rdmach_knob_tables;
	     t++) {
		for (i = 0; i < (*t)->nknobs; i++) {
			const struct rdmach_knob *k = &(*t)->knobs[i];

			printf("| `%s` | %s | %s | ", k->name, (*t)->module,
			       *k->deflt ? k->deflt : "\"\"");
			switch (k->type) {
			case RDMACH_KNOB_BOOL:
				printf("0 / 1");
				break;
			case RDMACH_KNOB_STRING:
				printf("text");
				break;
			case RDMACH_KNOB_SIZE:
			case RDMACH_KNOB_UINT:
				if (k->type == RDMACH_KNOB_SIZE) {
					md_size(lo, sizeof(lo), k->min);
					md_size(hi, sizeof(hi), k->max);
				} else {
					snprintf(lo, sizeof(lo), "%llu",
						 (unsigned long long)k->min);
					if (k->max == UINT64_MAX)
						snprintf(hi, sizeof(hi),
							 "no limit");
					else
						snprintf(hi, sizeof(hi), "%llu",
							 (unsigned long long)
							 k->max);
				}
				if (k->max == UINT64_MAX)
					printf(">= %s", lo);
				else
					printf("%s-%s", lo, hi);
				if (k->rules & RDMACH_KNOB_POW2)
					printf(", a power of two");
				if ((k->rules & RDMACH_KNOB_ZERO_OFF) &&
				    k->min > 0)
					printf(", or 0 (off)");
				break;
			}
			if (!strcmp(k->deflt, RDMACH_KNOB_AUTO) &&
			    k->type != RDMACH_KNOB_STRING)
				printf(", auto");
			printf(" | ");
			md_text(k->help);
			printf(" |\n");
		}
	}
}

static const char info_manual[] =
"NAME\n"
"    rdmach_info - show rdmach's version, transports and environment knobs\n"
"\n"
"SYNOPSIS\n"
"    rdmach_info [-c] [-t] [-v] [--tune]\n"
"    rdmach_info -m N\n"
"    rdmach_info --markdown\n"
"    rdmach_info -h | --help\n"
"\n"
"DESCRIPTION\n"
"    rdmach gives every pair of processes a FIFO byte pipe over shared\n"
"    memory (transport shm) or InfiniBand/RoCE (transport ib, when built\n"
"    with libibverbs).  rdmach_info reports what this build offers and how\n"
"    the environment configures it.  Without options it prints the version,\n"
"    the transports and the knobs (-v -t -c).\n"
"\n"
"OPTIONS\n"
"    -c, --config\n"
"        Every RDMACH_* knob, grouped by module: name, default, the value\n"
"        set in this environment as \"(set: VALUE)\", and its meaning.\n"
"    -t, --transports\n"
"        The transports built in, one per line, in order of preference\n"
"        for a pair of processes both can serve.\n"
"    -v, --version\n"
"        The library version and the API version (RDMACH_API_VERSION).\n"
"    -m N, --memory N\n"
"        The shared memory that N ranks on one host take with the knobs\n"
"        set: at start-up, per ordered pair that talks (main and line\n"
"        rings), per pair whose bulk ring and copy area are in use\n"
"        (given back after RDMACH_SHM_IDLE_RELEASE_MS idle; at most\n"
"        RDMACH_SHM_WARM_MAX writers per process).\n"
"    --tune\n"
"        The large-message tuning of the ib device the RDMACH_IB_* knobs\n"
"        select: measured figures (or the tuning cache's, or built-in ones\n"
"        as RDMACH_TUNE says), derived superpipeline settings and the\n"
"        model's predicted bandwidth per protocol and size.  Only with ib.\n"
"    --markdown\n"
"        Every knob as one Markdown table (knob, module, default, accepted\n"
"        values, meaning), whatever the environment sets: the generated\n"
"        block of doc/knobs.md (`make knobs-doc` writes it,\n"
"        test/check-knobs.sh compares them).\n"
"    -h, --help\n"
"        This text.\n"
"\n"
"ENVIRONMENT\n"
"    The library reads its knobs, RDMACH_* variables, at rdmach_init();\n"
"    `rdmach_info -c` lists every one (sizes take K, M, G suffixes; a bad\n"
"    value makes rdmach_init fail with -EINVAL and a message naming it).\n"
"    The main ones: RDMACH_TRANSPORT (auto, shm, ib), RDMACH_VERBOSE\n"
"    (0-3), RDMACH_STATS (counters at finalize).\n"
"\n"
"EXIT STATUS\n"
"    0 on success, 1 when --tune finds no usable RDMA device, 2 on a bad\n"
"    option.\n"
"\n"
"SEE ALSO\n"
"    rdmach_run --help; rdmach.h, rdmach_pmi.h and rdmach_launch.h for the\n"
"    API; `pkg-config --cflags --libs rdmach` to build against it.\n";

/* -m N: the shared memory of N ranks on one host with the knobs set
 * (rdma_shm/README.md, "Memory per local peer"): per process a header
 * and a control block per writer, populated at start-up; per ordered
 * pair that talks its main and line rings; per pair whose writer sends
 * windows of a few KiB or large messages its bulk ring and copy area,
 * until they idle RDMACH_SHM_IDLE_RELEASE_MS, for at most
 * RDMACH_SHM_WARM_MAX writers per process when more share the host. */
static uint64_t info_knob(const char *name, uint64_t dflt)
{
	uint64_t v;

	return rdmach_knob_get(name, &v) ? dflt : v;
}

static int info_shm_memory(long n)
{
	uint64_t warm = info_knob("RDMACH_SHM_WARM_MAX", 8);
	uint64_t capped = (uint64_t)n - 1 > warm;
	uint64_t ring = info_knob("RDMACH_SHM_RING_SIZE",
				  capped ? SHM_RING_MANY : SHM_RING_FEW);
	uint64_t line = info_knob("RDMACH_SHM_LINE_RING",
				  capped ? SHM_LINE_RING_MANY : SHM_LINE_RING_FEW);
	uint64_t bulk = info_knob("RDMACH_SHM_BULK_RING", 262144);
	uint64_t area = info_knob("RDMACH_SHM_PIPE_AREA",
				  n > SHM_PIPE_AREA_FEW_PROCS ?
				  SHM_PIPE_AREA_MANY : SHM_PIPE_AREA_FEW);
	uint64_t slot = info_knob("RDMACH_SHM_PIPE_CHUNK", 32768);
	uint64_t idle = info_knob("RDMACH_SHM_IDLE_RELEASE_MS", 1000);
	uint64_t fixed, talk, big, pairs = (uint64_t)n * (uint64_t)(n - 1);
	uint64_t nbrs = n > 2 ? 2 : 1;	/* a ring's neighbours, per rank */
	const double mib = 1024.0 * 1024.0;

	if (n < 2 || n > 65536) {
		fprintf(stderr, "rdmach_info: -m %ld: 2..65536 ranks\n", n);
		return 2;
	}
	if (bulk <= ring)
		bulk = 0;
	if (!info_knob("RDMACH_SHM_PIPE", 1))
		area = 0;
	if (area && slot)
		area += (area / slot * 128 + 4095) / 4096 * 4096;
	fixed = shm_seg_start_bytes((int)n);
	talk = ring + line;
	big = bulk + area;
	printf("# shm memory per node, %ld local ranks, these knobs\n", n);
	printf("at start-up (headers, control blocks)    %9.1f MiB\n",
	       (double)fixed * (double)n / mib);
	printf("+ per ordered pair that talks            %9.1f KiB"
	       "   neighbours only (%d per rank) %.1f MiB, all pairs %.1f MiB\n",
	       (double)talk / 1024, (int)nbrs,
	       (double)(talk * nbrs * (uint64_t)n) / mib,
	       (double)(talk * pairs) / mib);
	printf("+ per pair with bulk ring and copy area  %9.1f KiB"
	       "   all pairs %.1f MiB (%s)\n",
	       (double)big / 1024,
	       (double)(big * (capped ? warm * (uint64_t)n : pairs)) / mib,
	       capped ? "at most RDMACH_SHM_WARM_MAX writers per process" :
	       idle ? "given back after RDMACH_SHM_IDLE_RELEASE_MS idle" :
	       "kept until finalize");
	return 0;
}

static void info_version(void)
{
	printf("# rdmach version %s, API version %d\n", RDMACH_VERSION,
	       RDMACH_API_VERSION);
}

static void info_transports(void)
{
	const struct rdmach_tl_ops *const *p;
	int slot;

	/* by slot: the order of preference (core/tl.h) */
	printf("# transports built in\n");
	for (slot = 0; slot < RDMACH_TL_MAX; slot++)
		for (p = __start_rdmach_tls; p < __stop_rdmach_tls; p++)
			if ((*p)->id == slot)
				printf("%s\n", (*p)->name);
#ifndef RDMACH_HAVE_IB
	printf("# (no ib: configure found no libibverbs)\n");
#endif
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "config", no_argument, NULL, 'c' },
		{ "transports", no_argument, NULL, 't' },
		{ "version", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "tune", no_argument, NULL, 'T' },
		{ "markdown", no_argument, NULL, 'M' },
		{ "memory", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 }
	};
	int config = 0, transports = 0, version = 0, tune = 0, markdown = 0;
	long memory = 0;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "ctvhm:", longopts, NULL)) != -1) {
		switch (c) {
		case 'm':
			memory = strtol(optarg, &end, 10);
			if (*end || end == optarg)
				memory = -1;
			break;
		case 'c':
			config = 1;
			break;
		case 't':
			transports = 1;
			break;
		case 'v':
			version = 1;
			break;
		case 'T':	/* long option only */
			tune = 1;
			break;
		case 'M':	/* long option only */
			markdown = 1;
			break;
		case 'h':
			fputs(info_manual, stdout);
			return 0;
		default:
			fprintf(stderr, "usage: rdmach_info [-c] [-t] [-v] "
				"[-m N] [--tune] [--markdown] (rdmach_info "
				"--help for more)\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdmach_info: unexpected argument \"%s\" "
			"(rdmach_info --help)\n", argv[optind]);
		return 2;
	}
	if (markdown) {
		info_markdown();
		return 0;
	}
	if (memory)
		return info_shm_memory(memory);
	if (!config && !transports && !version && !tune)
		config = transports = version = 1;
	if (version)
		info_version();
	if (transports)
		info_transports();
	if (config) {
		rdmach_knob_print_all(stdout);
		info_memory();
	}
	return tune ? info_tune() : 0;
}
