# vm-cluster-guest.sh - sourced by every cluster VM's command (see
# vm-cluster.sh), inside the guest, as root, with the cluster's shared
# directory at /run/cluster:
#   cluster_setup   /etc/hosts of the cluster, root's ssh keys on a tmpfs
#                   /root, dropbear on this VM's address, wait for rxe0 to
#                   be ACTIVE, then say "ready"
#   cluster_head    wait until the harness says every VM is ready, check
#                   that ssh reaches each of them
#   cluster_serve   (the other VMs) serve until the harness says stop
#   cluster_slurm   (--slurm) munged with the cluster's key, slurmd, and
#                   slurmctld on the head; state on tmpfs (the root is
#                   read-only)
#   cluster_slurm_up  (the head) wait until every node is idle in Slurm
# Messages start with this VM's name; a failure returns 125.
CL=/run/cluster

cluster_msg() { echo "$VM_HOSTNAME: $*" >&2; }

cluster_setup() {
	local i state
	mount --bind $CL/hosts /etc/hosts || { cluster_msg "cannot bind /etc/hosts"; return 125; }
	# root's home: the host's /root is read-only here and not ours to use
	mount -t tmpfs -o mode=700 sshroot /root || return 125
	mkdir -m 700 /root/.ssh
	cp $CL/ssh/id_ed25519 $CL/ssh/config /root/.ssh/
	cp $CL/ssh/id_ed25519.pub /root/.ssh/authorized_keys
	chmod 600 /root/.ssh/*
	# commands run over ssh get a plain PATH from dropbear
	echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		>/root/.bashrc
	if [ "${VM_RXE:-1}" = 1 ]; then
		state=
		for i in $(seq 1 100); do
			state=$(rdma link show rxe0/1 2>/dev/null)
			case $state in *"state ACTIVE"*) break ;; esac
			sleep 0.1
		done
		case $state in
		*"state ACTIVE"*) ;;
		*) cluster_msg "rxe0 not ACTIVE after 10 s: $state"; return 125 ;;
		esac
	fi
	/usr/sbin/dropbear -r $CL/ssh/host_key -p "$VM_IP:22" -s -P /run/dropbear.pid \
		2>>/run/vm/dropbear.log || { cluster_msg "dropbear failed"; return 125; }
	if [ "${VM_SLURM:-0}" = 1 ]; then
		cluster_slurm || return 125
	fi
	touch "$CL/ready/$VM_HOSTNAME"
}

# Slurm from the host's packages: every directory it writes is a tmpfs
# here (the host's root is read-only), with the owners and modes munged
# demands; the configuration and the key come from the run directory
# (vm-cluster.sh --slurm writes them); logs go back there, per VM.
cluster_slurm() {
	local S=$CL/slurm d
	mount -t tmpfs -o mode=700,uid=$(id -u munge),gid=$(id -g munge) munge-etc /etc/munge &&
	mount -t tmpfs -o mode=711,uid=$(id -u munge),gid=$(id -g munge) munge-lib /var/lib/munge &&
	mount -t tmpfs -o mode=700,uid=$(id -u munge),gid=$(id -g munge) munge-log /var/log/munge &&
	mount -t tmpfs -o mode=755 slurm-etc /etc/slurm &&
	mount -t tmpfs -o mode=755 slurm-lib /var/lib/slurm &&
	mount -t tmpfs -o mode=755 slurm-log /var/log/slurm &&
	# slurmd loads a cgroup plugin whatever the proctrack and task
	# plugins: cgroup v1 (cgroup.conf), no systemd needed
	mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup &&
	mkdir /sys/fs/cgroup/freezer &&
	mount -t cgroup -o freezer freezer /sys/fs/cgroup/freezer ||
		{ cluster_msg "slurm: cannot mount its tmpfs directories"; return 125; }
	install -o munge -g munge -m 400 $S/munge.key /etc/munge/munge.key &&
	install -d -o munge -g munge -m 755 /run/munge &&
	cp $S/slurm.conf $S/cgroup.conf /etc/slurm/ &&
	for d in slurmctld slurmd; do install -d -m 755 /var/lib/slurm/$d || return 1; done ||
		{ cluster_msg "slurm: cannot install its files"; return 125; }
	runuser -u munge -- /usr/sbin/munged 2>>$S/munged-$VM_HOSTNAME.log ||
		{ cluster_msg "slurm: munged failed: $(tail -n 2 $S/munged-$VM_HOSTNAME.log)"; return 125; }
	if [ "$VM_HOSTNAME" = vm1 ]; then
		/usr/sbin/slurmctld 2>>$S/slurmctld.err ||
			{ cluster_msg "slurm: slurmctld failed: $(tail -n 2 $S/slurmctld.err)"; return 125; }
	fi
	/usr/sbin/slurmd 2>>$S/slurmd-$VM_HOSTNAME.err ||
		{ cluster_msg "slurm: slurmd failed: $(tail -n 2 $S/slurmd-$VM_HOSTNAME.err)"; return 125; }
}

# The head: every node registered and idle (slurmd starts before or after
# slurmctld: it retries), within the boot timeout.
cluster_slurm_up() {
	local i n st=
	n=$(echo $CLUSTER_HOSTS | wc -w)
	for i in $(seq 1 "$((CLUSTER_BOOT_TIMEOUT * 2))"); do
		st=$(sinfo -h -N -o '%N %t' 2>&1)
		[ "$(echo "$st" | grep -c ' idle$')" = "$n" ] && return 0
		sleep 0.5
	done
	cluster_msg "slurm: not every node idle after $CLUSTER_BOOT_TIMEOUT s: $(echo "$st" | tr '\n' ' ')"
	return 125
}

cluster_head() {
	local i h
	for i in $(seq 1 "$((CLUSTER_BOOT_TIMEOUT * 5))"); do
		[ -e $CL/go ] && break
		sleep 0.2
	done
	[ -e $CL/go ] || { cluster_msg "the other VMs did not come up"; return 125; }
	for h in $CLUSTER_HOSTS; do
		ssh "$h" true </dev/null ||
			{ cluster_msg "ssh to $h failed"; return 125; }
	done
	[ "${VM_SLURM:-0}" = 0 ] || cluster_slurm_up
}

cluster_serve() {
	local i
	for i in $(seq 1 "$((CLUSTER_TIMEOUT * 2))"); do
		[ -e $CL/stop ] && return 0
		sleep 0.5
	done
	cluster_msg "no stop from the harness within $CLUSTER_TIMEOUT s"
	return 124
}
