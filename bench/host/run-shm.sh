#!/bin/bash
# run-shm.sh - the shared-memory benchmark run (`make bench`): one run, side
# by side, each test repeated and the per-size median kept:
#   latency:   raw_shm_pingpong (the floor; unpinned and pinned),
#              rdmach_latency -t shm, mpi_latency under Debian's MPICH;
#   bandwidth: rdmach_bw -t shm, mpi_bw under Debian's MPICH (mpiexec -n 2);
# then the ratio summary (8-byte latency vs the floor, 1 MiB bandwidth vs
# MPICH).  results/shm-DATE/ holds summary.txt, the tables and PNG plots
# (plot.sh); every raw output is under results/shm-DATE/raw/.
#
# Builds nothing but `make mpi-bench` (`make bench` builds the rest first).
# Environment:
#   O=build            build directory (BUILD=asan: build-asan)
#   BENCH_REPS=3       repetitions of each whole table (median per size)
#   BENCH_HEADLINE_REPS=11  interleaved short runs for the summary's 8 B
#                      latency and 1 MiB bandwidth (median of each)
#   BENCH_QUICK=1      fewer iterations (a smoke run, not for numbers)
#   BENCH_BATCHES=16   each run reports its median batch (-b; 1 = plain mean)
#   BENCH_RESULTS=DIR  where to write (default results/shm-YYYYmmdd-HHMMSS)
#   BENCH_STRICT=1     exit 3 when a target is missed
#   MPIEXEC=path       the launcher for the MPI benchmarks (Debian's MPICH:
#                      mpiexec.mpich, not whichever MPI owns `mpiexec`)
# Exit status: 0, 1 if a benchmark failed, 3 on a missed target (strict).
set -uo pipefail

