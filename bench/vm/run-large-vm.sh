#!/bin/bash
# run-large-vm.sh - large messages in the style of Denis' Fig. 7 (Euro-Par
# 2011), in ONE boot of the Soft-RoCE VM (or natively when
# /sys/class/infiniband has a device):
#   1. rdmach_info --tune with RDMACH_TUNE=measure: the machine's figures,
#      the derived superpipeline settings and the model's predictions;
#   2. ib_read_bw and ib_write_bw (perftest) from 16 KiB to 16 MiB;
#   3. rdmach_large (ping-pong: the first round trip on fresh buffers and
#      the best of many on a reused one) for RDMACH_LARGE=pipeline,
#      superpipeline, zcopy and auto, with the counters of each; and auto
#      once more with RDMACH_TUNE=off ("auto-builtin": the built-in figures
#      of Denis' cluster, where registering costs more than copying: what
#      the choice does on such a machine, run on this one);
#   4. if an MPICH built with ch3:rdma is found (MPICH=prefix; default
#      build/mpich-install, else /work/ci-base/build/mpich-install), the
#      MPI loops of bench/src/mpi_large_loop.c (alloc-send-free, malloc-free,
#      reuse) under RDMACH_LARGE=auto with RDMACH_STATS=1.  This tree's
#      librdmach.so is LD_PRELOADed over the copy linked into that libmpi
#      (it exports rdmach_*; the CH3 channel calls only the public API),
#      so the loops run this code without rebuilding MPICH;
# then on the host one table with the targets' ratios, the model beside
# the measurement, and two PNGs (first touch, best) like Fig. 7.
# The guest CPU is emulated (~6.6x slower) and shared with the host: only
# ratios within one run mean something; check `uptime` first (the script
# records it before and after).
#
#   bench/vm/run-large-vm.sh              (builds O=build if needed)
#   bench/vm/run-large-vm.sh --report DIR (tables and plots again)
# Environment: O (build dir), BENCH_RESULTS (results/large-DATE),
#   LARGE_SIZES (16K:16M), LARGE_REUSED (100), LARGE_FRESH (10),
#   LARGE_CAP (64M: bytes per size and direction of the reused loop),
#   LARGE_ROUNDS (2: sweeps of sizes x protocols, interleaved; each
#   figure is the best round's),
#   LARGE_PERF_ITERS (100), LARGE_MPI (1; 0 skips the MPI loops),
#   MPICH (an install prefix), RDMACH_* passed into the guest.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
O=${O:-build}
case $O in /*) ;; *) O=$top/$O ;; esac
sizes=${LARGE_SIZES:-16K:16M}
reused=${LARGE_REUSED:-100}
fresh=${LARGE_FRESH:-10}
cap=${LARGE_CAP:-64M}
piters=${LARGE_PERF_ITERS:-100}
rounds=${LARGE_ROUNDS:-2}
protos="pipeline superpipeline zcopy auto auto-builtin"

bytes() { # 4K -> 4096
	case $1 in
	*[kK]) echo $(( ${1%?} << 10 )) ;;
	*[mM]) echo $(( ${1%?} << 20 )) ;;
	*) echo $(( $1 )) ;;
	esac
}

# ---------------------------------------------------------------- guest --
perf() {	# TOOL SIZE ITERS: "size MB/s(10^6)" from perftest's average
	local tool=$1 size=$2 it=$3 sp row try
	for try in 1 2 3; do
		timeout 300 "$tool" -d "$dev" -s "$size" -n "$it" -F \
			>"$out/perftest-server.log" 2>&1 &
		sp=$!
		sleep $try	# the emulated guest is slow to listen
		row=$(timeout 300 "$tool" -d "$dev" -s "$size" -n "$it" -F "$ip" \
			2>&1 | tee -a "$out/$tool.log" | grep -E '^ *[0-9]+ +[0-9]+ ')
		wait $sp
		[ -n "$row" ] && ! grep -qiE 'inf|nan' <<<"$row" && break
		row=
	done
	[ -n "$row" ] || { echo "run-large-vm: $tool -s $size failed" >&2; return 1; }
	awk '{ printf "%d %.2f\n", $1, $4 * 1.048576 }' <<<"$row"
}

inner() {
	out=$1 mpich=$2
	dev=${SOFTROCE_DEV:-$(ls /sys/class/infiniband | head -n1)}
	ip=${SOFTROCE_IP:-192.0.2.1}
	local t0=$SECONDS s max p it r
	mkdir -p "$out"
	uptime >"$out/uptime-guest.txt"
	RDMACH_TUNE=measure "$O/bin/rdmach_info" --tune >"$out/tune.txt" 2>&1
	echo "# tuning done at $((SECONDS - t0)) s" >&2
	s=$(bytes "${sizes%%:*}") max=$(bytes "${sizes##*:}")
	rm -f "$out"/large-*.r*.txt
	: >"$out/ib_read_bw.txt"
	: >"$out/ib_write_bw.txt"
	while [ "$s" -le "$max" ]; do
		it=$piters
		[ "$s" -ge $((4 << 20)) ] && it=$((piters / 4 > 5 ? piters / 4 : 5))
		perf ib_read_bw "$s" "$it" >>"$out/ib_read_bw.txt" || return 1
		perf ib_write_bw "$s" "$it" >>"$out/ib_write_bw.txt" || return 1
		s=$((s * 2))
	done
	echo "# perftest done at $((SECONDS - t0)) s" >&2
	# rounds of sizes of protocols, interleaved, so that a burst of load
	# on the host hits every protocol alike; one process pair per run
	for ((r = 1; r <= rounds; r++)); do
		s=$(bytes "${sizes%%:*}")
		while [ "$s" -le "$max" ]; do
			for p in $protos; do
				RDMACH_TUNE=$([ $p = auto-builtin ] && echo off || echo auto) \
				RDMACH_LARGE=${p%-builtin} timeout 900 "$O/bin/rdmach_large" \
					-t ib -m "$s:$s" -i "$reused" -f "$fresh" -c "$cap" -S \
					>"$out/run.out" 2>"$out/run.err" ||
					{ echo "run-large-vm: rdmach_large ($p, $s) failed" >&2
					  tail -5 "$out/run.err" >&2; return 1; }
				awk '$1 ~ /^[0-9]+$/ && NF == 5' "$out/run.out" >>"$out/large-$p.r$r.txt"
				# the counters of one size (1 MiB, or the last)
				[ "$r" = 1 ] && { [ "$s" = $((1 << 20)) ] || [ "$s" = "$max" ]; } &&
					cp "$out/run.out" "$out/large-$p.out"
			done
			s=$((s * 2))
		done
		echo "# round $r done at $((SECONDS - t0)) s" >&2
	done
	if [ -n "$mpich" ] && [ -x "$out/mpi_large_loop" ]; then
		for p in alloc-send-free malloc-free reuse; do
			LD_PRELOAD=$O/lib/librdmach.so RDMACH_TRANSPORT=ib \
			RDMACH_LARGE=auto RDMACH_STATS=1 timeout 600 \
				"$mpich/bin/mpiexec" -n 2 "$out/mpi_large_loop" \
				-m 1M -n 50 "$p" >"$out/mpi-$p.out" 2>&1 ||
				echo "run-large-vm: MPI loop $p failed" >&2
		done
		echo "# MPI loops done at $((SECONDS - t0)) s" >&2
	fi
	uptime >>"$out/uptime-guest.txt"
}

# ----------------------------------------------------------------- host --
col() {	# FILE COLUMN: "size value" rows of rdmach_large's table
	awk -v c="$2" '$1 ~ /^[0-9]+$/ && NF == 5 { print $1, $c }' "$1"
}

# join SIZE-FILE FILE...: per size of the first file, its value and each
# other file's value for that size (0 when missing)
join_sizes() {
	awk 'FNR == 1 { f++ } !/^#/ && NF >= 2 { v[f, $1] = $2; if (f == 1) s[++n] = $1 }
	     END { for (i = 1; i <= n; i++) { printf "%s", s[i]
		   for (j = 1; j <= f; j++) printf " %s", ((j, s[i]) in v) ? v[j, s[i]] : 0
		   printf "\n" } }' "$@"
}

report() {
	local out=$1 p f
	# per size, the best round (load on the host only ever slows a run)
	for p in $protos; do
		ls "$out"/large-$p.r*.txt >/dev/null 2>&1 || continue
		cat "$out"/large-$p.r*.txt | awk '{ if ($2 > f[$1]) f[$1] = $2
			if ($4 > b[$1]) b[$1] = $4; if (!($1 in seen)) { seen[$1] = 1; o[++n] = $1 } }
			END { for (i = 1; i <= n; i++) { print o[i], f[o[i]] > fo; print o[i], b[o[i]] > bo } }' \
			fo="$out/$p-first.txt" bo="$out/$p-best.txt"
	done
	# the model: one-way bandwidth of each protocol (rdmach_info --tune)
	awk '/^# bytes/ { on = 1; next } on && NF >= 7 && $1 ~ /^[0-9]+$/ {
		print $1, $2 > (d "/model-ring.txt"); print $1, $3 > (d "/model-spipe.txt")
		print $1, $5 > (d "/model-zcopy-hit.txt"); print $1, $7 > (d "/model-zcopy-2reg.txt") }' \
		d="$out" "$out/tune.txt"
	{
		echo "## Large messages, Soft-RoCE (guest CPU emulated: compare ratios)"
		grep -E '^(B_|lambda|g )' "$out/tune.txt" | tr -s ' ' | paste -sd ';' |
			sed 's/^/# machine: /'
		grep -E '^# machine figures' "$out/tune.txt"
		grep -E '^RDMACH_SPIPE_(C0|Q|BUF_SIZE|THRESHOLD) ' "$out/tune.txt" |
			awk '{ printf "%s=%s ", $1, $2 } END { print "" }' | sed 's/^/# derived: /'
		echo "# MB/s = 10^6 B/s; ping-pong one-way bandwidth (rdmach_large), perftest streaming"
		printf "%-9s %8s %8s | %8s %8s %8s %8s | %8s %8s %8s %8s | %7s %7s %7s | %8s %8s\n" size \
			read_bw write_bw pipe-1st spipe-1st zc-1st auto-1st \
			pipe-best spipe-bst zc-best auto-best m-spipe m-zc2reg m-zchit \
			autoB-1st autoB-bst
		join_sizes "$out/ib_read_bw.txt" "$out/ib_write_bw.txt" \
			"$out/pipeline-first.txt" "$out/superpipeline-first.txt" \
			"$out/zcopy-first.txt" "$out/auto-first.txt" \
			"$out/pipeline-best.txt" "$out/superpipeline-best.txt" \
			"$out/zcopy-best.txt" "$out/auto-best.txt" \
			"$out/model-spipe.txt" "$out/model-zcopy-2reg.txt" \
			"$out/model-zcopy-hit.txt" "$out/auto-builtin-first.txt" \
			"$out/auto-builtin-best.txt" 2>/dev/null |
			awk '{ printf "%-9s %8.2f %8.2f | %8.2f %8.2f %8.2f %8.2f | %8.2f %8.2f %8.2f %8.2f | %7.2f %7.2f %7.2f | %8.2f %8.2f\n",
				$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16 }' |
			tee "$out/table.txt"
		echo
		echo "# targets"
		awk '{ size = $1; rd = $2; af = $8; ab = $13	# table.txt fields ("|" count)
			bf = $5; if ($6 > bf) bf = $6; if ($7 > bf) bf = $7
			bb = $10; if ($11 > bb) bb = $11; if ($12 > bb) bb = $12
			r1 = ab > 0 ? af / ab : 0; r3f = bf > 0 ? af / bf : 0; r3b = bb > 0 ? ab / bb : 0
			m1 = r1 >= 0.90 ? "met" : "MISSED"
			m3 = (r3f >= 0.95 && r3b >= 0.95) ? "met" : "MISSED"
			printf "%-9s auto first/best %.3f (>= 0.90 %s)  auto/best fixed: first %.3f, best %.3f (>= 0.95 %s)", size, r1, m1, r3f, r3b, m3
			if (size >= 1048576) printf "  auto best/ib_read_bw %.3f (>= 0.95 %s)", ab / rd, (ab / rd >= 0.95 ? "met" : "MISSED")
			printf "\n" }' "$out/table.txt"
		echo
		for p in $protos; do
			[ -s "$out/large-$p.out" ] || continue
			echo "# counters, $p, one run of $(awk '$1 ~ /^[0-9]+$/ { print $1; exit }' "$out/large-$p.out") bytes (rank 0):"
			awk '/^# rank 0 counters/ { on = 1 } /^# rank 1 counters/ { on = 0 }
			     on && /^# (rcache|large)/' "$out/large-$p.out"
		done
		for p in alloc-send-free malloc-free reuse; do
			[ -s "$out/mpi-$p.out" ] || continue
			echo "# MPI loop $p (RDMACH_LARGE=auto, 1 MiB x 50):"
			grep -E '^(alloc|malloc|reuse)|^# (rcache|large)|rdmach counters, rank' "$out/mpi-$p.out"
		done
		echo "# host before/after: $(tr '\n' ' ' <"$out/uptime-host.txt")"
		echo "# guest: $(tr '\n' ' ' <"$out/uptime-guest.txt" 2>/dev/null)"
	} | tee "$out/summary.txt"
	command -v gnuplot >/dev/null || return 0
	for kind in first best; do
		args=()
		for p in $protos; do
			[ -s "$out/$p-$kind.txt" ] && args+=("$p=$out/$p-$kind.txt")
		done
		args+=("ib_read_bw=$out/ib_read_bw.txt" "ib_write_bw=$out/ib_write_bw.txt")
		if [ "$kind" = first ]; then
			args+=("model superpipeline=$out/model-spipe.txt"
			       "model zcopy, 2 registrations=$out/model-zcopy-2reg.txt")
		else
			args+=("model superpipeline=$out/model-spipe.txt"
			       "model zcopy, cache hit=$out/model-zcopy-hit.txt")
		fi
		"$top/bench/plot/plot.sh" -o "$out/large-$kind.png" -x "$sizes" \
			-t "Ping-pong bandwidth, $kind $([ $kind = first ] && echo 'touch (fresh buffers)' || echo 'of many (reused buffer)'), Soft-RoCE" \
			-y "Bandwidth (MB/s)" "${args[@]}" >/dev/null ||
			echo "run-large-vm: plot $kind failed" >&2
	done
	echo "plots: $out/large-first.png $out/large-best.png"
}

main() {
	case ${1:-} in
	--inner) O=$4; inner "$2" "$3"; exit ;;
	--report) report "$2"; exit ;;
	esac
	[ -x "$O/bin/rdmach_large" ] && [ -s "$O/lib/librdmach.so" ] ||
		make -C "$top" -j2 O="$O" >/dev/null || { echo "build failed" >&2; exit 1; }
	out=${BENCH_RESULTS:-$top/results/large-$(date +%Y%m%d-%H%M%S)}
	case $out in /*) ;; *) out=$top/$out ;; esac
	native=0; [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] && native=1
	case $out in
	"$top"/*) ;;
	*) [ $native = 1 ] || { echo "run-large-vm: BENCH_RESULTS must be under" \
		"$top, the one host directory the VM writes to" >&2; exit 1; } ;;
	esac
	mkdir -p "$out"
	uptime >"$out/uptime-host.txt"
	cat "$out/uptime-host.txt"
	mpich=
	if [ "${LARGE_MPI:-1}" = 1 ]; then
		for m in ${MPICH:-} "$top/build/mpich-install" /work/ci-base/build/mpich-install; do
			[ -x "$m/bin/mpicc" ] && [ -x "$m/bin/mpiexec" ] && { mpich=$m; break; }
		done
		if [ -n "$mpich" ]; then
			"$mpich/bin/mpicc" -O2 -I"$top/bench/src" -o "$out/mpi_large_loop" \
				"$top/bench/src/mpi_large_loop.c" || mpich=
		else
			echo "run-large-vm: no ch3:rdma MPICH found: MPI loops skipped" >&2
		fi
	fi
	start=$SECONDS
	if [ $native = 1 ]; then
		"$0" --inner "$out" "$mpich" "$O" || exit 1
	else
		RDMACH_VM_PASSENV="$(env | sed -n 's/^\(RDMACH_[A-Z0-9_]*\)=.*/\1/p' |
			tr '\n' ' ') LARGE_SIZES LARGE_REUSED LARGE_FRESH LARGE_CAP LARGE_PERF_ITERS LARGE_ROUNDS" \
		RDMACH_VM_TIMEOUT=${RDMACH_VM_TIMEOUT:-5400} \
			"$top/test/vm/vm-run.sh" "$top" \
			"$(printf '%q --inner %q %q %q' "$here/run-large-vm.sh" "$out" "$mpich" "$O")" ||
			{ echo "run-large-vm: the VM run failed" >&2; exit 1; }
	fi
	uptime >>"$out/uptime-host.txt"
	echo "# VM run: $((SECONDS - start)) s"
	report "$out"
	[ -s "$out/table.txt" ] || { echo "run-large-vm: no results in $out" >&2; exit 1; }
}

main "$@"
