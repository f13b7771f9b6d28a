/* knob.c - RDMACH_* environment knobs: parse, check range, list. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rdmach.h"
#include "knob.h"
#include "log.h"
#include "num.h"

/* Bounds of the "rdmach_knob_tables" section (RDMACH_KNOB_TABLE). */
extern const struct rdmach_knob_table *const __start_rdmach_knob_tables[]
	__attribute__((visibility("hidden")));
extern const struct rdmach_knob_table *const __stop_rdmach_knob_tables[]
	__attribute__((visibility("hidden")));

#define knob_for_each_table(t)                                           \
	for (t = __start_rdmach_knob_tables; t < __stop_rdmach_knob_tables; \
	     t++)

static int knob_parse_bool(const char *s, uint64_t *out)
{
	static const char *const yes[] = { "1", "y", "yes", "on", "true" };
	static const char *const no[] = { "0", "n", "no", "off", "false" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = 1;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* Decimal or 0x hex (a leading 0 is no octal: 0100000 is 100000) with an
 * optional binary K/M/G suffix (sizes). */
static int knob_parse_number(const char *s, int allow_suffix, uint64_t *out)
{
	int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	unsigned shift = 0;
	const char *end;
	uint64_t v;

	if (rdmach_num(s + 2 * hex, hex ? 16 : 10, UINT64_MAX, &v, &end))
		return -EINVAL;
	if (allow_suffix && *end) {
		switch (toupper((unsigned char)*end)) {
		case 'K': shift = 10; break;
		case 'M': shift = 20; break;
		case 'G': shift = 30; break;
		default: return -EINVAL;
		}
		end++;
		if (toupper((unsigned char)*end) == 'B')
			end++;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

static int knob_parse(const struct rdmach_knob *k, const char *s,
		      uint64_t *out)
{
	switch (k->type) {
	case RDMACH_KNOB_BOOL:
		return knob_parse_bool(s, out);
	case RDMACH_KNOB_SIZE:
		return knob_parse_number(s, 1, out);
	case RDMACH_KNOB_UINT:
		return knob_parse_number(s, 0, out);
	default:
		return -EINVAL;
	}
}

/* Set but empty is refused: a script's VAR= meant something, and taking
 * the default silently would hide it. */
static int knob_check_empty(const struct rdmach_knob *k, const char *env)
{
	if (env && !*env) {
		rdmach_err("%s is set but empty: give it a value (default %s) "
			   "or unset it", k->name, k->deflt);
		return -EINVAL;
	}
	return 0;
}

int rdmach_knob_u64(const struct rdmach_knob *k, uint64_t *out)
{
	const char *env = getenv(k->name);
	const char *s = env ? env : k->deflt;
	char esc[128];
	uint64_t v;

	if (knob_check_empty(k, env))
		return -EINVAL;

	/* unset, or set to "auto" as its default says */
	if (!strcmp(k->deflt, RDMACH_KNOB_AUTO) &&
	    !strcmp(s, RDMACH_KNOB_AUTO))
		return -ENODATA;

	if (knob_parse(k, s, &v)) {
		rdmach_err("%s=%s is not a valid %s", k->name,
			   rdmach_log_esc(s, esc, sizeof(esc)),
			   k->type == RDMACH_KNOB_BOOL ? "boolean (0/1)" :
			   k->type == RDMACH_KNOB_SIZE ? "size (e.g. 64K)" :
							 "number");
		return -EINVAL;
	}
	if (k->type == RDMACH_KNOB_BOOL ||
	    (!v && (k->rules & RDMACH_KNOB_ZERO_OFF))) {
		*out = v;
		return 0;
	}
	if (v < k->min || v > k->max) {
		rdmach_err("%s=%s is out of range [%llu, %llu]%s", k->name,
			   rdmach_log_esc(s, esc, sizeof(esc)),
			   (unsigned long long)k->min,
			   (unsigned long long)k->max,
			   k->rules & RDMACH_KNOB_ZERO_OFF ? " (or 0: off)" : "");
		return -EINVAL;
	}
	if ((k->rules & RDMACH_KNOB_POW2) && (v & (v - 1))) {
		rdmach_err("%s=%s is not a power of two", k->name,
			   rdmach_log_esc(s, esc, sizeof(esc)));
		return -EINVAL;
	}
	*out = v;
	return 0;
}

const char *rdmach_knob_str(const struct rdmach_knob *k)
{
	const char *env = getenv(k->name);

	return env && *env ? env : k->deflt;
}

const struct rdmach_knob *rdmach_knob_find(const char *name)
{
	const struct rdmach_knob_table *const *t;
	int i;

	knob_for_each_table(t)
		for (i = 0; i < (*t)->nknobs; i++)
			if ((*t)->knobs[i].name &&
			    !strcmp((*t)->knobs[i].name, name))
				return &(*t)->knobs[i];
	return NULL;
}

void rdmach_knob_print_all(FILE *out)
{
	const struct rdmach_knob_table *const *t;
	int i;

	knob_for_each_table(t) {
		fprintf(out, "# %s\n", (*t)->module);
		for (i = 0; i < (*t)->nknobs; i++) {
			const struct rdmach_knob *k = &(*t)->knobs[i];
			const char *env = getenv(k->name);

			fprintf(out, "%-28s default %-8s%s%s%s\n    %s\n",
				k->name, k->deflt, env ? " (set: " : "",
				env ? env : "", env ? ")" : "", k->help);
		}
	}
}

int rdmach_knob_check_tables(void)
{
	const struct rdmach_knob_table *const *t;
	int i;

	knob_for_each_table(t) {
		for (i = 0; i < (*t)->nknobs; i++) {
			if (!(*t)->knobs[i].name) {
				rdmach_err("knob table %s: entry %d is unset "
					   "(table and enum out of step)",
					   (*t)->module, i);
				return -EINVAL;
			}
		}
	}
	return 0;
}

extern char **environ;

/* RDMACH_* variables that are not knobs: the test harness's and its VM
 * scripts'. */
static const char *const knob_foreign_prefixes[] = {
	"RDMACH_TEST_", "RDMACH_VM_", "RDMACH_IB_VM_",
};

static int knob_foreign(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(knob_foreign_prefixes) /
			sizeof(knob_foreign_prefixes[0]); i++)
		if (!strncmp(name, knob_foreign_prefixes[i],
			     strlen(knob_foreign_prefixes[i])))
			return 1;
	return 0;
}

/* Edit distance between a and b (names of at most KNOB_NAME_MAX - 1). */
#define KNOB_NAME_MAX 64
static unsigned int knob_distance(const char *a, const char *b)
{
	unsigned int row[KNOB_NAME_MAX + 1], i, j, diag, up;
	size_t la = strlen(a), lb = strlen(b);

	if (la >= KNOB_NAME_MAX || lb >= KNOB_NAME_MAX)
		return UINT32_MAX;
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		diag = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			up = row[j];
			row[j] = diag + (a[i - 1] != b[j - 1]);
			if (row[j] > up + 1)
				row[j] = up + 1;
			if (row[j] > row[j - 1] + 1)
				row[j] = row[j - 1] + 1;
			diag = up;
		}
	}
	return row[lb];
}

/* The knob whose name is nearest to name, if a typo away (<= 3 edits). */
static const char *knob_nearest(const char *name)
{
	const struct rdmach_knob_table *const *t;
	unsigned int best = 4, d;
	const char *near = NULL;
	int i;

	knob_for_each_table(t) {
		for (i = 0; i < (*t)->nknobs; i++) {
			d = knob_distance(name, (*t)->knobs[i].name);
			if (d < best) {
				best = d;
				near = (*t)->knobs[i].name;
			}
		}
	}
	return near;
}

int rdmach_knob_check_env(int warn_unknown)
{
	char name[KNOB_NAME_MAX];
	const struct rdmach_knob *k;
	const char *eq, *near;
	char **e;
	uint64_t v;
	size_t len;
	int ret = 0;

	for (e = environ; e && *e; e++) {
		if (strncmp(*e, "RDMACH_", 7) || !(eq = strchr(*e, '=')))
			continue;
		len = (size_t)(eq - *e);
		if (len >= sizeof(name))
			len = sizeof(name) - 1;
		memcpy(name, *e, len);
		name[len] = '\0';
		k = rdmach_knob_find(name);
		if (k) {
			if (k->type == RDMACH_KNOB_STRING ?
			    knob_check_empty(k, eq + 1) :
			    rdmach_knob_u64(k, &v) == -EINVAL)
				ret = -EINVAL;
			continue;
		}
		if (!warn_unknown || knob_foreign(name))
			continue;
		near = knob_nearest(name);
		rdmach_warn("%s is set, but rdmach has no such knob%s%s%s "
			    "(rdmach_info lists them)", name,
			    near ? "; did you mean " : "", near ? near : "",
			    near ? "?" : "");
	}
	return ret;
}

int rdmach_knob_get(const char *name, uint64_t *value)
{
	const struct rdmach_knob *k;
	uint64_t v;
	int ret;

	if (!name || !value)
		return -EINVAL;
	k = rdmach_knob_find(name);
	if (!k || k->type == RDMACH_KNOB_STRING)
		return -ENOENT;
	ret = rdmach_knob_u64(k, &v);
	if (ret)
		return ret;
	*value = v;
	return 0;
}
