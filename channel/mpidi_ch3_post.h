/*
 * mpidi_ch3_post.h - CH3 channel "rdma": progress entry points as CH3
 * expects them (macros over MPIDI_CH3I_Progress).
 */
#ifndef MPIDI_CH3_POST_H_INCLUDED
#define MPIDI_CH3_POST_H_INCLUDED

#define MPIDI_CH3_Progress_start(progress_state_)                              \
	do {                                                                   \
		(progress_state_)->ch.completion_count =                       \
			MPIDI_CH3I_progress_completion_count;                  \
	} while (0)
#define MPIDI_CH3_Progress_end(progress_state_) do { } while (0)
#define MPIDI_CH3_Progress_poke() (MPIDI_CH3_Progress_test())

int MPIDI_CH3I_Progress(int blocking, MPID_Progress_state *state);
#define MPIDI_CH3_Progress_test() MPIDI_CH3I_Progress(FALSE, NULL)
#define MPIDI_CH3_Progress_wait(state) MPIDI_CH3I_Progress(TRUE, state)

#endif /* MPIDI_CH3_POST_H_INCLUDED */
