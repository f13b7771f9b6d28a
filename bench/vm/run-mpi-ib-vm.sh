#!/bin/bash
# run-mpi-ib-vm.sh - MPI over rdma_ib on the Soft-RoCE device against
# perftest on the same device, interleaved in ONE boot of the test VM
# (test/vm/vm-run.sh):
#  latency    8 bytes: our MPICH (ch3:rdma) and rdmach_latency against
#             ib_write_lat (BENCH_REPS rounds; target MPI <= 1.2x).  All
#             figures are medians of per-iteration times (perftest's
#             t_typical; -b = -i); over the rounds, the best and the
#             median of each are compared.
#  bandwidth  64 KiB-1 MiB, window of 64, one reused buffer: mpi_bw (the
#             large-message choice as users get it) and rdmach_bw against
#             ib_write_bw and ib_read_bw (the zero-copy path's own limit),
#             BENCH_BW_REPS rounds; per size the median of each and the
#             ratio to the better perftest figure (MB/s = 10^6 B/s).
# rdmach's own figures tell the channel's share from the transport's.
# Environment: BENCH_REPS (9), BENCH_BW_REPS (3; 0 = latency only),
# BENCH_RESULTS (results/mpi-ib-DATE).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root=$(pwd -P)
BW_SIZES="65536 262144 1048576"
# perftest_bw TOOL SIZE: its average bandwidth, 10^6 B/s (perftest's MB are
# 2^20 bytes)
perftest_bw() {
	local row try
	for try in 1 2 3; do
		timeout 120 "$1" -d rxe0 -s "$2" -n 200 -F >/tmp/srv.log 2>&1 &
		sleep "$try"	# the emulated guest is slow to listen
		row=$(timeout 120 "$1" -d rxe0 -s "$2" -n 200 -F 192.0.2.1 2>&1 |
			grep -E '^ *[0-9]+ +[0-9]+ ')
		wait
		[ -z "$row" ] || break
	done
	awk '{ printf "%d %.2f\n", $1, $4 * 1.048576 }' <<<"$row"
}
if [ "${1:-}" = --in-vm-bw ]; then
	out=$2 prog=$3 reps=$4
	for ((r = 1; r <= reps; r++)); do
		for s in $BW_SIZES; do perftest_bw ib_write_bw "$s"; done \
			>"$out/bw-write-$r.txt"
		for s in $BW_SIZES; do perftest_bw ib_read_bw "$s"; done \
			>"$out/bw-read-$r.txt"
		RDMACH_TRANSPORT=ib timeout 300 "$root/build/mpich-install/bin/mpiexec" -n 2 \
			"$prog" -m 64K:1M -w 64 -I 5 -X 1 >"$out/bw-mpi-$r.txt" 2>&1
		timeout 300 "$root/build/bin/rdmach_bw" -t ib -m 64K:1M -w 64 -I 5 -X 1 \
			>"$out/bw-rdmach-$r.txt" 2>&1
	done
	exit 0
fi
if [ "${1:-}" = --in-vm ]; then
	out=$2 prog=$3 reps=$4
	for ((r = 1; r <= reps; r++)); do
		ib_write_lat -d rxe0 -s 8 -n 2000 -F >/tmp/srv.log 2>&1 &
		sleep 0.5
		ib_write_lat -d rxe0 -s 8 -n 2000 -F 192.0.2.1 2>&1 |
			awk '$1 == 8 && NF >= 5 {print 8, $5}' >"$out/perftest-$r.txt"
		wait
		RDMACH_TRANSPORT=ib timeout 300 "$root/build/mpich-install/bin/mpiexec" -n 2 \
			"$prog" -m 8:8 -i 2000 -x 200 -b 2000 >"$out/mpi-$r.txt" 2>&1
		timeout 300 "$root/build/bin/rdmach_latency" -t ib -m 8:8 -i 2000 -x 200 -b 2000 \
			>"$out/rdmach-$r.txt" 2>&1
	done
	[ "${5:-0}" -gt 0 ] && "$0" --in-vm-bw "$out" "$(dirname "$prog")/mpi_bw" "$5"
	exit 0
