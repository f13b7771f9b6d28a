#!/bin/bash
# wrap.sh - what nas/test-nas.sh puts between mpiexec and a benchmark
# (run-nas.sh --wrap) to make a run fail in a known way.
#
#   wrap.sh unsuccessful PROG ARGS   NPB's report says "UNSUCCESSFUL", exit 0
#   wrap.sh noverify PROG ARGS       the "Verification =" line is dropped, exit 0
#   wrap.sh signal SIG RANK N PROG ARGS
#                                    rank RANK raises SIGSIG at its Nth
#                                    MPI_Alltoallv (IS: mid-run), through the
#                                    LD_PRELOAD shim $NAS_TEST_SHIM (killrank.c);
#                                    KILL: a dead rank, STOP: a hung one
set -u
mode=${1:?mode}; shift
case $mode in
unsuccessful)
	"$@" | sed 's/^\( *Verification *= *\)SUCCESSFUL/\1UNSUCCESSFUL/'
	exit "${PIPESTATUS[0]}" ;;
noverify)
	"$@" | grep -v '^ *Verification *='
	exit "${PIPESTATUS[0]}" ;;
signal)
	sig=$1 rank=$2 n=$3; shift 3
	if [ "${PMI_RANK:-}" = "$rank" ]; then
		NAS_TEST_SIGNAL=$sig NAS_TEST_CALL=$n LD_PRELOAD=${NAS_TEST_SHIM:?} exec "$@"
	fi
	exec "$@" ;;
*) echo "wrap.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac
