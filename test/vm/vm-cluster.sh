#!/usr/bin/env bash
# vm-cluster.sh - a throw-away cluster of N Soft-RoCE VMs on one virtual
# Ethernet segment, and a command run on its first VM (the "head").
#
# usage: test/vm/vm-cluster.sh [options] <dir> '<bash command>'
#   -n N            VMs, 2..4 (default 2): vm1 .. vmN, 192.0.2.11 .. 10+N,
#                   MACs 02:00:c0:00:02:0b ..; each has its own kernel,
#                   hostname, virtio NIC (eth0), rxe0 on it, dropbear
#   --mtu M1,M2..   NIC MTU per VM (default 1500 each; rxe's active MTU
#                   follows: 1500 -> 1024, 4200 or more -> 4096)
#   --no-rdma VM    boot VM without rxe0 (a host with no RDMA device)
#   --direct        2 VMs: one UDP link between the two NICs (QEMU dgram
#                   on 127.0.0.1) instead of the switch (vm-hub.c); for
#                   benchmarks (no hop through the switch)
#   --slurm         run Slurm: munged (one key), slurmctld on vm1, slurmd
#                   on every VM, a generated slurm.conf; the command starts
#                   once every node is idle (sinfo)
#   -h, --help
# The command runs on vm1 in <dir> (shared read-write at the same path by
# every VM; the host's / is read-only) once every VM is up.  There it has:
#   CLUSTER_HOSTS="vm1 vm2 .."  CLUSTER_HOSTFILE (one name a line)
#   CLUSTER_N  CLUSTER_NETDEV=eth0  HOME=/root  ssh to every VM as root,
#   `vmctl` on PATH: kill a VM, pull its cable, set its link down, remove
#   its rxe0 (test/vm/vmctl --help)
# Hydra starts ranks on the VMs as users do: mpiexec -f $CLUSTER_HOSTFILE
# (or -hosts vm1,vm2) with its default ssh launcher.
#
# Exit status: the command's; 124 on timeout; 125 when a VM failed, with a
# message naming it ("vm2: ...") and the tail of its console.
# env: RDMACH_VM_TIMEOUT (s, 1800)  RDMACH_VM_MEM (MiB per VM, 1024)
#      RDMACH_VM_SMP (vCPUs per VM, 1)  RDMACH_VM_PASSENV ("VAR1 VAR2")
#      RDMACH_VM_BOOT_TIMEOUT (s, 300)  RDMACH_VM_CACHE (see vm-lib.sh)
#      RDMACH_VM_KEEP=1: keep the run directory (logs) even on success
#      RDMACH_VM_SLURM_CPUS (CPUs= per node in slurm.conf, 4: more tasks
#      than the VM's vCPUs, by SlurmdParameters=config_overrides)
# Nothing leaves this machine: the NICs connect to the switch (or to each
# other) over 127.0.0.1 only, guest addresses are in 192.0.2.0/24, and no
# host network setting is touched.  Needs, beside vm-run.sh's: dropbear-bin
# and openssh-client (tools/install-deps.sh).
set -euo pipefail

VM_PROG=vm-cluster
. "$(dirname "$0")/vm-lib.sh"
usage() { sed -n '2,41s/^# \{0,1\}//p' "$0"; exit "${1:-2}"; }

N=2 MTUS= NORDMA= DIRECT=0 SLURM=0
while [ $# -gt 0 ]; do
	case $1 in
	-n) N=${2:?}; shift 2 ;;
	--mtu) MTUS=${2:?}; shift 2 ;;
	--no-rdma) NORDMA="$NORDMA ${2:?}"; shift 2 ;;
	--direct) DIRECT=1; shift ;;
	--slurm) SLURM=1; shift ;;
	-h|--help) usage 0 ;;
	--) shift; break ;;
	-*) echo "vm-cluster: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -eq 2 ] || usage
