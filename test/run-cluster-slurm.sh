# run-cluster-slurm.sh - boot S of test/run-cluster.sh: jobs started
# through Slurm as users start them, inside a cluster that runs it
# (test/vm/vm-cluster.sh --slurm).  Sourced by run-cluster.sh inside the
# head VM; uses its helpers (ok, bad, skip, want, mpx, suite, xok,
# have_mpich, mpich_path) and variables (L, T, X, MPIBIN, HF2, PREFIX).
#
#   slurm-mpi-list            srun --mpi=list offers pmi2 (pmix: reported)
#   slurm-pmi-long-line       Slurm's PMI-1 server cuts a request line
#                             over 1024 bytes (why rdmach's stay within)
#   slurm-pmix                srun --mpi=pmix: no PMI_FD, rdmach says so
#   slurm-conformance-srun    srun --mpi=pmi2 -N 2 -n 4 test_conformance
#   slurm-streams-*           xhost_stream (shm on a host, ib across, every
#                             pair checked) under srun with block, cyclic
#                             and arbitrary (SLURM_HOSTFILE) placement, and
#                             under salloc + Debian's Hydra (launching
#                             through srun)
#   slurm-mpi-*               MPICH ch3:rdma: cpi and mpi_node under srun
#                             (-m arbitrary: Slurm's mapping puts every
#                             rank on a node of its own; each rank's node
#                             communicator holds exactly the ranks on its
#                             VM, from rdmach's host ids),
#                             mpi_exchange under salloc + MPICH's mpiexec,
#                             an sbatch script with srun and mpiexec steps
#   slurm-startup             submission to rank 0's first line and to the
#                             end of MPI_Init: srun, salloc + mpiexec, Hydra
#                             over ssh (STARTUP_REPS runs each, median)
#   slurm-fault-rank-killed   a rank killed: the step ends (KillOnBadExit),
#                             the job is FAILED in jobcomp with its code
#   slurm-scancel             no process and no segment left on any VM
#   slurm-fault-vm2-killed    (last) vm2 powered off under a job: the ranks
#                             on vm1 see -ECONNRESET, srun ends in error,
#                             jobcomp says NODE_FAIL or FAILED, vm2 DOWN

JOBCOMP=/run/cluster/slurm/jobcomp.txt

# slurm_job NAME: the job's line of Slurm's completion log (jobcomp/
# filetxt), waiting at most 60 s for it (slurmctld writes it at the end)
slurm_job() {
	local i line
	for i in $(seq 1 120); do
		line=$(grep "Name=$1 " "$JOBCOMP" 2>/dev/null | tail -n 1)
		[ -n "$line" ] && { echo "$line"; return 0; }
		sleep 0.5
	done
	return 1
}

# jc_field LINE KEY: KEY's value in a jobcomp line
jc_field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# slurm_nothing_left PROG: no PROG process, no rdmach segment on any VM
slurm_nothing_left() {
	local h left=
	for h in $CLUSTER_HOSTS; do
		left="$left$(ssh "$h" "pgrep -a -x $1; pgrep -a slurmstepd; ls /dev/shm | grep rdmach" </dev/null 2>/dev/null | sed "s/^/$h: /")"
	done
	echo "$left"
}

