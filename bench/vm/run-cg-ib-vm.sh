#!/usr/bin/env bash
# run-cg-ib-vm.sh - instructions per 8-byte message over ib, in ONE boot of
# the Soft-RoCE VM: rdmach_latency under callgrind, a peer with a ring at
# start-up (RDMACH_CONNECT=all) and a promoted one (demand, ring after 16
# messages), each at 1000 and 3000 round trips; the difference of the two
# runs divided by 2000 is the steady state (start-up, the cold phase and
# the promotion drop out).  Per function: calls and inclusive
# instructions per call, summed over the call sites (callgrind's calls=
# lines), for each rank.
#
#   bench/vm/run-cg-ib-vm.sh               (build first: make -j2)
#   bench/vm/run-cg-ib-vm.sh --report DIR  the table of DIR again
# env: BENCH_RESULTS (results/cg-ib-DATE)  O (build)
#      BENCH_CG_FUNCS (the functions listed)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root=$(pwd -P)
O=${O:-build}
case $O in /*) ;; *) O=$root/$O ;; esac
funcs=${BENCH_CG_FUNCS:-rdmach_put ib_put ib_post_wr rdmach_get ib_ep_get ib_get_ring ring_rx_peek ring_rx_consume write}

if [ "${1:-}" = --in-vm ]; then
	out=$2
	for cfg in ring promoted; do
		case $cfg in
		ring) e="RDMACH_CONNECT=all" ;;
		promoted) e="RDMACH_CONNECT=demand RDMACH_IB_RING_AFTER=16" ;;
		esac
		for i in 1000 3000; do
			mkdir -p "$out/$cfg-$i"
			env $e RDMACH_TRANSPORT=ib timeout 600 "$O/bin/rdmach_run" -n 2 \
				valgrind --tool=callgrind --callgrind-out-file="$out/$cfg-$i/cg.%p" \
				"$O/bin/rdmach_latency" -t ib -m 8:8 -i "$i" -x 100 \
				>"$out/$cfg-$i.log" 2>&1
			echo "$cfg $i status $?" >>"$out/status.txt"
		done
	done
	exit 0
fi

# calls and inclusive instructions of FUNC in a callgrind file
cg_sum() {
	awk -v f="$2" '
		/^c?fn=\(/ { id = $1; sub(/^c?fn=/, "", id)
			if (NF > 1) { n = $0; sub(/^[^ ]* /, "", n); name[id] = n }
			if ($0 ~ /^cfn=/) callee = name[id]; next }
		/^calls=/ { c = $1; sub(/^calls=/, "", c)
			if (callee == f) { calls += c; want = 1 } next }
		want { incl += $2; want = 0 }
		END { printf "%d %d\n", calls, incl }' "$1"
}

report() {
	local out=$1 cfg rank f1 f3 fn a b
	echo "# instructions per 8 B message over ib (callgrind, 3000 - 1000 round trips)"
	printf '%-9s %-5s' config rank
	for fn in $funcs; do printf ' %14s' "$fn"; done
	echo
	for cfg in ring promoted; do
		for rank in 1 2; do
			f1=$(ls "$out/$cfg-1000"/cg.* 2>/dev/null | sed -n "${rank}p")
			f3=$(ls "$out/$cfg-3000"/cg.* 2>/dev/null | sed -n "${rank}p")
			[ -n "$f1" ] && [ -n "$f3" ] || continue
			printf '%-9s %-5s' "$cfg" "$rank"
			for fn in $funcs; do
				a=$(cg_sum "$f1" "$fn"); b=$(cg_sum "$f3" "$fn")
				awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ")
					c = y[1] - x[1]; i = y[2] - x[2]
					if (c > 0) printf " %14s", sprintf("%.1f/%d", i / c, c)
					else printf " %14s", "-" }'
			done
			echo
		done
	done
	echo "(each cell: instructions per call / calls in the 2000 extra round trips)"
}

if [ "${1:-}" = --report ]; then
	report "$2"
	exit 0
fi
out=$root/${BENCH_RESULTS:-results/cg-ib-$(date +%Y%m%d-%H%M%S)}
case ${BENCH_RESULTS:-} in /*) out=$BENCH_RESULTS ;; esac
mkdir -p "$out"
[ -x "$O/bin/rdmach_latency" ] || { echo "run-cg-ib-vm: make -j2 first" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "run-cg-ib-vm: needs valgrind" >&2; exit 2; }
RDMACH_VM_TIMEOUT=${RDMACH_VM_TIMEOUT:-1500} RDMACH_VM_PASSENV="O" O=$O \
	test/vm/vm-run.sh "$root" "bench/vm/run-cg-ib-vm.sh --in-vm $(printf %q "$out")" ||
	{ echo "run-cg-ib-vm: the VM run failed" >&2; exit 1; }
report "$out" | tee "$out/summary.txt"
