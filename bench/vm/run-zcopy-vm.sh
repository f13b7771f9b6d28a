#!/bin/bash
# run-zcopy-vm.sh - zero-copy (RDMA read + registration cache) against the
# pipelined copy, side by side with ib_read_bw, in ONE boot of the
# Soft-RoCE VM (or natively when /sys/class/infiniband has a device):
#   1. ib_read_bw on the device (perftest, loopback server + client);
#   2. rdmach_bw -t ib, window 1, reused buffers (median of 64 single
#      iterations): RDMACH_ZCOPY=1 and RDMACH_ZCOPY=0 (pipelined copy);
#   3. the same with -F (first touch: a fresh mmap'd buffer per message);
# then one table (MB/s = 10^6 B/s) with the ratios at 4 MiB (target:
# zero-copy on reused buffers >= 0.95 x ib_read_bw) and the registration
# cache counters of every zero-copy run (rdmach_bw -S).
# The guest CPU is emulated (~6.6x slower) and the host is shared: only
# ratios within one run mean something; check `uptime` first.
#
#   bench/vm/run-zcopy-vm.sh          (builds O=build-zcopy if needed)
# Environment: O (build dir, default build-zcopy), BENCH_RESULTS (default
# results/zcopy-YYYYmmdd-HHMMSS), ZC_SIZES (default 64K:4M), ZC_ITERS (64),
# ZC_ROUNDS (3: alternating ib_read_bw / zero-copy / copy runs at 4 MiB),
# RDMACH_* passed into the guest.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
O=${O:-build-zcopy}
case $O in /*) ;; *) O=$top/$O ;; esac
sizes=${ZC_SIZES:-64K:4M}
iters=${ZC_ITERS:-64}
rounds=${ZC_ROUNDS:-3}

# ---------------------------------------------------------------- guest --
read_bw() {	# SIZE: ib_read_bw average in 10^6 B/s
	local size=$1 sp row try
	for try in 1 2 3; do
		timeout 120 ib_read_bw -d "$dev" -s "$size" -n "$iters" -F \
			>"$out/perftest-server.log" 2>&1 &
		sp=$!
		sleep $try	# the emulated guest is slow to listen
		row=$(timeout 120 ib_read_bw -d "$dev" -s "$size" -n "$iters" \
			-F "$ip" 2>&1 | tee -a "$out/ib_read_bw.log" |
			grep -E '^ *[0-9]+ +[0-9]+ ')
		wait $sp
		[ -z "$row" ] || break
	done
	[ -n "$row" ] || { echo "ib_read_bw -s $size FAILED" >&2; return 1; }
	awk '{ printf "%d %.2f\n", $1, $4 * 1.048576 }' <<<"$row"
}

rbw() {		# NAME ZCOPY [-F]: rdmach_bw table into $out/NAME.txt
	local name=$1 zc=$2; shift 2
	echo "# $name: RDMACH_ZCOPY=$zc rdmach_bw $*" >&2
	if ! RDMACH_ZCOPY=$zc timeout 600 "$O/bin/rdmach_bw" -t ib -m "$sizes" \
		-w 1 -i "$iters" -I "$iters" -x 4 -X 4 -b "$iters" -S "$@" \
		>"$out/$name.out" 2>"$out/$name.err"; then
		echo "FAILED: $name" >&2
		tail -5 "$out/$name.err" >&2
		return 1
	fi
	grep -E '^[0-9]+ +[0-9.]+$' "$out/$name.out" >"$out/$name.txt"
}

inner() {
	out=$1
	dev=${SOFTROCE_DEV:-$(ls /sys/class/infiniband | head -n1)}
	ip=${SOFTROCE_IP:-192.0.2.1}
	mkdir -p "$out"
	uptime >"$out/uptime-guest.txt"
	local s=$(( 64 << 10 )) max=$(( 4 << 20 ))
	case $sizes in *:4M) ;; *) max=$(( 1 << 20 )) ;; esac
	: >"$out/ib_read_bw.txt"
	while [ "$s" -le "$max" ]; do
		read_bw "$s" >>"$out/ib_read_bw.txt" || return 1
		s=$(( s * 2 ))
	done
	rbw zcopy-reused 1 || return 1
	rbw copy-reused 0 || return 1
	rbw zcopy-first 1 -F || return 1
	rbw copy-first 0 -F || return 1
	# the target's ratio: alternate the two at 4 MiB (noise of a shared
	# host hits both alike), $rounds pairs
	local r
	: >"$out/ratio4m.txt"
	[ "$max" = $(( 4 << 20 )) ] || return 0
	for r in $(seq "$rounds"); do
		read_bw $(( 4 << 20 )) | awk '{ printf "%s ", $2 }' >>"$out/ratio4m.txt"
		sizes=4M:4M rbw ratio-zc 1 || return 1
		sizes=4M:4M rbw ratio-copy 0 || return 1
		echo "$(awk '{ print $2 }' "$out/ratio-zc.txt") $(awk '{ print $2 }' "$out/ratio-copy.txt")" >>"$out/ratio4m.txt"
	done
}

if [ "${1:-}" = --inner ]; then
	O=$3
	inner "$2"
	exit
fi

# ----------------------------------------------------------------- host --
[ -x "$O/bin/rdmach_bw" ] || make -C "$top" -j2 O="$O" >/dev/null ||
	{ echo "build failed" >&2; exit 1; }
out=${BENCH_RESULTS:-$top/results/zcopy-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
uptime | tee "$out/uptime-host.txt"
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	"$0" --inner "$out" "$O" || exit 1
else
	vm=$top/test/vm/vm-run.sh
	[ -x "$vm" ] || vm=/work/shared/softroce/run-in-vm.sh
	RDMACH_VM_PASSENV="$(env | sed -n 's/^\(RDMACH_[A-Z0-9_]*\)=.*/\1/p' |
		tr '\n' ' ') ZC_SIZES ZC_ITERS ZC_ROUNDS" RDMACH_VM_TIMEOUT=1500 \
		"$vm" "$top" "bench/vm/run-zcopy-vm.sh --inner $(printf %q "$out") $(printf %q "$O")" ||
		exit 1
