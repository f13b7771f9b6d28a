/*
 * knob.h - environment knobs.  Each module declares a table of its knobs
 * (name, type, default, range, help); getters parse the environment or the
 * default, check the range and log a clear error on a bad value.
 * `rdmach_info` prints every table.  Sizes accept K/M/G suffixes (binary).
 */
#ifndef RDMACH_CORE_KNOB_H
#define RDMACH_CORE_KNOB_H

#include <stdint.h>
#include <stdio.h>

enum rdmach_knob_type { RDMACH_KNOB_SIZE, RDMACH_KNOB_UINT, RDMACH_KNOB_BOOL,
			RDMACH_KNOB_STRING };

struct rdmach_knob {
	const char *name;		/* "RDMACH_SHM_RING_SIZE" */
	enum rdmach_knob_type type;
	const char *deflt;		/* as a user would write it: "64K" */
	uint64_t min, max;		/* numeric range, inclusive */
	const char *help;		/* one line */
};

/* One table per module (an array and its length), all listed in the
 * NULL-terminated rdmach_knob_tables. */
struct rdmach_knob_table {
	const char *module;		/* "core", "shm", "ib" */
	const struct rdmach_knob *knobs;
	int nknobs;
};
extern const struct rdmach_knob_table *const rdmach_knob_tables[];

/* Value of a numeric/bool knob; 0 or -EINVAL (message logged). */
int rdmach_knob_u64(const struct rdmach_knob *k, uint64_t *out);
/* Value of a string knob (environment or default; never NULL). */
const char *rdmach_knob_str(const struct rdmach_knob *k);
/* Look a knob up by name in every table (NULL if unknown). */
const struct rdmach_knob *rdmach_knob_find(const char *name);
/* Print every knob: name, default, current value, help. */
void rdmach_knob_print_all(FILE *out);

#define RDMACH_KNOB_TABLE(mod, arr)                                   \
	const struct rdmach_knob_table rdmach_knobs_##mod = {         \
		#mod, arr, (int)(sizeof(arr) / sizeof((arr)[0])) }

extern const struct rdmach_knob_table rdmach_knobs_core;
extern const struct rdmach_knob_table rdmach_knobs_shm;
extern const struct rdmach_knob_table rdmach_knobs_ib;
extern const struct rdmach_knob_table rdmach_knobs_rcache;
extern const struct rdmach_knob_table rdmach_knobs_launch;

#endif /* RDMACH_CORE_KNOB_H */
