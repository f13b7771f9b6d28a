/* rdmach_info - print the build's transports and every RDMACH_* knob with
 * its default and the value set in this environment (like ucx_info -c). */
#include <stdio.h>
#include <string.h>

#include "core/knob.h"
#include "rdmach.h"

int main(int argc, char *argv[])
{
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
