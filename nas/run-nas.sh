#!/bin/bash
# run-nas.sh - build the NAS Parallel Benchmarks 3.4-MPI against one or more
# MPI installations, run them, check that every run verified, and put the
# times side by side.
#
# usage: nas/run-nas.sh [options]
#   -s, --src PATH        NPB 3.4-MPI source: a tarball or an unpacked tree
#                         (never modified: built in a copy under build/nas/)
#                         [NPB_SRC; default ../shared/npb/NPB3.4-MPI.tar.gz]
#   -c, --class LIST      classes, S W A B C             [CLASS; default S]
#   -n, --np LIST         process counts                 [NP; default 4]
#   -b, --bench LIST      is ep cg mg ft lu sp bt dt     [BENCH; default all]
#   -m, --mpi LIST        MPIs to compare, the first is "ours"      [MPI]
#                         item: NAME | NAME=PREFIX[,VAR=VALUE...] | PREFIX
#                         NAME ch3:rdma ch3:nemesis ch3:sock ch4:ucx are known
#                         (PREFIX: $MPICH_INSTALLS/mpich{,-nemesis,-sock}-install,
#                         /usr); PREFIX may be a known NAME; VAR=VALUE pairs
#                         are set for that MPI's runs only (a variant)
#                         default: ch3:rdma and whichever of the others exist
#   -r, --rounds N        interleaved rounds; figures are medians  [ROUNDS; 1]
#   -t, --time-limit SEC  per run       [TIME_LIMIT; S 120 W 300 A 900 B 3600]
#   -o, --out DIR         result folder       [OUT; results/nas-DATE]
#       --stats           RDMACH_STATS=1: rdmach's counters summed per run
#       --vm              run in the Soft-RoCE VM over verbs (the first MPI and
#                         its variants only, RDMACH_TRANSPORT=ib; binaries
#                         built on the host)
#       --cluster N       run across N Soft-RoCE VMs (2..4, the first MPI and
#                         its variants only:
#                         test/vm/vm-cluster.sh; ranks round-robin over the
#                         VMs, shm between ranks of one VM, ib across)
#       --build-only      build, do not run;   --no-build: run what is built
#       --wrap CMD        put CMD between mpiexec and each benchmark (tests)
#   -h, --help
# Environment: MPICH_INSTALLS (build), NAS_BUILD (build/nas), NAS_CFLAGS,
# NAS_FFLAGS (-O3), RDMACH_STATS=1 as --stats.
# Writes OUT/table.txt, table.csv (medians per benchmark/class/np/MPI and
# ours' time over each MPI's), table.md (the side-by-side table in Markdown),
# runs.csv (every run), ratios.png, and the raw logs in OUT/logs/.  Exit status 0 only if every run verified.
set -u
set -o pipefail

here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$here/.." && pwd -P)
. "$repo/bench/lib/mpicmd.sh"	# mpi_cmd: Debian's MPICH by its .mpich names
prog=run-nas

usage() { sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//p}' "$0"; exit "${1:-2}"; }
die() { echo "$prog: $*" >&2; exit 2; }
note() { echo "$prog: $*" >&2; }
abspath() { realpath -m -- "$1"; }

ALL_BENCH="is ep cg mg ft lu sp bt dt"
src=${NPB_SRC:-}
classes=${CLASS:-S}
nps=${NP:-4}
benches=${BENCH:-$ALL_BENCH}
mpis=${MPI:-}
rounds=${ROUNDS:-1}
limit=${TIME_LIMIT:-}
out=${OUT:-}
stats=${RDMACH_STATS:-0}
vm=0 in_vm=0 cluster= do_build=1 do_run=1
wrap=${NAS_WRAP:-}
installs=${MPICH_INSTALLS:-$repo/build}
nas_build=${NAS_BUILD:-$repo/build/nas}
cmdline="nas/run-nas.sh$(printf ' %q' "$@")"

while [ $# -gt 0 ]; do
	case $1 in
	-s|--src) src=${2:?}; shift ;;
	-c|--class) classes=${2:?}; shift ;;
	-n|--np) nps=${2:?}; shift ;;
	-b|--bench) benches=${2:?}; shift ;;
	-m|--mpi) mpis=${2:?}; shift ;;
	-r|--rounds) rounds=${2:?}; shift ;;
	-t|--time-limit) limit=${2:?}; shift ;;
	-o|--out) out=${2:?}; shift ;;
	--stats) stats=1 ;;
	--vm) vm=1 ;;
	--cluster) cluster=${2:?}; shift ;;
	--in-vm) in_vm=1; do_build=0 ;;		# internal: the half --vm / --cluster run in the VM(s)
	--build-only) do_run=0 ;;
	--no-build) do_build=0 ;;
	--wrap) wrap=${2?}; shift ;;
	-h|--help) usage 0 ;;
	*) echo "$prog: unknown option '$1'" >&2; usage ;;
	esac
	shift
done

# ---- check the options --------------------------------------------------
classes=$(echo "$classes" | tr 'a-z,' 'A-Z ')
benches=$(echo "$benches" | tr 'A-Z,' 'a-z ')
nps=$(echo "$nps" | tr ',' ' ')
[ "$benches" = all ] && benches=$ALL_BENCH
for c in $classes; do
	case $c in S|W|A|B|C) ;; *) die "class '$c': one of S W A B C" ;; esac
