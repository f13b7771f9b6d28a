#!/bin/bash
# test-mpich.sh - run MPI programs and MPICH's own test suite against an
# MPICH installed by channel/build-mpich.sh.
#
#   channel/test-mpich.sh progs            MPI programs, 2..8 processes
#   channel/test-mpich.sh suite [dir...]   MPICH test/mpi directories
#                                          (default: pt2pt coll datatype comm
#                                          group init errhan attr)
#   channel/test-mpich.sh summary          pass counts so far (NAME=...)
#   channel/test-mpich.sh ci [dir...]      the fixed subset in test/ci/*.list
#                                          (80 tests, for CI)
#   channel/test-mpich.sh dropin           Debian's NPmpich2 and a Fortran
#                                          program of mpif90.mpich on this
#                                          MPICH (LD_LIBRARY_PATH), SONAMEs
#   channel/test-mpich.sh faults           a rank ending abnormally (exit(3),
#                                          SIGKILL): mpiexec reports its status
#   channel/test-mpich.sh vm-ib            that subset compiled here, run in the
#                                          Soft-RoCE VM with RDMACH_TRANSPORT=ib
# Environment:
#   PREFIX=dir       the MPICH install to test (build/mpich-install)
#   NAME=name        label for results (rdma; "sock" for the reference build)
#   NP_LIST="2 4 8"  process counts for `progs`
#   MPITEST_TIMEOUT  seconds per suite test (60)
#   SUITE_NP=n       largest process count of suite tests (8)
#   SUITE_LIST=file  a runtests list of single tests instead of directories
#   SUITE_TESTLISTS  list files per directory (testlist; add testlist.dtp
#                    for the generated datatype-pool tests, many and slow)
# Results go to build/mpich/results-$NAME/; the exit status is non-zero
# when anything failed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
work=${MPICH_WORK:-$repo/build/mpich}
name=${NAME:-rdma}
prefix=${PREFIX:-$repo/build/mpich-install}
out=$work/results-$name
mkdir -p "$out"
export MPITEST_TIMEOUT=${MPITEST_TIMEOUT:-60}
# one mpiexec per test, as before MPICH 5.0 (whose runtests otherwise runs
# batches through a run_mpitests program of the build tree it looks for
# beside runtests, in the source tree)
export MPITEST_RUN_INDIVIDUAL=1

[ -x "$prefix/bin/mpiexec" ] || { echo "test-mpich: no $prefix/bin/mpiexec (run make mpich)" >&2; exit 2; }
# this MPICH's commands by their path: another MPI's (Open MPI's mpicc,
# Debian's mpiexec alternatives) may come first in PATH
mpicc=$prefix/bin/mpicc mpif90=$prefix/bin/mpif90 mpiexec=$prefix/bin/mpiexec
export PATH=$prefix/bin:$PATH

fail=0
npass=0 nfail=0
run() {	# label, timeout, command...
	local label=$1 t=$2 t0 t1 rc
	shift 2
	t0=$(date +%s.%N)
	timeout -k 5 "$t" "$@" >"$out/$label.out" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	if [ $rc -eq 0 ]; then
		printf '  PASS %-40s %6.1f s\n' "$label" "$(echo "$t1 - $t0" | bc)"
		npass=$((npass + 1))
	else
		printf '  FAIL %-40s rc=%d (%s)\n' "$label" $rc "$out/$label.out"
		tail -5 "$out/$label.out" | sed 's/^/       /'
		nfail=$((nfail + 1))
		fail=1
	fi
}

# A program built with Debian's MPICH (libmpich.so.12) runs on this one
# through the ABI name build-mpich.sh installs (LD_LIBRARY_PATH only).
drop_in() {
	local deb=/usr/bin/mpicc.mpich
	[ -x "$deb" ] && [ -e "$prefix/lib/libmpich.so.12" ] || return 0
	"$deb" -O2 -o "$out/bin/mpi_libversion-debian" "$here/test/mpi_libversion.c" || return 0
	run drop-in-debian-binary-np2 60 env LD_LIBRARY_PATH="$prefix/lib" \
		"$mpiexec" -n 2 "$out/bin/mpi_libversion-debian" ch3:rdma
}

