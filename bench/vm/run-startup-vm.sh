#!/usr/bin/env bash
# run-startup-vm.sh - start-up and memory against the number of ranks,
# across a cluster of Soft-RoCE VMs (test/vm/vm-cluster.sh, 4 VMs by
# default): in ONE boot, interleaved rounds of bench/src/rdmach_startup
# (rdmach_init + rdmach_connect, then one 8-byte message to each peer of
# the pattern and one back; the slowest rank) started by Hydra over ssh,
# ranks placed round-robin (a rank's ring neighbours on other VMs), under
#   all      RDMACH_CONNECT=all (every pair at start-up)
#   demand   RDMACH_CONNECT=demand
#   old      BENCH_OLD's build, a tree of before connections on demand
#            (every pair at start-up, one PMI key per pair), if given
#   prev     BENCH_PREV's build under RDMACH_CONNECT=all, if given (a
#            change's tree before it)
# for each pattern (ring: two peers per rank; all: every pair talks), and
# each rank's VmPin and PSS after the first messages (medians over ranks).
# Then a table per N: medians over the rounds, min-max spread.  The guest
# CPU is emulated (~6.6x slower) and shared by 16 ranks per VM at 64:
# ratios mean something, absolute figures do not.
#
# usage: bench/vm/run-startup-vm.sh        (build first: make -j2)
#        bench/vm/run-startup-vm.sh --report DIR   the table of DIR again
# env: BENCH_RANKS ("4 16 64")  BENCH_ROUNDS (3)  BENCH_PATTERNS ("ring all")
#      BENCH_CONFIGS ("all demand", and old with BENCH_OLD)
#      BENCH_OLD=DIR  a build directory with bin/rdmach_startup of another
#                     tree (its library linked in); BENCH_PREV=DIR likewise
#      BENCH_VMS (4)  BENCH_RESULTS (results/startup-DATE)  O (build)
# Exit status 0; 1 if a run failed (the table says which).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root=$(pwd -P)
O=${O:-build}
case $O in /*) ;; *) O=$root/$O ;; esac

# ---------------------------------------------------------------- guest --
if [ "${1:-}" = --in-vm ]; then
	out=$2
	export HYDRA_LAUNCHER_EXEC=$root/test/vm/hydra-ssh
	hydra=$(command -v mpiexec.hydra || command -v mpiexec.mpich || echo mpiexec.hydra)
	# one run: CONFIG N PATTERN -> its two lines, tagged, into startup.txt
	one() {
		local cfg=$1 n=$2 pat=$3 bin=$O/bin/rdmach_startup mode=$1 t0 rc
		[ "$cfg" = old ] && { bin=$BENCH_OLD/bin/rdmach_startup; mode=all; }
		[ "$cfg" = prev ] && { bin=$BENCH_PREV/bin/rdmach_startup; mode=all; }
		t0=$(date +%s%N)
		# the emulated CPUs' limits of test/run-cluster.sh (scale64)
		timeout 1200 "$hydra" -f "$CLUSTER_HOSTFILE" -n "$n" \
			-genv RDMACH_CONNECT "$mode" -genv RDMACH_IB_TIMEOUT 18 \
			-genv RDMACH_PEER_TIMEOUT_MS 30000 \
			-genv RDMACH_CONNECT_TIMEOUT_MS 300000 -genv RDMACH_STATS 1 \
			nice -n 10 "$bin" "$pat" >"$out/last.log" 2>&1 </dev/null
		rc=$?
		cat "$out/last.log" >>"$out/runs.log"
		if [ $rc != 0 ] || ! grep -q '^startup ' "$out/last.log"; then
			echo "FAIL $cfg n=$n pattern=$pat: status $rc" | tee -a "$out/fail.txt"
			return
		fi
		grep -E '^(startup|memory) ' "$out/last.log" |
			sed "s/^/$cfg wall_ms=$((($(date +%s%N) - t0) / 1000000)) /" >>"$out/startup.txt"
	}
	for r in $(seq "$BENCH_ROUNDS"); do
		for n in $BENCH_RANKS; do
			for pat in $BENCH_PATTERNS; do
				for cfg in $BENCH_CONFIGS; do
					echo "round $r: $cfg n=$n $pat ($(date +%T))"
					one "$cfg" "$n" "$pat"
				done
			done
		done
	done
	exit 0
fi

# ----------------------------------------------------------------- host --
report() {	# DIR: per N, pattern and config the medians and spreads
	local out=$1
	. "$root/bench/lib/stats.sh"
	echo "# rdmach start-up across VMs ($(cat "$out/setup.txt" 2>/dev/null))"
	echo
	echo "| ranks | pattern | config | runs | init+connect ms | first message ms | total ms (min-max) | VmPin kB per rank | PSS kB per rank |"
	echo "|---|---|---|---|---|---|---|---|---|"
	awk '$3 == "startup" { split($4, n, "="); split($6, p, "=");
			print n[2], p[2], $1 }' "$out/startup.txt" | sort -u -k1,1n -k2,2 -k3,3 |
	while read -r n pat cfg; do
		sel() { awk -v c="$cfg" -v n="n=$n" -v p="pattern=$pat" -v w="$1" -v k="$2" \
			'$1 == c && $3 == w && $4 == n && $6 == p {
				for (i = 7; i <= NF; i++) { split($i, kv, "=");
					if (kv[1] == k) { print kv[2]; break } } }' "$out/startup.txt"; }
		local runs tot lo hi
		runs=$(sel startup total_ms | wc -l)
		tot=$(sel startup total_ms | median)
		lo=$(sel startup total_ms | sort -g | head -n1)
		hi=$(sel startup total_ms | sort -g | tail -n1)
		printf '| %s | %s | %s | %s | %s | %s | %s (%s-%s) | %s | %s |\n' \
			"$n" "$pat" "$cfg" "$runs" "$(sel startup connect_ms | median)" \
			"$(sel startup first_ms | median)" "$tot" "$lo" "$hi" \
			"$(sel memory vmpin_kb | median)" "$(sel memory pss_kb | median)"
	done
	[ -s "$out/fail.txt" ] && { echo; echo "failed runs:"; cat "$out/fail.txt"; }
	return 0
}

if [ "${1:-}" = --report ]; then
	report "$2"
	exit 0
fi
BENCH_RANKS=${BENCH_RANKS:-4 16 64}
BENCH_ROUNDS=${BENCH_ROUNDS:-3}
BENCH_PATTERNS=${BENCH_PATTERNS:-ring all}
BENCH_OLD=${BENCH_OLD:-}
BENCH_PREV=${BENCH_PREV:-}
for v in BENCH_OLD BENCH_PREV; do
	d=${!v}
	[ -n "$d" ] || continue
	case $d in /*) ;; *) d=$root/$d ;; esac
	[ -x "$d/bin/rdmach_startup" ] ||
		{ echo "run-startup-vm: no $d/bin/rdmach_startup" >&2; exit 2; }
	printf -v "$v" %s "$d"
done
BENCH_CONFIGS=${BENCH_CONFIGS:-${BENCH_OLD:+old }${BENCH_PREV:+prev }all demand}
vms=${BENCH_VMS:-4}
out=$root/${BENCH_RESULTS:-results/startup-$(date +%Y%m%d-%H%M%S)}
case ${BENCH_RESULTS:-} in /*) out=$BENCH_RESULTS ;; esac
mkdir -p "$out"
[ -x "$O/bin/rdmach_startup" ] || { echo "run-startup-vm: make -j2 first" >&2; exit 2; }
echo "$vms VMs, ranks round-robin, $BENCH_ROUNDS rounds, configs: $BENCH_CONFIGS; host load before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$out/setup.txt"
export O BENCH_RANKS BENCH_ROUNDS BENCH_PATTERNS BENCH_OLD BENCH_PREV BENCH_CONFIGS
export RDMACH_VM_PASSENV="${RDMACH_VM_PASSENV:-} O BENCH_RANKS BENCH_ROUNDS BENCH_PATTERNS BENCH_OLD BENCH_PREV BENCH_CONFIGS"
RDMACH_VM_MEM=${RDMACH_VM_MEM:-2048} RDMACH_VM_TIMEOUT=${RDMACH_VM_TIMEOUT:-5400} \
	test/vm/vm-cluster.sh -n "$vms" "$root" \
	"bench/vm/run-startup-vm.sh --in-vm $(printf %q "$out")" ||
	{ echo "run-startup-vm: the cluster run failed" >&2; report "$out"; exit 1; }
report "$out" | tee "$out/summary.md"
[ ! -s "$out/fail.txt" ]
