#!/bin/bash
# test-nas.sh - what `make check` runs for nas/: IS and CG class S built
# with our MPICH (ch3:rdma) and run at 4 processes must verify, and the
# runner's failure paths must fail: a wrong verification, a missing one, a
# killed rank, a hung rank (time limit), an interrupted runner.  Each case
# checks the exit status, the message (benchmark, class, np, MPI, log) and
# that nothing left behind looks like a valid result.
#
# usage: nas/test-nas.sh
# Environment: PREFIX (build/mpich-install: the MPICH to test), NPB_SRC
# (default ../shared/npb/NPB3.4-MPI.tar.gz), NAS_BUILD (build/nas),
# NAS_TEST_OUT (build/nas/test: the runs' result folders).  Without an NPB
# source the tests are skipped (NPB is not part of the repository).
# Ends with "N passed, M failed"; exit status 0 only if nothing failed.
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$here/.." && pwd -P)
prefix=$(realpath -m "${PREFIX:-$repo/build/mpich-install}")
export NAS_BUILD=${NAS_BUILD:-$repo/build/nas}
tout=$(realpath -m "${NAS_TEST_OUT:-$NAS_BUILD/test}")
runner=$here/run-nas.sh
mpi="ch3:rdma=$prefix"
T0=$(date +%s)

npass=0 nfail=0
ok() { echo "ok   $*"; npass=$((npass + 1)); }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }
finish() { echo "nas tests: $(($(date +%s) - T0)) s"; echo "$npass passed, $nfail failed"; [ "$nfail" = 0 ]; exit; }

npb=${NPB_SRC:-$repo/../shared/npb/NPB3.4-MPI.tar.gz}
if [ ! -e "$npb" ]; then
	# NPB is not part of the repository: without a copy there is nothing to test
	echo "skip nas tests: no NPB source $npb (set NPB_SRC= to NPB3.4-MPI's tarball or tree)"
	finish
fi
export NPB_SRC=$npb
if [ ! -x "$prefix/bin/mpiexec" ] || [ ! -x "$prefix/bin/mpif90" ]; then
	fail "no MPICH in $prefix (make mpich)"
	finish
fi
rm -rf "$tout" && mkdir -p "$tout"

# rn NAME ARGS...: the runner into $tout/NAME; status in $st, output in $tout/NAME.out
rn() {
	local name=$1; shift
	timeout -k 10 300 "$runner" -m "$mpi" -c S -n 4 -o "$tout/$name" "$@" >"$tout/$name.out" 2>&1
	st=$?
}
has() { grep -qF -- "$2" "$tout/$1.out"; }
show() { sed 's/^/     | /' "$tout/$1.out" | tail -n 15; }
csv_field() {	# name bench column -> the value in table.csv's row of bench
	awk -F, -v b="$2" -v col="$3" 'NR == 1 {for (i = 1; i <= NF; i++) h[$i] = i; next}
		$1 == b {print $h[col]}' "$tout/$1/table.csv"
}
# processes still running a binary: none may outlive the runner
leftovers() {
	local b=$1 p n=0
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" = "$b" ] && n=$((n + 1))
	done
	echo $n
}
# a failed run: non-zero exit, the FAIL line naming benchmark/class/np/MPI
# with WHY and the log, the log present, table.csv saying 0 verified and no time
check_failed() {	# name bench what why
	local name=$1 b=$2 what=$3 why=$4 log
	local line="FAIL $(echo "$b" | tr a-z A-Z) class S np 4 ch3:rdma round 1: $why"
	log=$tout/$name/logs/$b.S.np4.ch3-rdma.r1.log
	if [ "$st" = 0 ]; then fail "$what: the runner exited 0"; show "$name"; return; fi
	if ! has "$name" "$line" || ! has "$name" "(log: $log)"; then
		fail "$what: no line '$line ... (log: $log)'"; show "$name"; return
	fi
	[ -s "$log" ] || { fail "$what: log $log missing"; return; }
	if [ "$(csv_field "$name" "$b" verified)" != 0 ] || [ -n "$(csv_field "$name" "$b" seconds)" ]; then
		fail "$what: table.csv gives the run a result: $(grep "^$b," "$tout/$name/table.csv")"; return
	fi
	grep -q "^# RESULT: 1 of 1 runs FAILED" "$tout/$name/table.txt" ||
		{ fail "$what: table.txt does not say FAILED on top"; return; }
	ok "$what: exit $st, '$line'"
}

# 1. build IS and CG class S with our MPICH
t=$(date +%s)
rn build -b "is cg" --build-only
if [ "$st" = 0 ]; then ok "build IS, CG class S with $prefix/bin/mpicc, mpif90 ($(($(date +%s) - t)) s)"
else fail "build IS, CG class S"; show build; finish; fi
isbin=$(find "$NAS_BUILD" -path '*/npb/bin/is.S.x' | while read -r f; do
	grep -q "$prefix" "${f%/bin/is.S.x}/config/make.def" && echo "$f"; done | head -n 1)
