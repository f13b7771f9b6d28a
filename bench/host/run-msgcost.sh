#!/bin/bash
# run-msgcost.sh - instructions per small MPI message, sender and receiver
# apart, for this MPICH (ch3:rdma), ch3:nemesis from the same tree and
# Debian's MPICH (ch4:ucx): bench/src/mpi_msgcost.c under callgrind, counting
# only inside its measured windows (MPI_Isend x W + MPI_Waitall on rank 0;
# MPI_Irecv x W + MPI_Waitall on rank 1, every message already arrived;
# then MPI_Send x W and MPI_Recv x W),
# divided by the messages.  No waiting is counted, so the figures do not
# move with the host's speed as timings do; they are the work of the MPI
# library, its device and its transport per message.
#
# Environment: MSGCOST_SIZES ("1 8 16 32 64 128 256 1024"), MSGCOST_MPIS
#   ("rdma nemesis ucx"), MSGCOST_CALLS ("nonblocking blocking": also
#   MPI_Send / MPI_Recv), MSGCOST_WINDOW (16), MSGCOST_ROUNDS (20),
#   MSGCOST_RESULTS (results/msgcost-DATE), PREFIX_RDMA / PREFIX_NEMESIS /
#   PREFIX_UCX (as bench/host/run-mpi.sh).  Needs valgrind.  About a minute for the three.
set -u
cd "$(dirname "$0")/../.." || exit 2
sizes=(${MSGCOST_SIZES:-1 8 16 32 64 128 256 1024})
window=${MSGCOST_WINDOW:-16}
calls=(${MSGCOST_CALLS:-nonblocking blocking})
rounds=${MSGCOST_ROUNDS:-20}
out=${MSGCOST_RESULTS:-results/msgcost-$(date +%Y%m%d-%H%M%S)}
command -v valgrind >/dev/null || { echo "run-msgcost: needs valgrind" >&2; exit 2; }

mkdir -p "$out"
. bench/lib/mpis.sh
mpis_build run-msgcost "$out" "${MSGCOST_MPIS:-rdma nemesis ucx}" mpi_msgcost

# counted instructions of one rank's callgrind file (its "totals:" line)
totals() { awk '/^totals:/ { print $2; f = 1 } END { if (!f) print "" }' "$1"; }

# calls: "nonblocking" (MPI_Isend / MPI_Irecv + MPI_Waitall, the window
# bandwidth benchmarks' path) or "blocking" (MPI_Send / MPI_Recv, the
# latency benchmarks' path)
declare -A cost
for c in "${calls[@]}"; do
	case $c in
	nonblocking) flag= ;;
	blocking) flag=-b ;;
	*) echo "run-msgcost: MSGCOST_CALLS: unknown '$c' (nonblocking, blocking)" >&2; exit 2 ;;
	esac
	for n in "${names[@]}"; do
		for s in "${sizes[@]}"; do
			f="$out/$n/cg-$c-$s"
			rm -f "$f".*
			if ! timeout 600 "$(mpi_cmd "${prefix[$n]}" mpiexec)" -n 2 \
				valgrind -q --tool=callgrind --collect-atstart=no \
				--toggle-collect='measured_*' \
				--callgrind-out-file="$f.%q{PMI_RANK}" \
				"$out/$n/mpi_msgcost" -m "$s:$s" -w "$window" -i "$rounds" $flag \
				>"$out/$n/run-$c-$s.txt" 2>&1; then
				echo "run-msgcost: $n $c size $s failed (see $out/$n/run-$c-$s.txt)" >&2
				continue
			fi
			msgs=$(awk '!/^#/ && NF == 2 { print $2 }' "$out/$n/run-$c-$s.txt")
			for r in 0 1; do
				t=$(totals "$f.$r")
				[ -n "$t" ] && [ -n "$msgs" ] &&
					cost[$c,$n,$s,$r]=$(awk -v t="$t" -v m="$msgs" 'BEGIN { printf "%.0f", t / m }')
			done
		done
	done
done

{
	for c in "${calls[@]}"; do
		echo "## instructions per message, $c calls (callgrind; window of $window, $rounds windows counted per size;"
		if [ "$c" = blocking ]; then
			echo "## send = MPI_Send, recv = MPI_Recv, message already there)"
		else
			echo "## send = MPI_Isend + its share of MPI_Waitall, recv = MPI_Irecv + its share of MPI_Waitall, message already there)"
		fi
		printf '%-8s' size
		for n in "${names[@]}"; do printf '%18s%18s' "${label[$n]}-send" "${label[$n]}-recv"; done
		echo
		for s in "${sizes[@]}"; do
			printf '%-8s' "$s"
			for n in "${names[@]}"; do
				printf '%18s%18s' "${cost[$c,$n,$s,0]:--}" "${cost[$c,$n,$s,1]:--}"
			done
			echo
		done
		echo
	done
} | tee "$out/summary.txt"
