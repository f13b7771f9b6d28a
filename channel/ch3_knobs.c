/*
 * ch3_knobs.c - the knobs of the CH3 channel "rdma".  This table is built
 * into librdmach, not into MPICH, so that `rdmach_info` lists these knobs
 * beside the library's and rdmach_knob_get() checks them the same way: a
 * bad value fails MPI_Init with a message naming the knob.  The channel
 * (ch3_progress.c) reads them with rdmach_knob_get().
 */
#include "core/knob.h"

enum { CH3_K_YIELD_SPINS, CH3_K_SLEEP_US, CH3_K_SLEEP_AFTER_US,
       CH3_K_WAKE_SLEEP_US, CH3_K_RX_STAGING, CH3_K_RX_IN_PLACE, CH3_K_FAIL_GRACE,
       CH3_K_NUM };

static const struct rdmach_knob ch3_knobs[CH3_K_NUM] = {
	[CH3_K_YIELD_SPINS] = { "RDMACH_CH3_YIELD_SPINS", RDMACH_KNOB_UINT,
		RDMACH_KNOB_AUTO, 1, 100000000,
		"idle passes of a blocking MPI wait between sched_yield calls "
		"(auto: 1024; 16 when this host runs more ranks than CPUs)" },
	[CH3_K_SLEEP_US] = { "RDMACH_CH3_SLEEP_US", RDMACH_KNOB_UINT,
		RDMACH_KNOB_AUTO, 0, 1000000,
		"once idle for RDMACH_CH3_SLEEP_AFTER_US, sleep this long instead "
		"of each sched_yield; 0 = never sleep (auto: 0; 1 when "
		"oversubscribed, one timer slack)" },
	[CH3_K_SLEEP_AFTER_US] = { "RDMACH_CH3_SLEEP_AFTER_US",
		RDMACH_KNOB_UINT, "0", 0, 3600000000u,
		"idle time of a blocking wait before it starts sleeping" },
	[CH3_K_WAKE_SLEEP_US] = { "RDMACH_CH3_WAKE_SLEEP_US", RDMACH_KNOB_UINT,
		"1000", 1, 1000000,
		"a sleep that every peer can end by ringing (shm peers only, "
		"RDMACH_SHM_WAKE on) lasts at most this long instead of "
		"RDMACH_CH3_SLEEP_US" },
	[CH3_K_RX_STAGING] = { "RDMACH_CH3_RX_STAGING", RDMACH_KNOB_SIZE,
		"1K", 160, 1u << 20,
		"bytes a VC reads ahead per get when it looks for the next "
		"packet header (at least two CH3 packet headers; two headers' "
		"worth after a packet that left at least this much to read)" },
	[CH3_K_RX_IN_PLACE] = { "RDMACH_CH3_RX_IN_PLACE", RDMACH_KNOB_SIZE,
		"512", 0, UINT64_MAX,
		"after a message of at least this many bytes, a VC whose last "
		"poll found nothing hands the next header and its payload to "
		"CH3 where rdmach holds them (rdmach_peek), without the staging "
		"buffer: the payload is copied once (0: never)" },
	[CH3_K_FAIL_GRACE] = { "RDMACH_CH3_FAIL_GRACE_MS", RDMACH_KNOB_UINT,
		"1000", 0, 60000,
		"after a connection fails (peer died, link down), wait this long "
		"before raising the MPI error, so that the process manager ends "
		"the job first and mpiexec reports the failed rank's own exit "
		"status (0: raise at once)" },
};
RDMACH_KNOB_TABLE(ch3, ch3_knobs);
