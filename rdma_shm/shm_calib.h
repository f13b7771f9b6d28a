/*
 * shm_calib.h - the start-up measurement behind rdma_shm's choice between
 * the copy area (two copies that stay in cache) and cross-memory attach
 * (one copy) for a large put: how large a working set still copies at
 * in-cache speed on this machine.
 */
#ifndef RDMACH_SHM_CALIB_H
#define RDMACH_SHM_CALIB_H

#include <stdint.h>

/* The largest working set (a power of two, 512 KiB..max) whose memcpy
 * bandwidth is still at least 60% of the best of the smaller ones' (the
 * in-cache speed): beyond it a
 * message's bytes cannot be in cache, whoever wrote them last.  Costs
 * about 2 x max bytes of memory and ~10-30 ms once; 0 when the memory
 * cannot be had. */
uint64_t shm_calib_cache_limit(uint64_t max);

#endif /* RDMACH_SHM_CALIB_H */
