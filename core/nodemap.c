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

struct nodemap_cur {
	const char *p;
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

/* The blocks of s into b[] (at most RDMACH_NODEMAP_BLOCKS_MAX). */
static int nodemap_blocks(struct nodemap_cur *c, struct nodemap_block *b,
			  int *nb)
{
	int n = 0;

	if (nodemap_lit(c, "(vector"))
		return -EINVAL;
	while (!nodemap_lit(c, ",")) {
		if (n == RDMACH_NODEMAP_BLOCKS_MAX)
			return -E2BIG;
		if (nodemap_block(c, &b[n]))
			return -EINVAL;
		n++;
	}
	if (!n || nodemap_lit(c, ")") || *c->p)
		return -EINVAL;
	*nb = n;
	return 0;
}

/* Ranks in turn: ppn on each node of a block, the blocks cyclically. */
static void nodemap_assign(const struct nodemap_block *b, int nb, int size,
			   int *node_of)
{
	int r = 0;

	while (r < size) {
		int i, k, j;

		for (i = 0; i < nb && r < size; i++)
			for (k = 0; k < b[i].nodes && r < size; k++)
				for (j = 0; j < b[i].ppn && r < size; j++)
					node_of[r++] = b[i].start + k;
	}
}

int rdmach_nodemap_parse(const char *s, int size, int *node_of, char *why,
			 size_t whylen)
{
	struct nodemap_cur c = { s };
	struct nodemap_block *b;
	int nb = 0, ret;

	if (!s || size < 1 || !node_of)
		return -EINVAL;
	b = malloc(RDMACH_NODEMAP_BLOCKS_MAX * sizeof(*b));
	if (!b)
		return -ENOMEM;
	ret = nodemap_blocks(&c, b, &nb);
	if (ret == -E2BIG)
		snprintf(why, whylen, "more than %d blocks",
			 RDMACH_NODEMAP_BLOCKS_MAX);
	else if (ret)
		snprintf(why, whylen, "malformed at offset %d (expected "
			 "(vector,(start,nodes,ppn) or id,...) with node ids below "
			 "%d)", (int)(c.p - s), NODEMAP_ID_MAX);
	if (!ret)
		nodemap_assign(b, nb, size, node_of);
	free(b);
	return ret ? -EINVAL : 0;
}