fi
reps=${BENCH_REPS:-9} bw_reps=${BENCH_BW_REPS:-3}
out=$root/${BENCH_RESULTS:-results/mpi-ib-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
mpicc=$root/build/mpich-install/bin/mpicc
[ -x "$mpicc" ] || { echo "run-mpi-ib-vm: no build/mpich-install (make mpich)" >&2; exit 1; }
for b in mpi_latency mpi_bw; do
	"$mpicc" -O2 -Ibench/src -o "$out/$b" "bench/src/$b.c" -lm || exit 1
done
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	"$0" --in-vm "$out" "$out/mpi_latency" "$reps" "$bw_reps"
else
	test/vm/vm-run.sh "$root" "bench/vm/run-mpi-ib-vm.sh --in-vm $out $out/mpi_latency $reps $bw_reps"
fi || { echo "run-mpi-ib-vm: the VM run failed" >&2; exit 1; }
. bench/lib/stats.sh
runs() { for f in "$out"/"$1"-*.txt; do value "$f"; done; }
best() { sort -g | head -1; }
p=$(runs perftest | median) pb=$(runs perftest | best)
m=$(runs mpi | median) mb=$(runs mpi | best)
d=$(runs rdmach | median) db=$(runs rdmach | best)
{
	echo "runs: ib_write_lat $(runs perftest | tr '\n' ' ')us;" \
	     "rdmach $(runs rdmach | tr '\n' ' ')us; MPI $(runs mpi | tr '\n' ' ')us"
	echo "(the emulated guest is disturbed by anything else on the host: a"
	echo " disturbance only adds, so the best round of each is the cleaner"
	echo " comparison; the median over rounds is printed beside it)"
	awk -v p="$p" -v m="$m" -v d="$d" -v pb="$pb" -v mb="$mb" -v db="$db" 'BEGIN {
		printf "rdmach 8-byte latency over rdma_ib: best %s us vs ib_write_lat %s us, ratio %.2f; median %s vs %s, ratio %.2f\n", db, pb, db / pb, d, p, d / p
		printf "MPI 8-byte latency over rdma_ib: best %s us vs ib_write_lat %s us, ratio %.2f; median %s vs %s, ratio %.2f (target <= 1.2)\n", mb, pb, mb / pb, m, p, m / p }'
} | tee "$out/summary.txt"
[ "$bw_reps" -gt 0 ] || exit 0
# One table from the files bw-SERIES-ROUND.txt: per size the median of each
# series over the rounds, and the median over the rounds of each round's
# ratio to the better perftest figure of the same round (a round that
# caught the host busy moves all four figures alike).
bw_table() {
	awk 'function med(list,   n, a, i, j, t) {
		n = split(list, a, " ")
		for (i = 2; i <= n; i++)	# insertion sort
			for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	FNR == 1 { split(FILENAME, f, "/"); split(f[length(f)], p, "[-.]")
		series = p[2]; round = p[3] }
	!/^#/ && NF >= 2 { v[series, round, $1] = $2; all[series, $1] = all[series, $1] " " $2
		sizes[$1] = 1; rounds[round] = 1 }
	END {
		printf "%-9s %12s %12s %12s %12s %10s %10s\n", "size", "ib_write_bw",
			"ib_read_bw", "MPI", "rdmach", "MPI/best", "rdmach/best"
		for (s in sizes) {
			if (all["write", s] == "")
				continue	# perftest ran BW_SIZES only
			rm = rr = ""
			for (r in rounds) {
				b = v["write", r, s] > v["read", r, s] ? v["write", r, s] : v["read", r, s]
				if (b > 0) { rm = rm " " v["mpi", r, s] / b; rr = rr " " v["rdmach", r, s] / b }
			}
			printf "%-9s %12.2f %12.2f %12.2f %12.2f %10.3f %10.3f\n", s,
				med(all["write", s]), med(all["read", s]), med(all["mpi", s]),
				med(all["rdmach", s]), med(rm), med(rr)
		}
	}' "$out"/bw-*-*.txt | sort -n
}
{
	echo "bandwidth over rdma_ib, window 64, one reused buffer, $bw_reps rounds (MB/s = 10^6 B/s; figures: medians over the rounds; ratios: medians of the per-round ratios):"
	bw_table
} | tee -a "$out/summary.txt"
