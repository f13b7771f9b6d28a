/*
 * knob.h - environment knobs.  Each module declares a table of its knobs
 * (name, type, default, range, help) with designated initializers indexed
 * by its own enum, and registers it with RDMACH_KNOB_TABLE: the table's
 * address goes into the linker section "rdmach_knob_tables", so the core
 * lists every module's knobs without knowing the modules.  Getters parse
 * the environment or the default, check the range and log a clear error
 * naming the knob on a bad value.  `rdmach_info` prints every table.
 * Numbers are decimal or 0x hex (a leading 0 is not octal); sizes accept
 * K/M/G suffixes (binary).  A knob set to the empty string is refused by
 * name, not taken as its default.
 */
#ifndef RDMACH_CORE_KNOB_H
#define RDMACH_CORE_KNOB_H

#include <stdint.h>
#include <stdio.h>

enum rdmach_knob_type { RDMACH_KNOB_SIZE, RDMACH_KNOB_UINT, RDMACH_KNOB_BOOL,
			RDMACH_KNOB_STRING };

/* A numeric knob whose default is this string has no fixed default: unset,
 * the module decides (e.g. from the number of local processes). */
#define RDMACH_KNOB_AUTO "auto"

/* Rules of a numeric knob beyond its range (struct rdmach_knob.rules). */
enum {
	RDMACH_KNOB_POW2 = 1 << 0,	/* a power of two */
	RDMACH_KNOB_ZERO_OFF = 1 << 1,	/* 0 (off) passes, range or not */
};

struct rdmach_knob {
	const char *name;		/* "RDMACH_SHM_RING_SIZE" */
	enum rdmach_knob_type type;
	const char *deflt;		/* as a user would write it: "64K" */
	uint64_t min, max;		/* numeric range, inclusive */
	const char *help;		/* one line */
	unsigned int rules;		/* RDMACH_KNOB_POW2 | ..._ZERO_OFF */
};

struct rdmach_knob_table {
	const char *module;		/* "core", "shm", "ib", ... */
	const struct rdmach_knob *knobs;
	int nknobs;
};

/*
 * Register table arr (indexed by an enum ending in nknobs) of module mod.
 * Every entry of arr must be set: rdmach_knob_check_tables() refuses a
 * hole left by an enum value without an initializer.
 */
#define RDMACH_KNOB_TABLE(mod, arr)                                        \
	static const struct rdmach_knob_table rdmach_knobs_##mod = {       \
		#mod, arr, (int)(sizeof(arr) / sizeof((arr)[0])) };        \
	static const struct rdmach_knob_table *const rdmach_knobs_ref_##mod \
	__attribute__((used, section("rdmach_knob_tables"))) =             \
		&rdmach_knobs_##mod

/* Value of a numeric/bool knob; 0 or -EINVAL (message logged).  A knob
 * whose default is RDMACH_KNOB_AUTO gives -ENODATA while unset or set to
 * "auto". */
int rdmach_knob_u64(const struct rdmach_knob *k, uint64_t *out);
/* Value of a string knob (environment or default; never NULL). */
const char *rdmach_knob_str(const struct rdmach_knob *k);
/* Look a knob up by name in every table (NULL if unknown). */
const struct rdmach_knob *rdmach_knob_find(const char *name);
/* Print every knob: name, default, current value, help. */
void rdmach_knob_print_all(FILE *out);
/* 0, or -EINVAL when a registered table has an entry left unset (logged):
 * a table and its enum out of step. */
int rdmach_knob_check_tables(void);
/* Every RDMACH_* variable set: a numeric knob's value is checked whichever
 * module reads it, so that a bad one is refused even where its transport
 * does not run (-EINVAL, each logged); with warn_unknown, a name that is no
 * knob (nor the test harness's, RDMACH_TEST_* / RDMACH_VM_*) is warned of,
 * with the knob a typo away if there is one. */
int rdmach_knob_check_env(int warn_unknown);

#endif /* RDMACH_CORE_KNOB_H */
