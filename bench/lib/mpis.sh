# mpis.sh - sourced by the MPI benchmark scripts (run-mpi.sh,
# run-msgcost.sh) from the repository's root: the MPICH builds they
# compare, and their benchmark programs built with each.
#   prefix[NAME]  install prefix of rdma / nemesis / sock / ucx
#                 (PREFIX_RDMA, PREFIX_NEMESIS, PREFIX_SOCK, PREFIX_UCX)
#   label[NAME]   its device: ch3:rdma, ch3:nemesis, ch3:sock, ch4:ucx
#   mpis_build TAG OUT "NAMES" PROG...
#                 for each MPI of NAMES with an mpicc and an mpiexec, build
#                 bench/src/PROG.c (or DIR/PROG.c when PROG names a
#                 directory) into OUT/NAME/PROG; names=( those built );
#                 exits when a program does not build or no MPI is there
. bench/lib/mpicmd.sh
declare -A prefix=([rdma]=${PREFIX_RDMA:-$(pwd -P)/build/mpich-install}
		   [nemesis]=${PREFIX_NEMESIS:-$(pwd -P)/build/mpich-nemesis-install}
		   [sock]=${PREFIX_SOCK:-$(pwd -P)/build/mpich-sock-install}
		   [ucx]=${PREFIX_UCX:-/usr})
declare -A label=([rdma]=ch3:rdma [nemesis]=ch3:nemesis [sock]=ch3:sock
		  [ucx]=ch4:ucx)

mpis_build() {
	local tag=$1 dir=$2 want=$3 n p b src
	shift 3
	names=()
	for n in $want; do
		p=${prefix[$n]:-}
		if [ -n "$p" ] && [ -x "$(mpi_cmd "$p" mpicc)" ] && [ -x "$(mpi_cmd "$p" mpiexec)" ]; then
			mkdir -p "$dir/$n"
			for b in "$@"; do
				case $b in */*) src=$b.c b=${b##*/} ;; *) src=bench/src/$b.c ;; esac
				"$(mpi_cmd "$p" mpicc)" -O2 -Ibench/src -o "$dir/$n/$b" "$src" -lm ||
					{ echo "$tag: $n: $b does not build" >&2; exit 1; }
			done
			names+=("$n")
		else
			echo "$tag: no $n MPICH in ${p:-?}: left out"
		fi
	done
	[ ${#names[@]} -gt 0 ] || { echo "$tag: no MPI to measure" >&2; exit 1; }
}