case $N in [2-4]) ;; *) vm_die "-n $N: 2 to 4 VMs" ;; esac
[ "$DIRECT" = 0 ] || [ "$N" = 2 ] || vm_die "--direct needs -n 2"
WORK=$(cd "$1" && pwd -P) || vm_die "no such directory: $1"
CMD=$2
TIMEOUT=${RDMACH_VM_TIMEOUT:-1800}
BOOT_TIMEOUT=${RDMACH_VM_BOOT_TIMEOUT:-300}
for t in dropbear:/usr/sbin/dropbear dropbearkey:/usr/bin/dropbearkey \
	 ssh:/usr/bin/ssh ssh-keygen:/usr/bin/ssh-keygen cc:cc; do
	command -v "${t#*:}" >/dev/null ||
		vm_die "missing ${t%%:*} (tools/install-deps.sh: dropbear-bin openssh-client build-essential)"
done
if [ "$SLURM" = 1 ]; then
	for t in munged:/usr/sbin/munged slurmctld:/usr/sbin/slurmctld \
		 slurmd:/usr/sbin/slurmd srun:/usr/bin/srun; do
		[ -x "${t#*:}" ] ||
			vm_die "--slurm: missing ${t%%:*}: apt-get install --no-install-recommends slurmd slurmctld slurm-client munge (tools/install-deps.sh slurm; no service is started on this host)"
	done
fi
vm_prepare

HOSTS=() MTU=()
for i in $(seq 1 "$N"); do
	HOSTS+=("vm$i")
	m=$(echo "${MTUS:-}" | cut -d, -f"$i")
	MTU+=("${m:-1500}")
	case ${MTU[$((i - 1))]} in
	*[!0-9]*) vm_die "--mtu $MTUS: not a list of numbers" ;;
	esac
done
for h in $NORDMA; do
	[[ " ${HOSTS[*]} " == *" $h "* ]] || vm_die "--no-rdma $h: no such VM"
done

# --- the switch: built on first use, kept in the cache --------------------
HUB=
if [ "$DIRECT" = 0 ]; then
	src=$VM_DIR/vm-hub.c
	HUB=$VM_CACHE/vm-hub-$(sha256sum <"$src" | cut -c1-12)
	if [ ! -x "$HUB" ]; then
		cc -O2 -Wall -Wextra -Werror -std=gnu11 -o "$HUB.tmp" "$src" ||
			vm_die "cannot build $src"
		mv "$HUB.tmp" "$HUB"
	fi
fi

# --- the run directory: shared with every VM as /run/cluster -------------
CL=$(mktemp -d "${TMPDIR:-/tmp}/rdmach-cluster.XXXXXX")
mkdir -p "$CL/ready" "$CL/req" "$CL/ssh"
PIDS=() HUBPID= DONE=0
declare -A KILLED=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	# the switch prints its counters when it ends
	[ -z "$HUBPID" ] || kill -TERM "$HUBPID" 2>/dev/null || true
	wait 2>/dev/null || true
	if [ "${RDMACH_VM_KEEP:-0}" = 1 ] || [ "$DONE" != ok ]; then
		echo "vm-cluster: logs in $CL" >&2
	else
		rm -rf "$CL"
	fi
}
trap cleanup EXIT
trap 'echo "vm-cluster: interrupted" >&2; exit 130' INT TERM HUP

{
	echo "127.0.0.1 localhost"
	for i in $(seq 1 "$N"); do echo "192.0.2.$((10 + i)) vm$i"; done
} >"$CL/hosts"
printf '%s\n' "${HOSTS[@]}" >"$CL/hostfile"
ssh-keygen -q -t ed25519 -N '' -C rdmach-cluster -f "$CL/ssh/id_ed25519" ||
	vm_die "ssh-keygen failed"
dropbearkey -t ed25519 -f "$CL/ssh/host_key" >/dev/null 2>&1 ||
	vm_die "dropbearkey failed"
cat >"$CL/ssh/config" <<-'EOF'
	Host *
	  StrictHostKeyChecking no
	  UserKnownHostsFile /dev/null
	  LogLevel ERROR
	  BatchMode yes
	  ConnectTimeout 20
	  ServerAliveInterval 3
	  ServerAliveCountMax 5
EOF
{
	printf 'CLUSTER_HOSTS=%q CLUSTER_N=%d CLUSTER_NETDEV=eth0\n' "${HOSTS[*]}" "$N"
	printf 'CLUSTER_HOSTFILE=/run/cluster/hostfile CLUSTER_TIMEOUT=%d\n' "$TIMEOUT"
	printf 'CLUSTER_BOOT_TIMEOUT=%d\n' "$BOOT_TIMEOUT"
	echo 'export CLUSTER_HOSTS CLUSTER_N CLUSTER_NETDEV CLUSTER_HOSTFILE'
} >"$CL/env"

