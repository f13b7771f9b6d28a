#!/usr/bin/env bash
# run-cluster.sh - rdmach and MPICH across hosts: a cluster of Soft-RoCE VMs
# (test/vm/vm-cluster.sh) with ranks started by Hydra's mpiexec over ssh.
#
# usage: test/run-cluster.sh [smoke|full] [build-dir]     (default: smoke)
#   smoke  one boot of 2 VMs: the conformance suite with 4 ranks (2 per VM:
#          shm and ib in one run), byte-checked all-pairs streams with the
#          transport of each pair checked (shm on a host, ib across),
#          cpi on MPICH ch3:rdma (if PREFIX has it), mpi_exchange with
#          every message read in place from rdma_ib's ring, and 8 ranks
#          under RDMACH_CONNECT=demand exchanging with their ring
#          neighbours only (each has made 2 ib connections at MPI_Finalize),
#          then with all-to-all too (4: every rank on the other VM),
#          the all-to-all again with RDMACH_IB_QPS_MAX=1 (idle
#          connections closed and made again, every rank), and
#          mpi-node-2-per-vm (below, boot A)
#   full   `make check-cluster`: four boots
#          A  2 VMs: conformance, streams, knobs that differ between
#             hosts, a host without an RDMA device, MPI programs (cpi, Fortran,
#             mpi_exchange), the tests of the MPICH CI subset of up to 4
#             ranks across the 2 VMs, node awareness (mpi-node-K-per-vm,
#             K = 1, 2, 4: every rank's MPI_COMM_TYPE_SHARED communicator
#             is the K ranks of its VM by gethostname; a byte-checked
#             allreduce and bcast under MPICH's SMP algorithms: per
#             RDMACH_STATS only the node leaders move ib bytes, the
#             others' data go over shm; -2-per-vm-flat, the negative
#             control: under flat algorithms every rank's ib counters
#             grow), then the faults: a switch port down shorter than the
#             retry window (the stream resumes, every byte once and in
#             order), `ip link set down` on a host, a port down for longer,
#             and a VM killed mid-stream (survivors: -ECONNRESET in bound;
#             mpiexec: non-zero exit in bound)
#          B  4 VMs with MTUs 1500, 9000, 4200, 1500: conformance and
#             streams over 4 hosts, path MTU = the smaller end, cpi, rdmach
#             builds of other versions, a VM killed among 4
#          C  2 VMs: an MPI job that loses a VM (mpiexec ends in error)
#          D  (only when CLUSTER_BOOTS names it) 4 VMs: 64 ranks
#             round-robin, ring neighbours then all-to-all under demand
#             and under all:
#             the kernel's RC QPs per rank after each phase (what the
#             ranks used, no more), registered bytes
#          S  2 VMs running Slurm (vm-cluster.sh --slurm): jobs started by
#             srun --mpi=pmi2, salloc + mpiexec and sbatch, start-up
#             times, a rank killed, scancel, a VM killed
#             (test/run-cluster-slurm.sh); skipped, naming the packages,
#             without Slurm on this host
#          S4 (only when CLUSTER_BOOTS names it) 4 VMs under Slurm:
#             start-up times
# Every test prints "ok NAME" or "FAIL NAME: why"; suites add their own
# counts; the run ends with "N passed, M failed" (exit status 0 only if
# nothing failed).  A test that cannot run here (no MPICH, no git history)
# prints "skip NAME: why" and counts neither way.
#
# env: PREFIX      MPICH built with ch3:rdma (default build/mpich-install)
#      MPICH_WORK  its build tree, for the CI subset (default build/mpich)
#      CLUSTER_TESTS=REGEX  only the tests whose names match
#      CLUSTER_BOOTS="A B C S"  (full) the boots to run (S4 too)
#      STARTUP_REPS (3)  runs per launcher of the start-up measurement
#      CLUSTER_MPI_PRELOAD=1  MPI programs run with this tree's
#                   librdmach.so preloaded (PREFIX built against another)
#      RDMACH_TEST_SCALE (default 0.1)  RDMACH_IB_TIMEOUT (default here
#      18: see test/vm/README.md)  RDMACH_VM_*: see test/vm/vm-cluster.sh
# Ranks start with `mpiexec -f <hostfile>` and HYDRA_LAUNCHER_EXEC set to
# test/vm/hydra-ssh (ssh that ends the job when a host is lost).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
MODE=smoke
case ${1:-} in smoke|full) MODE=$1; shift ;; --inner) ;; -h|--help)
	sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
PREFIX=${PREFIX:-$ROOT/build/mpich-install}
MPICH_WORK=${MPICH_WORK:-$ROOT/build/mpich}
VM=$ROOT/test/vm/vm-cluster.sh
# rdma_ib's wire version, and the next one (a build of it must be refused)
WIRE=$(sed -n 's/^#define IB_WIRE_VERSION \([0-9][0-9]*\)$/\1/p' "$ROOT/rdma_ib/ib_dev.h")
WIRE_NEXT=$((WIRE + 1))