# Debian's programs built against its MPICH on this one (the MPICH ABI):
# the SONAMEs, then Debian's NetPIPE (netpipe-mpich2: NPmpich2, C, the
# table of 1 B-1 MiB checked) and a Fortran program built with Debian's
# mpif90.mpich (libmpichfort.so.12), both under this MPICH's Hydra with
# LD_LIBRARY_PATH=$prefix/lib only; a package that is absent is a "skip"
# line.  (ScaLAPACK's tests, scalapack-mpi-test, would pull in Open MPI
# through mpi-default-bin.)
dropin() {
	local lib=$prefix/lib so need np=/usr/bin/NPmpich2 f90=/usr/bin/mpif90.mpich
	local abi=$out/abi-lib rows
	mkdir -p "$out/bin"
	echo "Debian's MPICH programs on $prefix (LD_LIBRARY_PATH=$lib):"
	so=$(readelf -d "$lib/libmpi.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	if [ "$so" = libmpi.so.12 ] && [ "$(readlink -f "$lib/libmpich.so.12")" = "$(readlink -f "$lib/libmpi.so.12")" ]; then
		printf '  PASS %-40s libmpi.so: SONAME %s, libmpich.so.12 is it\n' abi-soname "$so"
		npass=$((npass + 1))
	else
		printf '  FAIL %-40s libmpi.so SONAME "%s", libmpich.so.12 -> %s\n' abi-soname \
			"$so" "$(readlink -f "$lib/libmpich.so.12" 2>/dev/null || echo none)"
		nfail=$((nfail + 1)); fail=1
		return 0
	fi
	# what a binary NEEDs must resolve to this install
	resolves() {	# binary library
		LD_LIBRARY_PATH=$ldp ldd "$1" | grep -q "^[[:space:]]*$2 => $ldp_first/"
	}
	if [ -x "$np" ]; then
		ldp=$lib ldp_first=$lib
		need=$(readelf -d "$np" | sed -n 's/.*(NEEDED).*\[\(libmpi.*\)\]/\1/p' | tr '\n' ' ')
		if [ "$need" = "libmpich.so.12 " ] && resolves "$np" libmpich.so.12; then
			printf '  PASS %-40s NEEDED %s-> %s\n' NPmpich2-needed "$need" "$lib"
			npass=$((npass + 1))
		else
			printf '  FAIL %-40s NEEDED "%s", not resolved to %s\n' NPmpich2-needed "$need" "$lib"
			nfail=$((nfail + 1)); fail=1
		fi
		# 1 B to 1 MiB, 100 round trips each, no perturbation; rdmach's
		# counters (RDMACH_STATS) show the ranks ran on this MPICH
		rm -f "$out/np.out"
		run NPmpich2-np2 120 env LD_LIBRARY_PATH="$lib" RDMACH_STATS=1 \
			"$mpiexec" -n 2 "$np" -n 100 -p 0 -u 1048576 -o "$out/np.out"
		rows=$(awk 'NF == 3 && $1 ~ /^[0-9]+$/ && $2 > 0 && $3 > 0' "$out/np.out" 2>/dev/null | wc -l)
		if [ "$rows" -ge 30 ] && [ "$(awk 'END {print $1}' "$out/np.out")" = 1048576 ] &&
		   [ "$(grep -c '^# rdmach counters, rank' "$out/NPmpich2-np2.out")" = 2 ]; then
			printf '  PASS %-40s %d sizes 1 B-1 MiB, rdmach counters of 2 ranks\n' NPmpich2-table "$rows"
			npass=$((npass + 1))
		else
			printf '  FAIL %-40s %s sizes, last %s, %s rdmach counter tables (%s)\n' NPmpich2-table \
				"$rows" "$(awk 'END {print $1}' "$out/np.out" 2>/dev/null)" \
				"$(grep -c '^# rdmach counters, rank' "$out/NPmpich2-np2.out")" "$out/np.out"
			nfail=$((nfail + 1)); fail=1
		fi
	else
		echo "  skip NPmpich2: no $np (apt-get install --no-install-recommends netpipe-mpich2)"
	fi
	if [ ! -x "$f90" ]; then
		echo "  skip Fortran drop-in: no $f90 (apt-get install libmpich-dev gfortran)"
	elif [ ! -e "$lib/libmpifort.so.12" ]; then
		echo "  skip Fortran drop-in: $prefix built without Fortran (no libmpifort.so.12)"
	else
		"$f90" -O2 -o "$out/bin/flibversion-debian" "$here/test/flibversion.f90" || { fail=1; return 0; }
		ldp=$lib ldp_first=$lib
		if [ ! -e "$lib/libmpichfort.so.12" ]; then
			# an install made before build-mpich.sh gave Debian's names
			rm -rf "$abi" && mkdir -p "$abi"
			ln -s "$lib/libmpifort.so.12" "$abi/libmpichfort.so.12"
			ldp=$abi:$lib ldp_first=$abi
			echo "  (no $lib/libmpichfort.so.12: rerun channel/build-mpich.sh install; a link in $abi for now)"
		fi
		need=$(readelf -d "$out/bin/flibversion-debian" | sed -n 's/.*(NEEDED).*\[\(libmpi.*\)\]/\1/p' | tr '\n' ' ')
		if [[ $need == *libmpichfort.so.12* ]] && resolves "$out/bin/flibversion-debian" libmpichfort.so.12; then
			printf '  PASS %-40s NEEDED %s-> %s\n' flibversion-needed "$need" "$ldp_first"
			npass=$((npass + 1))
		else
			printf '  FAIL %-40s NEEDED "%s", not resolved to %s\n' flibversion-needed "$need" "$ldp_first"
			nfail=$((nfail + 1)); fail=1
		fi
		run flibversion-debian-np2 60 env LD_LIBRARY_PATH="$ldp" \
			"$mpiexec" -n 2 "$out/bin/flibversion-debian" ch3:rdma
		grep -qx 'No Errors' "$out/flibversion-debian-np2.out" || {
			printf '  FAIL %-40s no "No Errors"\n' flibversion-output; nfail=$((nfail + 1)); fail=1; }
	fi
	drop_in
	return 0
}

progs() {
	local bin=$out/bin src=$work/src np
	mkdir -p "$bin"
	"$mpicc" -O2 -Wall -Wextra -Werror -o "$bin/mpi_exchange" "$here/test/mpi_exchange.c" || exit 1
	"$mpicc" -O2 -Wall -Wextra -Werror -o "$bin/mpi_node" "$here/test/mpi_node.c" || exit 1
	"$mpicc" -O2 -o "$bin/cpi" "$src/examples/cpi.c" -lm || exit 1
	rm -f "$bin/fhello"	# an MPICH built without Fortran has no mpif90
	[ ! -x "$mpif90" ] || "$mpif90" -O2 -o "$bin/fhello" "$here/test/fhello.f90" || exit 1
	for b in mpi_latency mpi_bw; do
		[ -f "$repo/bench/src/$b.c" ] &&
			"$mpicc" -O2 -Wall -Wextra -Werror -I"$repo/bench/src" -o "$bin/$b" "$repo/bench/src/$b.c" -lm
	done
	echo "MPI programs under $mpiexec:"
	for np in ${NP_LIST:-2 3 4 8}; do
		run "cpi-np$np" 60 "$mpiexec" -n "$np" "$bin/cpi"
		[ -x "$bin/fhello" ] && run "fhello-np$np" 60 "$mpiexec" -n "$np" "$bin/fhello"
		run "mpi_exchange-np$np" 300 "$mpiexec" -n "$np" "$bin/mpi_exchange"
		# every process of this host in one MPI_COMM_TYPE_SHARED communicator
		run "mpi_node-np$np" 60 "$mpiexec" -n "$np" "$bin/mpi_node" "$np"
	done
	# Hydra counts localhost and 127.0.0.1 as two nodes, rdmach one host:
	# its host ids decide, and the channel gives MPICH node ids from them
	# (ch3_node.c): one node communicator of both processes
	run mpi_node-np2-two-names 60 \
		"$mpiexec" -hosts localhost,127.0.0.1 -n 2 "$bin/mpi_node" 2
	# the channel's framing with the smallest staging buffer (headers cut
	# at its end, several packets per get) over a 4 KiB shm ring
	run mpi_exchange-np3-tiny-staging 300 env RDMACH_CH3_RX_STAGING=160 \
		RDMACH_SHM_RING_SIZE=4096 "$mpiexec" -n 3 "$bin/mpi_exchange" 1048576
	# headers and their payloads read in place (rdmach_peek) after every
	# message, headers cut at a 4 KiB ring's end going through staging
	run mpi_exchange-np3-in-place 300 env RDMACH_CH3_RX_IN_PLACE=1 \
		RDMACH_SHM_RING_SIZE=4096 "$mpiexec" -n 3 "$bin/mpi_exchange" 1048576
	[ -x "$bin/mpi_latency" ] && run mpi_latency-np2-verify-in-place 300 \
		env RDMACH_CH3_RX_IN_PLACE=1 "$mpiexec" -n 2 "$bin/mpi_latency" -m 1:64K -v
	# every byte of windows of small sends into a 4 KiB ring (from 512 B
	# an 8 KiB bulk ring), one way and both: sends that the full rings
	# take only in part or not at all wait in the VC's queue (ch3_isend.c,
	# send_small_request)
	for dir in "" -B; do
		[ -x "$bin/mpi_bw" ] && run "mpi_bw-np2-verify-tiny-ring$dir" 300 \
			env RDMACH_SHM_RING_SIZE=4096 RDMACH_SHM_LINE_RING=128 \
			RDMACH_SHM_BULK_RING=8192 RDMACH_SHM_BULK_MIN=512 \
			"$mpiexec" -n 2 "$bin/mpi_bw" -m 1:8K -w 64 -v -I 3 -X 1 $dir
	done
	# every writer cold (rdma_shm/README.md, warm writers): small packets
	# through the line ring, sends from 4 KiB by CMA, the rest through a
	# 16 KiB main ring; then one warm writer earned after 16 KiB and given
	# back after 1 ms idle, over and over
	run mpi_exchange-np4-cold 300 env RDMACH_SHM_WARM_MAX=0 \
		"$mpiexec" -n 4 "$bin/mpi_exchange" 1048576
	run mpi_exchange-np4-warm-churn 300 env RDMACH_SHM_WARM_MAX=1 \
		RDMACH_SHM_WARM_AFTER=16K RDMACH_SHM_IDLE_RELEASE_MS=1 \
		RDMACH_SHM_LIVENESS_MS=1 "$mpiexec" -n 4 "$bin/mpi_exchange" 1048576
	for dir in "" -B; do
		[ -x "$bin/mpi_bw" ] && run "mpi_bw-np2-verify-cold$dir" 300 \
			env RDMACH_SHM_WARM_MAX=0 \
			"$mpiexec" -n 2 "$bin/mpi_bw" -m 1:64K -w 64 -v -I 3 -X 1 $dir
	done
	drop_in
	[ -x "$bin/mpi_latency" ] && run mpi_latency-np2 300 "$mpiexec" -n 2 "$bin/mpi_latency"
	[ -x "$bin/mpi_bw" ] && run mpi_bw-np2 300 "$mpiexec" -n 2 "$bin/mpi_bw"
	return 0
}

# A rank that ends abnormally: mpiexec must report its own status (the
# exit code it chose, or Hydra's banner for the signal that killed it),
# not the surviving rank's abort (RDMACH_CH3_FAIL_GRACE_MS).
# Hydra itself (MPICH 4.0.2, pm/pmiserv/pmip_cb.c) has a race: when the
# proxy reaps the dead rank before it sees that rank's PMI socket close,
# the close handler overwrites the reaped status with 1, and mpiexec says
# "Hangup (signal 1)".  ch3:nemesis shows it as often (2 of 30 runs on a
# quiet host), so a run ending with 1 is counted as that race.  Likewise
# a run whose banner names the surviving rank killed by signal 9: Hydra's
# cleanup killed it (it did not abort by itself) and mpiexec reported that
# before the dead rank's exit code.  Every other status fails, and at
# least one run must give the rank's own status.
# Does the banner of log name rank 0 (the survivor) killed by signal 9?
survivor_killed() {
	local pid0 bad
	pid0=$(sed -n 's/^mpi_abnormal: rank 0 pid \([0-9]*\)$/\1/p' "$1")
	bad=$(sed -n 's/^=   PID \([0-9]*\) RUNNING AT .*/\1/p' "$1" | head -1)
	[ -n "$pid0" ] && [ "$pid0" = "$bad" ] && grep -q 'EXIT CODE: 9$' "$1"
}

expect_status() {	# label, want, runs, mode
	local label=$1 want=$2 runs=$3 mode=$4 k rc bad=0 good=0 race=0 log
	for ((k = 1; k <= runs; k++)); do
		log=$out/$label-$k.out
		timeout -k 5 60 "$mpiexec" -n 2 "$out/bin/mpi_abnormal" "$mode" >"$log" 2>&1
		rc=$?
		if [ "$rc" = 1 ] && grep -q 'EXIT CODE: 1$' "$log"; then
			race=$((race + 1))
		elif [ "$rc" = 9 ] && [ "$want" != 9 ] && survivor_killed "$log"; then
			race=$((race + 1))
		elif [ "$rc" != "$want" ]; then
			printf '  FAIL %-40s run %d: mpiexec status %d, expected %d (%s)\n' \
				"$label" "$k" "$rc" "$want" "$log"
			tail -5 "$log" | sed 's/^/       /'
			bad=1
		elif [ "$want" = 9 ] && ! grep -q 'signal 9\|EXIT CODE: 9' "$log"; then
			printf '  FAIL %-40s run %d: status 9 but nothing says why (%s)\n' \
				"$label" "$k" "$log"
			bad=1
		else
			good=$((good + 1))
		fi
	done
	if [ $bad = 0 ] && [ $good -gt 0 ]; then
		printf '  PASS %-40s %d of %d runs status %d, %d Hydra races\n' \
			"$label" "$good" "$runs" "$want" "$race"
		npass=$((npass + 1))
	else
		[ $bad = 0 ] && printf '  FAIL %-40s no run gave status %d (%d Hydra races)\n' \
			"$label" "$want" "$race"
		nfail=$((nfail + 1))
		fail=1
	fi
}

faults() {
	mkdir -p "$out/bin"
	"$mpicc" -O2 -Wall -Wextra -Werror -o "$out/bin/mpi_abnormal" \
		"$here/test/mpi_abnormal.c" || exit 1
	echo "abnormal ends under $mpiexec:"
	expect_status exit3-finalize 3 "${FAULT_RUNS:-8}" exit-finalize
	expect_status exit3-recv 3 "${FAULT_RUNS:-8}" exit-recv
	expect_status kill9 9 "${FAULT_RUNS:-8}" kill
}

summarize() {
	echo "per directory (pass/total), from $out/summary.junit.xml:"
	python3 "$here/test/suite_summary.py" "$out/summary.junit.xml"
}

# channel/test/ci/DIR.list less the programs DIR of this source lacks
# (those its Makefile.am does not name)
ci_list() {
	local d=$1 p rest
	while read -r p rest; do
		if [[ $p == \#* || -z $p ]] || grep -qw -- "$p" "$work/src/test/mpi/$d/Makefile.am"; then
			echo "$p${rest:+ $rest}"
		else
			echo "  (CI subset: $d/$p is not in this MPICH's test suite: left out)" >&2
		fi
	done <"$here/test/ci/$d.list"
}

suite() {
	local dirs=("$@") tb=$work/test-$name t0 t1 summary
	[ ${#dirs[@]} -gt 0 ] || dirs=(pt2pt coll datatype comm group init errhan attr)
	if [ ! -f "$tb/Makefile" ]; then
		rm -rf "$tb" && mkdir -p "$tb"
		(cd "$tb" && "$work/src/test/mpi/configure" --with-mpi="$prefix" \
			--disable-spawn --disable-ft-tests --disable-romio --disable-perftest \
			--disable-cxx --enable-fortran=no MPICC="$prefix/bin/mpicc" \
			>configure.out 2>&1) || { echo "test/mpi configure failed: $tb/config.log" >&2; exit 1; }
		make -C "$tb/util" -j2 >/dev/null 2>&1 && make -C "$tb/dtpools" -j2 >/dev/null 2>&1
	fi
	local sel
	if [ "${SUITE_CI:-0}" = 1 ]; then
		# the fixed CI subset: channel/test/ci/<dir>.list as
		# <dir>/testlist.ci, without the tests this release no longer has
		for d in "${dirs[@]}"; do
			mkdir -p "$tb/$d"
			ci_list "$d" >"$tb/$d/testlist.ci"
		done
		sel=(-tests=testlist.ci -testdirs="$(IFS=,; echo "${dirs[*]}")")
	elif [ -n "${SUITE_LIST:-}" ]; then
		cp "$SUITE_LIST" "$tb/testlist.sel"
		sel=(-tests=testlist.sel)
	else
		sel=(-tests="${SUITE_TESTLISTS:-testlist}" -testdirs="$(IFS=,; echo "${dirs[*]}")")
	fi
	# generated into the build tree before MPICH 4.3, a script of the
	# source tree since
	local runner=$tb/runtests
	[ -x "$runner" ] || runner=$work/src/test/mpi/runtests
	t0=$(date +%s)
	(cd "$tb" && "$runner" -srcdir="$work/src/test/mpi" "${sel[@]}" \
		-mpiexec="$prefix/bin/mpiexec" -maxnp="${SUITE_NP:-8}" \
		-xmlfile="$out/summary.xml" -junitfile="$out/summary.junit.xml" \
		>"$out/suite.out" 2>&1)
	t1=$(date +%s)
	summary=$(grep -E 'tests failed out of|tests passed' "$out/suite.out" | tail -1)
	echo "MPICH test suite ($name, ${dirs[*]:-list}): $summary in $((t1 - t0)) s"
	summarize
	local all nf
	all=$(sed -nE 's/^ *All ([0-9]+) tests passed.*/\1/p' "$out/suite.out" | tail -1)
	if [ -n "$all" ]; then
		npass=$((npass + all))
	else
		fail=1
		read -r nf all < <(sed -nE 's/^ *([0-9]+) tests failed out of ([0-9]+).*/\1 \2/p' \
			"$out/suite.out" | tail -1)
		[ -n "${all:-}" ] || { nf=1; all=1; }	# no summary: the harness failed
		npass=$((npass + all - nf)); nfail=$((nfail + nf))
	fi
}

# The CI subset compiled on the host, run in the Soft-RoCE VM over rdma_ib.
vm_ib() {
	local vt=$work/vmtest-$name tb=$work/test-$name S=$work/src/test/mpi d p np args
	[ -f "$tb/util/.libs/libmtest_single.a" ] || { echo "run '$0 suite' first (builds $tb)" >&2; exit 2; }
	rm -rf "$vt" && mkdir -p "$vt"
	for d in pt2pt coll comm datatype group attr; do
		grep -v '^#' "$here/test/ci/$d.list" | while read -r p np args; do
			[ -n "$p" ] && [ -f "$S/$d/$p.c" ] || continue
			"$mpicc" -O1 -I"$S/include" -I"$tb/include" -o "$vt/$d-$p" "$S/$d/$p.c" \
				"$tb/util/.libs/libmtest_single.a" "$tb/util/.libs/libdtypes.a" -lm \
				2>/dev/null && echo "$d-$p $np $args" >>"$vt/list"
		done
	done
	cp "$here/test/run-list.sh" "$vt/"
	RDMACH_VM_PASSENV="RDMACH_TRANSPORT" RDMACH_TRANSPORT=ib \
		"$repo/test/vm/vm-run.sh" "$vt" "./run-list.sh $vt $prefix/bin/mpiexec" |
		tee "$out/vm-ib.txt"
	tail -1 "$out/vm-ib.txt" | grep -q "passed" && ! grep -q "^FAIL" "$out/vm-ib.txt" || fail=1
}

cmd=${1:-}
case $cmd in
progs) shift; progs "$@" ;;
dropin) dropin ;;
summary) summarize ;;
ci) shift; SUITE_CI=1 suite "$@" ;;
faults) faults ;;
vm-ib) vm_ib ;;
suite) shift; suite "$@" ;;
*) sed -n '2,20p' "$0"; exit 2 ;;
esac
case $cmd in progs|ci|suite|faults|dropin) echo "$npass passed, $nfail failed" ;; esac
exit $fail