slurm_part() {
	local name log d rc line st i n pids pid
	# Hydra launches through srun inside an allocation: hydra-ssh is for
	# the ssh launcher only
	unset HYDRA_LAUNCHER_EXEC
	local HYDRA=$MPIEXEC
	if want slurm-mpi-list; then
		srun --mpi=list >"$L/mpi-list.log" 2>&1
		if grep -qx '[[:space:]]*pmi2' "$L/mpi-list.log"; then
			ok "slurm-mpi-list: $(grep -v 'MPI plugin' "$L/mpi-list.log" | tr -s ' \t\n' ' ')"
		else
			bad slurm-mpi-list "no pmi2: $(tr '\n' ' ' <"$L/mpi-list.log")"
		fi
	fi
	# Slurm's PMI-1 server (mpi/pmi2): what it announces, then the PMI
	# client's cases (long values, errors) against it
	if want slurm-pmi-maxes; then
		srun --mpi=pmi2 -J slurm-pmi -n 1 bash -c 'printf "cmd=init pmi_version=1 pmi_subversion=1\n" >&$PMI_FD; read -r -t 20 a <&$PMI_FD; echo "$a"; printf "cmd=get_maxes\n" >&$PMI_FD; read -r -t 20 b <&$PMI_FD; echo "$b"; printf "cmd=finalize\n" >&$PMI_FD; read -r -t 20 c <&$PMI_FD' \
			>"$L/pmi-maxes.log" 2>&1 </dev/null
		if grep -q '^cmd=maxes.*vallen_max=[0-9]' "$L/pmi-maxes.log"; then
			ok "slurm-pmi-maxes: $(grep '^cmd=maxes' "$L/pmi-maxes.log")"
		else
			bad slurm-pmi-maxes "$(tr '\n' ' ' <"$L/pmi-maxes.log")"
		fi
	fi
	# why a request line stays within 1024 bytes: a put of a 1000-byte
	# value (a line of about 1040) comes back cut
	if want slurm-pmi-long-line; then
		timeout 60 srun --mpi=pmi2 -J slurm-pmi -n 1 bash -c 'f=$PMI_FD
			q() { printf "%s\n" "$1" >&$f; r=; read -r -t 20 r <&$f; }
			q "cmd=init pmi_version=1 pmi_subversion=1"
			q "cmd=get_my_kvsname"; kvs=${r##*kvsname=}
			v=$(head -c 1000 /dev/zero | tr "\0" v)
			q "cmd=put kvsname=$kvs key=long value=$v"; echo "put: $r"
			q "cmd=barrier_in"; echo "barrier: $r"
			q "cmd=get kvsname=$kvs key=long"
			case $r in *value=*) g=${r##*value=}; echo "got ${#g} of 1000" ;;
			*) echo "get: $r" ;; esac' >"$L/pmi-long-line.log" 2>&1 </dev/null
		line=$(grep -E '^(got|get:)' "$L/pmi-long-line.log")
		case $line in
		"get: cmd=get_result rc=1"*|"got "[0-9]" of"*|"got "[0-9][0-9]" of"*|"got "[0-9][0-9][0-9]" of"*)
			ok "slurm-pmi-long-line: a put line of about 1040 bytes: $(grep -m1 '^put:' "$L/pmi-long-line.log"), then $line; slurmstepd: $(grep -m1 -o 'mpi/pmi2: value not.*' "$L/pmi-long-line.log") (rdmach's lines stay within 1024)" ;;
		*)
			bad slurm-pmi-long-line "a put of 1000 bytes in a line over 1024: $(tr '\n' ' ' <"$L/pmi-long-line.log" | cut -c1-200)" ;;
		esac
	fi
	# --mpi=pmix: Slurm serves PMIx, not the PMI-1 wire protocol (no
	# PMI_FD): rdmach's client cannot start there and says why; Debian's
	# plugin is listed but needs libpmix2 (not a dependency of Slurm's
	# packages), without which srun refuses --mpi=pmix
	if want slurm-pmix; then
		srun --mpi=pmix -J slurm-pmi -N 2 -n 2 "$X" -b 1M >"$L/pmix.log" 2>&1 </dev/null
		rc=$?
		if [ "$rc" != 0 ] && grep -q 'PMI_FD is not set' "$L/pmix.log"; then
			ok "slurm-pmix: --mpi=pmix gives no PMI_FD: srun status $rc, each rank: $(grep -m1 'PMI_FD' "$L/pmix.log" | cut -c1-120)"
		elif [ "$rc" != 0 ] && grep -q 'can not load PMIx library' "$L/pmix.log"; then
			ok "slurm-pmix: listed, but srun cannot load libpmix (libpmix2 not installed): $(grep -m1 -o 'pmi/pmix: can not load PMIx library' "$L/pmix.log")"
		else
			bad slurm-pmix "srun --mpi=pmix status $rc: $(head -n 3 "$L/pmix.log" | tr '\n' ' ')"
		fi
	fi
	MPIEXEC=srun suite slurm-test-pmi 300 --mpi=pmi2 -J slurm-pmi -N 2 -n 4 "$BUILD/test/test_pmi"
	MPIEXEC=srun suite slurm-conformance-srun 900 --mpi=pmi2 -J slurm-conformance \
		-N 2 -n 4 "$T/test_conformance"
	MPIEXEC=srun xok slurm-streams-srun-block 4 300 --mpi=pmi2 -J slurm-streams \
		-N 2 --ntasks-per-node=2 -n 4 "$X" -b 4M
	MPIEXEC=srun xok slurm-streams-srun-cyclic 4 300 --mpi=pmi2 -J slurm-streams \
		-N 2 -n 4 -m cyclic "$X" -b 4M
	# ranks 0,3 on vm1, 1,2 on vm2: Slurm's PMI_process_mapping for it
	printf 'vm1\nvm2\nvm2\nvm1\n' >"$L/arbitrary-hosts"
	SLURM_HOSTFILE=$L/arbitrary-hosts MPIEXEC=srun xok slurm-streams-srun-arbitrary 4 300 \
		--mpi=pmi2 -J slurm-streams -n 4 -m arbitrary "$X" -b 4M
	MPIEXEC=salloc xok slurm-streams-salloc-hydra 4 300 -J slurm-salloc -N 2 \
		"$HYDRA" -n 4 "$X" -b 4M
	if have_mpich; then
		if want slurm-mpi-srun-cpi; then
			(mpich_path
			 MPIEXEC=srun mpx 120 "$L/srun-cpi.log" --mpi=pmi2 -J slurm-mpi -N 2 -n 4 "$MPIBIN/cpi"
			) && grep -q 'pi is approximately' "$L/srun-cpi.log" &&
				ok "slurm-mpi-srun-cpi: srun --mpi=pmi2 -N 2 -n 4 cpi ($(cat "$L/srun-cpi.log.secs" | cut -d. -f1) s)" ||
				bad slurm-mpi-srun-cpi "$(tail -n 3 "$L/srun-cpi.log" | tr '\n' ' ')"
		fi
		# MPI_COMM_TYPE_SHARED: the 2 ranks of each VM (shm), as Slurm
		# placed them
		if want slurm-mpi-srun-node; then
			(mpich_path
			 MPIEXEC=srun mpx 120 "$L/srun-node.log" --mpi=pmi2 -J slurm-mpi -N 2 \
				--ntasks-per-node=2 -n 4 "$MPIBIN/mpi_node" 2
			) && grep -q 'No Errors' "$L/srun-node.log" &&
				ok "slurm-mpi-srun-node: mpi_node, 2 ranks per VM share a node communicator" ||
				bad slurm-mpi-srun-node "$(tail -n 3 "$L/srun-node.log" | tr '\n' ' ')"
		fi
		# -m arbitrary: Slurm's PMI_process_mapping, (vector,(0,4,1)),
		# puts every rank on a node of its own (rdmach warns that its
		# host ids decide); MPICH's node ids come from rdmach's host
		# numbers: on each VM a node communicator of its 2 ranks, the
		# ranks where the host file put them
		if want slurm-mpi-srun-arbitrary-node; then
			(mpich_path
			 SLURM_HOSTFILE=$L/arbitrary-hosts MPIEXEC=srun mpx 120 "$L/srun-arbitrary-node.log" \
				--mpi=pmi2 -J slurm-mpi -n 4 -m arbitrary "$MPIBIN/mpi_node" 2 \
				"$(paste -sd, "$L/arbitrary-hosts")"
			) && grep -q 'No Errors' "$L/srun-arbitrary-node.log" &&
				grep -q 'PMI_process_mapping puts rank.*the host ids decide' "$L/srun-arbitrary-node.log" &&
				ok "slurm-mpi-srun-arbitrary-node: mpi_node with ranks on $(paste -sd, "$L/arbitrary-hosts"): Slurm's mapping put every rank on its own node, each rank's node communicator holds the 2 ranks of its VM" ||
				bad slurm-mpi-srun-arbitrary-node "$(grep -v '^rdmach\[' "$L/srun-arbitrary-node.log" | tail -n 3 | tr '\n' ' ') $(grep -c 'PMI_process_mapping puts rank' "$L/srun-arbitrary-node.log") mapping warnings"
		fi
		if want slurm-mpi-salloc-mpiexec; then
			(mpich_path
			 MPIEXEC=salloc mpx 300 "$L/salloc-exchange.log" -J slurm-mpi -N 2 \
				"$PREFIX/bin/mpiexec" -n 4 "$MPIBIN/mpi_exchange"
			) && grep -q 'No Errors' "$L/salloc-exchange.log" &&
				ok "slurm-mpi-salloc-mpiexec: salloc -N 2 mpiexec -n 4 mpi_exchange ($(cut -d. -f1 <"$L/salloc-exchange.log.secs") s)" ||
				bad slurm-mpi-salloc-mpiexec "$(tail -n 3 "$L/salloc-exchange.log" | tr '\n' ' ')"
		fi
		if want slurm-mpi-sbatch; then
			cat >"$L/job.sh" <<-EOF
				#!/bin/bash
				#SBATCH -J slurm-sbatch -N 2 --ntasks-per-node=2 -o $L/sbatch.out
				srun --mpi=pmi2 $T/test_conformance alltoall_4 || exit 1
				srun --mpi=pmi2 $MPIBIN/mpi_exchange || exit 1
				$PREFIX/bin/mpiexec -n 4 $MPIBIN/cpi
			EOF
			(mpich_path; timeout -k 5 600 sbatch --wait "$L/job.sh" >"$L/sbatch.log" 2>&1)
			rc=$?
			line=$(slurm_job slurm-sbatch)
			if [ "$rc" = 0 ] && grep -q '^1 passed, 0 failed' "$L/sbatch.out" &&
			   grep -q 'No Errors' "$L/sbatch.out" &&
			   grep -q 'pi is approximately' "$L/sbatch.out" &&
			   [ "$(jc_field "$line" JobState)" = COMPLETED ]; then
				ok "slurm-mpi-sbatch: a batch script's srun (test_conformance, mpi_exchange) and mpiexec (cpi) steps; jobcomp COMPLETED"
			else
				bad slurm-mpi-sbatch "sbatch status $rc, jobcomp '$(jc_field "$line" JobState)': $(tail -n 4 "$L/sbatch.out" "$L/sbatch.log" | tr '\n' ' ')"
			fi
		fi
		want slurm-startup && slurm_startup
	else
		skip slurm-mpi "no MPICH ch3:rdma in $PREFIX (make mpich)"
	fi
	want slurm-fault-rank-killed && slurm_rank_killed
	want slurm-scancel && slurm_scancel
	want slurm-fault-vm2-killed && slurm_vm_killed
	return 0
}

