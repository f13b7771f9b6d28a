/* rdmach_info - print the build's transports and every RDMACH_* knob with
 * its default and the value set in this environment (like ucx_info -c).
 * --tune: the large-message tuning of the ib device (rdma_ib/ib_tune.h). */
#include <stdio.h>
#include <string.h>

#include "core/knob.h"
#include "rdmach.h"
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

int main(int argc, char *argv[])
{
	if (argc == 2 && !strcmp(argv[1], "--tune"))
		return info_tune();
	if (argc > 1 && strcmp(argv[1], "-c")) {
		fprintf(stderr, "usage: %s [-c]\n  prints the transports built "
			"in and every RDMACH_* environment knob\n", argv[0]);
		return 2;
	}
	printf("# rdmach API version %d\n", RDMACH_API_VERSION);
	printf("# transports built in: shm%s\n",
#ifdef RDMACH_HAVE_IB
	       " ib"
#else
	       " (no ib: configure found no libibverbs)"
#endif
	);
	rdmach_knob_print_all(stdout);
	return 0;
}