# --- Slurm (--slurm): one munge key, slurm.conf naming the VMs -----------
# Guests read them from /run/cluster/slurm (vm-cluster-guest.sh); daemons'
# logs and the job completion log (jobcomp/filetxt) come back there.
if [ "$SLURM" = 1 ]; then
	mkdir -p "$CL/slurm"
	dd if=/dev/urandom of="$CL/slurm/munge.key" bs=1024 count=1 2>/dev/null ||
		vm_die "cannot make a munge key"
	chmod 600 "$CL/slurm/munge.key"
	cat >"$CL/slurm/slurm.conf" <<-EOF
		# vm-cluster.sh --slurm: $N VMs, one vCPU each
		ClusterName=rdmach
		SlurmctldHost=vm1
		AuthType=auth/munge
		SlurmUser=root
		SlurmdUser=root
		StateSaveLocation=/var/lib/slurm/slurmctld
		SlurmdSpoolDir=/var/lib/slurm/slurmd
		SlurmctldPidFile=/run/slurmctld.pid
		SlurmdPidFile=/run/slurmd.pid
		SlurmctldLogFile=/run/cluster/slurm/slurmctld.log
		SlurmdLogFile=/run/cluster/slurm/slurmd-%n.log
		SlurmctldDebug=info
		SlurmdDebug=info
		ProctrackType=proctrack/linuxproc
		TaskPlugin=task/none
		SwitchType=switch/none
		MpiDefault=none
		SchedulerType=sched/builtin
		SelectType=select/cons_tres
		SelectTypeParameters=CR_CPU
		AccountingStorageType=accounting_storage/none
		JobAcctGatherType=jobacct_gather/none
		JobCompType=jobcomp/filetxt
		JobCompLoc=/run/cluster/slurm/jobcomp.txt
		MailProg=/bin/true
		# the guests' CPUs are emulated: generous timeouts
		SlurmdTimeout=30
		MessageTimeout=30
		SlurmctldTimeout=60
		BatchStartTimeout=60
		InactiveLimit=0
		KillWait=5
		MinJobAge=600
		ReturnToService=2
		# a task that fails ends its step (rdmach's ranks then go too)
		KillOnBadExit=1
		# one vCPU per VM; CPUs= below is taken as given
		SlurmdParameters=config_overrides
		NodeName=$(IFS=,; echo "${HOSTS[*]}") CPUs=${RDMACH_VM_SLURM_CPUS:-4} State=UNKNOWN
		PartitionName=vms Nodes=ALL Default=YES MaxTime=INFINITE State=UP
	EOF
	echo 'CgroupPlugin=cgroup/v1' >"$CL/slurm/cgroup.conf"
fi

