#!/bin/bash
# run-mpi-mem.sh - the memory an MPI job takes on one host against its
# number of ranks and what they talk to: ch3:rdma against ch3:nemesis of the
# same MPICH and Debian's MPICH (ch4:ucx).  Each job runs
# channel/test/mpi_neighbors with MPI_NEIGHBORS_HOLD_MS: after MPI_Init,
# after messages of 8 B .. 1 MiB with the two ring neighbours (every byte
# checked), after an MPI_Alltoall of 4 KiB per pair and after 16 of 16 KiB
# (pairs256k: every pair has sent 256 KiB), every rank pauses
# and reports its proportional set size (PSS: shared pages divided among the
# processes that map them); their sum is the node's memory in that state.
# The application's own buffers (4 x 1 MiB per rank, from the neighbour
# phase on) are in it for every MPI alike.  The MPIs take turns in every
# round (a change of the host hits all alike); per cell the median over the
# rounds.
#
#   bench/host/run-mpi-mem.sh
#
# MPIs: as run-mpi.sh (bench/lib/mpis.sh: PREFIX_RDMA, default
# build/mpich-install; PREFIX_NEMESIS, default build/mpich-nemesis-install;
# PREFIX_UCX, default /usr, Debian's); those missing are left out, and
# said so.
# Environment: BENCH_RANKS ("16 64"), BENCH_REPS (3), BENCH_HOLD_MS (2000),
#   BENCH_RESULTS (results/mpi-mem-DATE); PRELOAD_RDMA: a librdmach.so
#   the ch3:rdma MPICH runs with (LD_PRELOAD: this tree's library in an
#   MPICH built from an older one; its rdmach_* calls go to the preload).
# Prints the table (MiB, PSS summed over the ranks; ratio: ch3:rdma / the
# smallest peer) and writes it to $out/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root=$(pwd -P)
reps=${BENCH_REPS:-3}
ranks=(${BENCH_RANKS:-16 64})
out=${BENCH_RESULTS:-results/mpi-mem-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
. bench/lib/mpis.sh
. bench/lib/stats.sh

mpis_build run-mpi-mem "$out" "rdma nemesis ucx" channel/test/mpi_neighbors

echo "# uptime: $(uptime)" | tee "$out/summary.txt"
for r in $(seq 1 "$reps"); do
	for np in "${ranks[@]}"; do
		for n in "${names[@]}"; do
			log=$out/$n/np$np-$r.log
			pre=()
			[ "$n" != rdma ] || [ -z "${PRELOAD_RDMA:-}" ] ||
				pre=(env "LD_PRELOAD=$PRELOAD_RDMA")
			MPI_NEIGHBORS_HOLD_MS=${BENCH_HOLD_MS:-2000} timeout 900 "${pre[@]}" \
				"$(mpi_cmd "${prefix[$n]}" mpiexec)" -n "$np" \
				"$out/$n/mpi_neighbors" pairs256k >"$log" 2>&1
			st=$?
			ok=$(grep -c '^rank [0-9]*: ok' "$log")
			[ "$st" = 0 ] && [ "$ok" = "$np" ] ||
				echo "run-mpi-mem: $n np $np: status $st, $ok ranks ok ($log)"
			# the slowest rank's MPI_Init
			awk '$3 == "init_ms" { if ($4 > m) m = $4; k++ }
				END { print (k == np ? m : "NA") }' np="$np" "$log" \
				>>"$out/$n/np$np-init.ms"
			for ph in init neighbours alltoall pairs256k; do
				# every rank's figure, or none
				awk -v ph="$ph" -v np="$np" '
					$3 == "at" && $4 == ph ":" { s += $6; k++ }
					END { print (k == np ? s : "NA") }' "$log" \
					>>"$out/$n/np$np-$ph.kb"
			done
		done
	done
done

{
	printf '# PSS summed over the ranks, MiB (median of %d); ratio: ch3:rdma / smallest peer\n' "$reps"
	printf '%-6s %-11s' ranks after
	for n in "${names[@]}"; do printf ' %18s' "${label[$n]}"; done
	printf ' %7s\n' ratio
	for np in "${ranks[@]}"; do
		for ph in init neighbours alltoall pairs256k; do
			printf '%-6s %-11s' "$np" "$ph"
			best= mine=
			for n in "${names[@]}"; do
				m=$(grep -v NA "$out/$n/np$np-$ph.kb" 2>/dev/null | median)
				[ -n "$m" ] || { printf ' %18s' NA; continue; }
				printf ' %18s' "$(echo "scale=1; $m / 1024" | bc)"
				if [ "$n" = rdma ]; then mine=$m
				elif [ -z "$best" ] || awk "BEGIN { exit !($m < $best) }"; then best=$m; fi
			done
			if [ -n "$mine" ] && [ -n "$best" ]; then
				printf ' %7s\n' "$(echo "scale=2; $mine / $best" | bc)"
			else
				printf ' %7s\n' -
			fi
		done
	done
	printf '\n# MPI_Init, the slowest rank, ms (median of %d)\n' "$reps"
	for np in "${ranks[@]}"; do
		printf '%-6s %-11s' "$np" MPI_Init
		for n in "${names[@]}"; do
			m=$(grep -v NA "$out/$n/np$np-init.ms" 2>/dev/null | median)
			printf ' %18s' "${m:-NA}"
		done
		printf '\n'
	done
} | tee -a "$out/summary.txt"
