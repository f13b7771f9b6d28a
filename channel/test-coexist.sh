#!/bin/bash
# test-coexist.sh - our MPICH beside another MPI that owns the bare names:
# a shim directory first in PATH whose mpiexec, mpirun, mpicc, mpicxx,
# mpif77, mpif90 and mpifort print "shim: Open MPI's NAME called", log the
# call and exit 1 (what Debian's alternatives give when Open MPI is
# installed and selected); under it the scripts that launch MPI must pass
# and the shim's log must stay empty.
#
#   channel/test-coexist.sh
#   channel/test-coexist.sh shim DIR   only make the shim in DIR (calls
#                                      logged to DIR/calls.log): make check
#                                      runs its MPI steps with it in PATH
#
# Runs, with the shim first in PATH:
#   1. the shim itself through PATH (`mpiexec`, `mpicc`): must fail and log
#      (the test cannot pass because the shim is not reached);
#   2. channel/test-mpich.sh progs at 2 processes (NP_LIST);
#   3. bench/host/run-mpi.sh, ch3:rdma only, 1 round, latency 1-64 B;
#   4. nas/test-nas.sh when the MPICH has Fortran (builds and runs NAS IS
#      and CG class S and the runner's failure paths; COEXIST_NAS=0: not).
# Environment: PREFIX (build/mpich-install: the MPICH to test), MPICH_WORK
#   (build/mpich: its source tree, for cpi.c), NP_LIST (2), COEXIST_NAS.
# Ends with "N passed, M failed"; exit status 0 only if nothing failed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

make_shim() {	# dir log
	local n
	mkdir -p "$1" && : >"$2"
	for n in mpiexec mpirun mpicc mpicxx mpif77 mpif90 mpifort; do
		cat >"$1/$n" <<EOF
#!/bin/sh
echo "shim: Open MPI's $n called (\$*)" >>"$2"
echo "shim: Open MPI's $n called" >&2
exit 1
EOF
		chmod +x "$1/$n"
	done
}
if [ "${1:-}" = shim ]; then
	[ -n "${2:-}" ] || { echo "usage: $0 shim DIR" >&2; exit 2; }
	rm -rf "$2" && make_shim "$2" "$2/calls.log"
	exit
fi

prefix=$(realpath -m "${PREFIX:-$repo/build/mpich-install}")
export MPICH_WORK=${MPICH_WORK:-$repo/build/mpich}
[ -x "$prefix/bin/mpiexec" ] || { echo "test-coexist: no $prefix/bin/mpiexec (run make mpich)" >&2; exit 2; }

tmp=$(mktemp -d /tmp/rdmach-coexist.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
shim=$tmp/shim log=$tmp/shim.log out=$MPICH_WORK/results-coexist
mkdir -p "$out"
make_shim "$shim" "$log"
export PATH=$shim:$PATH

npass=0 nfail=0
ok() { printf '  PASS %s\n' "$*"; npass=$((npass + 1)); }
bad() { printf '  FAIL %s\n' "$*"; nfail=$((nfail + 1)); }
# label, log, command...: passes when the command does and the shim was not called
step() {
	local label=$1 f=$2 t0 rc
	shift 2
	: >"$log"
	t0=$(date +%s)
	"$@" >"$f" 2>&1
	rc=$?
	if [ $rc != 0 ]; then
		bad "$label: exit $rc ($f)"
		tail -n 5 "$f" | sed 's/^/       /'
	elif [ -s "$log" ]; then
		bad "$label: the shim was called: $(head -n 3 "$log" | tr '\n' ' ')"
	else
		ok "$label ($(($(date +%s) - t0)) s, shim not called)"
	fi
}

echo "with $shim first in PATH (mpiexec, mpicc, ...: exit 1), MPICH $prefix:"
# 1. the shim is what the bare names reach
if [ "$(command -v mpiexec)" = "$shim/mpiexec" ] && ! mpiexec -n 1 true 2>/dev/null &&
   ! mpicc --version >/dev/null 2>&1 && [ "$(grep -c '^shim:' "$log")" = 2 ]; then
	ok "bare mpiexec and mpicc reach the shim, which fails and logs"
else
	bad "the shim is not in effect: mpiexec is $(command -v mpiexec), log: $(cat "$log")"
fi

# 2. the MPI programs
step "channel/test-mpich.sh progs (NP_LIST=${NP_LIST:-2})" "$out/progs.out" \
	env NP_LIST="${NP_LIST:-2}" PREFIX="$prefix" NAME=coexist "$here/test-mpich.sh" progs
grep -q '^[0-9]* passed, 0 failed' "$out/progs.out" && echo "       $(tail -n 1 "$out/progs.out")"

# 3. the MPI benchmark runner, tiny: ch3:rdma, one round, latency to 64 B
step "bench/host/run-mpi.sh (ch3:rdma, latency 1-64 B, 1 round)" "$out/run-mpi.out" \
	env BENCH_MPIS=rdma PREFIX_RDMA="$prefix" BENCH_REPS=1 BENCH_HEADLINE=0 \
	BENCH_SERIES=lat BENCH_MAX=64 BENCH_BATCHES=1 BENCH_CPUS= \
	BENCH_RESULTS="$tmp/bench" "$repo/bench/host/run-mpi.sh"
rows=$(awk '!/^#/ && NF >= 2' "$tmp/bench/rdma/lat.median.txt" 2>/dev/null | wc -l)
if [ "$rows" = 7 ] && ! grep -q 'failed' "$out/run-mpi.out"; then
	ok "run-mpi.sh measured 7 sizes (1-64 B) on ch3:rdma"
else
	bad "run-mpi.sh: $rows sizes in $tmp/bench/rdma/lat.median.txt, $(grep -c failed "$out/run-mpi.out") failed runs"
fi

# 4. NAS: the runner builds with mpif90/mpicc and launches with mpiexec
nas=0; [ -x "$prefix/bin/mpif90" ] && nas=1
if [ "${COEXIST_NAS:-$nas}" = 1 ]; then
	step "nas/test-nas.sh" "$out/nas.out" env PREFIX="$prefix" "$repo/nas/test-nas.sh"
	grep -q '^[0-9]* passed, 0 failed' "$out/nas.out" && echo "       $(tail -n 1 "$out/nas.out")"
fi

echo "$npass passed, $nfail failed"
[ "$nfail" = 0 ]
