/*
 * fuzz_shm_pipe - rdma_shm's receive side (test/fuzz/shm_fuzz.h), favouring
 * the copy-area reader: PIPE packets whose total and slot flags come from the fuzzer, chunks copied out in gets of every size.  It must deliver
 * what fits or fail the connection with -EPROTO; the sanitizers and the
 * driver's count of loads per packet catch the rest.
 */
#include <stddef.h>
#include <stdint.h>

#include "shm_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return shm_fuzz_run(data, size, SHM_FUZZ_PIPE);
}
