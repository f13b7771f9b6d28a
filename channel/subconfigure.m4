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