# One block: bash reads it whole before running it (an edit of this file
# during a run cannot derail the run).
{

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cd "$top"
if [ "${BUILD:-}" = asan ]; then O=${O:-build-asan}; else O=${O:-build}; fi
reps=${BENCH_REPS:-3}
hl_reps=${BENCH_HEADLINE_REPS:-11}
mpiexec=${MPIEXEC:-$(command -v mpiexec.mpich || command -v mpiexec.hydra || echo mpiexec.mpich)}
out=${BENCH_RESULTS:-results/shm-$(date +%Y%m%d-%H%M%S)}
bin=$O/bin

die() { echo "run-shm.sh: $*" >&2; exit 1; }

for b in raw_shm_pingpong raw_shm_large rdmach_latency rdmach_bw; do
	[ -x "$bin/$b" ] || die "$bin/$b missing: run 'make O=$O' first (or 'make bench')"
done
# on top: summary, tables, plots; every raw output underneath
raw=$out/raw
mkdir -p "$raw" || die "cannot create $raw"

batches=${BENCH_BATCHES:-16}
lat_opts=(-b "$batches") bw_opts=(-b "$batches")
# the floor with rdmach_latency's counts: equal exposure to a busy host
raw_opts=(-b "$batches" -i 10000 -x 200)
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	lat_opts+=(-i 2000 -I 100 -x 100 -X 10)
	bw_opts+=(-i 20 -I 5 -x 2 -X 1)
	raw_opts+=(-i 2000 -I 100 -x 100 -X 10)
fi

have_mpi=0
if make -s O="$O" mpi-bench >"$raw/mpi-build.log" 2>&1 &&
   command -v "$mpiexec" >/dev/null; then
	have_mpi=1
else
	echo "run-shm.sh: no MPI benchmarks (see $raw/mpi-build.log); rdmach only" >&2
fi

failed=0
# run NAME CMD...: one repetition into $raw/NAME.$rep.txt; a failure is
# reported with its stderr and counted, the run goes on.
run() {
	local name=$1; shift
	local f=$raw/$name.$rep.txt
	if ! timeout 600 "$@" >"$f" 2>"$raw/$name.$rep.err"; then
		echo "run-shm.sh: FAILED: $* (rep $rep):" >&2
		tail -5 "$raw/$name.$rep.err" >&2
		failed=1
		rm -f "$f"
		return 1
	fi
	[ -s "$raw/$name.$rep.err" ] || rm -f "$raw/$name.$rep.err"
}

echo "# rdmach shared-memory benchmarks: $reps repetitions, median per size; summary, tables and plots in $out/, raw outputs in $raw/"
echo "# host: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -r)"
echo "# each run: median of $batches batches per size; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if awk '{ exit !($1 > 0.5) }' /proc/loadavg; then
	echo "# WARNING: the host is busy (load $(cut -d' ' -f1 /proc/loadavg)): benchmarks that spin on 2 cores are slowed by every other process"
fi
for ((rep = 1; rep <= reps; rep++)); do
	printf '# repetition %d/%d...\n' "$rep" "$reps" >&2
	run raw-unpinned "$bin/raw_shm_pingpong" "${raw_opts[@]}"
	run raw-pinned "$bin/raw_shm_pingpong" -P "${raw_opts[@]}"
	run rdmach-lat "$bin/rdmach_latency" -t shm "${lat_opts[@]}"
	run rdmach-lat-pinned "$bin/rdmach_latency" -t shm -P "${lat_opts[@]}"
	run rdmach-bw "$bin/rdmach_bw" -t shm "${bw_opts[@]}"
	if [ $have_mpi = 1 ]; then
		run mpi-lat "$mpiexec" -n 2 "$O/mpi/mpi_latency" "${lat_opts[@]}"
		run mpi-bw "$mpiexec" -n 2 "$O/mpi/mpi_bw" "${bw_opts[@]}"
	fi
done

# The summary's figures: short runs of one size, interleaved, so that a
# burst of load on the host hits every series alike.
for ((rep = 1; rep <= hl_reps; rep++)); do
	printf '# headline run %d/%d...\n' "$rep" "$hl_reps" >&2
	# three decimals: the latencies are tens of nanoseconds
	BENCH_DIGITS=3 run hl-raw "$bin/raw_shm_pingpong" -m 8:8 "${raw_opts[@]}"
	BENCH_DIGITS=3 run hl-raw-pinned "$bin/raw_shm_pingpong" -P -m 8:8 "${raw_opts[@]}"
	BENCH_DIGITS=3 run hl-rdmach-lat "$bin/rdmach_latency" -t shm -m 8:8 -b "$batches"
	BENCH_DIGITS=3 run hl-rdmach-lat-pinned "$bin/rdmach_latency" -t shm -P -m 8:8 -b "$batches"
	run hl-rdmach-bw "$bin/rdmach_bw" -t shm -m 1M:1M -b "$batches"
	run hl-memcpy "$bin/raw_shm_large" -M memcpy -m 1M:1M -b "$batches"
	if [ $have_mpi = 1 ]; then
		run hl-mpi-bw "$mpiexec" -n 2 "$O/mpi/mpi_bw" -m 1M:1M -b "$batches"
	fi
done

# median NAME: per-size median over $raw/NAME.*.txt into $raw/NAME.median.txt
median() {
	local name=$1 files
	files=$(ls "$raw/$name".[0-9]*.txt 2>/dev/null) || return 1
	[ -n "$files" ] || return 1
	# shellcheck disable=SC2086
	awk -v n="$(echo $files | wc -w)" '
		/^#/ { if (FNR == NR) print; next }
		NF >= 2 { if (!($1 in cnt)) order[++nsz] = $1
			  v[$1, ++cnt[$1]] = $2 }
		END {
			printf "# median of %d runs\n", n
			for (i = 1; i <= nsz; i++) {
				s = order[i]; k = cnt[s]
				for (a = 1; a <= k; a++) x[a] = v[s, a]
				for (a = 2; a <= k; a++)	# insertion sort
					for (b = a; b > 1 && x[b-1] > x[b]; b--) {
						t = x[b]; x[b] = x[b-1]; x[b-1] = t }
				m = k % 2 ? x[(k+1)/2] : (x[k/2] + x[k/2+1]) / 2
				printf "%-10d %18.*f\n", s, (m < 1 ? 3 : 2), m
			}
		}' $files >"$raw/$name.median.txt"
}

for name in raw-unpinned raw-pinned rdmach-lat rdmach-lat-pinned rdmach-bw \
	    mpi-lat mpi-bw hl-raw hl-raw-pinned hl-rdmach-lat \
	    hl-rdmach-lat-pinned hl-rdmach-bw hl-mpi-bw hl-memcpy; do
	median "$name" || rm -f "$raw/$name.median.txt"
done

# value NAME SIZE: the median at SIZE, or empty
value() {
	[ -s "$raw/$1.median.txt" ] &&
	awk -v s="$2" '!/^#/ && $1 == s { print $2; exit }' "$raw/$1.median.txt"
}

# side FILE... : one table, a column per series (bench/plot/osu-join.awk)
side() {
	awk -v w=14 -f "$top/bench/plot/osu-join.awk" "$@"
}

with_ratio() { # add column: col(a)/col(b), 1-based data columns
	awk -v a="$1" -v b="$2" '{ x = $(a + 1); y = $(b + 1)
		if (x == "-" || y == "-" || y + 0 == 0) printf "%s %10s\n", $0, "-"
		else printf "%s %10.2f\n", $0, x / y }'
}