# ======================================================= inside the head VM
if [ "${1:-}" = --inner ]; then
	PART=$2 BUILD=$3
	cd "$ROOT" || exit 2
	export RDMACH_TEST_SCALE=${RDMACH_TEST_SCALE:-0.1}
	export HYDRA_LAUNCHER_EXEC=$ROOT/test/vm/hydra-ssh
	# Debian's Hydra by name (Open MPI's may own `mpiexec`); MPICH's own
	# under mpich_path
	MPIEXEC=$(command -v mpiexec.hydra || command -v mpiexec.mpich || echo mpiexec.hydra)
	# rxe acks from the peer's (emulated, shared) CPU: at the default
	# 67 ms ack timeout a busy host retransmits spuriously, and rxe's
	# retransmission has bugs of its own (test/vm/README.md); 1.07 s
	export RDMACH_IB_TIMEOUT=${RDMACH_IB_TIMEOUT:-18}
	T=$BUILD/test X=$BUILD/test/vm/xhost_stream
	L=$BUILD/cluster-logs/$PART
	rm -rf "$L" && mkdir -p "$L"
	MPIBIN=$BUILD/cluster-mpi
	HF=$CLUSTER_HOSTFILE
	# two ranks per host, in host order (ranks 0,1 on vm1, 2,3 on vm2)
	HF2=$L/hosts-by-2
	for h in $CLUSTER_HOSTS; do echo "$h:2"; done >"$HF2"
	pass=0 fail=0
	# CLUSTER_TESTS=REGEX: only the tests whose names match
	want() { [ -z "${CLUSTER_TESTS:-}" ] || [[ $1 =~ $CLUSTER_TESTS ]]; }
	# mpiexec must end within this many seconds of its start when a host
	# is lost: the fault at 2 s (vmctl itself may take seconds on a busy
	# guest), ssh gives up on a silent host after 15-18 s
	# (ServerAliveInterval 3 x 5), hydra-ssh ends the job; 2x slack for
	# the emulated CPUs
	FAULT_MPIEXEC_S=60

	ok() { echo "ok $1"; pass=$((pass + 1)); }
	bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }
	skip() { echo "skip $1: $2"; }
	# mpx TIMEOUT LOG mpiexec-args...: run, log, return mpiexec's status;
	# sets SECS (and writes it to LOG.secs, for a run in a subshell)
	SECS=0
	mpx() {
		local t=$1 log=$2 t0 rc; shift 2
		t0=$(date +%s.%N)
		timeout -k 5 "$t" "$MPIEXEC" "$@" >"$log" 2>&1 </dev/null
		rc=$?
		SECS=$(echo "$(date +%s.%N) - $t0" | bc)
		echo "$SECS" >"$log.secs"
		return $rc
	}
	# suite NAME TIMEOUT mpiexec-args...: a program that ends with
	# "N passed, M failed": its counts are ours
	suite() {
		local name=$1 t=$2 log=$L/$1.log line p f; shift 2
		want "$name" || return 0
		mpx "$t" "$log" "$@"
		local rc=$?
		grep -E '^(FAIL|skip) ' "$log" | sed "s/^/  /"
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n1)
		if [ -z "$line" ]; then
			bad "$name" "no summary (mpiexec status $rc): $(tail -n 3 "$log" | tr '\n' ' ')"
			return
		fi
		p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed}
		[ "$rc" = 0 ] || [ "$f" != 0 ] || f=1
		echo "== $name: $line (${SECS%.*} s)"
		pass=$((pass + p)); fail=$((fail + f))
	}
	# xok NAME NRANKS TIMEOUT mpiexec-args...: every rank's stream ok
	xok() {
		local name=$1 n=$2 t=$3 log=$L/$1.log; shift 3
		want "$name" || return 0
		if mpx "$t" "$log" "$@" &&
		   [ "$(grep -c ': ok: ' "$log")" = "$n" ]; then
			ok "$name (${SECS%.*} s)"
			grep -h ': ok: ' "$log" | head -n 1 | sed 's/^/  /'
		else
			bad "$name" "$(grep -h 'FAIL\|error' "$log" | head -n 3 | tr '\n' ' ') (status $?, log $log)"
		fi
	}
	# refused NAME PATTERN TIMEOUT mpiexec-args...: the job must fail, in
	# bound, with a message matching PATTERN
	refused() {
		local name=$1 pat=$2 t=$3 log=$L/$1.log; shift 3
		want "$name" || return 0
		if mpx "$t" "$log" "$@"; then
			bad "$name" "the job succeeded"
		elif [ "$(echo "$SECS > $t - 2" | bc)" = 1 ]; then
			bad "$name" "no end within $t s (hang?)"
		elif grep -q -- "$pat" "$log"; then
			ok "$name (fails in ${SECS%.*} s)"
			grep -h -m1 -- "$pat" "$log" | cut -c1-300 | sed 's/^/  /'
		else
			bad "$name" "no message matching '$pat': $(grep -h error "$log" | head -n 2 | tr '\n' ' ')"
		fi
	}
	# fault NAME CUT-HOST [any-status] ARGS...: xhost_stream -x reset -c
	# CUT-HOST: every rank on the other hosts reports every pair across
	# the fault reset in bound (the ranks on CUT-HOST, if they can report,
	# too: none may fail), and mpiexec ends with an error in bound
	# ("any-status": it may also end well, when no host was lost)
	fault() {
		local name=$1 cut=$2 d=$L/$1 anyrc=0; shift 2
		want "$name" || return 0
		[ "$1" != any-status ] || { anyrc=1; shift; }
		mkdir -p "$d"
		mpx 240 "$d/mpiexec.log" -f "$HF" "$@" -x reset -c "$cut" -v -o "$d"
		local rc=$? f n=0 nok=0
		reachable
		for f in "$d"/rank-*.txt; do
			grep -q "^xhost rank [0-9]* on $cut:" "$f" && continue
			n=$((n + 1))
			grep -q ': ok: ' "$f" && nok=$((nok + 1))
		done
		if [ "$n" -gt 0 ] && [ "$nok" = "$n" ] && [ "$rc" != 124 ] &&
		   { [ "$rc" != 0 ] || [ "$anyrc" = 1 ]; } &&
		   [ "$(echo "$SECS < $FAULT_MPIEXEC_S" | bc)" = 1 ] &&
		   ! grep -qh FAIL "$d"/rank-*.txt; then
			ok "$name (mpiexec status $rc after ${SECS%.*} s)"
			grep -h ': -ECONNRESET' "$d"/rank-*.txt | cut -c1-200 | sed 's/^/  /'
		else
			bad "$name" "$nok of $n ranks off $cut ok, mpiexec status $rc after ${SECS%.*} s: $(grep -h FAIL "$d"/rank-*.txt | head -n 3 | tr '\n' ' ') (logs $d)"
		fi
	}
	# wait (at most 60 s) until every VM answers ssh again after a fault
	reachable() {
		local h i
		for h in $CLUSTER_HOSTS; do
			for i in $(seq 1 30); do
				ssh -o ConnectTimeout=2 "$h" true </dev/null 2>/dev/null && break
				sleep 1
			done
		done
	}
	have_mpich() { [ -x "$MPIBIN/cpi" ] && [ -x "$PREFIX/bin/mpiexec" ]; }
	mpich_path() {
		export PATH=$PREFIX/bin:$PATH MPIEXEC=$PREFIX/bin/mpiexec
		# an MPICH whose ch3:rdma was linked with another rdmach: its
		# calls of the API go through the PLT, so this tree's library
		# can stand in for it
		[ -z "${CLUSTER_MPI_PRELOAD:-}" ] || export LD_PRELOAD=$BUILD/lib/librdmach.so
	}

	# mpi_demand NAME IB ARGS...: MPI under RDMACH_CONNECT=demand, 8 ranks
	# placed round-robin (a rank's ring neighbours are on the other VM),
	# mpi_neighbors ARGS: at MPI_Finalize (after CH3's close protocol)
	# every rank has made exactly IB ib connections (shm: its VM's 4)
	mpi_demand() {
		local name=$1 ib=$2 log=$L/$1.log nok nline nbad; shift 2
		want "$name" || return 0
		(mpich_path
		 mpx 300 "$log" -f "$HF" -n 8 -genv RDMACH_CONNECT demand \
			-genv RDMACH_STATS 1 "$MPIBIN/mpi_neighbors" "$@")
		local rc=$?
		SECS=$(cat "$log.secs" 2>/dev/null || echo 0)
		nok=$(grep -c '^rank [0-9]*: ok' "$log")
		nline=$(grep -c '^# connections:' "$log")
		nbad=$(grep '^# connections:' "$log" | grep -vc " ib $ib,")
		if [ "$rc" = 0 ] && [ "$nok" = 8 ] && [ "$nline" = 8 ] && [ "$nbad" = 0 ]; then
			ok "$name: 8 ranks, $ib ib connections each after MPI_Finalize (${SECS%.*} s)"
		else
			bad "$name" "status $rc, $nok ranks ok, $nline stats lines, $nbad with other than $ib ib connections: $(grep '^# connections:' "$log" | sort | uniq -c | tr '\n' ' ')"
		fi
	}

	# mpi_qps NAME: mpi_neighbors alltoall under demand with
	# RDMACH_IB_QPS_MAX=1, 8 ranks round-robin (4 peers over ib each, and
	# CH3's close protocol at MPI_Finalize): every rank ok, and each one's
	# idle connections were closed and made again (either end asking)
	mpi_qps() {
		local name=$1 log=$L/$1.log nok nline nclosed; shift
		want "$name" || return 0
		(mpich_path
		 mpx 300 "$log" -f "$HF" -n 8 -genv RDMACH_CONNECT demand \
			-genv RDMACH_IB_QPS_MAX 1 -genv RDMACH_STATS 1 \
			"$MPIBIN/mpi_neighbors" alltoall)
		local rc=$?
		SECS=$(cat "$log.secs" 2>/dev/null || echo 0)
		nok=$(grep -c '^rank [0-9]*: ok' "$log")
		nline=$(grep -c '^# ib connections:' "$log")
		nclosed=$(sed -n 's/^# ib connections:.* closed: \([0-9]*\) asked by us, \([0-9]*\) by peers.*/\1 \2/p' "$log" |
			awk '$1 + $2 > 0' | wc -l)
		if [ "$rc" = 0 ] && [ "$nok" = 8 ] && [ "$nline" = 8 ] && [ "$nclosed" = 8 ]; then
			ok "$name: 8 ranks, RDMACH_IB_QPS_MAX=1, every rank closed idle connections (${SECS%.*} s)"
		else
			bad "$name" "status $rc, $nok ranks ok, $nline ib stats lines, $nclosed with connections closed: $(grep '^# ib connections:' "$log" | head -n 2 | tr '\n' ' ')"
		fi
	}

	# mpi_node_k K [flat]: mpi_node with K ranks per VM (hostfile vmN:K,
	# ranks in host order): each rank's MPI_COMM_TYPE_SHARED communicator
	# is the K ranks whose gethostname() is its own; then an
	# MPI_Allreduce of NODE_AR_BYTES and an MPI_Bcast of NODE_BC_BYTES
	# (below MPICH 4.0.2's MPIR_CVAR_BCAST_LONG_MSG_SIZE, above which its
	# SMP broadcast is flat), bytes checked, under MPICH's node-aware
	# algorithms (4.0.2's defaults select them only for empty messages).
	# From RDMACH_STATS (mpiexec -l: every line names its rank): each
	# node leader (node rank 0) put at least half the allreduce on ib;
	# every other rank moved at most NODE_IB_BOUND ib bytes (start-up,
	# the small collectives of the test) and put at least half the
	# allreduce on shm.  "flat", the negative control: under flat
	# algorithms (reduce-scatter + allgather, binomial) the same counters
	# show every rank putting an eighth of the allreduce at least on ib.
	# Per rank: node_<K>[-flat].txt and the test's output.
	NODE_AR_BYTES=4194304 NODE_BC_BYTES=262144 NODE_IB_BOUND=16384
	mpi_node_k() {
		local k=$1 flat=${2:-} h n nvm=0 rc nbad ar_alg=smp bc_alg=smp what
		local name=mpi-node-$1-per-vm${2:+-$2} log=$L/mpi-node-$1${2:+-$2}.log
		local hf=$L/hosts-by-$1 txt=$L/node_$1${2:+-$2}.txt
		want "$name" || return 0
		for h in $CLUSTER_HOSTS; do echo "$h:$k"; nvm=$((nvm + 1)); done >"$hf"
		n=$((nvm * k))
		[ -z "$flat" ] || { ar_alg=reduce_scatter_allgather; bc_alg=binomial; }
		(mpich_path
		 mpx 300 "$log" -l -f "$hf" -n "$n" -genv RDMACH_STATS 1 \
			-genv MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM "$ar_alg" \
			-genv MPIR_CVAR_BCAST_INTRA_ALGORITHM "$bc_alg" \
			"$MPIBIN/mpi_node" "$k" "$NODE_AR_BYTES" "$NODE_BC_BYTES")
		rc=$?
		SECS=$(cat "$log.secs" 2>/dev/null || echo 0)
		awk -v n="$n" -v k="$k" -v nvm="$nvm" -v ar="$NODE_AR_BYTES" \
		    -v bound="$NODE_IB_BOUND" -v flat="$flat" '
		    # "[R] rank R on HOST: node size K, node rank J, leader|member"
		    /^\[[0-9]+\] rank [0-9]+ on [^ ]+: node size / {
			r = $3; h = $5; sub(":$", "", h); host[r] = h
			sz[r] = $8; sub(",", "", sz[r]); role[r] = $12 }
		    /^\[[0-9]+\] # rdmach counters, rank [0-9]+$/ { stats[$NF] = 1 }
		    # "[R] PEER/TL bytes_put bytes_got ..."
		    /^\[[0-9]+\] [0-9]+\/(ib|shm) / {
			r = $1; gsub(/[][]/, "", r); split($2, a, "/")
			put[r, a[2]] += $3; got[r, a[2]] += $4 }
		    END {
			for (r = 0; r < n; r++) {
			    printf "rank %d on %s: node size %s, %s: ib out %d B, in %d B; shm out %d B, in %d B\n",
				r, host[r], sz[r], role[r], put[r, "ib"], got[r, "ib"],
				put[r, "shm"], got[r, "shm"]
			    if (!(r in host) || !(r in stats)) {
				print "bad: rank " r " printed no node line or no counters"; continue }
			    if (sz[r] != k) print "bad: rank " r " has a node of " sz[r]
			    if (role[r] == "leader")
				leaders[host[r]]++
			    if (flat) {
				if (put[r, "ib"] < ar / 8)
				    print "bad: rank " r " put " put[r, "ib"] + 0 " ib bytes under flat algorithms, less than an eighth of the allreduce"
			    } else if (role[r] == "leader") {
				if (put[r, "ib"] < ar / 2)
				    print "bad: leader rank " r " put " put[r, "ib"] + 0 " ib bytes, less than half the allreduce"
			    } else {
				if (put[r, "ib"] + got[r, "ib"] > bound)
				    print "bad: rank " r " (no leader) moved " put[r, "ib"] + got[r, "ib"] " ib bytes, more than " bound
				if (put[r, "shm"] < ar / 2)
				    print "bad: rank " r " (no leader) put " put[r, "shm"] " shm bytes, less than half the allreduce"
			    }
			}
			nl = 0
			for (h in leaders) { nl++; if (leaders[h] != 1) print "bad: " leaders[h] " leaders on " h }
			if (nl != nvm) print "bad: leaders on " nl " hosts of " nvm
		    }' "$log" >"$txt"
		nbad=$(grep -c '^bad: ' "$txt")
		if [ -n "$flat" ]; then
			what="under flat algorithms every rank puts ib bytes (the counters see them)"
		else
			what="ib bytes from the node leaders only"
		fi
		if [ "$rc" = 0 ] && grep -q '^\[0\] No Errors' "$log" && [ "$nbad" = 0 ]; then
			ok "$name: $n ranks, node communicators of $k = the VM's ranks; $what (${SECS%.*} s)"
			sed 's/^/  /' "$txt"
		else
			bad "$name" "status $rc, $(grep -c '^\[0\] No Errors' "$log") No Errors, $nbad checks failed: $(grep -h '^bad: \|^\[[0-9]*\] rank [0-9]*: ' "$txt" "$log" | head -n 4 | tr '\n' ' ' | cut -c1-400) (log $log)"
			grep '^rank ' "$txt" | sed 's/^/  /'
		fi
	}

	# scale64 CONNECT: 64 ranks, 16 per VM placed round-robin (a rank's
	# ring neighbours on other VMs), mpi_neighbors alltoall with the
	# kernel's view after each phase: RC QPs = the ib peers used (2
	# after the neighbours under demand, the 48 on other VMs after the
	# all-to-all, and 48 throughout under all); prints the median
	# registered bytes and VmPin per phase (scale64_<connect>.txt).
	# 16 ranks share each VM's one emulated CPU, and Soft-RoCE's
	# "adapter" is that CPU's kernel: the timeouts allow for it (all
	# makes 768 QPs per VM inside MPI_Init: minutes there), and the
	# ranks run niced, so that the kernel and ssh (Hydra's link to the
	# VM) are not starved
	scale64() {
		local c=$1 name=scale64-$1 log=$L/scale64-$1.log nb na q1 q2
		want "$name" || return 0
		(mpich_path
		 mpx 1500 "$log" -f "$HF" -n 64 -genv RDMACH_CONNECT "$c" \
			-genv RDMACH_PEER_TIMEOUT_MS 30000 \
			-genv RDMACH_CONNECT_TIMEOUT_MS 300000 \
			-genv MPI_NEIGHBORS_RESOURCES 1 -genv RDMACH_STATS 1 \
			nice -n 10 "$MPIBIN/mpi_neighbors" alltoall)
		local rc=$?
		SECS=$(cat "$log.secs" 2>/dev/null || echo 0)
		[ "$c" = demand ] && q1=2 || q1=48
		q2=48
		nb=$(grep -c "^rank [0-9]* after neighbours: rc_qps $q1 " "$log")
		na=$(grep -c "^rank [0-9]* after alltoall: rc_qps $q2 " "$log")
		awk '/ after (neighbours|alltoall): / {
			ph = $4; sub(":", "", ph); n[ph]++
			mr[ph, n[ph]] = $10; pin[ph, n[ph]] = $12 }
		     function med(a, ph, k,   i, j, t, v) {
			for (i = 1; i <= k; i++) v[i] = a[ph, i]
			for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
				if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			return v[int((k + 1) / 2)] }
		     END { for (ph in n) printf "%s %s: median mr_bytes %d, vmpin_kb %d (%d ranks)\n",
			conn, ph, med(mr, ph, n[ph]), med(pin, ph, n[ph]), n[ph] }' \
			conn="$c" "$log" | sort >"$L/scale64_$c.txt"
		sed 's/^/  /' "$L/scale64_$c.txt"
		if [ "$rc" = 0 ] && [ "$(grep -c '^rank [0-9]*: ok' "$log")" = 64 ] &&
		   [ "$nb" = 64 ] && [ "$na" = 64 ]; then
			ok "$name: 64 ranks on 4 VMs, RC QPs $q1 after the neighbours, $q2 after the all-to-all, every byte checked (${SECS%.*} s)"
		else
			bad "$name" "status $rc, $(grep -c '^rank [0-9]*: ok' "$log") ranks ok, $nb with $q1 RC QPs after the neighbours, $na with $q2 after the all-to-all: $(grep -v '^rank\|^#\|^peer\|^[0-9]' "$log" | head -n 3 | tr '\n' ' ' | cut -c1-300)"
		fi
	}

	case $PART in
	smoke)
		suite conformance-2x2 900 -f "$HF2" -n 4 "$T/test_conformance"
		xok streams-2x2 4 300 -f "$HF2" -n 4 "$X" -b 4M
		if have_mpich; then
			(mpich_path
			 mpx 120 "$L/cpi.log" -f "$HF" -n 4 "$MPIBIN/cpi"
			 ) && grep -q 'pi is approximately' "$L/cpi.log" &&
				ok "cpi, 4 ranks on 2 VMs (MPICH ch3:rdma)" ||
				bad cpi "$(tail -n 3 "$L/cpi.log" | tr '\n' ' ')"
			# every header and payload read in place (rdmach_peek)
			# from rdma_ib's ring, one rank per VM, bytes checked
			(mpich_path
			 mpx 300 "$L/in-place.log" -f "$HF" -n 2 \
				-genv RDMACH_CH3_RX_IN_PLACE 1 \
				"$MPIBIN/mpi_exchange" 262144
			 ) && SECS=$(cat "$L/in-place.log.secs") &&
				grep -q 'No Errors' "$L/in-place.log" &&
				ok "mpi_exchange read in place over ib, 1 rank per VM (${SECS%.*} s)" ||
				bad in-place "$(tail -n 3 "$L/in-place.log" | tr '\n' ' ')"
			mpi_demand mpi-demand-neighbours 2
			mpi_demand mpi-demand-alltoall 4 alltoall
			mpi_qps mpi-qps-max-1
			mpi_node_k 2
		else
			skip cpi "no MPICH ch3:rdma in $PREFIX (make mpich)"
		fi
		;;
	A)
		suite conformance-2x2 900 -f "$HF2" -n 4 "$T/test_conformance"
		suite conformance-2x2-zcopy-4K 900 -f "$HF2" -n 4 \
			-genv RDMACH_ZCOPY_THRESHOLD 4K -genv RDMACH_TEST_SCALE 0.05 \
			"$T/test_conformance"
		xok streams-2x2 4 300 -f "$HF2" -n 4 "$X" -b 8M
		# knobs that differ between the hosts (ranks 0,1 on vm1, 2,3 on vm2)
		refused knob-ring-size 'RDMACH_IB_RING_SIZE=.*set the same everywhere' 120 \
			-f "$HF2" -n 2 -env RDMACH_IB_RING_SIZE 64K "$X" -b 1M : -n 2 "$X" -b 1M
		refused knob-mode 'RDMACH_IB_MODE=.*set the same everywhere' 120 \
			-f "$HF2" -n 2 -env RDMACH_IB_MODE piggyback "$X" -b 1M : -n 2 "$X" -b 1M
		xok knob-chunk-4K-vs-64K 4 300 -f "$HF2" -n 2 -env RDMACH_IB_CHUNK_SIZE 4K "$X" -b 4M : \
			-n 2 -env RDMACH_IB_CHUNK_SIZE 64K "$X" -b 4M
		xok knob-zcopy-threshold-4K-vs-1M 4 300 -f "$HF2" -n 2 -env RDMACH_ZCOPY_THRESHOLD 4K "$X" -b 4M : \
			-n 2 -env RDMACH_ZCOPY_THRESHOLD 1M "$X" -b 4M
		xok knob-zcopy-off-on-vm2 4 300 -f "$HF2" -n 2 "$X" -b 4M : \
			-n 2 -env RDMACH_ZCOPY 0 "$X" -b 4M
		xok knob-ib-mtu-512-on-vm2 4 300 -f "$HF2" -n 2 "$X" -b 4M : \
			-n 2 -env RDMACH_IB_MTU 512 "$X" -b 4M
		# a host without an RDMA device, its peers on another host
		if ! want no-rdma-device; then :
		elif vmctl rdma vm2 off; then
			refused no-rdma-device 'host vm2 (rank [0-9]*) has no usable RDMA device: no RDMA device' \
				120 -f "$HF2" -n 4 "$X" -b 1M
			vmctl rdma vm2 on || bad no-rdma-device "rxe0 not back on vm2"
			for i in $(seq 1 50); do
				vmctl run vm2 rdma link show rxe0/1 | grep -q ACTIVE && break
				sleep 0.2
			done
		else
			bad no-rdma-device "cannot remove rxe0 on vm2"
		fi
		# MPI programs (MPICH ch3:rdma), 4 ranks on 2 VMs
		if ! want mpi; then :
		elif have_mpich; then
			mpich_path
			mpx 120 "$L/cpi.log" -f "$HF" -n 4 "$MPIBIN/cpi" &&
				grep -q 'pi is approximately' "$L/cpi.log" &&
				ok "MPI cpi, 4 ranks (${SECS%.*} s)" ||
				bad cpi "$(tail -n 3 "$L/cpi.log" | tr '\n' ' ')"
			mpx 120 "$L/fhello.log" -f "$HF" -n 4 "$MPIBIN/fhello" &&
				ok "MPI Fortran fhello, 4 ranks (${SECS%.*} s)" ||
				bad fhello "$(tail -n 3 "$L/fhello.log" | tr '\n' ' ')"
			mpx 600 "$L/mpi_exchange.log" -f "$HF" -n 4 "$MPIBIN/mpi_exchange" &&
				grep -q 'No Errors' "$L/mpi_exchange.log" &&
				ok "MPI mpi_exchange (byte-checked, all pairs), 4 ranks (${SECS%.*} s)" ||
				bad mpi_exchange "$(tail -n 3 "$L/mpi_exchange.log" | tr '\n' ' ')"
			mpi_demand mpi-demand-neighbours 2
			mpi_demand mpi-demand-alltoall 4 alltoall
			# the MPICH CI subset, precompiled on the host: the tests
			# of up to 4 ranks, spread over both VMs
			if ! want mpich-ci; then :
			elif [ -s "$MPIBIN/ci/list" ]; then
				local_p=0 local_n=0 local_big=0
				while read -r prog np args; do
					if [ "$np" -gt 4 ]; then
						local_big=$((local_big + 1))
						continue
					fi
					case $prog in
					comm-ctxalloc)	# make check runs it on one host
						skip "ci $prog" "200000 communicator creations, each a round trip between emulated hosts: longer than its 300 s limit"
						continue ;;
					esac
					local_n=$((local_n + 1))
					# MPICH's testlist options: timeLimit=S is
					# the test's own limit
					limit=120 argv=()
					for a in $args; do
						case $a in
						timeLimit=*) limit=${a#timeLimit=} ;;
						*) argv+=("$a") ;;
						esac
					done
					if mpx "$limit" "$L/ci-$prog.log" -f "$HF" -n "$np" "$MPIBIN/ci/$prog" "${argv[@]}" &&
					   grep -q "No Errors" "$L/ci-$prog.log"; then
						local_p=$((local_p + 1))
					else
						echo "  FAIL ci $prog -n $np (limit $limit s): $(tail -n 2 "$L/ci-$prog.log" | tr '\n' ' ' | cut -c1-200)"
					fi
				done <"$MPIBIN/ci/list"
				echo "== MPICH CI subset on 2 VMs: $local_p of $local_n passed ($local_big tests of 5 to 10 ranks left out)"
				pass=$((pass + local_p)); fail=$((fail + local_n - local_p))
			else
				skip mpich-ci "no precompiled CI subset (MPICH_WORK=$MPICH_WORK)"
			fi
		else
			skip mpi "no MPICH ch3:rdma in $PREFIX (make mpich)"
		fi
		# node awareness across hosts: 1, 2 and 4 ranks per VM
		if have_mpich; then
			for k in 1 2 4; do mpi_node_k "$k"; done
			mpi_node_k 2 flat
		elif want mpi-node; then
			skip mpi-node "no MPICH ch3:rdma in $PREFIX (make mpich)"
		fi
		# faults, 2 ranks per VM; a short switch-port outage with
		# single-packet writes and no RDMA reads (see test/vm/README.md:
		# rxe's retransmission of multi-packet messages)
		xok fault-port-down-1s-resumes 4 300 -f "$HF2" -n 4 \
			-genv RDMACH_PEER_TIMEOUT_MS 10000 -genv RDMACH_ZCOPY 0 \
			-genv RDMACH_IB_CHUNK_SIZE 960 \
			"$X" -b 6M -r 1 -w 2 -a "vmctl cable vm2 down 1"
		fault fault-ip-link-down-vm2 vm2 any-status -n 4 "$X" -r 2 -w 2 \
			-a "vmctl link vm2 down 3" -T 120
		fault fault-port-down-20s vm2 -n 4 "$X" -r 2 -w 2 \
			-a "vmctl cable vm2 down 20" -T 120
		fault fault-vm2-killed vm2 -n 4 "$X" -r 2 -w 2 \
			-a "vmctl kill vm2" -T 120
		;;
	B)
		suite conformance-4x1 900 -f "$HF" -n 4 "$T/test_conformance"
		xok streams-4x2 8 300 -f "$HF2" -n 8 "$X" -b 2M
		if ! want mpi; then :
		elif have_mpich; then
			(mpich_path
			 mpx 120 "$L/cpi.log" -f "$HF" -n 4 "$MPIBIN/cpi") &&
				grep -q 'pi is approximately' "$L/cpi.log" &&
				ok "MPI cpi, 4 ranks on 4 VMs" ||
				bad cpi "$(tail -n 3 "$L/cpi.log" | tr '\n' ' ')"
		else
			skip cpi "no MPICH ch3:rdma in $PREFIX"
		fi
		# path MTU: vm1's port is 1024, vm2's 4096: both ends use 1024
		# (the switch drops frames over a port's MTU, as a real link)
		if ! want mtu; then :
		elif mpx 120 "$L/mtu.log" -hosts vm1,vm2 -n 2 -genv RDMACH_VERBOSE 2 "$X" -b 8M &&
		   grep -q 'rdmach\[0\].*rank 1: path MTU 1024 (this port 1024, the peer.s 4096' "$L/mtu.log" &&
		   grep -q 'rdmach\[1\].*rank 0: path MTU 1024 (this port 4096, the peer.s 1024' "$L/mtu.log"; then
			ok "path MTU = the smaller end (1024 on vm1, 4096 on vm2)"
			grep -h 'path MTU' "$L/mtu.log" | sed 's/^/  /'
		else
			bad mtu "$(grep -h 'path MTU\|FAIL\|error' "$L/mtu.log" | head -n 4 | tr '\n' ' ')"
		fi
		# rdmach of other versions: ranks 0,1 on vm1, 2,3 on vm4 (both
		# MTU 1500), and against vm2 (MTU 9000)
		H14=$L/hosts-vm1-vm4
		printf 'vm1:2\nvm4:2\n' >"$H14"
		H12=$L/hosts-vm1-vm2
		printf 'vm1:2\nvm2:2\n' >"$H12"
		# (RDMACH_TRANSPORT=ib: the previous test_conformance sized a
		# case by its first connection's ring, which differs between
		# the ranks when shm and ib mix)
		old=$BUILD/cluster-old/build/test/test_conformance
		if [ -x "$old" ]; then
			# the previous build publishes per-peer addresses, not
			# the connection manager's record: refused, named
			refused version-previous-on-vm4 'published no rdma_ib record' 600 \
				-f "$H14" -genv RDMACH_TRANSPORT ib \
				-n 2 "$T/test_conformance" alltoall_4 : \
				-n 2 "$old" alltoall_4
			# negative control: the previous build sends at its own
			# port's MTU (4096 on vm2), which vm1's link drops
			refused mtu-negative-control-previous-on-vm2 'ECONNRESET\|peer died\|keepalive\|FAIL' 300 \
				-f "$H12" -genv RDMACH_TRANSPORT ib -n 2 "$T/test_conformance" alltoall_4 : \
				-n 2 "$old" alltoall_4
		else
			skip version-previous-on-vm4 "no build of the previous version"
		fi
		wire_next=$BUILD/cluster-wire-next/test/vm/xhost_stream
		if [ -x "$wire_next" ]; then
			refused version-wire-next-on-vm4 "speaks rdma_ib wire version $WIRE_NEXT, this rank $WIRE" 120 \
				-f "$H14" -n 2 "$X" -b 1M : -n 2 "$wire_next" -b 1M
		else
			skip version-wire-next-on-vm4 "no build with IB_WIRE_VERSION=$WIRE_NEXT"
		fi
		fault fault-vm3-killed-of-4 vm3 -n 4 "$X" -r 2 -w 2 \
			-a "vmctl kill vm3" -T 120
		;;
	D)
		if have_mpich; then
			scale64 demand
			scale64 all
		else
			skip scale64 "no MPICH ch3:rdma in $PREFIX (make mpich)"
		fi
		;;
	C)
		if ! want mpi-vm2-killed; then :
		elif have_mpich; then
			mpich_path
			d=$L/mpi-vm2-killed
			mkdir -p "$d"
			# mpi_exchange of 64 MB messages runs for minutes; vm2 dies
			# 15 s in
			(sleep 15; vmctl kill vm2) &
			mpx 240 "$d/mpiexec.log" -f "$HF2" -n 4 "$MPIBIN/mpi_exchange" 67108864
			rc=$?
			wait
			if [ "$(echo "$SECS < 15" | bc)" = 1 ]; then
				bad mpi-vm2-killed "the job ended (status $rc) after ${SECS%.*} s, before vm2 was killed: $(grep -h 'rdmach.*failed' "$d/mpiexec.log" | head -n 2 | tr '\n' ' ' | cut -c1-300)"
			elif [ "$rc" != 0 ] && [ "$rc" != 124 ] &&
			   [ "$(echo "$SECS < 15 + 60" | bc)" = 1 ] &&
			   grep -q 'rdmach.*failed' "$d/mpiexec.log"; then
				ok "MPI job losing vm2: mpiexec status $rc after ${SECS%.*} s (vm2 killed at 15 s)"
				grep -h 'rdmach.*failed\|Fatal\|hydra-ssh' "$d/mpiexec.log" | head -n 4 | cut -c1-200 | sed 's/^/  /'
			else
				bad mpi-vm2-killed "mpiexec status $rc after ${SECS%.*} s: $(grep -h 'rdmach\|Fatal' "$d/mpiexec.log" | head -n 3 | tr '\n' ' ')"
			fi
		else
			skip mpi-vm2-killed "no MPICH ch3:rdma in $PREFIX"
		fi
		;;
	S)	# Slurm (vm-cluster.sh --slurm): jobs started as users do
		. "$ROOT/test/run-cluster-slurm.sh"
		slurm_part
		;;
	S4)	# start-up times on 4 VMs under Slurm
		. "$ROOT/test/run-cluster-slurm.sh"
		unset HYDRA_LAUNCHER_EXEC
		if have_mpich; then slurm_startup; else skip slurm-startup "no MPICH ch3:rdma in $PREFIX"; fi
		;;
	esac
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ]
	exit