# the median of the numbers on stdin
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

# slurm_startup: rank 0's first line and the end of MPI_Init, seconds after
# the submission, 2 ranks per VM, STARTUP_REPS (3) runs of each launcher
slurm_startup() {
	local reps=${STARTUP_REPS:-3} n=$((2 * CLUSTER_N)) how i f log first init res=
	for how in srun salloc-mpiexec hydra-ssh; do
		: >"$L/startup-$how.txt"
		for i in $(seq 1 "$reps"); do
			log=$L/startup-$how-$i.log
			(mpich_path
			 export STARTUP_T0=$(date +%s.%N)
			 case $how in
			 srun) timeout 120 srun --mpi=pmi2 -J slurm-startup -N "$CLUSTER_N" \
				--ntasks-per-node=2 "$MPIBIN/mpi_startup" ;;
			 salloc-mpiexec) timeout 120 salloc -J slurm-startup -N "$CLUSTER_N" \
				--ntasks-per-node=2 "$PREFIX/bin/mpiexec" "$MPIBIN/mpi_startup" ;;
			 hydra-ssh) timeout 120 "$PREFIX/bin/mpiexec" -launcher ssh -f "$HF2" \
				-n "$n" "$MPIBIN/mpi_startup" ;;
			 esac) >"$log" 2>&1 </dev/null
			first=$(sed -n 's/^startup first \([0-9.]*\).*/\1/p' "$log")
			init=$(sed -n 's/^startup init \([0-9.]*\).*/\1/p' "$log")
			[ -n "$first" ] && [ -n "$init" ] && grep -q "(n=$n)" "$log" ||
				{ bad "slurm-startup-$how" "run $i: $(tail -n 3 "$log" | tr '\n' ' ')"; continue 2; }
			echo "$first $init" >>"$L/startup-$how.txt"
		done
		first=$(cut -d' ' -f1 "$L/startup-$how.txt" | median)
		init=$(cut -d' ' -f2 "$L/startup-$how.txt" | median)
		ok "slurm-startup-$how: $CLUSTER_N VMs, $n ranks: first line $first s, MPI_Init done $init s after submission (median of $reps; runs: $(tr '\n' ';' <"$L/startup-$how.txt"))"
	done
}