echo
echo "## One-way latency (us), median of $reps"
# columns: 1 raw, 2 raw pinned, 3 rdmach, 4 rdmach pinned, [5 MPICH]
lat_series=(raw-unpinned raw-pinned rdmach-lat rdmach-lat-pinned)
lat_cols=(raw raw-pinned rdmach rdmach-pinned)
if [ -s "$raw/mpi-lat.median.txt" ]; then
	lat_series+=(mpi-lat); lat_cols+=(MPICH-ucx)
fi
for s in "${lat_series[@]}"; do
	[ -s "$raw/$s.median.txt" ] || echo "# no data" >"$raw/$s.median.txt"
done
{ printf '%-10s' "# Size"; printf ' %14s' "${lat_cols[@]}"; printf ' %10s %10s\n' rdmach/raw pinned; }
files=()
for s in "${lat_series[@]}"; do files+=("$raw/$s.median.txt"); done
side "${files[@]}" | with_ratio 3 1 | with_ratio 4 2 | tee "$out/latency-table.txt"

echo
echo "## Bandwidth (MB/s = 10^6 B/s), window 64, median of $reps"
if [ -s "$raw/mpi-bw.median.txt" ]; then
	printf '%-10s %14s %14s %10s\n' "# Size" rdmach-shm MPICH-ucx rdmach/MPI
	side "$raw/rdmach-bw.median.txt" "$raw/mpi-bw.median.txt" |
		with_ratio 1 2 | tee "$out/bandwidth-table.txt"
else
	printf '%-10s %14s\n' "# Size" rdmach-shm
	side "$raw/rdmach-bw.median.txt" | tee "$out/bandwidth-table.txt"
fi

# verdict X LIMIT le|ge -> "met" or "MISSED"
missed=0
verdict() {
	if awk -v x="$1" -v l="$2" -v op="$3" 'BEGIN { exit !(op == "le" ? x <= l : x >= l) }'; then
		echo met
	else
		missed=1; echo MISSED
	fi
}