fi

# ============================================================== the host
[ -x "$BUILD/test/test_conformance" ] && [ -x "$BUILD/test/vm/xhost_stream" ] ||
	make -C "$ROOT" -j2 O="$BUILD" >/dev/null || { echo "run-cluster: build failed"; exit 2; }

# MPI programs and the CI subset, compiled here (the guest CPU is slow)
mpi_build() {
	local bin=$BUILD/cluster-mpi src=$MPICH_WORK/src tb=$MPICH_WORK/test-rdma d p np args
	[ -x "$PREFIX/bin/mpicc" ] || return 0
	mkdir -p "$bin/ci"
	"$PREFIX/bin/mpicc" -O2 -o "$bin/cpi" "$src/examples/cpi.c" -lm || return 1
	"$PREFIX/bin/mpif90" -O2 -o "$bin/fhello" "$ROOT/channel/test/fhello.f90" || return 1
	"$PREFIX/bin/mpicc" -O2 -o "$bin/mpi_exchange" "$ROOT/channel/test/mpi_exchange.c" || return 1
	"$PREFIX/bin/mpicc" -O2 -o "$bin/mpi_neighbors" "$ROOT/channel/test/mpi_neighbors.c" || return 1
	"$PREFIX/bin/mpicc" -O2 -o "$bin/mpi_node" "$ROOT/channel/test/mpi_node.c" || return 1
	[ "$MODE" = full ] || return 0
	# boot S
	"$PREFIX/bin/mpicc" -O2 -o "$bin/mpi_startup" "$ROOT/channel/test/mpi_startup.c" || return 1
	# the CI subset: boot A only
	[[ " ${CLUSTER_BOOTS:-A} " == *" A "* ]] || return 0
	: >"$bin/ci/list"
	[ -f "$tb/util/.libs/libmtest_single.a" ] || return 0
	for d in pt2pt coll comm datatype group attr; do
		grep -v '^#' "$ROOT/channel/test/ci/$d.list" | while read -r p np args; do
			[ -n "$p" ] && [ -f "$src/test/mpi/$d/$p.c" ] || continue
			"$PREFIX/bin/mpicc" -O1 -I"$src/test/mpi/include" -I"$tb/include" \
				-o "$bin/ci/$d-$p" "$src/test/mpi/$d/$p.c" \
				"$tb/util/.libs/libmtest_single.a" "$tb/util/.libs/libdtypes.a" -lm \
				2>/dev/null && echo "$d-$p $np $args" >>"$bin/ci/list"
		done
	done
}

