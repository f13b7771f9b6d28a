/*
 * shm_calib.h - the start-up measurement behind rdma_shm's choice between
 * the copy area (two copies, overlapped on two cores) and cross-memory
 * attach (one copy, after the kernel pins the pages) for a large put: how
 * large a working set still copies at in-cache speed, and how fast each
 * way moves bytes that are in cache and bytes that are not.
 */
#ifndef RDMACH_SHM_CALIB_H
#define RDMACH_SHM_CALIB_H

#include <stdint.h>

struct shm_calib {
	/* the largest working set (a power of two, 512 KiB..max) whose memcpy
	 * rate is still at least 60% of the best of the smaller ones' (the
	 * in-cache rate): beyond it a message cannot be in cache */
	uint64_t cache_limit;
	/* bytes/ns moved in 256 KiB pieces: memcpy and process_vm_readv of
	 * this process's own memory (the pinning path a peer's read takes),
	 * within the cache limit ("hot") and from twice it ("cold") */
	double copy_hot, copy_cold, cma_hot, cma_cold;
};

/* Measure (about 2 x max bytes of memory, ~10-40 ms on a host CPU).  0;
 * -ETIME when the measurement outran budget_ns (an emulated CPU copies
 * 32 MiB in seconds): *out is then untouched; -ENOMEM. */
int shm_calib_measure(uint64_t max, uint64_t budget_ns, struct shm_calib *out);

#endif /* RDMACH_SHM_CALIB_H */