# --- the network ----------------------------------------------------------
NET=()
if [ "$DIRECT" = 1 ]; then
	# two free UDP ports on 127.0.0.1 (QEMU reports a clash if one is taken
	# meanwhile)
	used=$(ss -Hunl 2>/dev/null | awk '{print $4}' | sed 's/.*://')
	P=()
	while [ ${#P[@]} -lt 2 ]; do
		p=$((20000 + RANDOM % 40000))
		grep -qx "$p" <<<"$used" || [[ " ${P[*]:-} " == *" $p "* ]] || P+=("$p")
	done
	for i in 0 1; do
		NET+=("dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=${P[$i]},remote.type=inet,remote.host=127.0.0.1,remote.port=${P[$((1 - i))]}")
	done
else
	mkfifo "$CL/hub.cmd"
	"$HUB" -n "$N" -o "$CL/hub.ports" -m "$(IFS=,; echo "${MTU[*]}")" \
		-c "$CL/hub.cmd" -t "$BOOT_TIMEOUT" -T "$((TIMEOUT + BOOT_TIMEOUT + 60))" \
		2>"$CL/hub.log" &
	HUBPID=$!
	for i in $(seq 1 100); do
		[ -f "$CL/hub.ports" ] && [ "$(wc -l <"$CL/hub.ports")" = "$N" ] && break
		kill -0 $HUBPID 2>/dev/null || break
		sleep 0.05
	done
	[ -f "$CL/hub.ports" ] && [ "$(wc -l <"$CL/hub.ports")" = "$N" ] ||
		vm_die "the switch did not start: $(cat "$CL/hub.log")"
	mapfile -t HP <"$CL/hub.ports"
	for i in $(seq 0 $((N - 1))); do
		NET+=("stream,id=n0,server=off,addr.type=inet,addr.host=127.0.0.1,addr.port=${HP[$i]}")
	done
fi

# --- the VMs --------------------------------------------------------------
guest=$VM_DIR/vm-cluster-guest.sh
for i in $(seq 1 "$N"); do
	h=vm$i D=$CL/$h
	mkdir -p "$D"
	rxe=1
	[[ " $NORDMA " != *" $h "* ]] || rxe=0
	{
		printf 'export WORK=%q HOME=/root TERM=dumb\n' "$WORK"
		printf 'export VM_HOSTNAME=%s VM_IP=192.0.2.%d VM_MTU=%s VM_NETDEV=eth0 VM_RXE=%d\n' \
			"$h" $((10 + i)) "${MTU[$((i - 1))]}" "$rxe"
		echo "export VM_SLURM=$SLURM"
		echo 'export VM_MOUNTS=cluster:/run/cluster'
		for v in ${RDMACH_VM_PASSENV:-}; do
			[ -z "${!v+x}" ] || printf 'export %s=%q\n' "$v" "${!v}"
		done
	} >"$D/env"
	{
		printf 'export PATH=%q:$PATH\n' "$VM_DIR"
		echo '. /run/cluster/env'
		printf '. %q\n' "$guest"
		echo 'cluster_setup || exit 125'
		if [ "$i" = 1 ]; then
			echo 'cluster_head || exit 125'
			echo 'cd "$WORK" || exit 125'
			printf '%s\n' "$CMD"
		else
			echo 'cluster_serve'
		fi
	} >"$D/cmd"
	out=file,path=$D/out.log
	[ "$i" = 1 ] && out=stdio,signal=off
	vm_qemu_base "${RDMACH_VM_SMP:-1}" "${RDMACH_VM_MEM:-1024}" "$D" "$WORK" "$out"
	"${VM_QEMU[@]}" -virtfs "$(vm_fs "$CL" cluster)" \
		-netdev "${NET[$((i - 1))]}" \
		-device "virtio-net-pci,netdev=n0,mac=02:00:c0:00:02:$(printf %02x $((10 + i)))" \
		</dev/null 2>"$D/qemu.err" &
	PIDS+=($!)
done

# vm_fail VM MESSAGE: name the VM, show why, end with 125
vm_fail() {
	local D=$CL/$1
	echo "vm-cluster: $1: $2" >&2
	grep -h 'vm-init:\|vm[0-9]*: ' "$D/console.log" "$D/out.log" 2>/dev/null | tail -n 5 >&2 || true
	tail -n 15 "$D/console.log" "$D/qemu.err" 2>/dev/null | sed "s/^/  $1| /" >&2 || true
	exit 125
}

# a VM's QEMU ended: did its guest report a status?
vm_gone() {	# index -> 0 if it ended as asked
	local i=$1 h=vm$1 rc=0
	wait "${PIDS[$((i - 1))]}" || rc=$?
	[ -n "${KILLED[$h]:-}" ] && return 0
	if [ -s "$CL/$h/rc" ]; then
		[ "$(cat "$CL/$h/rc")" = 0 ] && [ -e "$CL/stop" ] && return 0
		vm_fail "$h" "its guest ended with status $(cat "$CL/$h/rc")"
	fi
	vm_fail "$h" "QEMU exited (status $rc) without a status from the guest"
}

# --- requests from the guests (vmctl) -------------------------------------
declare -A CABLE_BACK=()
# timed cable faults end here, whatever became of the guest that asked
cables_back() {
	local i t s
	for i in "${!CABLE_BACK[@]}"; do
		[ -n "${CABLE_BACK[$i]}" ] || continue
		read -r t s <<<"${CABLE_BACK[$i]}"
		if awk -v t="$t" -v n="$EPOCHREALTIME" 'BEGIN { exit !(n >= t) }'; then
			echo "$s $((i - 1))" >"$CL/hub.cmd"
			echo "vm-cluster: vm$i cable $s" >&2
			CABLE_BACK[$i]=
		fi
	done
}

serve_requests() {
	local r id ans what h arg idx
	for r in "$CL"/req/*.req; do
		[ -e "$r" ] || return 0
		id=${r%.req}
		read -r what h arg <"$r" || true
		rm -f "$r"
		idx=${h#vm}
		ans=ok
		case $what in
		kill)
			if [ -n "${KILLED[$h]:-}" ]; then
				ans="ok already"
			else
				KILLED[$h]=1
				kill -9 "${PIDS[$((idx - 1))]}" 2>/dev/null || ans="$h was not running"
				wait "${PIDS[$((idx - 1))]}" 2>/dev/null || true
				echo "vm-cluster: $h killed on request" >&2
			fi ;;
		cable)	# cable VM down|up [SECONDS]: the harness plugs it back
			if [ -z "$HUBPID" ]; then
				ans="no switch (--direct)"
			else
				set -- $arg
				echo "$1 $((idx - 1))" >"$CL/hub.cmd"
				echo "vm-cluster: $h cable $1${2:+ for $2 s}" >&2
				CABLE_BACK[$idx]=
				[ -z "${2:-}" ] || CABLE_BACK[$idx]="$(awk -v t="$EPOCHREALTIME" \
					-v d="$2" -v s="$1" 'BEGIN { printf "%.3f %s", t + d, s == "down" ? "up" : "down" }')"
			fi ;;
		*) ans="unknown request '$what'" ;;
		esac
		echo "$ans" >"$id.done.tmp" && mv "$id.done.tmp" "$id.done"
	done
}

# --- boot: wait until every VM is ready -----------------------------------
t0=$SECONDS
while :; do
	ready=0
	for i in $(seq 1 "$N"); do
		[ -e "$CL/ready/vm$i" ] && ready=$((ready + 1))
		kill -0 "${PIDS[$((i - 1))]}" 2>/dev/null || vm_gone "$i" ||
			vm_fail "vm$i" "stopped while booting"
		[ ! -s "$CL/vm$i/rc" ] || vm_fail "vm$i" "failed while booting"
	done
	[ "$ready" = "$N" ] && break
	[ $((SECONDS - t0)) -lt "$BOOT_TIMEOUT" ] || {
		for i in $(seq 1 "$N"); do
			[ -e "$CL/ready/vm$i" ] || vm_fail "vm$i" "not up after $BOOT_TIMEOUT s"
		done
	}
	sleep 0.2
done
touch "$CL/go"
[ -z "${RDMACH_VM_VERBOSE:-}" ] || echo "vm-cluster: $N VMs up in $((SECONDS - t0)) s" >&2

# --- run: until the head's QEMU ends --------------------------------------
t0=$SECONDS
while kill -0 "${PIDS[0]}" 2>/dev/null; do
	serve_requests
	cables_back
	for i in $(seq 2 "$N"); do
		[ -z "${KILLED[vm$i]:-}" ] || continue
		kill -0 "${PIDS[$((i - 1))]}" 2>/dev/null || vm_gone "$i" || true
	done
	if [ $((SECONDS - t0)) -ge "$TIMEOUT" ]; then
		echo "vm-cluster: vm1: the command timed out after $TIMEOUT s" >&2
		exit 124
	fi
	sleep 0.1
done
qrc=0
wait "${PIDS[0]}" || qrc=$?
touch "$CL/stop"
# the others power off when they see stop
t1=$SECONDS
for i in $(seq 2 "$N"); do
	p=${PIDS[$((i - 1))]}
	while kill -0 "$p" 2>/dev/null && [ $((SECONDS - t1)) -lt 30 ]; do
		sleep 0.1
	done
	if kill -0 "$p" 2>/dev/null; then
		echo "vm-cluster: vm$i: did not power off within 30 s: killed" >&2
		kill -9 "$p" 2>/dev/null || true
	else
		vm_gone "$i"
	fi
done
if [ -s "$CL/vm1/rc" ]; then
	rc=$(cat "$CL/vm1/rc")
	[ "$rc" != 125 ] || vm_fail vm1 "the command could not start"
	DONE=ok
	exit "$rc"
fi
vm_fail vm1 "QEMU exited (status $qrc) without a status from the guest"
