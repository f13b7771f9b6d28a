# vm-lib.sh - sourced by vm-run.sh (one VM) and vm-cluster.sh (several):
# the kernel and initramfs cache, and the QEMU arguments every test VM has.
#
#   vm_prepare        check the tools, fetch/extract the kernel once, build
#                     the initramfs once; sets VM_CACHE VM_KERNEL VM_INITRD
#   vm_fs PATH TAG [,OPTS]   a -virtfs argument
#   vm_qemu_base      the common QEMU arguments (in the array VM_QEMU)
# The caller sets VM_PROG (for messages) before sourcing.
#
# Cache: ${RDMACH_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmach-vm}: the
# kernel .deb of linux-image-amd64's dependency (apt-get download, never
# installed), its vmlinuz, the modules the guest loads, and initramfs images
# named by a hash of /init + modules + busybox (edits rebuild them).

VM_PROG=${VM_PROG:-vm}
VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# loaded in this order by vm-init.sh (with their dependencies first):
# virtio transport and 9p for the shares, the console, a dummy netdev and
# virtio_net for the cluster's NIC, crc32 (rdma_rxe needs the transform and
# the guest has no modprobe), Soft-RoCE
VM_MODULES="virtio_pci 9pnet_virtio 9p virtio_console dummy virtio_net
	    crc32_generic rdma_rxe"

vm_die() { echo "$VM_PROG: $*" >&2; exit 125; }

vm_prepare() {
	local t kpkg k deb kver mods m
	for t in qemu-system-x86_64 busybox depmod modprobe cpio rdma; do
		command -v "$t" >/dev/null || [ -x "/bin/$t" ] || [ -x "/sbin/$t" ] ||
			vm_die "missing $t (tools/install-deps.sh, or apt-get install qemu-system-x86 busybox-static kmod cpio rdma-core iproute2)"
	done
	VM_CACHE=${RDMACH_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmach-vm}
	mkdir -p "$VM_CACHE"
	exec 9>"$VM_CACHE/.lock"
	flock -w 600 9 || vm_die "the VM cache $VM_CACHE stayed locked for 600 s"

	# --- kernel: Debian's, from the package linux-image-amd64 depends on
	kpkg=$(cat "$VM_CACHE/kpkg" 2>/dev/null || true)
	if [ -z "$kpkg" ]; then
		_vm_kpkg() { apt-cache depends linux-image-amd64 2>/dev/null |
			 awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
		kpkg=$(_vm_kpkg)
		# a fresh machine may have no package lists yet
		[ -n "$kpkg" ] || { apt-get update -qq >&2 || true; kpkg=$(_vm_kpkg); }
		[ -n "$kpkg" ] || vm_die "cannot resolve linux-image-amd64 (apt-get update?)"
		echo "$kpkg" >"$VM_CACHE/kpkg"
	fi
	k=$VM_CACHE/$kpkg
	# the module set names its directory, so caches of other sets stay valid
	mods=$k/modules-$(echo $VM_MODULES | sha256sum | cut -c1-8)
	mkdir -p "$k"
	if [ ! -s "$k/vmlinuz" ] || [ ! -s "$mods.list" ]; then
		deb=$(ls "$k"/*.deb 2>/dev/null | head -n1 || true)
		if [ -z "$deb" ]; then
			echo "$VM_PROG: apt-get download $kpkg" >&2
			(cd "$k" && apt-get -qq -o APT::Sandbox::User=root download "$kpkg") >&2 ||
				vm_die "apt-get download $kpkg failed"
			deb=$(ls "$k"/*.deb | head -n1)
		fi
		rm -rf "$k/x" "$mods" && mkdir "$k/x" "$mods" && dpkg -x "$deb" "$k/x"
		kver=$(ls "$k/x/lib/modules" | head -n1)
		cp "$k/x/boot/vmlinuz-$kver" "$k/vmlinuz"
		depmod -b "$k/x" "$kver"
		for m in $VM_MODULES; do
			modprobe -d "$k/x" -S "$kver" --show-depends "$m" |
				awk '$1 == "insmod" {print $2}'
		done | awk '!seen[$0]++' | while read -r f; do
			cp "$f" "$mods/"; basename "$f"
		done >"$mods.list.tmp"
		mv "$mods.list.tmp" "$mods.list"
		rm -rf "$k/x"
	fi
	VM_KERNEL=$k/vmlinuz

	# --- initramfs: busybox + modules + /init
	local init=$VM_DIR/vm-init.sh stamp tmp
	stamp=$(cat "$init" "$mods.list" /bin/busybox | sha256sum | cut -c1-12)
	VM_INITRD=$k/initrd-$stamp.gz
	if [ ! -s "$VM_INITRD" ]; then
		tmp=$(mktemp -d)
		mkdir -p "$tmp"/{bin,dev,proc,sys,newroot,lib/modules}
		cp /bin/busybox "$tmp/bin/"
		cp "$init" "$tmp/init" && chmod 755 "$tmp/init"
		cp "$mods.list" "$tmp/modules.list"
		cp "$mods"/* "$tmp/lib/modules/"
		(cd "$tmp" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) \
			>"$VM_INITRD.tmp" && mv "$VM_INITRD.tmp" "$VM_INITRD"
		rm -rf "$tmp"
	fi
	flock -u 9
	exec 9>&-
}

vm_fs() { echo "local,path=${1//,/,,},mount_tag=$2,security_model=none,multidevs=remap${3:-}"; }

# vm_qemu_base SMP MEM CTL WORK CONSOLE-CHARDEV: the arguments of every test
# VM: TCG, no default devices, PVH-less bzImage boot, kernel console to
# CTL/console.log, the command's output on a virtconsole, and three 9p
# shares (host / read-only, WORK read-write, CTL read-write).
vm_qemu_base() {
	local smp=$1 mem=$2 ctl=$3 work=$4 chardev=$5
	VM_QEMU=(qemu-system-x86_64 -accel tcg -cpu max -smp "$smp" -m "$mem"
		-nodefaults -no-user-config -display none -no-reboot
		-kernel "$VM_KERNEL" -initrd "$VM_INITRD"
		-append "console=ttyS0 panic=-1 quiet"
		-serial "file:$ctl/console.log"
		-device virtio-serial-pci -chardev "$chardev,id=out"
		-device virtconsole,chardev=out
		-virtfs "$(vm_fs / hostroot ,readonly=on)"
		-virtfs "$(vm_fs "$work" work)" -virtfs "$(vm_fs "$ctl" ctl)")
}
