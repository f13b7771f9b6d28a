##
## CH3 channel "rdma" (rdmach).  Inserted into MPICH as
## src/mpid/ch3/channels/rdma by channel/build-mpich.sh.
##

if BUILD_CH3_RDMA

AM_CPPFLAGS +=                                          \
    -I$(top_srcdir)/src/mpid/ch3/channels/rdma          \
    @RDMACH_CPPFLAGS@

mpi_core_sources +=                                     \
    src/mpid/ch3/channels/rdma/ch3_init.c               \
    src/mpid/ch3/channels/rdma/ch3_isend.c              \
    src/mpid/ch3/channels/rdma/ch3_node.c               \
    src/mpid/ch3/channels/rdma/ch3_oob.c                \
    src/mpid/ch3/channels/rdma/ch3_progress.c           \
    src/mpid/ch3/channels/rdma/ch3_win.c

noinst_HEADERS +=                                       \
    src/mpid/ch3/channels/rdma/mpidi_ch3_pre.h          \
    src/mpid/ch3/channels/rdma/mpidi_ch3_post.h         \
    src/mpid/ch3/channels/rdma/mpidi_ch3_impl.h         \
    src/mpid/ch3/channels/rdma/ch3_compat.h

endif BUILD_CH3_RDMA