done
for b in $benches; do
	case " $ALL_BENCH " in *" $b "*) ;; *) die "benchmark '$b': one of $ALL_BENCH" ;; esac
done
for n in $nps; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || die "process count '$n' is not a positive integer"
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "rounds '$rounds' is not a positive integer"
[ -z "$limit" ] || [[ $limit =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "time limit '$limit' is not a number of seconds"
[ -n "$classes" ] && [ -n "$benches" ] && [ -n "$nps" ] || die "empty class, benchmark or process count list"
[ "$stats" = 1 ] || stats=0
[ -z "$cluster" ] || [[ $cluster =~ ^[2-4]$ ]] || die "--cluster $cluster: 2 to 4 VMs"
[ -z "$cluster" ] || [ "$vm" = 0 ] || die "--vm and --cluster: one or the other"

limit_for() {	# class -> seconds
	if [ -n "$limit" ]; then echo "$limit"; return; fi
	local s
	case $1 in S) s=120 ;; W) s=300 ;; A) s=900 ;; B) s=3600 ;; C) s=7200 ;; esac
	[ "$in_vm" = 1 ] && s=$((s * 10))	# the VM's CPU is emulated
	echo "$s"
}

# ---- MPIs ----------------------------------------------------------------
known_prefix() {	# NAME -> default prefix, or nothing
	case $1 in
	ch3:rdma|rdma) echo "$installs/mpich-install" ;;
	ch3:nemesis|nemesis) echo "$installs/mpich-nemesis-install" ;;
	ch3:sock|sock) echo "$installs/mpich-sock-install" ;;
	ch4:ucx|ucx) echo /usr ;;
	esac
}
canon_name() {
	case $1 in rdma) echo ch3:rdma ;; nemesis) echo ch3:nemesis ;;
	sock) echo ch3:sock ;; ucx) echo ch4:ucx ;; *) echo "$1" ;; esac
}
usable() { [ -x "$(mpi_cmd "$1" mpicc)" ] && [ -x "$(mpi_cmd "$1" mpiexec)" ]; }

mpi_names=()
declare -A mpi_prefix=() mpi_env=()
add_mpi() {	# item
	local item=$1 name val envs= p
	if [[ $item == *=* ]]; then
		name=${item%%=*}; val=${item#*=}
		if [[ $val == *,* ]]; then envs=${val#*,}; val=${val%%,*}; fi
		p=$(known_prefix "$val"); [ -n "$p" ] || p=$val
	elif [ -n "$(known_prefix "$item")" ]; then
		name=$(canon_name "$item"); p=$(known_prefix "$item")
	else
		p=$item
		name=$("$(mpi_cmd "$p" mpichversion)" 2>/dev/null | sed -n 's/^MPICH Device:[[:space:]]*//p')
		[ -n "$name" ] || name=$(basename "$p")
	fi
	[ -n "$name" ] || die "MPI '$item': empty name"
	[ -z "${mpi_prefix[$name]:-}" ] || die "MPI '$name' given twice"
	p=$(abspath "$p")
	usable "$p" || die "MPI $name: no $p/bin/mpicc and mpiexec (build it, or give NAME=PREFIX)"
	local e
	for e in ${envs//,/ }; do
		[[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "MPI $name: '$e' is not VAR=VALUE"
	done
	mpi_names+=("$name"); mpi_prefix[$name]=$p; mpi_env[$name]=${envs//,/ }
}
if [ -n "$mpis" ]; then
	for m in $mpis; do add_mpi "$m"; done
else
	usable "$installs/mpich-install" ||
		die "no ch3:rdma MPICH in $installs/mpich-install: run 'make mpich', or give -m NAME=PREFIX"
	add_mpi ch3:rdma
	for m in ch3:nemesis ch3:sock ch4:ucx; do
		if usable "$(known_prefix $m)"; then add_mpi "$m"
		else note "no $m in $(known_prefix $m): left out"; fi
	done
fi
ref=${mpi_names[0]}
if [ "$vm" = 1 ] || [ -n "$cluster" ] || [ "$in_vm" = 1 ]; then
	# in the VMs: the first MPI and its variants (its prefix, other settings)
	keep=()
	for name in "${mpi_names[@]}"; do
		[ "${mpi_prefix[$name]}" = "${mpi_prefix[$ref]}" ] && keep+=("$name")
	done
	mpi_names=("${keep[@]}")
fi

slug() { echo "$1" | tr -c 'A-Za-z0-9.+_-' '-' | sed 's/-*$//'; }
# one NPB copy per MPI prefix (variants of an MPI share its binaries)
build_dir() { echo "$nas_build/$(slug "$(basename "$1")")-$(echo "$1" | md5sum | cut -c1-8)"; }

# ---- process counts NPB accepts ------------------------------------------
pow2() { local n=$1; [ $((n & (n - 1))) -eq 0 ]; }
square() { local r; r=$(awk -v n="$1" 'BEGIN {printf "%d", sqrt(n) + 0.5}'); [ $((r * r)) -eq "$1" ]; }
lu_grid() {	# LU/proc_grid.f isqrt2: xdim*ydim = n with ydim <= xdim <= 2*ydim
	local n=$1 x=1 sq=0 y
	while [ $sq -le "$n" ]; do sq=$((x * x)); [ $sq -eq "$n" ] && return 0; x=$((x + 1)); done
	x=$((x - 1)); y=$((n / x))
	while [ $((x * y)) -ne "$n" ] && [ $((2 * y)) -ge $x ]; do x=$((x + 1)); y=$((n / x)); done
	[ $((x * y)) -eq "$n" ] && [ $((2 * y)) -ge $x ]
}
dt_nodes() { case $1 in S) echo 5 ;; W) echo 11 ;; A) echo 21 ;; B) echo 43 ;; *) echo 0 ;; esac; }
np_skip() {	# bench class np -> reason on stdout when NPB cannot run it
	local b=$1 c=$2 n=$3
	case $b in
	is|cg|mg|ft) pow2 "$n" || echo "$b needs a power-of-two process count" ;;
	bt|sp) square "$n" || echo "$b needs a square process count (1 4 9 16 ...)" ;;
	lu) lu_grid "$n" || echo "lu cannot lay $n processes out as a grid" ;;
	dt) if [ "$(dt_nodes "$c")" = 0 ]; then echo "dt has no verification values for class $c"
	    elif [ "$n" -lt "$(dt_nodes "$c")" ]; then echo "dt class $c (graph BH) needs at least $(dt_nodes "$c") processes"; fi ;;
	esac
}
run_args() { [ "$1" = dt ] && echo BH; }
uc() { echo "$1" | tr a-z A-Z; }

