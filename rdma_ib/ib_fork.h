/* ib_fork.h - fork() and registered memory (rdma_ib private, prefix ib_). */
#ifndef RDMACH_IB_FORK_H
#define RDMACH_IB_FORK_H

/*
 * Call once at the start of the ib transport's open, BEFORE the first
 * verbs call that registers memory (ideally before ibv_get_device_list):
 * ibv_fork_init() protects only registrations made after it.
 *
 * Without protection, a fork() while memory is registered makes the
 * parent's registered pages copy-on-write; the parent's next write gets a
 * new page while the adapter keeps using the old one (silent corruption).
 *   - kernel >= 5.13 copies pinned pages for the child at fork
 *     (ibv_is_fork_initialized() == IBV_FORK_UNNEEDED): nothing to do;
 *   - else ibv_fork_init(): registered ranges become MADV_DONTFORK (the
 *     child does not see them; it may fork/exec freely, as system() does);
 *   - if that is too late (memory already registered): warn once.
 * Returns the resulting enum ibv_fork_status (never fails the open).
 */
int ib_fork_setup(void);

#endif /* RDMACH_IB_FORK_H */
