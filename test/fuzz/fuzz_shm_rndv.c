/*
 * fuzz_shm_rndv - rdma_shm's receive side (test/fuzz/shm_fuzz.h), favouring
 * the rendezvous reader: RNDV descriptors (segment count, lengths, total) from the fuzzer, mostly naming this process's own memory, read by process_vm_readv into gets of every size.  It must deliver
 * what fits or fail the connection with -EPROTO; the sanitizers and the
 * driver's count of loads per packet catch the rest.
 */
#include <stddef.h>
#include <stdint.h>

#include "shm_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return shm_fuzz_run(data, size, SHM_FUZZ_RNDV);
}
