/*
 * shm_fuzz.h - the driver the rdma_shm receive harnesses share
 * (fuzz_shm_ring, fuzz_shm_pipe, fuzz_shm_rndv): one connection's receive
 * side (rdma_shm/shm_ep.c, shm_pipe.c, shm_rndv.c, built as they are with
 * -DRDMACH_FUZZ) over rings and a copy area in heap buffers of their exact
 * sizes (ASan sees a step past one), where every load of a word the writer
 * could write (rdma_shm/shm_peer.h) returns fresh fuzzer bytes.  A load at
 * a ring's head is shaped into a header (the fuzzer picks its sequence
 * number among expected, next, zero and any, and its type and length with
 * the harness's bias); a slot flag into a length; anything else is raw.
 * The fuzzer also picks the calls: gets of various sizes and pieces,
 * peek + consume.  A field loaded twice within one packet aborts.
 */
#ifndef RDMACH_SHM_FUZZ_H
#define RDMACH_SHM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* The packet type a header load favours. */
enum shm_fuzz_bias { SHM_FUZZ_DATA, SHM_FUZZ_PIPE, SHM_FUZZ_RNDV };

int shm_fuzz_run(const uint8_t *data, size_t size, enum shm_fuzz_bias bias);

#endif /* RDMACH_SHM_FUZZ_H */