# ---- NPB source and builds ------------------------------------------------
find_npb() {	# dir -> the NPB3.4-MPI directory inside it
	local d
	for d in "$1" "$1"/* "$1"/*/*; do
		[ -f "$d/sys/setparams.c" ] && [ -f "$d/config/make.def.template" ] &&
			[ -d "$d/IS" ] && { echo "$d"; return 0; }
	done
	return 1
}
src_id() {	# identity of the source: changes when it does
	if [ -d "$src" ]; then
		(cd "$src" && find . -type f ! -name '*.o' ! -name '*.x' ! -name '*.mod' \
			-printf '%P %s %T@\n' | sort | md5sum | cut -c1-16)
	else
		md5sum <"$src" | cut -c1-16
	fi
}
make_def() {	# prefix -> config/make.def
	local p=$1 ff=${NAS_FFLAGS:--O3} v
	v=$("$(mpi_cmd "$p" mpif90)" -dumpversion 2>/dev/null | cut -d. -f1)
	# gfortran >= 10 rejects NPB's calls that pass differing types to MPI,
	# and randi8.f's X'...' constants
	[[ ${v:-0} =~ ^[0-9]+$ ]] && [ "${v:-0}" -ge 10 ] && ff="$ff -fallow-argument-mismatch -fallow-invalid-boz"
	cat <<EOF
# written by rdmach nas/run-nas.sh for $p
MPIFC = $(mpi_cmd "$p" mpif90)
FLINK = \$(MPIFC)
FMPI_LIB =
FMPI_INC =
FFLAGS = $ff
FLINKFLAGS = \$(FFLAGS)
MPICC = $(mpi_cmd "$p" mpicc)
CLINK = \$(MPICC)
CMPI_LIB =
CMPI_INC =
CFLAGS = ${NAS_CFLAGS:--O3}
CLINKFLAGS = \$(CFLAGS)
CC = gcc -g
BINDIR = ../bin
CONVERTFLAG = -DFORTRAN_REC_SIZE=1
RAND = randi8
EOF
}
prepare_copy() {	# prefix -> a fresh or current NPB copy in build_dir/npb
	local p=$1 bd want tmp d
	bd=$(build_dir "$p")
	mkdir -p "$bd"
	want="$(src_id) $(make_def "$p" | md5sum | cut -c1-16)"
	if [ "$(cat "$bd/npb/.rdmach-nas-stamp" 2>/dev/null)" = "$want" ]; then return 0; fi
	note "copying NPB from $src into $bd/npb"
	rm -rf "$bd/npb" "$bd/unpack"
	mkdir -p "$bd/unpack"
	if [ -d "$src" ]; then
		d=$(find_npb "$src") || { note "$src holds no NPB 3.4-MPI tree (no sys/setparams.c, config/, IS/)"; return 1; }
		cp -a "$d" "$bd/npb" || return 1
		make -C "$bd/npb" clean >/dev/null 2>&1
		rm -f "$bd/npb"/bin/*.x
	else
		tar -C "$bd/unpack" -xf "$src" || { note "cannot unpack $src"; return 1; }
		d=$(find_npb "$bd/unpack") || { note "$src holds no NPB 3.4-MPI tree"; return 1; }
		mv "$d" "$bd/npb"
	fi
	rm -rf "$bd/unpack" "$bd"/build-*.log
	mkdir -p "$bd/npb/bin"
	make_def "$p" >"$bd/npb/config/make.def"
	echo "$want" >"$bd/npb/.rdmach-nas-stamp"
}
binary() { echo "$(build_dir "$1")/npb/bin/$2.$3.x"; }

build_failed=()
build_all() {
	local p b c bd lg done_prefixes=" " name
	mkdir -p "$nas_build" || die "cannot create $nas_build"
	[ -n "$src" ] || { [ -e "$repo/../shared/npb/NPB3.4-MPI.tar.gz" ] && src=$repo/../shared/npb/NPB3.4-MPI.tar.gz; }
	[ -n "$src" ] || die "no NPB source: give -s PATH (or NPB_SRC=) to NPB3.4-MPI.tar.gz or its tree"
	src=$(abspath "$src")
	[ -e "$src" ] || die "NPB source $src does not exist"
	for name in "${mpi_names[@]}"; do
		p=${mpi_prefix[$name]}
		case $done_prefixes in *" $p "*) continue ;; esac
		done_prefixes+="$p "
		bd=$(build_dir "$p")
		exec 8>"$bd.lock" && flock 8
		if ! prepare_copy "$p"; then
			for b in $benches; do for c in $classes; do
				build_failed+=("$b $c $name")
			done; done
			exec 8>&-; continue
		fi
		for c in $classes; do
			for b in $benches; do
				[ -x "$(binary "$p" "$b" "$c")" ] && continue
				[ "$b" = dt ] && [ "$(dt_nodes "$c")" = 0 ] && continue
				lg=$bd/build-$b.$c.log
				note "building $b class $c with $p/bin/mpicc, mpif90"
				if ! make -C "$bd/npb" "$b" CLASS="$c" >"$lg" 2>&1 ||
				   [ ! -x "$(binary "$p" "$b" "$c")" ]; then
					echo "$prog: FAIL build $(uc "$b") class $c with $name ($p): see $lg" >&2
					tail -n 5 "$lg" | sed 's/^/    /' >&2
					build_failed+=("$b $c $name")
				fi
			done
		done
		exec 8>&-
	done
}

if [ "$do_build" = 1 ]; then
	build_all
fi
if [ "$do_run" = 0 ]; then
	[ ${#build_failed[@]} -eq 0 ] && { note "built into $nas_build"; exit 0; }
	exit 1
fi

# ---- --vm / --cluster: the same runner in Soft-RoCE VMs ------------------
if [ "$vm" = 1 ] || [ -n "$cluster" ]; then
	[ ${#build_failed[@]} -eq 0 ] || exit 1
	if [ "$vm" = 1 ]; then
		vmtag=vm suffix=/ib env_vm="RDMACH_TRANSPORT=ib "
		vmcmd=("$repo/test/vm/vm-run.sh")
	else
		vmtag=cluster$cluster suffix=/${cluster}vms env_vm=
		vmcmd=("$repo/test/vm/vm-cluster.sh" -n "$cluster")
	fi
	[ -x "${vmcmd[0]}" ] || die "no ${vmcmd[0]}"
	out=$(abspath "${out:-$repo/results/nas-$vmtag-$(date +%Y%m%d-%H%M%S)}")
	mkdir -p "$out" || die "cannot create $out"
	# the first MPI and its variants, interleaved in the VMs as on the host
	vm_mpis=
	for name in "${mpi_names[@]}"; do
		vm_mpis+="${vm_mpis:+ }${name}${suffix}=${mpi_prefix[$name]}${mpi_env[$name]:+,${mpi_env[$name]// /,}}"
	done
	args=(--in-vm -c "$classes" -n "$nps" -b "$benches" -r "$rounds" -o "$out"
	      -m "$vm_mpis")
	[ -n "$limit" ] && args+=(-t "$limit")
	[ "$stats" = 1 ] && args+=(--stats)
	[ -n "$wrap" ] && args+=(--wrap "$wrap")
	if [ "$vm" = 1 ]; then
		note "running in the Soft-RoCE VM (RDMACH_TRANSPORT=ib), results in $out"
		dir=$out	# the VM mounts the host's / read-only, this read-write
	else
		note "running across $cluster Soft-RoCE VMs, results in $out"
		dir=$repo	# shared read-write by every VM of the cluster
		case $out/ in "$repo"/*) ;; *) die "--cluster: the result folder must be inside $repo" ;; esac
	fi
	RDMACH_VM_TIMEOUT=${RDMACH_VM_TIMEOUT:-3600} "${vmcmd[@]}" "$dir" \
		"${env_vm}NAS_BUILD=$(printf %q "$nas_build") $(printf %q "$here/run-nas.sh")$(printf ' %q' "${args[@]}")"
	exit $?
fi
# in a cluster VM: Hydra places the ranks over the VMs, and a lost VM ends
# the job (test/vm/hydra-ssh); in the single VM, every byte over verbs
hostargs=()
if [ "$in_vm" = 1 ] && [ -n "${CLUSTER_HOSTFILE:-}" ]; then
	hostargs=(-f "$CLUSTER_HOSTFILE")
	export HYDRA_LAUNCHER_EXEC=${HYDRA_LAUNCHER_EXEC:-$repo/test/vm/hydra-ssh}
elif [ "$in_vm" = 1 ]; then
	export RDMACH_TRANSPORT=${RDMACH_TRANSPORT:-ib}
fi

# ---- runs ------------------------------------------------------------------
out=$(abspath "${out:-$repo/results/nas-$(date +%Y%m%d-%H%M%S)}")
logs=$out/logs
mkdir -p "$logs" || die "cannot create $logs"
# an earlier run's tables in this folder would be taken for this one's
rm -f "$out"/table.txt "$out"/table.csv "$out"/table.md "$out"/runs.csv "$out"/ratios.png
records=$logs/runs.partial.tsv
: >"$records"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)

cur_pid= cur_tag=
reap() {	# kill what is left of a run: every process carrying its tag
	local tag=$1 pids
	pids=$(grep -lzxF "NAS_RUN_TAG=$tag" /proc/[0-9]*/environ 2>/dev/null |
		sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | grep -vx "$$")
	[ -n "$pids" ] || return 1
	kill -KILL $pids 2>/dev/null
	echo "$pids" | wc -l
}
interrupted() {
	trap '' INT TERM	# a signal sent to the process group arrives twice
	if [ -n "$cur_pid" ]; then
		kill -TERM "$cur_pid" 2>/dev/null
		sleep 1
		reap "$cur_tag" >/dev/null
	fi
	rm -f "$out"/*.tmp
	echo "$prog: interrupted: no table written (raw logs in $logs)" >&2
	exit 130
}
trap interrupted INT TERM

failures=() skips=()
# counters: RDMACH_STATS=1 makes every rank print "# rdmach counters, rank N",
# a row per peer and a "total" row, and "# rcache: H hits, M misses, ..."
counters() {	# log -> ranks bytes pkts stalls zcopy piped hits misses
	awk '
	$1 == "total" && NF == 10 && $2 ~ /^[0-9]+$/ {
		n++; bytes += $2; pkts += $4; stalls += $6; zc += $9; pp += $10 }
	/^# rcache: / { hits += $3; miss += $5 }
	END { if (n) printf "%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\n", n, bytes, pkts, stalls, zc, pp, hits, miss
	      else printf "\t\t\t\t\t\t\t\n" }' "$1"
}
field() {	# log label -> the value of NPB's " label = value" line
	sed -n "s|^ *$2 *= *\\([^ ]*\\) *\$|\\1|p" "$1" | tail -n 1
}

seq_no=0
run_one() {	# round bench class np mpi
	local r=$1 b=$2 c=$3 n=$4 m=$5 p bin log rc status t0 t1 secs mops wall lim tag nleft
	p=${mpi_prefix[$m]}
	bin=$(binary "$p" "$b" "$c")
	log=$logs/$b.$c.np$n.$(slug "$m").r$r.log
	lim=$(limit_for "$c")
	seq_no=$((seq_no + 1))
	tag=$$.$seq_no.$RANDOM
	local what="$(uc "$b") class $c np $n $m round $r"
	if [ ! -x "$bin" ]; then
		status=NOT-BUILT
		echo "$prog: FAIL $what: not built ($bin missing)" >&2
		failures+=("$what: not built (see $(build_dir "$p")/build-$b.$c.log)")
		printf '%s\t%s\t%s\t%s\t%s\t%s\t\t\t\t\t\t\t\t\t\t\t\t%s\n' "$r" "$b" "$c" "$n" "$m" "$status" "${log#$out/}" >>"$records"
		return
	fi
	{
		echo "# run-nas: $what: $(mpi_cmd "$p" mpiexec) ${hostargs[*]:+${hostargs[*]} }-n $n ${wrap:+$wrap }$bin $(run_args "$b")"
		echo "# env: ${mpi_env[$m]:-(none)}${RDMACH_TRANSPORT:+ RDMACH_TRANSPORT=$RDMACH_TRANSPORT} RDMACH_STATS=$stats; time limit $lim s"
	} >"$log"
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	timeout -k 5 "$lim" env NAS_RUN_TAG="$tag" RDMACH_STATS="$stats" ${mpi_env[$m]} \
		"$(mpi_cmd "$p" mpiexec)" "${hostargs[@]}" -n "$n" $wrap "$bin" $(run_args "$b") >>"$log" 2>&1 </dev/null &
	cur_pid=$! cur_tag=$tag
	wait "$cur_pid"; rc=$?
	cur_pid=
	t1=$(date +%s.%N)
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
	if nleft=$(reap "$tag"); then
		echo "# run-nas: killed $nleft process(es) left over by this run" >>"$log"
	fi
	secs=$(field "$log" "Time in seconds")
	mops=$(field "$log" "Mop/s total")
	local verif class_rep np_rep
	verif=$(field "$log" Verification)
	class_rep=$(field "$log" Class)
	np_rep=$(field "$log" "Total processes")
	if [ $rc -eq 124 ] || { [ $rc -eq 137 ] && [ "$(awk -v w="$wall" -v l="$lim" 'BEGIN {print (w >= l)}')" = 1 ]; }; then
		status=TIMEOUT; local why="timed out after $lim s"
	elif [ $rc -ne 0 ]; then
		status=EXIT-$rc; why="mpiexec exited with status $rc"
		[ $rc -gt 128 ] && why="$why (signal $((rc - 128)))"
		local sig
		sig=$(grep -o -m1 -E 'KILLED BY SIGNAL: [0-9]+|EXIT STRING: [A-Za-z ]+ \(signal [0-9]+\)' "$log")
		[ -n "$sig" ] && why="$why; mpiexec: ${sig}"
	elif [ -z "$verif" ]; then
		status=NO-VERIFICATION; why="no 'Verification =' line in NPB's report"
	elif [ "$verif" != SUCCESSFUL ]; then
		status=UNSUCCESSFUL; why="NPB reports Verification = $verif"
	elif [ "$class_rep" != "$c" ] || [ "$np_rep" != "$n" ]; then
		status=WRONG-REPORT; why="the report is for class $class_rep on $np_rep processes"
	else
		status=OK
	fi
	local cnt
	cnt=$(counters "$log")
	if [ "$status" = OK ]; then
		printf '  ok   %-44s %10s s %12s Mop/s\n' "$what" "$secs" "$mops"
	else
		echo "$prog: FAIL $what: $why (log: $log)" >&2
		failures+=("$what: $why (log: $log)")
		secs= mops=
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$b" "$c" "$n" "$m" "$status" \
		"$secs" "$mops" "$wall" "$cnt" "${log#$out/}" >>"$records"
}

echo "$prog: ${mpi_names[*]}; classes $classes; np $nps; $benches; $rounds round(s); results in $out"
nm=${#mpi_names[@]}
for ((r = 1; r <= rounds; r++)); do
	for c in $classes; do
		for n in $nps; do
			for b in $benches; do
				why=$(np_skip "$b" "$c" "$n")
				if [ -n "$why" ]; then
					[ $r = 1 ] && { note "skip $(uc "$b") class $c np $n: $why"; skips+=("$(uc "$b") class $c np $n: $why"); }
					continue
				fi
				# the MPIs' order turns each round, so none always runs first
				for ((i = 0; i < nm; i++)); do
					run_one "$r" "$b" "$c" "$n" "${mpi_names[$(((i + r - 1) % nm))]}"
				done
			done
		done
	done
done
[ -s "$records" ] || { note "nothing ran (every benchmark/class/np combination was skipped)"; exit 1; }

# ---- tables ------------------------------------------------------------------
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
t_end=$(date +%s)
knobs=$(env | grep -E '^RDMACH_' | sort | tr '\n' ' ')
nruns=$(wc -l <"$records")
{
	if [ ${#failures[@]} -gt 0 ]; then
		echo "# RESULT: ${#failures[@]} of $nruns runs FAILED (listed at the end; not in the figures)"
	else
		echo "# result: all $nruns runs verified"
	fi
	echo "# NAS Parallel Benchmarks 3.4-MPI, $(date -d @"$t_start" '+%Y-%m-%d %H:%M'), $((t_end - t_start)) s"
	echo "# command: $cmdline"
	echo "# host: $(nproc) CPUs, $(uname -r); load average at start $load_start, at end $load_end"
	echo "# NPB source: ${src:-(as built)}; time limit per run: $(for c in $classes; do printf '%s %s s  ' "$c" "$(limit_for "$c")"; done)"
	for m in "${mpi_names[@]}"; do
		echo "# MPI $m: ${mpi_prefix[$m]}${mpi_env[$m]:+ with ${mpi_env[$m]}}"
	done
	[ -n "$knobs" ] && echo "# environment: $knobs"
	echo "# $rounds round(s), interleaved (every MPI once per benchmark per round, order turning);"
	echo "# seconds and Mop/s: NPB's own, median of the verified runs; ratio: $ref's median time over that MPI's (below 1: $ref faster)"
} >"$out/table.txt.tmp"

aggregate() {	# mode -> text or csv, from the records
	awk -F'\t' -v mode="$1" -v ref="$ref" -v mpis="${mpi_names[*]}" \
	    -v benches="$benches" -v classes="$classes" -v nps="$nps" -v stats="$stats" '
	function med(s,    a, n, i, j, t) {	# median of a space-separated list
		n = split(s, a, " "); if (!n) return ""
		for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function lo(s,    a, n, i, v) { n = split(s, a, " "); v = ""; for (i = 1; i <= n; i++) if (v == "" || a[i] + 0 < v) v = a[i] + 0; return v }
	function hi(s,    a, n, i, v) { n = split(s, a, " "); v = ""; for (i = 1; i <= n; i++) if (v == "" || a[i] + 0 > v) v = a[i] + 0; return v }
	function f2(v) { return v == "" ? "-" : sprintf("%.2f", v) }
	function ratio(a, b) { return (a == "" || b == "" || a <= 0 || b <= 0) ? "" : sprintf("%.3f", a / b) }
	function human(v) { if (v == "") return "-"; if (v >= 1e9) return sprintf("%.2fG", v / 1e9); if (v >= 1e6) return sprintf("%.2fM", v / 1e6); if (v >= 1e4) return sprintf("%.1fk", v / 1e3); return v }
	{
		k = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5
		runs[k]++
		if ($6 == "OK") { ok[k]++; secs[k] = secs[k] " " $7; mops[k] = mops[k] " " $8 }
		if ($10 != "") { cnt[k]++; for (i = 11; i <= 17; i++) c[k, i] = c[k, i] " " $i; ranks[k] = ranks[k] " " $10 }
	}
	END {
		nm = split(mpis, M, " "); nb = split(benches, B, " "); nc = split(classes, C, " "); nn = split(nps, N, " ")
		cname[11] = "bytes"; cname[12] = "packets"; cname[13] = "stalls"; cname[14] = "zcopy"; cname[15] = "pipelined"; cname[16] = "rc_hits"; cname[17] = "rc_misses"
		if (mode == "csv")
			print "bench,class,np,mpi,runs,verified,seconds,seconds_min,seconds_max,mops," ref "_over_this,ranks_counted,bytes,packets,stalls,zcopy,pipelined,rcache_hits,rcache_misses"
		if (mode == "text") {
			printf "\n%-5s %-5s %4s  %-16s %8s %10s %12s %10s\n", "bench", "class", "np", "MPI", "verified", "seconds", "Mop/s", ref "/this"
		}
		for (ci = 1; ci <= nc; ci++) for (ni = 1; ni <= nn; ni++) for (bi = 1; bi <= nb; bi++) {
			kr = B[bi] SUBSEP C[ci] SUBSEP N[ni] SUBSEP ref
			rs = med(secs[kr])
			for (mi = 1; mi <= nm; mi++) {
				k = B[bi] SUBSEP C[ci] SUBSEP N[ni] SUBSEP M[mi]
				if (!(k in runs)) continue
				s = med(secs[k]); r = ratio(rs, s)
				if (mode == "csv") {
					line = B[bi] "," C[ci] "," N[ni] "," M[mi] "," runs[k] "," ok[k] + 0 "," s "," lo(secs[k]) "," hi(secs[k]) "," med(mops[k]) "," r "," med(ranks[k])
					for (i = 11; i <= 17; i++) line = line "," med(c[k, i])
					print line
				} else if (mode == "text") {
					printf "%-5s %-5s %4d  %-16s %4d/%-3d %10s %12s %10s\n", toupper(B[bi]), C[ci], N[ni], M[mi], ok[k], runs[k], f2(s), f2(med(mops[k])), r == "" ? "-" : sprintf("%.2f", r)
				}
			}
		}
		if (mode == "text" && nm > 1) {
			printf "\n## %s against the fastest other MPI (median seconds)\n%-5s %-5s %4s", ref, "bench", "class", "np"
			for (mi = 1; mi <= nm; mi++) printf " %12s", M[mi]
			printf "  %-16s %8s\n", "fastest other", ref "/it"
		}
		if (mode == "md") {
			printf "| bench | class | np |"; for (mi = 1; mi <= nm; mi++) printf " %s |", M[mi]
			printf " %s / fastest other |\n|---|---|---|", ref; for (mi = 1; mi <= nm; mi++) printf "---:|"; printf "---|\n"
		}
		if ((mode == "text" && nm > 1) || mode == "plot" || mode == "md") {
			if (mode == "plot") { printf "run"; for (mi = 2; mi <= nm; mi++) printf "\t%s/%s", ref, M[mi]; printf "\n" }
			for (ci = 1; ci <= nc; ci++) for (ni = 1; ni <= nn; ni++) for (bi = 1; bi <= nb; bi++) {
				kr = B[bi] SUBSEP C[ci] SUBSEP N[ni] SUBSEP ref
				if (!(kr in runs)) continue
				rs = med(secs[kr]); best = ""; bm = ""
				if (mode == "text") printf "%-5s %-5s %4d", toupper(B[bi]), C[ci], N[ni]
				else if (mode == "md") printf "| %s | %s | %d |", toupper(B[bi]), C[ci], N[ni]
				else printf "%s.%s.%d", toupper(B[bi]), C[ci], N[ni]
				for (mi = 1; mi <= nm; mi++) {
					k = B[bi] SUBSEP C[ci] SUBSEP N[ni] SUBSEP M[mi]; s = med(secs[k])
					if (mode == "text") printf " %12s", (k in runs) ? (s == "" ? "FAIL" : f2(s)) : "-"
					else if (mode == "md") printf " %s |", (k in runs) ? (s == "" ? "FAIL" : f2(s)) : "-"
					else if (mi > 1) printf "\t%s", (r = ratio(rs, s)) == "" ? "?" : r
					if (mi > 1 && s != "" && (best == "" || s + 0 < best + 0)) { best = s; bm = M[mi] }
				}
				r = ratio(rs, best)
				if (mode == "text") printf "  %-16s %8s\n", bm == "" ? "-" : bm, r == "" ? "-" : sprintf("%.2f", r)
				else if (mode == "md") printf " %s |\n", r == "" ? "-" : sprintf("%.2f (%s)", r, bm)
				else printf "\n"
			}
		}
		for (k in cnt) any = 1
		if (mode == "text" && stats && !any)
			printf "\n## rdmach counters: none in the logs (RDMACH_STATS=1, but no MPI here prints them)\n"
		if (mode == "text" && stats && any) {
			printf "\n## rdmach counters (RDMACH_STATS=1): sum over the ranks, median over the rounds\n"
			printf "%-5s %-5s %4s  %-16s %10s %10s %8s %8s %9s %8s %9s\n", "bench", "class", "np", "MPI", "bytes", "packets", "stalls", "zcopy", "pipelined", "rc_hits", "rc_misses"
			for (ci = 1; ci <= nc; ci++) for (ni = 1; ni <= nn; ni++) for (bi = 1; bi <= nb; bi++) for (mi = 1; mi <= nm; mi++) {
				k = B[bi] SUBSEP C[ci] SUBSEP N[ni] SUBSEP M[mi]
				if (!cnt[k]) continue
				printf "%-5s %-5s %4d  %-16s", toupper(B[bi]), C[ci], N[ni], M[mi]
				w[11] = 10; w[12] = 10; w[13] = 8; w[14] = 8; w[15] = 9; w[16] = 8; w[17] = 9
				for (i = 11; i <= 17; i++) printf " %" w[i] "s", human(med(c[k, i]))
				printf "\n"
			}
		}
	}' "$records"
}

aggregate text >>"$out/table.txt.tmp"
{
	if [ ${#skips[@]} -gt 0 ]; then
		echo; echo "## skipped (NPB cannot run these counts)"
		printf '%s\n' "${skips[@]}"
	fi
	echo
	if [ ${#failures[@]} -gt 0 ]; then
		echo "## FAILED: ${#failures[@]} (not counted in the figures above)"
		printf 'FAIL %s\n' "${failures[@]}"
	else
		echo "## all $nruns runs verified (NPB: Verification = SUCCESSFUL)"
	fi
} >>"$out/table.txt.tmp"
aggregate csv >"$out/table.csv.tmp"
[ ${#mpi_names[@]} -gt 1 ] && aggregate md >"$out/table.md.tmp"
{
	echo "round,bench,class,np,mpi,status,seconds,mops,wall_seconds,ranks_counted,bytes,packets,stalls,zcopy,pipelined,rcache_hits,rcache_misses,log"
	tr '\t' ',' <"$records"
} >"$out/runs.csv.tmp"

# ratios.png: ours' time over each other MPI's, one group of bars per run
plot_ok=0
if [ ${#mpi_names[@]} -gt 1 ] && command -v gnuplot >/dev/null; then
	aggregate plot >"$logs/ratios.dat"
	nrows=$(($(wc -l <"$logs/ratios.dat") - 1))
	term='png noenhanced'
	echo 'set terminal' | gnuplot 2>&1 | grep -q pngcairo && term="pngcairo noenhanced font 'Sans,10'"
	ymax=$(awk -F'\t' 'NR > 1 {for (i = 2; i <= NF; i++) if ($i != "?" && $i + 0 > m) m = $i + 0}
		END {m *= 1.1; printf "%.2f", m < 1.2 ? 1.2 : m}' "$logs/ratios.dat")
	width=$((nrows * 22 * ${#mpi_names[@]} + 300)); [ $width -lt 640 ] && width=640; [ $width -gt 4000 ] && width=4000
	cat >"$logs/ratios.gp" <<EOF
set terminal $term size $width,480
set output '$out/ratios.png.tmp'
set title "NPB 3.4-MPI: $ref time / other MPI's time (below 1: $ref faster; median of $rounds)"
set datafile separator "\t"
set datafile missing "?"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set yrange [0:$ymax]
set ylabel "time ratio"
set xtics rotate by -45
set key outside top right
set grid ytics
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black"
set arrow 2 from graph 0, first 1.05 to graph 1, first 1.05 nohead dt 2 lc rgb "red"
plot for [i=2:${#mpi_names[@]}] '$logs/ratios.dat' using i:xtic(1) title columnheader(i)
EOF
	if [ "$nrows" -gt 0 ] && gnuplot "$logs/ratios.gp" >"$logs/ratios.gnuplot.log" 2>&1; then
		plot_ok=1
	else
		note "no plot (gnuplot: $logs/ratios.gnuplot.log)"
		rm -f "$out/ratios.png.tmp"
	fi
fi

mv "$out/table.csv.tmp" "$out/table.csv"
[ -f "$out/table.md.tmp" ] && mv "$out/table.md.tmp" "$out/table.md"
mv "$out/runs.csv.tmp" "$out/runs.csv"
[ "$plot_ok" = 1 ] && mv "$out/ratios.png.tmp" "$out/ratios.png"
mv "$out/table.txt.tmp" "$out/table.txt"
rm -f "$records"
case $out in "$repo"/results/nas-*) ln -sfn "$(basename "$out")" "$repo/results/nas-latest" 2>/dev/null ;; esac
trap - INT TERM

cat "$out/table.txt"
echo
echo "$prog: $out/table.txt, table.csv$([ -f "$out/table.md" ] && echo ', table.md'), runs.csv$([ "$plot_ok" = 1 ] && echo ', ratios.png'); logs in $logs"
if [ ${#failures[@]} -gt 0 ]; then
	echo "$prog: ${#failures[@]} run(s) FAILED:" >&2
	printf '  %s\n' "${failures[@]}" >&2
	exit 1
fi
exit 0
