#!/usr/bin/env bash
# run-cluster-vm.sh - latency and bandwidth between two hosts: in ONE boot
# of a 2-VM Soft-RoCE cluster (test/vm/vm-cluster.sh: the two NICs on
# its switch, lossless like a PFC fabric, or with BENCH_LINK=direct on one
# UDP link over 127.0.0.1, no switch hop, which drops frames under load),
# interleaved rounds of
#   perftest  ib_write_lat 8 B, ib_write_bw and ib_read_bw 1 MiB (vm1 -> vm2)
#   rdmach    rdmach_latency 8 B, rdmach_bw 1 MiB (rank 0 on vm1, 1 on vm2)
#             by the superpipeline and by the ring's pipelined copy
#   MPI       mpi_latency 8 B, mpi_bw 1 MiB (superpipeline) on MPICH
#             ch3:rdma (PREFIX)
#   Debian's MPICH (ch4:ucx), the same mpi_latency/mpi_bw, as a peer
# then a table: per-round values, median, min-max spread, and the ratios
# to perftest (targets: rdmach 8 B latency <= 1.10 x ib_write_lat, MPI <=
# 1.15 x; 1 MiB bandwidth >= 0.95 x ib_write_bw).  Latency is the median of
# per-iteration times (perftest's t_typical; -b = -i for ours); bandwidth
# is perftest's BW average (converted to 10^6 B/s, as OSU) and our window
# bandwidth.  The guest CPU is emulated (~6.6x slower): ratios mean
# something, absolute figures do not; a busy host disturbs both sides.
#
# usage: bench/vm/run-cluster-vm.sh           (build first: make; make mpich)
# env: BENCH_ROUNDS (5)  BENCH_RESULTS (results/cluster-DATE)
#      BENCH_LINK (switch | direct)
#      PREFIX (build/mpich-install)  O (build)
#      BENCH_ZCOPY=1  also rdmach_bw by zero-copy and MPI in auto (RDMA
#                     reads: they stall between two rxe hosts on the
#                     direct link, see test/vm/README.md)
# Exit status 0; 1 if a run failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root=$(pwd -P)
O=${O:-build}
case $O in /*) ;; *) O=$root/$O ;; esac
PREFIX=${PREFIX:-$root/build/mpich-install}

# ---------------------------------------------------------------- guest --
if [ "${1:-}" = --in-vm ]; then
	out=$2 rounds=$3
	peer=vm2 dev=rxe0
	export HYDRA_LAUNCHER_EXEC=$root/test/vm/hydra-ssh
	# Hydra and Debian's MPICH by name: Open MPI's alternatives may own
	# the bare mpiexec / mpicc
	hydra=$(command -v mpiexec.hydra || command -v mpiexec.mpich || echo mpiexec.hydra)
	# perf TOOL SIZE ITERS FILE: one perftest pair, server on vm2
	# TRIES tries of at most LIMIT s each (ib_read_bw: RDMA reads between
	# two rxe hosts stall, see test/vm/README.md; one short try)
	perf() {
		local tool=$1 size=$2 iters=$3 f=$4 row try
		local tries=${TRIES:-3} limit=${LIMIT:-120}
		for ((try = 1; try <= tries; try++)); do
			ssh $peer "timeout $limit $tool -d $dev -s $size -n $iters -F" \
				>"$out/srv.log" 2>&1 </dev/null &
			sleep $((try == 1 ? 2 : 4))
			row=$(timeout $limit "$tool" -d $dev -s "$size" -n "$iters" -F $peer 2>&1 |
				tee -a "$out/$tool.log" | grep -E '^ *[0-9]+ +[0-9]+ ')
			wait
			[ -n "$row" ] && ! grep -qiE 'inf|nan' <<<"$row" && break
			row=
		done
		[ -n "$row" ] || return 0	# no figure: the table says so
		case $tool in
		*_lat) awk '{ printf "%s\n", $5 }' <<<"$row" ;;
		*_bw) awk '{ printf "%.2f\n", $4 * 1.048576 }' <<<"$row" ;;
		esac >>"$out/$f"
	}
	# ours NAME MPIEXEC PROGRAM ARGS...: value of the last row
	ours() {
		local f=$1 m=$2; shift 2
		timeout 300 $m -hosts vm1,$peer -n 2 "$@" >"$out/last.log" 2>&1 </dev/null
		awk '!/^#/ && NF >= 2 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ {v = $2}
		     END {if (v != "") print v}' \
			"$out/last.log" >>"$out/$f"
		cat "$out/last.log" >>"$out/$f.log"
	}
	# acks come from an emulated CPU: the cluster tests' retry timeout
	export RDMACH_IB_TIMEOUT=18
	lat="-m 8:8 -i 2000 -x 200 -b 2000"
	bw="-m 1M:1M -I 10 -X 2 -w 16"
	# large puts by RDMA writes: the superpipeline and the ring's pipelined
	# copy; zero-copy (RDMA reads, the default for a reused buffer) only
	# with BENCH_ZCOPY=1, as reads between rxe hosts stall
	by_spipe="-genv RDMACH_LARGE superpipeline"
	by_ring="-genv RDMACH_LARGE pipeline"
	for ((r = 1; r <= rounds; r++)); do
		echo "round $r of $rounds"
		perf ib_write_lat 8 2000 perftest_write_lat.txt
		ours rdmach_lat.txt "$hydra" "$O/bin/rdmach_latency" $lat
		[ -x "$out/mpi_latency" ] &&
			ours mpi_lat.txt "$PREFIX/bin/mpiexec" "$out/mpi_latency" $lat
		[ -x "$out/ucx_latency" ] &&
			ours ucx_lat.txt /usr/bin/mpiexec.mpich "$out/ucx_latency" $lat
		perf ib_write_bw 1048576 200 perftest_write_bw.txt
		TRIES=1 LIMIT=60 perf ib_read_bw 1048576 200 perftest_read_bw.txt
		ours rdmach_bw_sp.txt "$hydra $by_spipe" "$O/bin/rdmach_bw" $bw
		ours rdmach_bw_pl.txt "$hydra $by_ring" "$O/bin/rdmach_bw" $bw
		[ "${BENCH_ZCOPY:-0}" = 1 ] &&
			ours rdmach_bw.txt "$hydra" "$O/bin/rdmach_bw" $bw
		[ -x "$out/mpi_bw" ] &&
			ours mpi_bw.txt "$PREFIX/bin/mpiexec $by_spipe" "$out/mpi_bw" $bw
		[ "${BENCH_ZCOPY:-0}" = 1 ] && [ -x "$out/mpi_bw" ] &&
			ours mpi_bw_auto.txt "$PREFIX/bin/mpiexec" "$out/mpi_bw" $bw
		[ -x "$out/ucx_bw" ] &&
			ours ucx_bw.txt /usr/bin/mpiexec.mpich "$out/ucx_bw" $bw
	done
	# what UCX chose across the two hosts (or why it did not run)
	[ -x "$out/ucx_latency" ] &&
		UCX_LOG_LEVEL=info timeout 120 /usr/bin/mpiexec.mpich -hosts vm1,$peer -n 2 \
			"$out/ucx_latency" -m 8:8 -i 100 >"$out/ucx-info.log" 2>&1 </dev/null
	ucx_info -d >"$out/ucx_info-d.log" 2>&1
	exit 0
fi

# ----------------------------------------------------------------- host --
rounds=${BENCH_ROUNDS:-5}
out=$root/${BENCH_RESULTS:-results/cluster-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
[ -x "$O/bin/rdmach_latency" ] || make -C "$root" -j2 O="$O" >/dev/null ||
	{ echo "run-cluster-vm: build failed" >&2; exit 1; }
if [ -x "$PREFIX/bin/mpicc" ]; then
	for b in mpi_latency mpi_bw; do
		"$PREFIX/bin/mpicc" -O2 -Ibench/src -o "$out/$b" "bench/src/$b.c" -lm || exit 1
	done
else
	echo "run-cluster-vm: no MPICH ch3:rdma in $PREFIX (make mpich): MPI rows left out" >&2
fi
if [ -x /usr/bin/mpicc.mpich ]; then	# Debian's MPICH, ch4:ucx
	/usr/bin/mpicc.mpich -O2 -Ibench/src -o "$out/ucx_latency" bench/src/mpi_latency.c -lm &&
		/usr/bin/mpicc.mpich -O2 -Ibench/src -o "$out/ucx_bw" bench/src/mpi_bw.c -lm || exit 1
fi
echo "host load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/load.txt"
case ${BENCH_LINK:=switch} in
switch) link=() ;;
direct) link=(--direct) ;;
*) echo "run-cluster-vm: BENCH_LINK is switch or direct" >&2; exit 2 ;;
esac
echo "link: $BENCH_LINK" >>"$out/load.txt"
export RDMACH_VM_PASSENV="${RDMACH_VM_PASSENV:-} BENCH_ZCOPY"
test/vm/vm-cluster.sh -n 2 "${link[@]}" "$root" \
	"bench/vm/run-cluster-vm.sh --in-vm $(printf %q "$out") $rounds" ||
	{ echo "run-cluster-vm: the cluster run failed" >&2; exit 1; }
echo "host load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"

. bench/lib/stats.sh
row() {	# LABEL FILE UNIT: the values, median, spread
	local f=$out/$2 m lo hi
	[ -s "$f" ] || { printf '| %s | (no run) | | |\n' "$1"; return; }
	m=$(median <"$f"); lo=$(sort -g "$f" | head -n1); hi=$(sort -g "$f" | tail -n1)
	printf '| %s | %s | %s %s | %s-%s |\n' "$1" "$(tr '\n' ' ' <"$f")" "$m" "$3" "$lo" "$hi"
}
med() { [ -s "$out/$1" ] && median <"$out/$1"; }
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
pl=$(med perftest_write_lat.txt) pw=$(med perftest_write_bw.txt)
{
	echo "# Between two Soft-RoCE VMs (rxe0 <-> rxe0, $BENCH_LINK link), $rounds rounds"
	echo "$(cat "$out/load.txt" | tr '\n' ';')"
	echo
	echo "| what | per round | median | spread (min-max) |"
	echo "|---|---|---|---|"
	row "ib_write_lat 8 B (us)" perftest_write_lat.txt us
	row "rdmach_latency 8 B (us)" rdmach_lat.txt us
	row "MPI ch3:rdma 8 B (us)" mpi_lat.txt us
	row "MPI ch4:ucx (Debian) 8 B (us)" ucx_lat.txt us
	row "ib_write_bw 1 MiB (MB/s)" perftest_write_bw.txt MB/s
	row "ib_read_bw 1 MiB (MB/s)" perftest_read_bw.txt MB/s
	row "rdmach_bw 1 MiB, superpipeline (MB/s)" rdmach_bw_sp.txt MB/s
	row "rdmach_bw 1 MiB, ring pipeline (MB/s)" rdmach_bw_pl.txt MB/s
	[ "${BENCH_ZCOPY:-0}" = 1 ] && row "rdmach_bw 1 MiB, zero-copy (MB/s)" rdmach_bw.txt MB/s
	row "MPI ch3:rdma 1 MiB, superpipeline (MB/s)" mpi_bw.txt MB/s
	[ "${BENCH_ZCOPY:-0}" = 1 ] && row "MPI ch3:rdma 1 MiB, auto: zero-copy (MB/s)" mpi_bw_auto.txt MB/s
	row "MPI ch4:ucx (Debian) 1 MiB (MB/s)" ucx_bw.txt MB/s
	echo
	echo "ratios of the medians:"
	echo "  rdmach 8 B latency / ib_write_lat = $(ratio "$(med rdmach_lat.txt)" "$pl") (target <= 1.10)"
	echo "  MPI ch3:rdma 8 B latency / ib_write_lat = $(ratio "$(med mpi_lat.txt)" "$pl") (target <= 1.15)"
	echo "  MPI ch4:ucx 8 B latency / ib_write_lat = $(ratio "$(med ucx_lat.txt)" "$pl")"
	echo "  rdmach 1 MiB bandwidth (superpipeline) / ib_write_bw = $(ratio "$(med rdmach_bw_sp.txt)" "$pw") (target >= 0.95)"
	echo "  rdmach 1 MiB bandwidth (ring pipeline) / ib_write_bw = $(ratio "$(med rdmach_bw_pl.txt)" "$pw")"
	echo "  MPI ch3:rdma 1 MiB bandwidth / ib_write_bw = $(ratio "$(med mpi_bw.txt)" "$pw")"
	if [ "${BENCH_ZCOPY:-0}" = 1 ]; then
		pr=$(med perftest_read_bw.txt)
		echo "  rdmach 1 MiB bandwidth (zero-copy) / ib_write_bw = $(ratio "$(med rdmach_bw.txt)" "$pw"), / ib_read_bw = $(ratio "$(med rdmach_bw.txt)" "$pr")"
		echo "  MPI ch3:rdma 1 MiB bandwidth (auto) / ib_write_bw = $(ratio "$(med mpi_bw_auto.txt)" "$pw"), / ib_read_bw = $(ratio "$(med mpi_bw_auto.txt)" "$pr")"
	fi
	echo "  MPI ch4:ucx 1 MiB bandwidth / ib_write_bw = $(ratio "$(med ucx_bw.txt)" "$pw")"
	if [ ! -s "$out/ucx_lat.txt" ]; then
		echo
		echo "Debian's MPICH (ch4:ucx) did not run across the VMs:"
		grep -hiE 'error|fail|unreach|transport' "$out"/ucx_lat.txt.log "$out/ucx-info.log" 2>/dev/null | head -n 8
	fi
} | tee "$out/summary.md"
