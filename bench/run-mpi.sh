#!/bin/bash
# run-mpi.sh - MPI ping-pong and window bandwidth (bench/mpi_latency.c,
# bench/mpi_bw.c) on several MPICHs of this machine, side by side in one run,
# 2 processes on shared memory, with the issue's ratios:
#   rdma     our MPICH, --with-device=ch3:rdma   (make mpich)
#   nemesis  ch3:nemesis from the same source    (CHANNEL=nemesis channel/build-mpich.sh)
#   sock     ch3:sock from the same source       (CHANNEL=sock channel/build-mpich.sh)
#   ucx      Debian's MPICH, ch4:ucx             (apt-get install mpich libmpich-dev)
# Installs that are missing are left out (and said so).  Targets: 8-byte
# latency of rdma no worse than nemesis; 1 MiB bandwidth of rdma no worse
# than ucx.  Each figure is the median of BENCH_REPS (5) interleaved runs
# (8-byte latency: each run the median of 15 batches, 3 decimals; the
# per-round rdma/nemesis ratios are printed too).
# Environment: BENCH_REPS, BENCH_RESULTS (results/mpi-DATE).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$(pwd -P)
reps=${BENCH_REPS:-5}
out=${BENCH_RESULTS:-results/mpi-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
ln -sfn "$(basename "$out")" results/mpi-latest 2>/dev/null || true

declare -A prefix=([rdma]=$root/build/mpich-install
		   [nemesis]=$root/build/mpich-nemesis-install
		   [sock]=$root/build/mpich-sock-install [ucx]=/usr)
names=()
for n in rdma nemesis sock ucx; do
	p=${prefix[$n]}
	if [ -x "$p/bin/mpicc" ] && [ -x "$p/bin/mpiexec" ]; then
		mkdir -p "$out/$n"
		for b in mpi_latency mpi_bw; do
			"$p/bin/mpicc" -O2 -Ibench -o "$out/$n/$b" "bench/$b.c" -lm ||
				{ echo "run-mpi: $n: $b does not build" >&2; exit 1; }
		done
		names+=("$n")
	else
		echo "run-mpi: no $n MPICH in $p: left out"
	fi
done
[ ${#names[@]} -gt 0 ] || { echo "run-mpi: no MPI to measure" >&2; exit 1; }

run() {	# name prog args... -> stdout OSU table
	local n=$1 b=$2; shift 2
	timeout 600 "${prefix[$n]}/bin/mpiexec" -n 2 "$out/$n/$b" "$@"
}

# interleaved headline runs: every MPI once per round
for ((r = 1; r <= reps; r++)); do
	for n in "${names[@]}"; do
		BENCH_DIGITS=3 run "$n" mpi_latency -m 8:8 -i 20000 -x 2000 -b 15 \
			>"$out/$n/lat8-$r.txt" 2>&1 ||
			echo "run-mpi: $n latency run $r failed" >&2
		run "$n" mpi_bw -m 1M:1M -I 20 -X 2 >"$out/$n/bw1m-$r.txt" 2>&1 ||
			echo "run-mpi: $n bandwidth run $r failed" >&2
	done
done
# whole curves, once each
for n in "${names[@]}"; do
	run "$n" mpi_latency -m 0:4M >"$out/$n/latency.txt" 2>&1
	run "$n" mpi_bw -m 1:4M >"$out/$n/bw.txt" 2>&1
done

. bench/stats.sh
declare -A lat bw
for n in "${names[@]}"; do
	lat[$n]=$(for f in "$out/$n"/lat8-*.txt; do value "$f"; done | median)
	bw[$n]=$(for f in "$out/$n"/bw1m-*.txt; do value "$f"; done | median)
done

{
	echo "## MPI on shared memory, 2 processes (median of $reps interleaved runs; load: $(cut -d' ' -f1-3 /proc/loadavg))"
	printf '%-10s %16s %20s\n' MPI "8 B latency (us)" "1 MiB bw (MB/s)"
	for n in "${names[@]}"; do printf '%-10s %16s %20s\n' "$n" "${lat[$n]}" "${bw[$n]}"; done
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a / b; else print "n/a"}'; }
	if [ -n "${lat[nemesis]:-}" ]; then
		# rdma and nemesis run back to back in each round: the per-round
		# ratio cancels what moves between rounds (the placement of the
		# two vCPUs changes the floor by up to 3x on this machine)
		paired=$(for ((r = 1; r <= reps; r++)); do
			ratio "$(value "$out/rdma/lat8-$r.txt")" "$(value "$out/nemesis/lat8-$r.txt")"; echo
		done)
		echo "8-byte latency: ch3:rdma ${lat[rdma]} us, ch3:nemesis ${lat[nemesis]} us, ratio $(ratio "${lat[rdma]}" "${lat[nemesis]}"); per-round ratios $(echo $paired), median $(echo "$paired" | median) (target <= 1.0)"
	fi
	[ -n "${bw[ucx]:-}" ] &&
		echo "1 MiB bandwidth: ch3:rdma ${bw[rdma]} MB/s, ch4:ucx ${bw[ucx]} MB/s, ratio $(ratio "${bw[rdma]}" "${bw[ucx]}") (target >= 1.0)"
	for t in latency bw; do
		echo; echo "## $t curves"
		files=(); for n in "${names[@]}"; do files+=("$out/$n/$t.txt"); done
		printf '%-10s' size; printf ' %14s' "${names[@]}"; echo
		awk -v w=14 -f bench/osu-join.awk "${files[@]}"
	done
} | tee "$out/summary.txt"

plots=()
for t in latency bw; do
	args=(); for n in "${names[@]}"; do args+=("$n=$out/$n/$t.txt"); done
	y="Latency (us)"; [ $t = bw ] && y="Bandwidth (MB/s)"
	log=(); [ $t = latency ] && log=(-l)
	bench/plot.sh -o "$out/mpi-$t.png" -t "MPI $t, 2 processes, shared memory" \
		-y "$y" "${log[@]}" "${args[@]}" && plots+=("$out/mpi-$t.png")
done
echo "plots: ${plots[*]}"