# builds of other versions for the version tests (full): the commit before
# the wire version field, and this tree with the next IB_WIRE_VERSION
other_builds() {
	local rev
	rev=$(git -C "$ROOT" log --format=%H -S'IB_WIRE_VERSION' --reverse -- rdma_ib/ib.h rdma_ib/ib_dev.h 2>/dev/null | head -n1)
	if [ -n "$rev" ] && [ ! -x "$BUILD/cluster-old/build/test/test_conformance" ]; then
		rm -rf "$BUILD/cluster-old" && mkdir -p "$BUILD/cluster-old"
		git -C "$ROOT" archive "$rev^" | tar -x -C "$BUILD/cluster-old" &&
			make -C "$BUILD/cluster-old" -j2 build/test/test_conformance >"$BUILD/cluster-old.log" 2>&1 ||
			echo "run-cluster: the build of ${rev:0:12}^ failed ($BUILD/cluster-old.log)"
	fi
	make -C "$ROOT" -j2 O="$BUILD/cluster-wire-next" EXTRA_CFLAGS=-DIB_WIRE_VERSION=$WIRE_NEXT \
		"$BUILD/cluster-wire-next/test/vm/xhost_stream" >"$BUILD/cluster-wire-next.log" 2>&1 ||
		echo "run-cluster: the IB_WIRE_VERSION=$WIRE_NEXT build failed ($BUILD/cluster-wire-next.log)"
}

