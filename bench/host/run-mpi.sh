#!/bin/bash
# run-mpi.sh - MPI on shared memory, 2 processes, on several MPICHs of this
# machine side by side, interleaved, with the issue's ratios:
#   rdma     our MPICH, --with-device=ch3:rdma   (make mpich)
#   nemesis  ch3:nemesis from the same source    (CHANNEL=nemesis channel/build-mpich.sh)
#   sock     ch3:sock from the same source       (CHANNEL=sock channel/build-mpich.sh; off by default)
#   ucx      Debian's MPICH, ch4:ucx             (apt-get install mpich libmpich-dev)
# Installs that are missing are left out (and said so).
#
# 1. headline, BENCH_REPS rounds: 8-byte latency (median of 15 batches, 3
#    decimals; per-round rdma/nemesis ratios) and 1 MiB bandwidth;
# 2. curves, BENCH_REPS rounds, each round every series on every MPI in
#    turn: latency (bench/src/mpi_latency.c), bandwidth and bidirectional
#    bandwidth (bench/src/mpi_bw.c, window 64, -B), each with one reused buffer
#    (as the common MPI benchmark suites measure) and cache-cold (-C: every
#    message from/to the next slice of a BENCH_POOL-byte pool per side);
#    per-size medians, and per size the ratio of rdma to the BEST peer at
#    that size (latency: rdma / min(peers), target <= 1; bandwidth:
#    rdma / max(peers), target >= 1);
# 3. in every round too: the one-copy limit (build/bin/raw_shm_large -M memcpy,
#    1 MiB, reused and cold), rdmach's own 1 MiB bandwidth (rdmach_bw -t
#    shm; target >= 0.6 x the memcpy limit) and the time a cache line takes
#    from one CPU to the other (build/bin/raw_shm_pingpong, 8 B one way, no MPI
#    or rdmach code): the host's state, which decides which MPI leads at
#    small sizes (fast line transfers: the one with the fewest
#    instructions per message; slow ones: the one that moves the fewest
#    lines).
# Tables in $out/summary.txt, raw outputs under $out/NAME/, PNGs per series.
#
# Environment: BENCH_REPS (5), BENCH_RESULTS (results/mpi-DATE),
#   BENCH_MPIS ("rdma nemesis ucx"; add sock), BENCH_MAX (64M: largest
#   size), BENCH_POOL (256M: the cold pool, per side; make it far larger
#   than the last-level cache a core sees), BENCH_BATCHES (5),
#   BENCH_SERIES ("lat lat-cold bw bw-cold bibw bibw-cold"),
#   BENCH_CPUS ("0,1": taskset for every process; "" = no pinning),
#   BENCH_HEADLINE=0 (skip part 1), PREFIX_RDMA / PREFIX_NEMESIS /
#   PREFIX_SOCK / PREFIX_UCX (install prefixes, e.g. a ch3:nemesis built
#   in another tree from the same source).
# Needs both cores quiet: the script prints the load average before and after.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
reps=${BENCH_REPS:-5}
out=${BENCH_RESULTS:-results/mpi-$(date +%Y%m%d-%H%M%S)}
max=${BENCH_MAX:-64M}
pool=${BENCH_POOL:-256M}
batches=${BENCH_BATCHES:-5}
series=(${BENCH_SERIES:-lat lat-cold bw bw-cold bibw bibw-cold})
cpus=${BENCH_CPUS-0,1}
mkdir -p "$out"
ln -sfn "$(basename "$out")" results/mpi-latest 2>/dev/null || true

. bench/lib/mpis.sh
mpis_build run-mpi "$out" "${BENCH_MPIS:-rdma nemesis ucx}" mpi_latency mpi_bw
peers=(); for n in "${names[@]}"; do [ "$n" != rdma ] && peers+=("$n"); done

pin=(); [ -n "$cpus" ] && pin=(taskset -c "$cpus")
load0=$(cut -d' ' -f1-3 /proc/loadavg)

run() {	# name prog args... -> stdout OSU table
	local n=$1 b=$2; shift 2
	timeout 900 "${pin[@]}" "$(mpi_cmd "${prefix[$n]}" mpiexec)" -n 2 "$out/$n/$b" "$@"
}

series_args() { # series -> program and its arguments
	case $1 in
	lat) echo mpi_latency -m "1:$max" -b "$batches" ;;
	lat-cold) echo mpi_latency -m "1:$max" -b "$batches" -C "$pool" ;;
	bw) echo mpi_bw -m "1:$max" -b "$batches" ;;
	bw-cold) echo mpi_bw -m "1:$max" -b "$batches" -C "$pool" ;;
	bibw) echo mpi_bw -B -m "1:$max" -b "$batches" ;;
	bibw-cold) echo mpi_bw -B -m "1:$max" -b "$batches" -C "$pool" ;;
	*) echo "run-mpi: unknown series $1" >&2; exit 2 ;;
	esac
}

