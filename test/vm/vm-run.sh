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

VM_PROG=vm-run
. "$(dirname "$0")/vm-lib.sh"
die() { vm_die "$@"; }
[ $# -eq 2 ] || { sed -n '2,15s/^# \{0,1\}//p' "$0" >&2; exit 2; }
WORK=$(cd "$1" && pwd -P) || die "no such directory: $1"
CMD=$2
vm_prepare

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

vm_qemu_base "${RDMACH_VM_SMP:-$(nproc)}" "${RDMACH_VM_MEM:-2048}" "$CTL" \
	"$WORK" stdio,signal=off
timeout --foreground -k 10 "${RDMACH_VM_TIMEOUT:-900}" "${VM_QEMU[@]}" \
	</dev/null 2>"$CTL/qemu.err" &
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
