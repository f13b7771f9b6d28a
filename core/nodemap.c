/* nodemap.c - the PMI_process_mapping parser (see nodemap.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nodemap.h"
#include "num.h"

/* Node ids are bounded like ranks: a number beyond means a bad mapping. */
#define NODEMAP_ID_MAX (1 << 24)

struct nodemap_block {
	int start, nodes, ppn;
};

/* A plain block (count 1, rep 1) or a repeat group "[b,...]xN": the
 * count blocks from first, rep times. */
struct nodemap_item {
	int first, count, rep;
};

struct nodemap_map {
	struct nodemap_block *b;
	struct nodemap_item *it;
	int nb, nit;
};

struct nodemap_cur {
	const char *p;
	const char *what;	/* what went wrong, for the message */
};

static int nodemap_lit(struct nodemap_cur *c, const char *lit)
{
	size_t n = strlen(lit);

	if (strncmp(c->p, lit, n))
		return -EINVAL;
	c->p += n;
	return 0;
}

/* A decimal number 0..max, digits only (no sign, no blanks). */
static int nodemap_num(struct nodemap_cur *c, int max, int *out)
{
	uint64_t v;

	if (rdmach_num(c->p, 10, (uint64_t)max, &v, &c->p))
		return -EINVAL;
	*out = (int)v;
	return 0;
}

static int nodemap_block(struct nodemap_cur *c, struct nodemap_block *b)
{
	/* a bare node id is (id,1,1): MPICH 4.3's Hydra writes one node of
	 * one rank so, e.g. "(vector,0)" for a single process */
	if (*c->p >= '0' && *c->p <= '9') {
		b->nodes = b->ppn = 1;
		return nodemap_num(c, NODEMAP_ID_MAX - 1, &b->start);
	}
	if (nodemap_lit(c, "(") ||
	    nodemap_num(c, NODEMAP_ID_MAX - 1, &b->start) ||
	    nodemap_lit(c, ",") || nodemap_num(c, NODEMAP_ID_MAX, &b->nodes) ||
	    nodemap_lit(c, ",") || nodemap_num(c, NODEMAP_ID_MAX, &b->ppn) ||
	    nodemap_lit(c, ")"))
		return -EINVAL;
	if (!b->nodes || !b->ppn || b->start + b->nodes > NODEMAP_ID_MAX)
		return -EINVAL;
	return 0;
}

/* One block into m->b[] (at most RDMACH_NODEMAP_BLOCKS_MAX). */
static int nodemap_add_block(struct nodemap_cur *c, struct nodemap_map *m)
{
	if (m->nb == RDMACH_NODEMAP_BLOCKS_MAX)
		return -E2BIG;
	if (nodemap_block(c, &m->b[m->nb]))
		return -EINVAL;
	m->nb++;
	return 0;
}

/* "[block,...]xN" (MPICH 4.3's Hydra: MPL_rankmap_array_to_str), c->p
 * after the '['; one level only, as MPICH's writer and reader have it. */
static int nodemap_group(struct nodemap_cur *c, struct nodemap_map *m,
			 struct nodemap_item *it)
{
	int ret;

	it->first = m->nb;
	do {
		if (*c->p == '[') {
			c->what = "a group inside a group";
			return -EINVAL;
		}
		ret = nodemap_add_block(c, m);
		if (ret)
			return ret;
	} while (!nodemap_lit(c, ","));
	it->count = m->nb - it->first;
	if (nodemap_lit(c, "]x") ||
	    nodemap_num(c, NODEMAP_ID_MAX, &it->rep) || !it->rep) {
		c->what = "a group not closed by ]xN, N from 1";
		return -EINVAL;
	}
	return 0;
}

/* The items of s: "(vector" then ",item" for each, then ")". */
static int nodemap_items(struct nodemap_cur *c, struct nodemap_map *m)
{
	int ret;

	if (nodemap_lit(c, "(vector"))
		return -EINVAL;
	while (!nodemap_lit(c, ",")) {
		struct nodemap_item *it = &m->it[m->nit];

		/* an item has a block at least: no more items than blocks */
		if (m->nit == RDMACH_NODEMAP_BLOCKS_MAX)
			return -E2BIG;

		if (!nodemap_lit(c, "[")) {
			ret = nodemap_group(c, m, it);
		} else {
			it->first = m->nb;
			it->count = it->rep = 1;
			ret = nodemap_add_block(c, m);
		}
		if (ret)
			return ret;
		m->nit++;
	}
	if (!m->nit || nodemap_lit(c, ")") || *c->p)
		return -EINVAL;
	return 0;
}

/* Block b's ranks from r on (up to size): the next r. */
static int nodemap_place(const struct nodemap_block *b, int r, int size,
			 int *node_of)
{
	for (int k = 0; k < b->nodes && r < size; k++)
		for (int j = 0; j < b->ppn && r < size; j++)
			node_of[r++] = b->start + k;
	return r;
}

/* Ranks in turn: ppn on each node of a block, the blocks in order (a
 * group's rep times), all of them again until every rank has a node (a
 * mapping shorter than the job repeats: MPICH 4.0's Hydra writes one
 * cycle of a round-robin placement).  Each pass over an item places a
 * rank at least, so this ends. */
static void nodemap_assign(const struct nodemap_map *m, int size, int *node_of)
{
	int r = 0;

	while (r < size) {
		for (int i = 0; i < m->nit && r < size; i++) {
			const struct nodemap_item *it = &m->it[i];

			for (int k = 0; k < it->rep && r < size; k++)
				for (int j = it->first; j < it->first + it->count; j++)
					r = nodemap_place(&m->b[j], r, size, node_of);
		}
	}
}

int rdmach_nodemap_parse(const char *s, int size, int *node_of, char *why,
			 size_t whylen)
{
	struct nodemap_cur c = { s, NULL };
	struct nodemap_map m = { 0 };
	int ret = -ENOMEM;

	if (!s || size < 1 || !node_of)
		return -EINVAL;
	m.b = malloc(RDMACH_NODEMAP_BLOCKS_MAX * sizeof(*m.b));
	m.it = malloc(RDMACH_NODEMAP_BLOCKS_MAX * sizeof(*m.it));
	if (!m.b || !m.it)
		goto out;
	ret = nodemap_items(&c, &m);
	if (ret == -E2BIG)
		snprintf(why, whylen, "more than %d blocks",
			 RDMACH_NODEMAP_BLOCKS_MAX);
	else if (ret)
		snprintf(why, whylen, "malformed at offset %d: %s (expected "
			 "(vector,B,...), B = (start,nodes,ppn), node id or "
			 "[B,...]xN; ids < %d)", (int)(c.p - s),
			 c.what ? c.what : "unexpected text", NODEMAP_ID_MAX);
	if (!ret)
		nodemap_assign(&m, size, node_of);
	ret = ret ? -EINVAL : 0;
out:
	free(m.it);
	free(m.b);
	return ret;
}
