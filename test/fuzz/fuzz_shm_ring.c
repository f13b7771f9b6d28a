/*
 * fuzz_shm_ring - rdma_shm's receive side (test/fuzz/shm_fuzz.h), favouring
 * the ring reader: data and PAD packets (and any other type now and then) in the main, line and bulk rings, read by gets of every size in one or two pieces and by peek + consume.  It must deliver
 * what fits or fail the connection with -EPROTO; the sanitizers and the
 * driver's count of loads per packet catch the rest.
 */
#include <stddef.h>
#include <stdint.h>

#include "shm_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return shm_fuzz_run(data, size, SHM_FUZZ_DATA);
}
