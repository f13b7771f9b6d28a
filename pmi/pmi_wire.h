/* pmi_wire.h - the PMI-1 wire format shared by the client (pmi.c) and the
 * built-in server (launch.c): one line of space-separated key=value pairs. */
#ifndef RDMACH_CORE_PMI_WIRE_H
#define RDMACH_CORE_PMI_WIRE_H

#define PMI_WIRE_MAX_ATTRS 16

struct pmi_wire_msg {
	int nattr;
	struct {
		const char *key;
		const char *val;
	} attr[PMI_WIRE_MAX_ATTRS];
};

/* Split "k=v k=v ..." in place (a value runs to the next space).
 * 0, or -EPROTO for a token without '=' or too many pairs. */
int pmi_wire_parse(char *line, struct pmi_wire_msg *msg);
/* The value of key, or NULL. */
const char *pmi_wire_attr(const struct pmi_wire_msg *msg, const char *key);

#endif /* RDMACH_CORE_PMI_WIRE_H */
