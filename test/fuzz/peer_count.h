/*
 * peer_count.h - the ib harnesses' count of loads from memory the peer
 * writes (proto/peer.h, built with -DRDMACH_FUZZ): the harness calls
 * peer_count_begin() before each use (a peek, a scan, a take; the reader
 * cuts a take where a chunk is done, proto_peer_epoch); a byte loaded
 * twice within one use aborts.  Probes are not counted.
 */
#ifndef RDMACH_FUZZ_PEER_COUNT_H
#define RDMACH_FUZZ_PEER_COUNT_H

#include <stddef.h>

void peer_count_begin(void);
/* loads counted since the last peer_count_begin() */
size_t peer_count_loads(void);

#endif /* RDMACH_FUZZ_PEER_COUNT_H */