# 1. interleaved headline runs: every MPI once per round
if [ "${BENCH_HEADLINE:-1}" = 1 ]; then
	for ((r = 1; r <= reps; r++)); do
		for n in "${names[@]}"; do
			BENCH_DIGITS=3 run "$n" mpi_latency -m 8:8 -i 20000 -x 2000 -b 15 \
				>"$out/$n/lat8-$r.txt" 2>&1 ||
				echo "run-mpi: $n latency run $r failed" >&2
			run "$n" mpi_bw -m 1M:1M -I 20 -X 2 >"$out/$n/bw1m-$r.txt" 2>&1 ||
				echo "run-mpi: $n bandwidth run $r failed" >&2
		done
	done
fi

# 2 + 3. curves and limits, interleaved: round r runs every series on every
# MPI, then the limits, so that a change of the host hits all alike
make -s O=build build/bin/raw_shm_large build/bin/raw_shm_pingpong \
	build/bin/rdmach_bw >/dev/null 2>&1
have_raw=0
[ -x build/bin/raw_shm_large ] && [ -x build/bin/raw_shm_pingpong ] &&
	[ -x build/bin/rdmach_bw ] && have_raw=1
mkdir -p "$out/limits"
for ((r = 1; r <= reps; r++)); do
	echo "run-mpi: round $r/$reps (load $(cut -d' ' -f1 /proc/loadavg))" >&2
	for s in "${series[@]}"; do
		read -r -a a <<<"$(series_args "$s")"
		for n in "${names[@]}"; do
			run "$n" "${a[@]}" >"$out/$n/$s-$r.txt" 2>"$out/$n/$s-$r.err" ||
				echo "run-mpi: $n $s round $r failed" >&2
		done
	done
	if [ $have_raw = 1 ]; then
		"${pin[@]}" build/bin/raw_shm_large -M memcpy -m 1M:1M \
			>"$out/limits/memcpy-$r.txt" 2>&1
		"${pin[@]}" build/bin/raw_shm_large -M memcpy -m 1M:1M -C "$pool" \
			>"$out/limits/memcpy-cold-$r.txt" 2>&1
		"${pin[@]}" build/bin/rdmach_bw -t shm -m 1M:1M -b "$batches" \
			>"$out/limits/rdmach-bw1m-$r.txt" 2>&1
		"${pin[@]}" build/bin/raw_shm_pingpong -P -m 8:8 -b "$batches" \
			>"$out/limits/line-$r.txt" 2>&1
	fi
done

. bench/lib/stats.sh
# med_curve FILES... -> per-size median over the files, OSU rows
med_curve() {
	awk '!/^#/ && NF >= 2 { if (!($1 in c)) o[++n] = $1; v[$1, ++c[$1]] = $2 }
	     END { for (i = 1; i <= n; i++) { s = o[i]; k = c[s]
			for (a = 1; a <= k; a++) x[a] = v[s, a]
			for (a = 2; a <= k; a++)
				for (b = a; b > 1 && x[b-1] > x[b]; b--) { t = x[b]; x[b] = x[b-1]; x[b-1] = t }
			printf "%-10d %18.3f\n", s, k % 2 ? x[(k+1)/2] : (x[k/2] + x[k/2+1]) / 2 } }' "$@"
}
for n in "${names[@]}"; do
	for s in "${series[@]}"; do
		ls "$out/$n/$s-"[0-9]*.txt >/dev/null 2>&1 &&
			med_curve "$out/$n/$s-"[0-9]*.txt >"$out/$n/$s.median.txt"
	done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a / b; else print "n/a"}'; }
# best_table SERIES KIND(lat|bw): size, every MPI, best peer, rdma/best, verdict
best_table() {
	local s=$1 kind=$2 files=() n
	for n in "${names[@]}"; do files+=("$out/$n/$s.median.txt"); done
	printf '%-10s' size; printf ' %12s' "${names[@]}"; printf ' %12s %8s %s\n' best-peer ratio target
	awk -v w=12 -f bench/plot/osu-join.awk "${files[@]}" |
	awk -v kind="$kind" -v names="${names[*]}" '
		BEGIN { nn = split(names, nm, " ") }
		{ best = ""; r = ""; rd = ""
		  for (i = 1; i <= nn; i++) {
			x = $(i + 1)
			if (nm[i] == "rdma") { rd = x; continue }
			if (x == "-") continue
			if (best == "" || (kind == "lat" ? x + 0 < best : x + 0 > best)) { best = x + 0; bn = nm[i] }
		  }
		  printf "%s", $0
		  if (rd == "" || rd == "-" || best == "") { printf " %12s %8s %s\n", "-", "-", "-"; next }
		  r = rd / best
		  ok = kind == "lat" ? r <= 1.0 : r >= 1.0
		  printf " %12s %8.2f %s\n", bn, r, ok ? "met" : "MISSED"
		}'
}

