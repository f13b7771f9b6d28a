/* ib_fork.c - make fork() safe for registered memory: see ib_fork.h. */
#include <string.h>

#include <infiniband/verbs.h>

#include "ib_fork.h"
#include "core/log.h"

static const char *ib_fork_status_str(enum ibv_fork_status st)
{
	switch (st) {
	case IBV_FORK_UNNEEDED:
		return "not needed: the kernel copies pinned pages at fork";
	case IBV_FORK_ENABLED:
		return "enabled (registered memory is MADV_DONTFORK)";
	default:
		return "disabled";
	}
}

int ib_fork_setup(void)
{
	static int warned;
	enum ibv_fork_status st = ibv_is_fork_initialized();
	int ret;

	if (st == IBV_FORK_DISABLED) {
		ret = ibv_fork_init();
		st = ibv_is_fork_initialized();
		if (ret && st == IBV_FORK_DISABLED && !warned) {
			warned = 1;
			rdmach_warn("ib: ibv_fork_init failed (%s): fork() "
				    "while memory is registered may corrupt "
				    "RDMA transfers of the parent; start with "
				    "RDMAV_FORK_SAFE=1 or avoid fork()",
				    strerror(ret));
		}
	}
	rdmach_debug("ib: fork protection %s", ib_fork_status_str(st));
	return (int)st;
}
