/* pmi_wire.c - parsing of PMI-1 lines (see pmi_wire.h). */
#include <errno.h>
#include <string.h>

#include "pmi_wire.h"

int pmi_wire_parse(char *line, struct pmi_wire_msg *msg)
{
	char *p = line;

	msg->nattr = 0;
	while (*p) {
		char *tok, *eq;

		while (*p == ' ')
			p++;
		if (!*p)
			break;
		tok = p;
		while (*p && *p != ' ')
			p++;
		if (*p)
			*p++ = '\0';
		eq = strchr(tok, '=');
		if (!eq || msg->nattr == PMI_WIRE_MAX_ATTRS)
			return -EPROTO;
		*eq = '\0';
		msg->attr[msg->nattr].key = tok;
		msg->attr[msg->nattr].val = eq + 1;
		msg->nattr++;
	}
	return 0;
}

const char *pmi_wire_attr(const struct pmi_wire_msg *msg, const char *key)
{
	int i;

	for (i = 0; i < msg->nattr; i++)
		if (!strcmp(msg->attr[i].key, key))
			return msg->attr[i].val;
	return NULL;
}