# slurm_step_pid HOST GLOBAL-TASK: the task's pid on HOST (scontrol listpids)
slurm_step_pid() {
	ssh "$1" scontrol listpids </dev/null 2>/dev/null |
		awk -v t="$2" '$5 == t && $4 != "-" { print $1; exit }'
}

slurm_rank_killed() {
	local name=slurm-fault-rank-killed log=$L/slurm-fault-rank-killed.log t0 i pid rc line st code
	t0=$SECONDS
	# streams rate-limited to last minutes; task 3 (on vm2) is killed
	srun --mpi=pmi2 -J $name -N 2 --ntasks-per-node=2 -n 4 "$X" -b 1G -r 1 -T 200 \
		>"$log" 2>&1 </dev/null &
	local job=$!
	pid=
	for i in $(seq 1 120); do
		pid=$(slurm_step_pid vm2 3)
		[ -n "$pid" ] && break
		sleep 0.5
	done
	sleep 5		# past rdmach_init: the streams run
	[ -z "$pid" ] || ssh vm2 kill -9 "$pid" </dev/null
	local tk=$SECONDS
	wait $job
	rc=$?
	line=$(slurm_job $name)
	st=$(jc_field "$line" JobState) code=$(jc_field "$line" ExitCode)
	if [ -n "$pid" ] && [ "$rc" != 0 ] && [ $((SECONDS - tk)) -lt 60 ] &&
	   [ "$st" = FAILED ] && [ "$code" != 0:0 ]; then
		ok "$name: task 3 (pid $pid on vm2) killed: srun status $rc after $((SECONDS - tk)) s, jobcomp $st ExitCode=$code"
		grep -h 'error\|rdmach' "$log" | head -n 4 | cut -c1-200 | sed 's/^/  /'
	else
		bad $name "pid '$pid', srun status $rc, $((SECONDS - tk)) s after the kill, jobcomp '$st' '$code': $(tail -n 3 "$log" | tr '\n' ' ')"
	fi
	[ -z "$(slurm_nothing_left xhost_stream)" ] ||
		bad "$name-leftovers" "$(slurm_nothing_left xhost_stream | tr '\n' ' ')"
}