shim=$NAS_BUILD/test-shim/killrank.so
mkdir -p "${shim%/*}"
"$prefix/bin/mpicc" -shared -fPIC -O2 -Wall -Wextra -Werror -o "$shim" "$here/test/killrank.c" ||
	fail "build the LD_PRELOAD shim nas/test/killrank.c"
export NAS_TEST_SHIM=$shim

# 2. both verify at 4 processes, counters summed over the 4 ranks
t=$(date +%s)
rn verify -b "is cg" --no-build --stats
for b in is cg; do
	if [ "$st" = 0 ] && [ "$(csv_field verify $b verified)" = 1 ] &&
	   [ -n "$(csv_field verify $b seconds)" ] && has verify "ok   $(echo $b | tr a-z A-Z) class S np 4 ch3:rdma"; then
		ok "$(echo $b | tr a-z A-Z) class S np 4 on ch3:rdma verified ($(csv_field verify $b seconds) s)"
	else
		fail "$(echo $b | tr a-z A-Z) class S np 4 on ch3:rdma (exit $st)"; show verify
	fi
	r=$(csv_field verify $b ranks_counted) by=$(csv_field verify $b bytes)
	if [ "$r" = 4 ] && [ "${by:-0}" -gt 0 ]; then
		ok "$b: RDMACH_STATS=1 counters of 4 ranks summed ($by bytes)"
	else
		fail "$b: counters: ranks_counted '$r', bytes '$by'"
	fi
done
[ -f "$tout/verify/table.txt" ] && [ -f "$tout/verify/runs.csv" ] && [ ! -e "$tout/verify/logs/runs.partial.tsv" ] &&
	ok "result folder: table.txt, table.csv, runs.csv on top, logs/ under it ($(($(date +%s) - t)) s)" ||
	fail "result folder: $(ls "$tout/verify" "$tout/verify/logs" | tr '\n' ' ')"

# 3. a wrong verification
rn unsuccessful -b is --no-build --wrap "$here/test/wrap.sh unsuccessful"
check_failed unsuccessful is "wrong verification" "NPB reports Verification = UNSUCCESSFUL"
rn noverify -b cg --no-build --wrap "$here/test/wrap.sh noverify"
check_failed noverify cg "no verification" "no 'Verification =' line in NPB's report"

# 4. a rank killed (SIGKILL) in the middle of IS
t=$(date +%s)
rn killed -b is --no-build -t 60 --wrap "$here/test/wrap.sh signal KILL 1 3"
check_failed killed is "killed rank ($(($(date +%s) - t)) s)" "mpiexec exited with status"
[ "$(leftovers "$isbin")" = 0 ] && ok "killed rank: no process left" || fail "killed rank: $(leftovers "$isbin") processes of $isbin left"

# 5. a hung rank (SIGSTOP mid-run): the time limit ends the run
t=$(date +%s)
rn hung -b is --no-build -t 4 --wrap "$here/test/wrap.sh signal STOP 1 3"
check_failed hung is "time limit ($(($(date +%s) - t)) s)" "timed out after 4 s"
[ "$(leftovers "$isbin")" = 0 ] && ok "time limit: no process left" || fail "time limit: $(leftovers "$isbin") processes of $isbin left"

# 6. the runner interrupted during a run: no table at all, nothing left running
name=interrupted
timeout -k 10 120 "$runner" -m "$mpi" -c S -n 4 -b is --no-build -t 60 -o "$tout/$name" \
	--wrap "$here/test/wrap.sh signal STOP 1 3" >"$tout/$name.out" 2>&1 &
rpid=$!
for ((i = 0; i < 100; i++)); do
	[ -f "$tout/$name/logs/is.S.np4.ch3-rdma.r1.log" ] && break
	sleep 0.1
done
sleep 2
kill -TERM "$rpid"
wait "$rpid"; st=$?
tables=$(cd "$tout/$name" 2>/dev/null && ls table.txt table.csv runs.csv ratios.png 2>/dev/null)
if [ "$st" = 130 ] && has "$name" "interrupted: no table written" && [ -z "$tables" ] &&
   [ "$(leftovers "$isbin")" = 0 ]; then
	ok "interrupted runner: exit 130, no table, no process left"
else
	fail "interrupted runner: exit $st, tables '$tables', $(leftovers "$isbin") processes left"; show "$name"
fi

# 7. options the runner refuses
rn badclass -c Q
[ "$st" = 2 ] && has badclass "class 'Q'" && ok "bad class: exit 2" || { fail "bad class: exit $st"; show badclass; }
rn nothing -b bt -n 2 --no-build
[ "$st" != 0 ] && has nothing "skip BT class S np 2: bt needs a square process count" &&
	ok "BT at np 2: skipped and said so, nothing ran: exit $st" || { fail "BT at np 2: exit $st"; show nothing; }

finish