echo
echo "## Summary (median of $hl_reps interleaved runs of each; load average now: $(cut -d' ' -f1-3 /proc/loadavg))" | tee "$out/summary.txt"
spread() { # NAME SIZE -> "min..max" over the repetitions
	cat "$raw/$1".[0-9]*.txt 2>/dev/null | awk -v s="$2" '
		!/^#/ && $1 == s { if (n++ == 0 || $2 < lo) lo = $2; if ($2 > hi) hi = $2 }
		END { if (n) printf (lo < 1 ? "%.3f..%.3f" : "%.2f..%.2f"), lo, hi }'
}
lat_line() { # LABEL RDMACH RAW
	local ratio
	if [ -n "$2" ] && [ -n "$3" ]; then
		ratio=$(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.2f", a / b }')
		echo "8-byte latency$1: rdmach $2 us, raw floor $3 us, ratio $ratio (target <= 1.5: $(verdict "$ratio" 1.5 le)); runs: rdmach $4, raw $5"
	else
		echo "8-byte latency$1: rdmach ${2:-?} us, raw floor ${3:-?} us (not compared: a run failed)"
	fi
}
{
	lat_line "" "$(value hl-rdmach-lat 8)" "$(value hl-raw 8)" \
		"$(spread hl-rdmach-lat 8)" "$(spread hl-raw 8)"
	lat_line " (both pinned)" "$(value hl-rdmach-lat-pinned 8)" "$(value hl-raw-pinned 8)" \
		"$(spread hl-rdmach-lat-pinned 8)" "$(spread hl-raw-pinned 8)"
} | tee -a "$out/summary.txt"
r1=$(value hl-rdmach-bw 1048576) m1=$(value hl-mpi-bw 1048576)
if [ -n "$r1" ] && [ -n "$m1" ]; then
	ratio=$(awk -v a="$r1" -v b="$m1" 'BEGIN { printf "%.2f", a / b }')
	echo "1 MiB bandwidth: rdmach $r1 MB/s, MPICH ch4:ucx $m1 MB/s, ratio $ratio (target >= 1.0: $(verdict "$ratio" 1.0 ge)); runs: rdmach $(spread hl-rdmach-bw 1048576), MPICH $(spread hl-mpi-bw 1048576)"
else
	echo "1 MiB bandwidth: rdmach ${r1:-?} MB/s, MPICH ch4:ucx ${m1:-?} MB/s (not compared: a run failed or no MPI)"
fi | tee -a "$out/summary.txt"
mc=$(value hl-memcpy 1048576)
if [ -n "$r1" ] && [ -n "$mc" ]; then
	ratio=$(awk -v a="$r1" -v b="$mc" 'BEGIN { printf "%.2f", a / b }')
	echo "1 MiB bandwidth vs the one-copy limit: rdmach $r1 MB/s, memcpy of 1 MiB (one process, reused buffer) $mc MB/s, ratio $ratio (target >= 0.6: $(verdict "$ratio" 0.6 ge))"
fi | tee -a "$out/summary.txt"
# verdict ran in subshells (pipes): recompute missed for the exit status
grep -q MISSED "$out/summary.txt" && missed=1

plot_series() { # LABEL=NAME... -> LABEL=FILE for the medians that exist
	local a
	for a in "$@"; do
		[ -s "$raw/${a#*=}.median.txt" ] && echo "${a%%=*}=$raw/${a#*=}.median.txt"
	done
}
if command -v gnuplot >/dev/null; then
	mapfile -t lat < <(plot_series "raw shm floor (unpinned)=raw-unpinned" \
		"raw shm floor (pinned)=raw-pinned" "rdmach shm=rdmach-lat" \
		"rdmach shm (pinned)=rdmach-lat-pinned" \
		"MPICH ch4:ucx=mpi-lat")
	mapfile -t bw < <(plot_series "rdmach shm=rdmach-bw" "MPICH ch4:ucx=mpi-bw")
	"$top/bench/plot/plot.sh" -o "$out/latency-small.png" -l -x 1:8K \
		-t "One-way latency, shared memory, small messages (median of $reps)" \
		-y "Latency (us)" "${lat[@]}" >/dev/null
	"$top/bench/plot/plot.sh" -o "$out/latency.png" -l \
		-t "One-way latency, shared memory (median of $reps)" \
		-y "Latency (us)" "${lat[@]}" >/dev/null
	"$top/bench/plot/plot.sh" -o "$out/bandwidth.png" \
		-t "Bandwidth, window of 64, shared memory (median of $reps)" \
		-y "Bandwidth (MB/s)" "${bw[@]}" >/dev/null
	echo "plots: $out/latency-small.png $out/latency.png $out/bandwidth.png"
fi
ln -sfn "$(basename "$out")" "$(dirname "$out")/shm-latest" 2>/dev/null

[ $failed = 0 ] || { echo "run-shm.sh: some runs failed (see above)" >&2; exit 1; }
[ $missed = 1 ] && [ "${BENCH_STRICT:-0}" = 1 ] && exit 3
exit 0
}
