[#] start of __file__
dnl CH3 channel "rdma": MPICH's CH3 device over rdmach's five functions
dnl (init, connect, put, get, finalize).  rdmach is built outside MPICH
dnl (`make` in the rdmach tree) and linked into libmpi as a static archive.

AC_DEFUN([PAC_SUBCFG_PREREQ_]PAC_SUBCFG_AUTO_SUFFIX,[
    AM_CONDITIONAL([BUILD_CH3_RDMA],[test "X$device_name" = "Xch3" -a "X$channel_name" = "Xrdma"])
    AM_COND_IF([BUILD_CH3_RDMA],[
        AC_MSG_NOTICE([RUNNING PREREQ FOR ch3:rdma])
        dnl rdmach serialises each context: CH3's global lock provides that.
        MPID_MAX_THREAD_LEVEL=MPI_THREAD_MULTIPLE
        MPID_CH3I_CH_HCOLL_BCOL="basesmuma,basesmuma,ptpcoll"
    ])
])dnl

AC_DEFUN([PAC_SUBCFG_BODY_]PAC_SUBCFG_AUTO_SUFFIX,[
AM_COND_IF([BUILD_CH3_RDMA],[
AC_MSG_NOTICE([RUNNING CONFIGURE FOR ch3:rdma])

AC_ARG_WITH([rdmach],
    [AS_HELP_STRING([--with-rdmach=DIR],
        [rdmach source tree (DIR/include/rdmach.h) used by ch3:rdma])],
    [], [with_rdmach=no])
AC_ARG_WITH([rdmach-lib],
    [AS_HELP_STRING([--with-rdmach-lib=FILE],
        [rdmach static library (default DIR/build/lib/librdmach.a)])],
    [], [with_rdmach_lib=""])

if test "X$with_rdmach" = "Xno" -o "X$with_rdmach" = "Xyes" ; then
    AC_MSG_ERROR([ch3:rdma needs --with-rdmach=DIR (the rdmach source tree)])
fi
if test ! -f "$with_rdmach/include/rdmach.h" ; then
    AC_MSG_ERROR([ch3:rdma: $with_rdmach/include/rdmach.h not found])
fi
if test -z "$with_rdmach_lib" ; then
    with_rdmach_lib="$with_rdmach/build/lib/librdmach.a"
fi
if test ! -f "$with_rdmach_lib" ; then
    AC_MSG_ERROR([ch3:rdma: $with_rdmach_lib not found (run make in $with_rdmach first)])
fi

RDMACH_CPPFLAGS="-I$with_rdmach/include"
AC_SUBST([RDMACH_CPPFLAGS])

dnl What differs between MPICH releases (channel/ch3_compat.h): feature
dnl tests, not version numbers.  A header that stands alone is compiled
dnl against; CH3's own headers need this configure's output, so for them
dnl the declaration is looked for.
AC_MSG_CHECKING([whether MPIR_Progress_hook_exec_all takes a VCI])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM(
    [#include "$main_top_srcdir/src/include/mpir_progress_hook.h"],
    [int made = 0; return MPIR_Progress_hook_exec_all(-1, &made);])],
    [AC_MSG_RESULT([yes])
     AC_DEFINE([RDMACH_CH3_HOOK_VCI], [1],
        [Define if MPIR_Progress_hook_exec_all takes a VCI (MPICH 4.3)])],
    [AC_MSG_RESULT([no])])

rdmach_impl_h="$main_top_srcdir/src/include/mpir_impl.h"
rdmach_ch3_h="$main_top_srcdir/src/mpid/ch3/include/mpidimpl.h"
dnl The last argument of internal collectives: MPIR_Errflag_t * (4.0, 4.1),
dnl MPIR_Errflag_t (4.2, 4.3), int coll_attr (5.0).
AC_MSG_CHECKING([the last argument of internal collectives])
if grep -Eq 'int MPIR_Barrier\(MPIR_Comm \*comm_ptr, int coll_attr\)' "$rdmach_impl_h" ; then
    AC_MSG_RESULT([int coll_attr])
    AC_DEFINE([RDMACH_CH3_COLL_ATTR], [1],
        [Define if internal collectives end with int coll_attr (MPICH 5.0)])
elif grep -Eq 'int MPIR_Barrier\(MPIR_Comm \*comm_ptr, MPIR_Errflag_t \*errflag\)' "$rdmach_impl_h" ; then
    AC_MSG_RESULT([MPIR_Errflag_t *])
    AC_DEFINE([RDMACH_CH3_ERRFLAG_PTR], [1],
        [Define if internal collectives end with MPIR_Errflag_t * (MPICH 4.0, 4.1)])
else
    AC_MSG_RESULT([MPIR_Errflag_t])
fi
dnl The window function allocate_shm gained "int must" (4.2).
AC_MSG_CHECKING([whether allocate_shm takes must])
if grep -Eq 'allocate_shm\)\(.*int must\)' "$rdmach_ch3_h" ; then
    AC_MSG_RESULT([yes])
    AC_DEFINE([RDMACH_CH3_SHM_MUST], [1],
        [Define if CH3's allocate_shm window function takes int must (MPICH 4.2)])
else
    AC_MSG_RESULT([no])
fi

dnl rdmach built with verbs support references libibverbs.
rdmach_extra_libs=""
if nm "$with_rdmach_lib" 2>/dev/null | grep -q " U ibv_" ; then
    AC_CHECK_LIB([ibverbs], [ibv_get_device_list], [rdmach_extra_libs="-libverbs"],
        [AC_MSG_ERROR([ch3:rdma: $with_rdmach_lib needs libibverbs, which was not found])])
fi
PAC_LIBS_ADD([$with_rdmach_lib $rdmach_extra_libs -lpthread])

])dnl end AM_COND_IF(BUILD_CH3_RDMA,...)
])dnl end _BODY

[#] end of __file__
