/*
 * nodemap.h - PMI_process_mapping, the PMI-1 key through which Hydra (and
 * rdmach_run) says which ranks share a node: "(vector,(start,nodes,ppn),
 * ...)" - each block puts ppn consecutive ranks on each of the nodes
 * start..start+nodes-1, the blocks in turn, repeated until every rank has
 * a node (MPICH's reading); a bare node id is (id,1,1), and "[b,...]xN"
 * repeats the blocks b,... N times in place, as MPICH 4.3 and 5.0's Hydra
 * write them (MPL_rankmap_array_to_str: "(vector,[(0,2,1)]x4)" is 8 ranks
 * round-robin on 2 nodes); Slurm writes triples only.  Anything else
 * (nested groups, blanks, N of 0) is refused with the offset and what was
 * wrong (the caller then reads every rank's host id).  It comes from the
 * process manager: foreign text, parsed strictly with bounds on every
 * number and count.
 */
#ifndef RDMACH_CORE_NODEMAP_H
#define RDMACH_CORE_NODEMAP_H

#include <stddef.h>

/* Most blocks a mapping may have (Hydra writes one per distinct layout). */
#define RDMACH_NODEMAP_BLOCKS_MAX 1024

/* Parse s for a group of size ranks: node_of[r] = the node of rank r
 * (0 .. nodes-1).  0, or -EINVAL for anything malformed or out of bounds
 * (why: a message of whylen bytes); node_of is written only on success. */
int rdmach_nodemap_parse(const char *s, int size, int *node_of, char *why,
			 size_t whylen);

#endif /* RDMACH_CORE_NODEMAP_H */
