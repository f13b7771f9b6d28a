/*
 * mpidi_ch3_pre.h - CH3 channel "rdma": what CH3 embeds in its own
 * structures (VC, progress state).  Included by mpidpre.h before the packet
 * types exist, so only pointers to them appear here.
 */
#ifndef MPIDI_CH3_PRE_H_INCLUDED
#define MPIDI_CH3_PRE_H_INCLUDED

#include <pthread.h>

/* Every connection is set up by rdmach_connect() at MPI_Init; there is no
 * way to add processes later, so CH3's dynamic-process code is compiled out
 * (MPI_Comm_spawn, MPI_Comm_connect/accept fail with a clear error). */
#define MPIDI_CH3_HAS_NO_DYNAMIC_PROCESS
#undef MPID_USE_SEQUENCE_NUMBERS

typedef struct {
	int dummy;
} MPIDI_CH3I_CH_comm_t;

struct rdmach_conn;
union MPIDI_CH3_Pkt;

/* Per-VC channel state: a FIFO of requests still (partly) to be put, and
 * the receive side: headers and the payloads after them handed to CH3's
 * handlers where rdmach holds them (rdmach_peek), or else got ahead into a
 * staging buffer, and the request whose iovec the rest of a payload is
 * read into. */
typedef struct MPIDI_CH3I_VC {
	struct MPIR_Request *sendq_head;
	struct MPIR_Request *sendq_tail;
	struct rdmach_conn *conn;	/* NULL until rdmach_connect */
	struct MPIR_Request *recv_active;
	char *rx_buf;			/* staging: [rx_pos, rx_len) unread;
					 * NULL when nothing is (the process's
					 * spare serves the next get) */
	size_t rx_pos, rx_len;
	/* Header of a send started with an empty queue.  It stays put while
	 * that send is queued: a zero-copy put must be retried with the same
	 * iovec bases. */
	union MPIDI_CH3_Pkt *tx_pkt;
	int polled;			/* in the progress engine's poll list */
	int terminate_pending;		/* CH3 closed the VC; sendq not empty */
	int terminated;			/* closed: no longer polled */
	size_t rx_ahead;		/* bytes the next refill reads up to */
	uint64_t rx_in_place_min;	/* RDMACH_CH3_RX_IN_PLACE; UINT64_MAX
					 * once rdmach_peek said -EOPNOTSUPP */
	int rx_peek;			/* the last message had a payload of
					 * rx_in_place_min bytes or more */
	int rx_waited;			/* a poll found nothing since the
					 * last packet */
	/* Sends whose last bytes rdmach took by reference (the peer reads
	 * them from the buffer): completed, in ticket order, once
	 * rdmach_put_done reaches their ticket. */
	struct MPIR_Request *zc_head;
	struct MPIR_Request *zc_tail;
} MPIDI_CH3I_VC;

#define MPIDI_CH3_VC_DECL struct MPIDI_CH3I_VC ch;

/* Per-request channel state: a send's rdmach_put_deferred ticket and its
 * link in its VC's zero-copy list (apart from next, the send queue's:
 * a request moves from one to the other). */
#define MPIDI_CH3_REQUEST_DECL					\
	struct MPIDI_CH3I_Request {				\
		uint64_t put_ticket;				\
		struct MPIR_Request *zc_next;			\
	} ch;

/* A shared-memory window (ch3_win.c): one segment for the node's
 * processes, their memory back to back, then the process-shared mutex
 * that CH3's accumulates on it take (MPIDI_CH3I_SHM_MUTEX_*). */
#define MPIDI_CH3_WIN_DECL						\
	void *shm_seg;			/* NULL: not a shm window */	\
	MPI_Aint shm_seg_len;						\
	MPL_shm_hnd_t shm_seg_hnd;					\
	pthread_mutex_t *shm_mutex;

typedef struct MPIDI_CH3I_Progress_state {
	int completion_count;
} MPIDI_CH3I_Progress_state;

#define MPIDI_CH3_PROGRESS_STATE_DECL MPIDI_CH3I_Progress_state ch;

extern volatile unsigned int MPIDI_CH3I_progress_completion_count;

#endif /* MPIDI_CH3_PRE_H_INCLUDED */
