#!/bin/busybox sh
# vm-init.sh - PID 1 of the test VM (see vm-run.sh): load the modules, mount
# the host's / (ro) and the work dir (rw) over 9p, create rxe0 on a dummy
# netdev (or on the NIC that vm-cluster.sh gives: VM_NETDEV, VM_IP, VM_MTU,
# VM_HOSTNAME, VM_MOUNTS, VM_RXE=0 for none, from /ctl/env), run /ctl/cmd
# in a chroot, write its status to /ctl/rc, power off.
/bin/busybox --install -s /bin
export PATH=/bin
R=/newroot
fail() { echo "vm-init: $*"; echo 125 >/ctl/rc; sync; poweroff -f; }
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $(cat /modules.list); do
	a=; [ "$m" = dummy.ko ] && a=numdummies=0
	insmod "/lib/modules/$m" $a || fail "insmod $m"
done
o=trans=virtio,version=9p2000.L,msize=524288
mkdir -p /ctl; mount -t 9p -o $o ctl /ctl || fail "mount ctl"
. /ctl/env
touch /ctl/clock; date -s @$(($(stat -c %Y /ctl/clock) + 1)) >/dev/null
mount -t 9p -o $o,ro,cache=loose hostroot $R || fail "mount host root"
for d in proc sys dev; do mount --move /$d $R/$d; done
mknod -m 666 /dev/null c 1 3
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts; mount -t tmpfs shm $R/dev/shm
mount -t tmpfs -o mode=1777 tmp $R/tmp
mount -t tmpfs -o mode=755 run $R/run
mkdir -p $R/run/vm; mount --bind /ctl $R/run/vm
mkdir -p "$R$WORK" 2>/dev/null	# under /tmp it is on the tmpfs just mounted
mount -t 9p -o $o,cache=mmap work "$R$WORK" || fail "mount $WORK"
for m in ${VM_MOUNTS:-}; do		# extra shares, "tag:/path" (under /run)
	mkdir -p "$R${m#*:}" && mount -t 9p -o $o "${m%%:*}" "$R${m#*:}" ||
		fail "mount ${m%%:*}"
done
[ -z "${VM_HOSTNAME:-}" ] || hostname "$VM_HOSTNAME"
ip link set lo up
if [ -n "${VM_NETDEV:-}" ]; then	# a NIC (vm-cluster.sh): VM_IP, VM_MTU
	n=$VM_NETDEV
	ip link set "$n" mtu "${VM_MTU:-1500}" || fail "$n: mtu ${VM_MTU:-}"
	ip addr add "$VM_IP/24" dev "$n" || fail "$n: address $VM_IP"
	ip link set "$n" up || fail "$n: no such NIC"
else					# no NIC: a dummy netdev of our own
	n=rxenet0
	ip link add $n type dummy || fail "dummy netdev"
	ip addr add 192.0.2.1/24 dev $n
	ip link set $n up
fi
[ "${VM_RXE:-1}" = 0 ] || PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot $R \
	rdma link add rxe0 type rxe netdev $n || fail "rdma link add rxe0 on $n"
exec 3<>$R/dev/hvc0; stty raw -echo <&3
mkfifo /out; cat /out >&3 & cat=$!
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
chroot $R /bin/bash /run/vm/cmd <$R/dev/null >/out 2>&1 3>&-
rc=$?
for p in $R/proc/[0-9]*; do		# leftovers keep the pipe open
	p=${p##*/}
	[ "$p" = 1 ] || [ "$p" = $cat ] ||
		[ -z "$(head -c1 $R/proc/$p/cmdline 2>/dev/null)" ] ||
		kill -9 "$p" 2>/dev/null
done
wait $cat
stty raw <&3
echo $rc >/ctl/rc; sync
poweroff -f
