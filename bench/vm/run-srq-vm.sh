#!/bin/bash
# run-srq-vm.sh - rdma_ib's shared receive path (rdma_ib/README.md, "The
# shared receive path"), in ONE boot of the Soft-RoCE VM: 8-byte latency
# and 8 KiB / 1 MiB bandwidth of a peer with a ring at start-up
# (RDMACH_CONNECT=all), a promoted peer (demand, ring after 16 messages)
# and a cold peer (demand, never promoted), BENCH_SRQ_ROUNDS interleaved
# rounds, next to ib_write_lat / ib_send_lat on the same device; medians
# and spreads, ratios to today's ring and to perftest.
#
#   bench/vm/run-srq-vm.sh          (build first: make -j2)
#   bench/vm/run-srq-vm.sh --report DIR    the summary of DIR again
# Environment: O=build, BENCH_SRQ_ROUNDS=9, BENCH_SRQ_ITERS=5000,
#   BENCH_RESULTS=DIR (default results/srq-YYYYmmdd-HHMMSS)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
O=${O:-build}
case $O in /*) ;; *) O=$top/$O ;; esac
rounds=${BENCH_SRQ_ROUNDS:-9}
iters=${BENCH_SRQ_ITERS:-5000}

in_vm() {
	local out=$1 r cfg dev=rxe0 ip=192.0.2.1
	declare -A env=(
		[ring]="RDMACH_CONNECT=all"
		[promoted]="RDMACH_CONNECT=demand RDMACH_IB_RING_AFTER=16"
		[cold]="RDMACH_CONNECT=demand RDMACH_IB_RING_AFTER=1000000000"
	)
	for r in $(seq "$rounds"); do
		for cfg in ring promoted cold; do
			env ${env[$cfg]} RDMACH_TRANSPORT=ib timeout 300 \
				"$O/bin/rdmach_latency" -t ib -m 8:8 -i "$iters" -b 5 |
				awk -v c="$cfg" '$1 == 8 { print c, $2 }' >>"$out/lat.txt"
			env ${env[$cfg]} RDMACH_TRANSPORT=ib timeout 300 \
				"$O/bin/rdmach_bw" -t ib -m 8K:1M -i 200 -I 20 |
				awk -v c="$cfg" '$1 == 8192 || $1 == 1048576 { print c, $1, $2 }' >>"$out/bw.txt"
		done
		for tool in ib_write_lat ib_send_lat; do
			timeout 60 $tool -d $dev -s 8 -n "$iters" -F >/dev/null 2>&1 &
			sleep 1
			timeout 60 $tool -d $dev -s 8 -n "$iters" -F $ip 2>/dev/null |
				awk -v c=$tool '$1 == 8 && NF >= 5 { print c, $5 }' >>"$out/lat.txt"
			wait
		done
	done
}

if [ "${1:-}" = --inner ]; then
	in_vm "$2"
	exit
fi
if [ "${1:-}" = --report ]; then
	out=$2
else
	out=${BENCH_RESULTS:-$top/results/srq-$(date +%Y%m%d-%H%M%S)}
	mkdir -p "$out"
	RDMACH_VM_TIMEOUT=${RDMACH_VM_TIMEOUT:-1800} \
	RDMACH_VM_PASSENV="O BENCH_SRQ_ROUNDS BENCH_SRQ_ITERS" O=$O \
		"$top/test/vm/vm-run.sh" "$top" \
		"bench/vm/run-srq-vm.sh --inner $(printf %q "$out")" || exit 1
fi
med() { sort -g | awk '{ a[NR] = $1 } END { if (NR) printf "%.2f %.2f %.2f", a[int((NR + 1) / 2)], a[1], a[NR] }'; }
echo "# 8 B latency, us: median min max over $rounds rounds"
for c in ring promoted cold ib_write_lat ib_send_lat; do
	printf "%-14s %s\n" "$c" "$(awk -v c=$c '$1 == c { print $2 }' "$out/lat.txt" | med)"
done | tee "$out/summary.txt"
ring=$(awk '$1 == "ring" { print $2 }' "$out/lat.txt" | med | cut -d' ' -f1)
for c in promoted cold; do
	m=$(awk -v c=$c '$1 == c { print $2 }' "$out/lat.txt" | med | cut -d' ' -f1)
	echo "$c / ring: $(awk -v a="$m" -v b="$ring" 'BEGIN { printf "%.3f", a / b }')"
done | tee -a "$out/summary.txt"
echo "# bandwidth, MB/s: median min max" | tee -a "$out/summary.txt"
for c in ring promoted cold; do
	for s in 8192 1048576; do
		printf "%-10s %8s %s\n" "$c" "$s" "$(awk -v c=$c -v s=$s '$1 == c && $2 == s { print $3 }' "$out/bw.txt" | med)"
	done
done | tee -a "$out/summary.txt"
echo "results: $out"