fi

# ---------------------------------------------------------------- table --
# same sizes in the same order in every file
paste "$out/ib_read_bw.txt" "$out/zcopy-reused.txt" "$out/copy-reused.txt" \
	"$out/zcopy-first.txt" "$out/copy-first.txt" |
	awk '{ print $1, $2, $4, $6, $8, $10 }' >"$out/table.txt"
{
	echo "# MB/s (10^6 B/s), window 1, median of $iters iterations"
	printf "%-9s %11s %11s %11s %11s %11s %8s %8s\n" size ib_read_bw \
		zc-reused copy-reused zc-first copy-first zc/read copy/read
	awk '{ printf "%-9d %11.2f %11.2f %11.2f %11.2f %11.2f %8.3f %8.3f\n",
	       $1, $2, $3, $4, $5, $6, $3 / $2, $4 / $2 }' "$out/table.txt"
	awk 'END { if (NR) printf "4 MiB: zero-copy reused / ib_read_bw = %.3f " \
		"(target >= 0.95), first touch zero-copy / copy = %.3f\n",
		$3 / $2, $5 / $6 }' "$out/table.txt"
	echo
	if [ -s "$out/ratio4m.txt" ]; then
		echo "# 4 MiB, alternating: ib_read_bw zero-copy copy -> zc/read copy/read"
		awk '{ printf "%8.2f %8.2f %8.2f -> %.3f %.3f\n", $1, $2, $3,
		       $2 / $1, $3 / $1 }' "$out/ratio4m.txt"
		awk '{ print $2 / $1 }' "$out/ratio4m.txt" | sort -g |
			awk '{ z[NR] = $1 } END { m = (NR % 2) ? z[(NR + 1) / 2] : (z[NR / 2] + z[NR / 2 + 1]) / 2; printf "median zero-copy/ib_read_bw: %.3f (target >= 0.95)\n", m }'
	fi
	for r in zcopy-reused copy-reused zcopy-first copy-first; do
		echo "# $r: $(grep -E '^# rcache' "$out/$r.out" | tr '\n' ' ')"
	done
} | tee "$out/summary.txt"