{
	echo "## MPI on shared memory, 2 processes (median of $reps interleaved rounds; load before $load0, after $(cut -d' ' -f1-3 /proc/loadavg); pinned: ${cpus:-no})"
	echo "# host: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -r); cold pool $pool per side"
	if [ "${BENCH_HEADLINE:-1}" = 1 ]; then
		declare -A lat bw
		for n in "${names[@]}"; do
			lat[$n]=$(for f in "$out/$n"/lat8-*.txt; do value "$f"; done | median)
			bw[$n]=$(for f in "$out/$n"/bw1m-*.txt; do value "$f"; done | median)
		done
		printf '%-10s %16s %20s\n' MPI "8 B latency (us)" "1 MiB bw (MB/s)"
		for n in "${names[@]}"; do printf '%-10s %16s %20s\n' "$n" "${lat[$n]}" "${bw[$n]}"; done
		if [ -n "${lat[nemesis]:-}" ] && [ -n "${lat[rdma]:-}" ]; then
			# rdma and nemesis run back to back in each round: the
			# per-round ratio cancels what moves between rounds
			paired=$(for ((r = 1; r <= reps; r++)); do
				ratio "$(value "$out/rdma/lat8-$r.txt")" "$(value "$out/nemesis/lat8-$r.txt")"; echo
			done)
			echo "8-byte latency: ch3:rdma ${lat[rdma]} us, ch3:nemesis ${lat[nemesis]} us, ratio $(ratio "${lat[rdma]}" "${lat[nemesis]}"); per-round ratios $(echo $paired), median $(echo "$paired" | median) (target <= 1.0)"
		fi
		if [ -n "${bw[rdma]:-}" ] && [ ${#peers[@]} -gt 0 ]; then
			b=; bn=
			for n in "${peers[@]}"; do
				[ -n "${bw[$n]}" ] && awk -v x="${bw[$n]}" -v y="${b:-0}" 'BEGIN{exit !(x > y)}' && { b=${bw[$n]}; bn=$n; }
			done
			[ -n "$b" ] && echo "1 MiB bandwidth: ch3:rdma ${bw[rdma]} MB/s, best peer $bn $b MB/s, ratio $(ratio "${bw[rdma]}" "$b") (target >= 1.0)"
		fi
	fi
	if [ $have_raw = 1 ]; then
		m=$(for f in "$out"/limits/memcpy-[0-9]*.txt; do value "$f"; done | median)
		mc=$(for f in "$out"/limits/memcpy-cold-*.txt; do value "$f"; done | median)
		rb=$(for f in "$out"/limits/rdmach-bw1m-*.txt; do value "$f"; done | median)
		echo "one-copy limit (memcpy, 1 MiB): reused $m MB/s, cold $mc MB/s; rdmach_bw 1 MiB $rb MB/s = $(ratio "$rb" "$m") x the reused limit (target >= 0.6)"
		lr=$(for f in "$out"/limits/line-*.txt; do value "$f"; done)
		echo "cache line from CPU to CPU (raw_shm_pingpong, 8 B one way): $(echo "$lr" | median) us; per round $(echo $lr)"
	fi
	for s in "${series[@]}"; do
		kind=bw; case $s in lat*) kind=lat ;; esac
		echo
		echo "## $s ($( [ $kind = lat ] && echo "one-way latency, us" || echo "MB/s")): rdma / best peer per size"
		best_table "$s" "$kind" | tee "$out/$s.table.txt"
		miss=$(awk '$NF == "MISSED" {printf "%s%s", sep, $1; sep=" "}' "$out/$s.table.txt")
		echo "# $s: $(grep -c ' met$' "$out/$s.table.txt") sizes met, missed at: ${miss:-none}"
	done
} | tee "$out/summary.txt"

plots=()
for s in "${series[@]}"; do
	args=(); for n in "${names[@]}"; do
		[ -s "$out/$n/$s.median.txt" ] && args+=("${label[$n]}=$out/$n/$s.median.txt")
	done
	[ ${#args[@]} -gt 0 ] || continue
	y="Bandwidth (MB/s)"; log=()
	case $s in lat*) y="Latency (us)"; log=(-l) ;; esac
	bench/plot/plot.sh -o "$out/mpi-$s.png" -t "MPI $s, 2 processes, shared memory (median of $reps)" \
		-y "$y" "${log[@]}" "${args[@]}" >/dev/null && plots+=("$out/mpi-$s.png")
done
echo "plots: ${plots[*]}"
