#!/bin/bash
# run-ib-vm.sh - verbs performance (issue 3) in ONE boot of the Soft-RoCE VM:
#   1. perftest ib_write_lat / ib_write_bw on rxe0 (server + client, loopback);
#   2. rdmach_latency / rdmach_bw with RDMACH_TRANSPORT=ib, and the ratios:
#      8-byte latency vs ib_write_lat (target <= 1.15), 1 MiB bandwidth vs
#      ib_write_bw (target >= 0.90);
#   3. RDMACH_IB_MODE=basic|piggyback|pipeline: latency and bandwidth curves;
#   4. RDMACH_IB_CHUNK_SIZE=2K..64K: bandwidth and large-message latency;
# then tables and PNGs (plot.sh) on the host, like the paper's figures 4-9.
# The guest CPU is emulated (~6.6x slower): ratios to perftest on the same
# soft device mean something, absolute numbers do not.
#
#   bench/vm/run-ib-vm.sh            build on the host first (make O=...)
#   bench/vm/run-ib-vm.sh --report results/ib-DATE    tables and plots again
# Environment:
#   O=build               build directory holding bin/rdmach_{latency,bw}
#   BENCH_TRANSPORT=ib    shm to try the script before rdma_ib exists
#   BENCH_SCALE=1         multiply iteration counts (2 = twice as many)
#   BENCH_IB_PARTS="headline curves modes chunks"   what to run (in order;
#                         curves/modes/chunks stop at the first one left out)
#   BENCH_IB_ROUNDS=3     interleaved perftest/rdmach rounds for the summary
#   BENCH_RESULTS=DIR     where to write (default results/ib-YYYYmmdd-HHMMSS)
#   BENCH_STRICT=1        exit 3 when a target is missed
#   VM_RUN=path           VM harness taking <dir> '<bash command>' (default:
#                         the project's test/vm/vm-run.sh if present, else
#                         /work/shared/softroce/run-in-vm.sh)
#   RDMACH_*              passed into the guest
# Exit status: 0; 1 if a run failed; 3 on a missed target (strict).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
O=${O:-build}
case $O in /*) ;; *) O=$top/$O ;; esac
transport=${BENCH_TRANSPORT:-ib}
scale=${BENCH_SCALE:-1}
bin=$O/bin

die() { echo "run-ib-vm.sh: $*" >&2; exit 1; }
n() { echo $(( $1 * scale > 0 ? $1 * scale : 1 )); }	# scaled count
parts=${BENCH_IB_PARTS:-headline curves modes chunks}
rounds=${BENCH_IB_ROUNDS:-3}
part() { [[ " $parts " == *" $1 "* ]]; }

# ---------------------------------------------------------------- guest --
# perf NAME TOOL SIZE ITERS: one perftest pair; appends "size value" to
# $out/NAME.txt (latency: t_typical, perftest's median, like our median
# batch; bandwidth: BW average converted from perftest's MB = 2^20 to
# OSU's MB = 10^6).
perf() {
	local name=$1 tool=$2 size=$3 iters=$4 row= sp try
	# up to 3 tries: under load the client may find no server yet, and
	# perftest's clock calibration may fail (r^2 < 0.9: "inf" results)
	for try in 1 2 3; do
		timeout 120 "$tool" -d "$dev" -s "$size" -n "$iters" -F \
			>"$out/perftest-server.log" 2>&1 &
		sp=$!
		sleep $((try == 1 ? 1 : 3))
		row=$(timeout 120 "$tool" -d "$dev" -s "$size" -n "$iters" -F \
			"$ip" 2>&1 | tee -a "$out/$name.log" |
			grep -E '^ *[0-9]+ +[0-9]+ ')
		wait $sp
		# a failed calibration shows as inf, nan or 0.00
		[ -n "$row" ] && ! grep -qiE 'inf|nan' <<<"$row" &&
			awk '{ exit !($4 + 0 > 0 && $5 + 0 > 0) }' <<<"$row" && break
		echo "run-ib-vm.sh: $tool -s $size: try $try failed" >&2
		row=
	done
	if [ -z "$row" ]; then
		echo "run-ib-vm.sh: $tool -s $size FAILED" >&2
		cat "$out/perftest-server.log" >&2
		return 1
	fi
	case $tool in
	*_lat) awk '{ printf "%-10d %18.2f\n", $1, $5 }' <<<"$row" ;;
	*_bw) awk '{ printf "%-10d %18.2f\n", $1, $4 * 1.048576 }' <<<"$row" ;;
	esac >>"$out/$name.txt"
}

# bench NAME [VAR=value...] -- PROGRAM ARGS...: one rdmach benchmark run
bench() {
	local name=$1; shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	echo "# $name: ${envs[*]} $*" >&2
	if ! env "${envs[@]}" RDMACH_TRANSPORT="$transport" timeout 300 "$@" \
		-t "$transport" >"$out/$name.out" 2>"$out/$name.err"; then
		echo "run-ib-vm.sh: FAILED: ${envs[*]} $*" >&2
		tail -5 "$out/$name.err" >&2
		failed=1
		return 1
	fi
	[ -s "$out/$name.err" ] || rm -f "$out/$name.err"
	# the table alone (-S appends counters to the full output in .out)
	awk '/^# rank [0-9]+ counters/ { exit } /^#/ || $1 ~ /^[0-9]+$/' \
		"$out/$name.out" >"$out/$name.txt"
}

in_vm() {
	out=$1
	failed=0
	local t0=$SECONDS s it
	# both harnesses make rxe0 on a dummy netdev with 192.0.2.1
	dev=${SOFTROCE_DEV:-rxe0}
	ip=${SOFTROCE_IP:-192.0.2.1}
	[ -e "/sys/class/infiniband/$dev" ] || die "--in-vm: no RDMA device $dev (not inside the Soft-RoCE VM?)"
	echo "# guest: $(uname -r), device $dev, $(nproc) CPUs, transport $transport"

	# 0. the summary's figures: short runs of one size, perftest and rdmach
	#    interleaved, so that bursts of host load hit both alike
	if part headline; then
		for ((k = 1; k <= rounds; k++)); do
			perf hl-perftest-lat ib_write_lat 8 "$(n 1000)" || failed=1
			# -b = -i: the median of per-iteration times, the
			# statistic of perftest's t_typical
			bench "hl-rdmach-lat-$k" -- "$bin/rdmach_latency" -m 8:8 \
				-i "$(n 1000)" -x 100 -b "$(n 1000)"
			perf hl-perftest-bw ib_write_bw 1048576 "$(n 200)" || failed=1
			bench "hl-rdmach-bw-$k" -- "$bin/rdmach_bw" -m 1M:1M \
				-I "$(n 1)" -X 1
		done
		echo "# headline rounds done at $((SECONDS - t0)) s" >&2
	fi
	part curves || return $failed

	# 1. perftest, the raw floor (client and server in this guest)
	for s in 8 $((1 << 6)) $((1 << 9)) $((1 << 12)) $((1 << 15)) $((1 << 18)) $((1 << 20)); do
		it=$(n 1000); [ "$s" -ge 32768 ] && it=$(n 100); [ "$s" -ge 262144 ] && it=$(n 20)
		perf perftest-lat ib_write_lat "$s" "$it" || failed=1
	done
	for s in 8 $((1 << 6)) $((1 << 9)) $((1 << 12)) $((1 << 15)) $((1 << 18)) $((1 << 20)); do
		it=$(n 1000); [ "$s" -ge 32768 ] && it=$(n 200); [ "$s" -ge 262144 ] && it=$(n 50)
		perf perftest-bw ib_write_bw "$s" "$it" || failed=1
	done
	echo "# perftest done at $((SECONDS - t0)) s" >&2

	# 2. rdmach with its defaults (latency: median of 5 batches, so
	#    compared with perftest's t_typical, a median too)
	bench rdmach-lat -- "$bin/rdmach_latency" -m 1:1M -i "$(n 500)" \
		-x "$(n 50)" -I "$(n 10)" -X 1 -b 5 -S
	bench rdmach-bw -- "$bin/rdmach_bw" -m 8:1M -i "$(n 5)" -x 1 \
		-I "$(n 2)" -X 1 -S
	echo "# defaults done at $((SECONDS - t0)) s" >&2

	part modes || return $failed
	# 3. protocol modes (paper figures 4-5)
	for mode in basic piggyback pipeline; do
		bench "mode-$mode-lat" RDMACH_IB_MODE=$mode -- \
			"$bin/rdmach_latency" -m 1:256K -i "$(n 200)" -x 20 \
			-I "$(n 5)" -X 1 -b 5
		bench "mode-$mode-bw" RDMACH_IB_MODE=$mode -- \
			"$bin/rdmach_bw" -m 64:1M -i "$(n 3)" -x 1 -I "$(n 1)" -X 1
	done
	echo "# modes done at $((SECONDS - t0)) s" >&2

	part chunks || return $failed
	# 4. chunk size of the pipelined copy (paper figures 6-7)
	for c in 2K 4K 8K 16K 32K 64K; do
		bench "chunk-$c-bw" RDMACH_IB_MODE=pipeline RDMACH_IB_CHUNK_SIZE=$c -- \
			"$bin/rdmach_bw" -m 16K:1M -i "$(n 2)" -x 1 -I "$(n 1)" -X 1
		bench "chunk-$c-lat" RDMACH_IB_MODE=pipeline RDMACH_IB_CHUNK_SIZE=$c -- \
			"$bin/rdmach_latency" -m 16K:256K -i "$(n 10)" -x 1 \
			-I "$(n 3)" -X 1
	done
	echo "# chunk sweep done at $((SECONDS - t0)) s" >&2
	return $failed
}

# ----------------------------------------------------------------- host --
value() { # FILE SIZE -> value or empty
	[ -s "$1" ] && awk -v s="$2" '!/^#/ && $1 == s { print $2; exit }' "$1"
}

hl_all() { # DIR PREFIX SIZE -> the values of every headline run, sorted
	cat "$1/$2"*.txt 2>/dev/null |
		awk -v s="$3" '!/^#/ && $1 == s { print $2 }' | sort -g | tr '\n' ' ' | sed 's/ $//'
}

hl_median() { # DIR PREFIX SIZE -> median of the headline runs
	hl_all "$@" | awk '{ if (NF) print (NF % 2 ? $((NF + 1) / 2) : ($(NF / 2) + $(NF / 2 + 1)) / 2) }'
}

ratio_line() { # WHAT A_LABEL A B_LABEL B UNIT OP LIMIT
	local what=$1 al=$2 a=$3 bl=$4 b=$5 unit=$6 op=$7 lim=$8 r v
	if [ -z "$a" ] || [ -z "$b" ]; then
		echo "$what: $al ${a:-?} $unit, $bl ${b:-?} $unit (not compared: a run failed)"
		return
	fi
	r=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')
	if awk -v x="$r" -v l="$lim" -v op="$op" 'BEGIN { exit !(op == "le" ? x <= l : x >= l) }'; then
		v=met
	else
		v=MISSED
	fi
	echo "$what: $al $a $unit, $bl $b $unit, ratio $r (target $([ "$op" = le ] && echo '<=' || echo '>=') $lim: $v)"
}

table() { # TITLE LABEL=FILE...: a column per existing file, its sizes first
	local title=$1 a labels=() files=()
	shift
	for a in "$@"; do
		[ -s "${a#*=}" ] || continue
		labels+=("${a%%=*}")
		files+=("${a#*=}")
	done
	[ ${#files[@]} -gt 0 ] || { echo "# $title: no data"; return; }
	printf '# %s\n%-10s' "$title" "# Size"
	printf ' %12s' "${labels[@]}"
	printf '\n'
	awk -v w=12 -f "$top/bench/plot/osu-join.awk" "${files[@]}"
}

report() {
	local out=$1 f lbl plots m c
	echo
	echo "## rdmach ($transport) vs perftest on rxe0 (guest CPU emulated: compare ratios)"
	table "latency (us)" "ib_write_lat=$out/perftest-lat.txt" "rdmach=$out/rdmach-lat.txt"
	table "bandwidth (MB/s = 10^6 B/s)" "ib_write_bw=$out/perftest-bw.txt" "rdmach=$out/rdmach-bw.txt"
	table "RDMACH_IB_MODE: latency (us)" basic="$out/mode-basic-lat.txt" \
		piggyback="$out/mode-piggyback-lat.txt" pipeline="$out/mode-pipeline-lat.txt"
	table "RDMACH_IB_MODE: bandwidth (MB/s)" basic="$out/mode-basic-bw.txt" \
		piggyback="$out/mode-piggyback-bw.txt" pipeline="$out/mode-pipeline-bw.txt"
	table "RDMACH_IB_CHUNK_SIZE: bandwidth (MB/s)" \
		$(for c in 2K 4K 8K 16K 32K 64K; do echo "$c=$out/chunk-$c-bw.txt"; done)
	table "RDMACH_IB_CHUNK_SIZE: latency (us)" \
		$(for c in 2K 4K 8K 16K 32K 64K; do echo "$c=$out/chunk-$c-lat.txt"; done)
	echo
	{
		echo "## Summary (rdmach transport $transport, Soft-RoCE rxe0)"
		[ "$transport" = ib ] ||
			echo "# NOTE: transport $transport, not ib: the ratios below do not measure rdma_ib"
		if [ -s "$out/hl-perftest-lat.txt" ]; then
			echo "# medians of the interleaved rounds; runs: rdmach $(hl_all "$out" hl-rdmach-lat- 8)," \
				"ib_write_lat $(hl_all "$out" hl-perftest-lat 8) us;" \
				"rdmach $(hl_all "$out" hl-rdmach-bw- 1048576), ib_write_bw" \
				"$(hl_all "$out" hl-perftest-bw 1048576) MB/s"
			ratio_line "8-byte latency" rdmach "$(hl_median "$out" hl-rdmach-lat- 8)" \
				ib_write_lat "$(hl_median "$out" hl-perftest-lat 8)" us le 1.15
			ratio_line "1 MiB bandwidth" rdmach "$(hl_median "$out" hl-rdmach-bw- 1048576)" \
				ib_write_bw "$(hl_median "$out" hl-perftest-bw 1048576)" MB/s ge 0.90
		else
			ratio_line "8-byte latency" rdmach "$(value "$out/rdmach-lat.txt" 8)" \
				ib_write_lat "$(value "$out/perftest-lat.txt" 8)" us le 1.15
			ratio_line "1 MiB bandwidth" rdmach "$(value "$out/rdmach-bw.txt" 1048576)" \
				ib_write_bw "$(value "$out/perftest-bw.txt" 1048576)" MB/s ge 0.90
		fi
	} | tee "$out/summary.txt"

	command -v gnuplot >/dev/null || return 0
	p() { "$top/bench/plot/plot.sh" "$@" >/dev/null || echo "run-ib-vm.sh: plot $2 failed" >&2; }
	p -o "$out/latency.png" -l -t "Latency on Soft-RoCE rxe0: rdmach ($transport) vs ib_write_lat" \
		-y "Latency (us)" "ib_write_lat=$out/perftest-lat.txt" "rdmach=$out/rdmach-lat.txt"
	p -o "$out/bandwidth.png" -t "Bandwidth on Soft-RoCE rxe0: rdmach ($transport) vs ib_write_bw" \
		-y "Bandwidth (MB/s)" "ib_write_bw=$out/perftest-bw.txt" "rdmach=$out/rdmach-bw.txt"
	for kind in lat bw; do
		plots=()
		for m in basic piggyback pipeline; do
			[ -s "$out/mode-$m-$kind.txt" ] && plots+=("$m=$out/mode-$m-$kind.txt")
		done
		[ ${#plots[@]} -gt 0 ] || continue
		if [ $kind = lat ]; then
			p -o "$out/modes-latency.png" -l -t "Latency by RDMACH_IB_MODE (Soft-RoCE)" \
				-y "Latency (us)" "${plots[@]}"
		else
			p -o "$out/modes-bandwidth.png" -t "Bandwidth by RDMACH_IB_MODE (Soft-RoCE)" \
				-y "Bandwidth (MB/s)" "${plots[@]}"
		fi
		plots=()
		for c in 2K 4K 8K 16K 32K 64K; do
			[ -s "$out/chunk-$c-$kind.txt" ] && plots+=("chunk $c=$out/chunk-$c-$kind.txt")
		done
		[ ${#plots[@]} -gt 0 ] || continue
		if [ $kind = lat ]; then
			p -o "$out/chunk-latency.png" -l -t "Latency by RDMACH_IB_CHUNK_SIZE (pipeline, Soft-RoCE)" \
				-y "Latency (us)" "${plots[@]}"
		else
			p -o "$out/chunk-bandwidth.png" -t "Bandwidth by RDMACH_IB_CHUNK_SIZE (pipeline, Soft-RoCE)" \
				-y "Bandwidth (MB/s)" "${plots[@]}"
		fi
	done
	echo "plots: $(cd "$out" && ls ./*.png | tr '\n' ' ')"
}

# Everything below runs from main(), so that bash has read the whole file
# before it starts (editing the script during a run cannot derail it).
main() {
	case ${1:-} in
	--in-vm) in_vm "$2"; exit ;;	# inside the guest
	--report) report "$2"; exit ;;	# tables and plots again, from a result dir
	esac

	for b in rdmach_latency rdmach_bw; do
		[ -x "$bin/$b" ] || die "$bin/$b missing: build on the host first (make O=${O#"$top"/})"
	done
	vm=${VM_RUN:-}
	if [ -z "$vm" ]; then
		for v in "$top/test/vm/vm-run.sh" /work/shared/softroce/run-in-vm.sh; do
			[ -x "$v" ] && { vm=$v; break; }
		done
	fi
	[ -n "$vm" ] || die "no VM harness (test/vm/vm-run.sh or /work/shared/softroce/run-in-vm.sh)"
	out=${BENCH_RESULTS:-$top/results/ib-$(date +%Y%m%d-%H%M%S)}
	case $out in /*) ;; *) out=$top/$out ;; esac
	mkdir -p "$out" || die "cannot create $out"
	rm -f "$out"/*.txt "$out"/*.out

	passenv="O BENCH_TRANSPORT BENCH_SCALE BENCH_IB_PARTS BENCH_IB_ROUNDS $(env | sed -n 's/^\(RDMACH_[A-Za-z0-9_]*\)=.*/\1/p' | tr '\n' ' ')"
	export O BENCH_TRANSPORT=$transport BENCH_SCALE=$scale
	echo "# run-ib-vm.sh: one VM boot via $vm; results in $out"
	start=$SECONDS
	# one bash string: both harnesses accept it; 30 min at most (a busy
	# host slows the emulated guest several times over)
	SOFTROCE_TIMEOUT=${SOFTROCE_TIMEOUT:-1800} \
	RDMACH_VM_TIMEOUT=${RDMACH_VM_TIMEOUT:-1800} \
	SOFTROCE_PASSENV="${SOFTROCE_PASSENV:-} $passenv" \
	RDMACH_VM_PASSENV="${RDMACH_VM_PASSENV:-} $passenv" \
		"$vm" "$top" "$(printf '%q --in-vm %q' "$here/run-ib-vm.sh" "$out")" 2>&1 |
		tee "$out/vm.log"
	rc=${PIPESTATUS[0]}
	echo "# VM run: $((SECONDS - start)) s, status $rc"
	report "$out"
	ln -sfn "$(basename "$out")" "$(dirname "$out")/ib-latest" 2>/dev/null
	[ "$rc" = 0 ] || { echo "run-ib-vm.sh: the VM run failed (status $rc; see $out/vm.log)" >&2; exit 1; }
	grep -q MISSED "$out/summary.txt" && [ "${BENCH_STRICT:-0}" = 1 ] && exit 3
	exit 0
}

main "$@"
