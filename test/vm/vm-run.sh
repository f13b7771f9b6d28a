#!/usr/bin/env bash
# vm-run.sh - run a command in a throw-away QEMU VM with a Soft-RoCE device
# (rdma_rxe "rxe0"), for testing rdma_ib on a host whose kernel has no RDMA.
#
# usage: test/vm/vm-run.sh <dir> '<bash command>'
#   The guest runs Debian's kernel with the host's / mounted read-only (9p),
#   <dir> read-write at the same path, tmpfs on /tmp; the command runs in
#   <dir> as root.  Its output arrives on stdout; the exit status is the
#   command's, 124 on timeout, 125 when the VM failed to report one.
# env: RDMACH_VM_TIMEOUT (s, 900)  RDMACH_VM_MEM (MiB, 2048)
#      RDMACH_VM_SMP (vCPUs, nproc)  RDMACH_VM_PASSENV ("VAR1 VAR2")
#      RDMACH_VM_CACHE (${XDG_CACHE_HOME:-$HOME/.cache}/rdmach-vm)
# Needs (Debian): qemu-system-x86 busybox-static kmod cpio rdma-core
# ibverbs-providers iproute2.  The kernel .deb is fetched once with
# `apt-get download` (never installed) and kept in the cache.
set -euo pipefail

die() { echo "vm-run: $*" >&2; exit 125; }
[ $# -eq 2 ] || { sed -n '2,15s/^# \{0,1\}//p' "$0" >&2; exit 2; }
WORK=$(cd "$1" && pwd -P) || die "no such directory: $1"
CMD=$2
CACHE=${RDMACH_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmach-vm}
for t in qemu-system-x86_64 busybox depmod modprobe cpio rdma; do
	command -v "$t" >/dev/null || [ -x "/bin/$t" ] || [ -x "/sbin/$t" ] ||
		die "missing $t (apt-get install qemu-system-x86 busybox-static kmod cpio rdma-core iproute2)"
done
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

# --- kernel: Debian's, from the package linux-image-amd64 depends on ------
KPKG=$(cat "$CACHE/kpkg" 2>/dev/null || true)
if [ -z "$KPKG" ]; then
	kpkg() { apt-cache depends linux-image-amd64 2>/dev/null |
		 awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
	KPKG=$(kpkg)
	# a fresh machine may have no package lists yet
	[ -n "$KPKG" ] || { apt-get update -qq >&2 || true; KPKG=$(kpkg); }
	[ -n "$KPKG" ] || die "cannot resolve linux-image-amd64 (apt-get update?)"
	echo "$KPKG" >"$CACHE/kpkg"
fi
K=$CACHE/$KPKG
mkdir -p "$K"
if [ ! -s "$K/vmlinuz" ] || [ ! -d "$K/modules" ]; then
	deb=$(ls "$K"/*.deb 2>/dev/null | head -n1 || true)
	if [ -z "$deb" ]; then
		echo "vm-run: apt-get download $KPKG" >&2
		(cd "$K" && apt-get -qq -o APT::Sandbox::User=root download "$KPKG") >&2 ||
			die "apt-get download $KPKG failed"
		deb=$(ls "$K"/*.deb | head -n1)
	fi
	rm -rf "$K/x" && mkdir "$K/x" && dpkg -x "$deb" "$K/x"
	kver=$(ls "$K/x/lib/modules" | head -n1)
	cp "$K/x/boot/vmlinuz-$kver" "$K/vmlinuz"
	depmod -b "$K/x" "$kver"
	# rdma_rxe needs the crc32 transform; the guest has no modprobe, so
	# list every module with its dependencies in load order
	mkdir -p "$K/modules"
	for m in virtio_pci 9pnet_virtio 9p virtio_console dummy crc32_generic \
		 rdma_rxe; do
		modprobe -d "$K/x" -S "$kver" --show-depends "$m" |
			awk '$1 == "insmod" {print $2}'
	done | awk '!seen[$0]++' | while read -r f; do
		cp "$f" "$K/modules/"; basename "$f"
	done >"$K/modules.list"
	rm -rf "$K/x"
fi

# --- initramfs: busybox + modules + /init ----------------------------------
INIT=$(dirname "$0")/vm-init.sh
STAMP=$(cat "$INIT" "$K/modules.list" /bin/busybox | sha256sum | cut -c1-12)
INITRD=$K/initrd-$STAMP.gz
if [ ! -s "$INITRD" ]; then
	t=$(mktemp -d)
	mkdir -p "$t"/{bin,dev,proc,sys,newroot,lib/modules}
	cp /bin/busybox "$t/bin/"
	cp "$INIT" "$t/init" && chmod 755 "$t/init"
	cp "$K/modules.list" "$t/"
	cp "$K"/modules/* "$t/lib/modules/"
	(cd "$t" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$INITRD"
	rm -rf "$t"
fi
flock -u 9

# --- per-run control dir: env, command, status -----------------------------
CTL=$(mktemp -d "${TMPDIR:-/tmp}/rdmach-vm.XXXXXX")
trap 'rm -rf "$CTL"' EXIT
{
	printf 'export WORK=%q HOME=/tmp TERM=dumb\n' "$WORK"
	for v in ${RDMACH_VM_PASSENV:-}; do
		[ -z "${!v+x}" ] || printf 'export %s=%q\n' "$v" "${!v}"
	done
} >"$CTL/env"
printf 'cd "$WORK" || exit 125\n%s\n' "$CMD" >"$CTL/cmd"

fs() { echo "local,path=${1//,/,,},mount_tag=$2,security_model=none,multidevs=remap${3:-}"; }
timeout --foreground -k 10 "${RDMACH_VM_TIMEOUT:-900}" qemu-system-x86_64 \
	-accel tcg -cpu max -smp "${RDMACH_VM_SMP:-$(nproc)}" \
	-m "${RDMACH_VM_MEM:-2048}" -nodefaults -no-user-config -display none \
	-no-reboot -kernel "$K/vmlinuz" -initrd "$INITRD" \
	-append "console=ttyS0 panic=-1 quiet" -serial "file:$CTL/console.log" \
	-device virtio-serial-pci -chardev stdio,id=out,signal=off \
	-device virtconsole,chardev=out \
	-virtfs "$(fs / hostroot ,readonly=on)" -virtfs "$(fs "$WORK" work)" \
	-virtfs "$(fs "$CTL" ctl)" </dev/null 2>"$CTL/qemu.err" &
QPID=$!
trap 'kill $QPID 2>/dev/null; wait $QPID; exit 130' INT TERM HUP
qrc=0
wait $QPID || qrc=$?
if [ -s "$CTL/rc" ]; then
	rc=$(cat "$CTL/rc")
	# 125 from the guest's init: say why (its message is on the console)
	[ "$rc" != 125 ] || grep -h 'vm-init:' "$CTL/console.log" >&2 || true
	exit "$rc"
fi
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	echo "vm-run: timed out" >&2; exit 124
fi
echo "vm-run: the VM ended without a status (qemu rc $qrc)" >&2
tail -n 20 "$CTL/console.log" "$CTL/qemu.err" >&2 || true
exit 125