mpi_build || echo "run-cluster: compiling the MPI programs failed (PREFIX=$PREFIX)"
[ "$MODE" = full ] && [[ " ${CLUSTER_BOOTS:-B} " == *" B "* ]] && other_builds

# Slurm's daemons and clients (boot S): from the host's packages, which
# the VMs share; optional (tools/install-deps.sh slurm)
SLURM_MISSING=
slurm_present() {
	local t
	for t in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/srun; do
		[ -x "$t" ] || SLURM_MISSING="$SLURM_MISSING $t"
	done
	[ -z "$SLURM_MISSING" ] && return 0
	SLURM_MISSING="missing$SLURM_MISSING: tools/install-deps.sh slurm (apt-get install --no-install-recommends slurmd slurmctld slurm-client munge; no service is started on this host)"
	return 1
}

export RDMACH_VM_PASSENV="${RDMACH_VM_PASSENV:-} RDMACH_TEST_SCALE RDMACH_VERBOSE RDMACH_IB_TIMEOUT PREFIX MPICH_WORK CLUSTER_TESTS CLUSTER_MPI_PRELOAD STARTUP_REPS"
export PREFIX MPICH_WORK
total_p=0 total_f=0 summary=()
boot() {	# LABEL PART vm-cluster options...
	local label=$1 part=$2 t0 log line p f rc; shift 2
	log=$BUILD/cluster-logs/boot-$part.log
	mkdir -p "$BUILD/cluster-logs"
	echo "=== $label"
	t0=$SECONDS
	"$VM" "$@" "$ROOT" "test/run-cluster.sh --inner $part $(printf %q "$BUILD")" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n1)
	if [ -n "$line" ]; then
		p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed}
		[ "$rc" = 0 ] || [ "$f" != 0 ] || f=1
	else
		echo "run-cluster: $label: no summary (status $rc)"
		p=0; f=1
	fi
	total_p=$((total_p + p)); total_f=$((total_f + f))
	summary+=("$(printf '%-44s %4d passed, %d failed, %4d s' "$label" "$p" "$f" $((SECONDS - t0)))")
}

