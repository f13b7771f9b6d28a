/*
 * ib_tune.h - what the large-message model (proto/tune.h) needs, measured
 * on this host and device at start-up (rdma_ib private, prefix ib_tune_):
 *   B_copy      memcpy at 64 KiB and 1 MiB in cache, 1 MiB from memory
 *               (proto/tune.c);
 *   lambda_reg, B_reg   ibv_reg_mr + ibv_dereg_mr of 4 KiB and 1 MiB of
 *               ordinary (4 KiB-page) memory, best of a few;
 *   lambda_net, B_net, g   RDMA writes between two QPs of this device
 *               connected to each other (loopback): an 8-byte write's
 *               completion is a round trip, a 256 KiB one gives the
 *               bandwidth, 32 back-to-back writes the per-write gap.
 * Bounded by a budget (IB_TUNE_BUDGET_S); the time taken is reported.
 *
 * RDMACH_TUNE=auto (default): read the cache file
 *   ${XDG_CACHE_HOME:-$HOME/.cache}/rdmach/tune-<device>-<host>.conf
 * and measure (then write it) only when it is missing or was measured
 * under another key: device, port, kernel release, CPU model, host name,
 * file format version (tune_parse: -ESTALE).  measure: always measure
 * (and rewrite the file); off: the built-in figures, nothing measured or
 * read; anything else: the path of the file to use instead.
 */
#ifndef RDMACH_IB_TUNE_H
#define RDMACH_IB_TUNE_H

#include <stddef.h>
#include <stdio.h>

#include "proto/tune.h"

#define IB_TUNE_BUDGET_S 0.05

struct ib_dev;

enum { IB_TUNE_STEP_REGION, IB_TUNE_STEP_COPY, IB_TUNE_STEP_REG,
       IB_TUNE_STEP_NET, IB_TUNE_STEPS };

struct ib_tune {
	struct tune_machine m;
	double step_s[IB_TUNE_STEPS];	/* a measurement's parts */
	char source[80];	/* "measured", "cache file", "built-in" */
	char file[512];		/* the cache file, "" if none */
	double elapsed_s;	/* measuring or reading took this long */
};

/* Fill t for device dev under mode (the RDMACH_TUNE value).  Always
 * succeeds: a failed measurement falls back to the built-in figures for
 * what it could not measure (logged). */
void ib_tune_run(struct ib_dev *dev, const char *mode, struct ib_tune *t);

/* `rdmach_info --tune`: open the device the knobs select, tune, print the
 * measured figures, the derived settings and the model's predictions.
 * 0, or a negative errno (no device). */
int ib_tune_report(FILE *out);
/* rdmach_info: registered memory per process against peers and rings
 * with the current knobs (ib_iface.c). */
int ib_mem_report(FILE *out, uint64_t demand_above);

#endif /* RDMACH_IB_TUNE_H */
