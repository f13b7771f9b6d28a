#!/bin/bash
# check-mpich.sh - build ch3:rdma from one MPICH release and check it: the
# MPI programs (test-mpich.sh progs) at 4 processes, the CI subset of
# MPICH's test suite (its own counts, up to 8), that release's
# test/mpi/rma directory at 4, the MPI scripts beside a PATH whose bare
# mpiexec/mpicc are another MPI's (test-coexist.sh) and Debian's programs
# on this MPICH (test-mpich.sh dropin).
#
#   channel/check-mpich.sh VERSION     4.0.2: Debian's source package
#                                      (apt-get source mpich); others:
#                                      $MPICH_TARBALLS/mpich-VERSION.tar.gz
#   MPICH_SRC=tarball-or-tree channel/check-mpich.sh [VERSION]
#                                      (VERSION default: from the name)
# Environment:
#   MPICH_TARBALLS=dir   where mpich-VERSION.tar.gz are (/work/shared/mpich)
#   CONFIGURE_EXTRA=...  (--disable-fortran --disable-cxx --disable-romio)
#   CHECKS="progs ci rma coexist dropin"  which checks; NP=4 processes; JOBS=2
# The source, build tree and results go to build/mpich-VERSION, the install
# to build/mpich-VERSION-install (built once; a rerun rebuilds only what
# changed); wall times of each step to build/mpich-VERSION/check-times.log.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
version=${1:-}
src=${MPICH_SRC:-}

die() { echo "check-mpich: $*" >&2; exit 2; }

if [ -z "$version" ]; then
	[ -n "$src" ] || die "usage: $0 VERSION (or MPICH_SRC=... $0)"
	version=$(basename "$src" | sed -nE 's/^mpich-([0-9][0-9.a-z]*[0-9a-z])(\.tar\..*)?$/\1/p')
	[ -n "$version" ] || die "cannot tell the version of $src: give it as an argument"
fi
if [ -z "$src" ] && [ "$version" != 4.0.2 ]; then
	src=${MPICH_TARBALLS:-/work/shared/mpich}/mpich-$version.tar.gz
	[ -f "$src" ] || die "$src not found (set MPICH_SRC= or MPICH_TARBALLS=)"
fi

export MPICH_SRC=$src MPICH_WORK=$repo/build/mpich-$version
export PREFIX=$repo/build/mpich-$version-install NAME=rdma
export CONFIGURE_EXTRA=${CONFIGURE_EXTRA---disable-fortran --disable-cxx --disable-romio}
# for the build only: rdmach warns of RDMACH_* variables it does not know
rdmach_build=${RDMACH_BUILD:-$repo/build}
unset RDMACH_BUILD
np=${NP:-4}
times=$MPICH_WORK/check-times.log
mkdir -p "$MPICH_WORK"

timed() {	# label, command...
	local label=$1 t0 rc
	shift
	t0=$(date +%s)
	"$@"
	rc=$?
	echo "$(date -Is) $version $label $(($(date +%s) - t0))s rc=$rc" | tee -a "$times"
	return $rc
}

timed build env RDMACH_BUILD="$rdmach_build" "$here/build-mpich.sh" || exit 1
"$PREFIX/bin/mpichversion" | grep -q 'ch3:rdma' ||
	die "$PREFIX/bin/mpichversion does not report ch3:rdma"
# test-mpich.sh writes each suite run's results to the same files
keep() {
	local r=$MPICH_WORK/results-rdma
	cp "$r/suite.out" "$r/suite-$1.out" 2>/dev/null
	cp "$r/summary.junit.xml" "$r/summary-$1.junit.xml" 2>/dev/null
	return 0
}

fail=0
for c in ${CHECKS:-progs ci rma coexist dropin}; do
	case $c in
	progs) timed progs env NP_LIST="$np" "$here/test-mpich.sh" progs || fail=1 ;;
	# the subset with its own process counts, as make check runs it
	# (coll2 and grouptest fail capped at 4: they need 5 and 8)
	ci) timed ci env SUITE_NP=8 "$here/test-mpich.sh" ci || fail=1; keep ci ;;
	# MPICH's own time limit (180 s): rma_contig -iter=10000, a
	# passive-target loop on MPI_Win_create, takes 20-80 s on 2 busy cores
	rma) timed rma env SUITE_NP="$np" MPITEST_TIMEOUT="${MPITEST_TIMEOUT:-180}" \
		"$here/test-mpich.sh" suite rma || fail=1; keep rma ;;
	# the bare names first in PATH are a shim that fails: never called
	coexist) timed coexist "$here/test-coexist.sh" || fail=1 ;;
	dropin) timed dropin "$here/test-mpich.sh" dropin || fail=1 ;;
	*) die "unknown check '$c'" ;;
	esac
done
exit $fail