if [ "$MODE" = smoke ]; then
	boot "smoke: 2 VMs" smoke -n 2
else
	boots=" ${CLUSTER_BOOTS:-A B C S} "
	[[ $boots != *" A "* ]] || boot "A: 2 VMs" A -n 2
	[[ $boots != *" B "* ]] ||
		boot "B: 4 VMs, MTU 1500 9000 4200 1500" B -n 4 --mtu 1500,9000,4200,1500
	[[ $boots != *" C "* ]] || boot "C: 2 VMs, an MPI job loses one" C -n 2
	[[ $boots != *" D "* ]] ||
		RDMACH_VM_MEM=${RDMACH_VM_MEM:-2048} boot "D: 4 VMs, 64 ranks" D -n 4
	if [[ $boots == *" S "* || $boots == *" S4 "* ]] && ! slurm_present; then
		echo "skip S: no Slurm on this host: $SLURM_MISSING"
	else
		[[ $boots != *" S "* ]] || boot "S: 2 VMs under Slurm" S -n 2 --slurm
		[[ $boots != *" S4 "* ]] ||
			boot "S4: 4 VMs under Slurm, start-up times" S4 -n 4 --slurm
	fi
fi
echo "=== summary (logs in $BUILD/cluster-logs)"
for s in "${summary[@]}"; do echo "$s"; done
echo "$total_p passed, $total_f failed"
[ "$total_f" = 0 ]
