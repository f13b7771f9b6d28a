# vm-cluster-guest.sh - sourced by every cluster VM's command (see
# vm-cluster.sh), inside the guest, as root, with the cluster's shared
# directory at /run/cluster:
#   cluster_setup   /etc/hosts of the cluster, root's ssh keys on a tmpfs
#                   /root, dropbear on this VM's address, wait for rxe0 to
#                   be ACTIVE, then say "ready"
#   cluster_head    wait until the harness says every VM is ready, check
#                   that ssh reaches each of them
#   cluster_serve   (the other VMs) serve until the harness says stop
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
	touch "$CL/ready/$VM_HOSTNAME"
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