slurm_scancel() {
	local name=slurm-scancel job i n=0 line st left
	job=$(sbatch --parsable -J $name -N 2 --ntasks-per-node=2 -o "$L/$name.out" \
		--wrap "srun --mpi=pmi2 $X -b 1G -r 1 -T 200")
	[ -n "$job" ] || { bad $name "sbatch failed"; return; }
	# every task of the step running, on both VMs
	for i in $(seq 1 120); do
		n=$(for h in $CLUSTER_HOSTS; do ssh "$h" pgrep -c -x xhost_stream </dev/null; done 2>/dev/null |
			awk '{ s += $1 } END { print s + 0 }')
		[ "$n" = 4 ] && break
		sleep 0.5
	done
	sleep 5
	scancel "$job"
	line=$(slurm_job $name)
	st=$(jc_field "$line" JobState)
	for i in $(seq 1 30); do
		left=$(slurm_nothing_left xhost_stream)
		[ -z "$left" ] && break
		sleep 1
	done
	if [ "$n" = 4 ] && [ "$st" = CANCELLED ] && [ -z "$left" ]; then
		ok "$name: job $job cancelled with its 4 ranks running: jobcomp $st, no process, no /dev/shm segment left on $CLUSTER_HOSTS"
	else
		bad $name "$n ranks seen running, jobcomp '$st', left: $(echo "$left" | tr '\n' ' ')"
	fi
}

slurm_vm_killed() {
	local name=slurm-fault-vm2-killed d=$L/slurm-fault-vm2-killed rc f n=0 nok=0 line st i node
	mkdir -p "$d"
	MPIEXEC=srun mpx 240 "$d/srun.log" --mpi=pmi2 -J $name -N 2 --ntasks-per-node=2 \
		-n 4 "$X" -r 2 -w 2 -a "vmctl kill vm2" -T 120 -x reset -c vm2 -v -o "$d"
	rc=$?
	for f in "$d"/rank-*.txt; do
		grep -q "^xhost rank [0-9]* on vm2:" "$f" && continue
		n=$((n + 1))
		grep -q ': ok: ' "$f" && nok=$((nok + 1))
	done
	line=$(slurm_job $name)
	st=$(jc_field "$line" JobState)
	for i in $(seq 1 90); do
		node=$(scontrol show node vm2 2>/dev/null | sed -n 's/.*State=\([A-Z+_]*\).*/\1/p' | head -n 1)
		case $node in DOWN*) break ;; esac
		sleep 2
	done
	if [ "$n" -gt 0 ] && [ "$nok" = "$n" ] && [ "$rc" != 0 ] && [ "$rc" != 124 ] &&
	   { [ "$st" = NODE_FAIL ] || [ "$st" = FAILED ]; } &&
	   [[ $node == DOWN* ]]; then
		ok "$name: srun status $rc after ${SECS%.*} s, $nok of $n ranks on vm1 saw the resets, jobcomp $st ExitCode=$(jc_field "$line" ExitCode), vm2 $node"
		grep -h ': -ECONNRESET' "$d"/rank-*.txt | head -n 2 | cut -c1-200 | sed 's/^/  /'
		grep -h 'error' "$d/srun.log" | head -n 3 | cut -c1-200 | sed 's/^/  /'
	else
		bad $name "$nok of $n ranks off vm2 ok, srun status $rc after ${SECS%.*} s, jobcomp '$st', vm2 '$node': $(grep -h FAIL "$d"/rank-*.txt | head -n 2 | tr '\n' ' ') $(tail -n 2 "$d/srun.log" | tr '\n' ' ')"
	fi
}
