#!/bin/bash
# run-mpi-versions.sh - ch3:rdma against ch3:nemesis of the same MPICH
# release, for several releases in one interleaved run on shared memory,
# 2 processes: 8-byte latency (bench/src/mpi_latency.c, median of 15
# batches) and 1 MiB bandwidth (bench/src/mpi_bw.c, window 64, one reused
# buffer), the same commands as run-mpi.sh's headline.  Every round runs
# every MPI once, so a change of the host hits all alike; per MPI the median
# over the rounds, per release the ratio of ch3:rdma to its peers (latency:
# rdma / best peer, target <= 1; bandwidth: rdma / best peer, target >= 1).
#
#   bench/host/run-mpi-versions.sh
#
# MPIs: for each VERSION, build/mpich-VERSION-install (ch3:rdma, make
# check-mpich VERSION=) and build/mpich-VERSION-nemesis-install (ch3:nemesis,
# CHANNEL=nemesis channel/build-mpich.sh with MPICH_WORK=build/mpich-VERSION
# PREFIX=build/mpich-VERSION-nemesis-install); Debian's MPICH (ch4:ucx,
# /usr) as one more peer of every release when BENCH_UCX=1 (default 1).
# Installs that are missing are left out (and said so).
# Environment: BENCH_VERSIONS ("4.0.2 4.3.2 5.0.1"), BENCH_REPS (5),
#   BENCH_RESULTS (results/mpi-versions-DATE), BENCH_CPUS ("0,1": taskset;
#   "" = no pinning), BENCH_UCX (1).
# Table in $out/summary.txt, raw outputs under $out/NAME/.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root=$(pwd -P)
reps=${BENCH_REPS:-5}
out=${BENCH_RESULTS:-results/mpi-versions-$(date +%Y%m%d-%H%M%S)}
cpus=${BENCH_CPUS-0,1}
versions=(${BENCH_VERSIONS:-4.0.2 4.3.2 5.0.1})
mkdir -p "$out"
. bench/lib/mpicmd.sh
. bench/lib/stats.sh

declare -A prefix label
names=()
add() {	# name prefix label
	local p=$1 n=$2
	if [ -x "$(mpi_cmd "$p" mpicc)" ] && [ -x "$(mpi_cmd "$p" mpiexec)" ]; then
		mkdir -p "$out/$n"
		for b in mpi_latency mpi_bw; do
			"$(mpi_cmd "$p" mpicc)" -O2 -Ibench/src -o "$out/$n/$b" "bench/src/$b.c" -lm ||
				{ echo "run-mpi-versions: $n: $b does not build" >&2; exit 1; }
		done
		prefix[$n]=$p label[$n]=$3 names+=("$n")
	else
		echo "run-mpi-versions: no $3 in $p: left out"
	fi
}
for v in "${versions[@]}"; do
	add "$root/build/mpich-$v-install" "rdma-$v" "ch3:rdma $v"
	add "$root/build/mpich-$v-nemesis-install" "nemesis-$v" "ch3:nemesis $v"
done
[ "${BENCH_UCX:-1}" = 1 ] && add /usr ucx "ch4:ucx 4.0.2 (Debian)"
[ ${#names[@]} -gt 0 ] || { echo "run-mpi-versions: no MPI to measure" >&2; exit 1; }

pin=(); [ -n "$cpus" ] && pin=(taskset -c "$cpus")
load0=$(cut -d' ' -f1-3 /proc/loadavg)
run() {	# name prog args... -> stdout OSU table
	local n=$1 b=$2; shift 2
	timeout 900 "${pin[@]}" "$(mpi_cmd "${prefix[$n]}" mpiexec)" -n 2 "$out/$n/$b" "$@"
}
for ((r = 1; r <= reps; r++)); do
	echo "run-mpi-versions: round $r/$reps (load $(cut -d' ' -f1 /proc/loadavg))" >&2
	for n in "${names[@]}"; do
		BENCH_DIGITS=3 run "$n" mpi_latency -m 8:8 -i 20000 -x 2000 -b 15 \
			>"$out/$n/lat8-$r.txt" 2>&1 || echo "run-mpi-versions: $n latency run $r failed" >&2
		run "$n" mpi_bw -m 1M:1M -I 20 -X 2 >"$out/$n/bw1m-$r.txt" 2>&1 ||
			echo "run-mpi-versions: $n bandwidth run $r failed" >&2
	done
done

declare -A lat bw
for n in "${names[@]}"; do
	lat[$n]=$(for f in "$out/$n"/lat8-*.txt; do value "$f"; done | median)
	bw[$n]=$(for f in "$out/$n"/bw1m-*.txt; do value "$f"; done | median)
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a / b; else print "n/a"}'; }
{
	echo "## ch3:rdma and ch3:nemesis per MPICH release, 2 processes, shared memory (median of $reps interleaved rounds; load before $load0, after $(cut -d' ' -f1-3 /proc/loadavg); pinned: ${cpus:-no})"
	echo "# host: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -r)"
	printf '%-26s %16s %16s\n' MPI "8 B latency (us)" "1 MiB bw (MB/s)"
	for n in "${names[@]}"; do printf '%-26s %16s %16s\n' "${label[$n]}" "${lat[$n]}" "${bw[$n]}"; done
	echo
	printf '%-8s %-10s %-34s %-10s %-34s\n' release "lat/nem" "latency: rdma / best peer" "bw/nem" "bandwidth: rdma / best peer"
	for v in "${versions[@]}"; do
		rd=rdma-$v
		[ -n "${prefix[$rd]:-}" ] || continue
		bl=; bln=; bb=; bbn=
		for n in "nemesis-$v" ucx; do
			[ -n "${prefix[$n]:-}" ] && [ -n "${lat[$n]}" ] || continue
			if [ -z "$bl" ] || awk -v x="${lat[$n]}" -v y="$bl" 'BEGIN{exit !(x < y)}'; then bl=${lat[$n]}; bln=${label[$n]}; fi
			if [ -z "$bb" ] || awk -v x="${bw[$n]}" -v y="$bb" 'BEGIN{exit !(x > y)}'; then bb=${bw[$n]}; bbn=${label[$n]}; fi
		done
		[ -n "$bl" ] || { echo "$v: no peer"; continue; }
		printf '%-8s %-10s %-34s %-10s %-34s\n' "$v" "$(ratio "${lat[$rd]}" "${lat[nemesis-$v]:-0}")" \
			"$(ratio "${lat[$rd]}" "$bl") ($bln)" "$(ratio "${bw[$rd]}" "${bw[nemesis-$v]:-0}")" \
			"$(ratio "${bw[$rd]}" "$bb") ($bbn)"
	done
} | tee "$out/summary.txt"
