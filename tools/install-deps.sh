#!/bin/sh
# install-deps.sh - install, from Debian's archive, what rdmach needs to
# build, test and benchmark: rdma-core (libibverbs), Debian's MPICH (Hydra's
# mpiexec and the reference MPI; netpipe-mpich2, a program of Debian's
# built against it that channel/test-mpich.sh dropin runs on ours),
# perftest, gnuplot, valgrind, and what the
# Soft-RoCE test VMs need (qemu, busybox, kmod, cpio; dropbear's server
# binary and the openssh client for the VM cluster: no service is started
# on this host), and clang with its libFuzzer runtime (test/fuzz/).
# Idempotent: only missing packages are installed.  Needs root (or sudo).
set -e
PKGS="build-essential pkg-config libibverbs-dev librdmacm-dev rdma-core
      ibverbs-providers ibverbs-utils rdmacm-utils perftest mpich libmpich-dev
      netpipe-mpich2
      gnuplot-nox valgrind qemu-system-x86 busybox-static kmod cpio xz-utils
      iproute2 util-linux gfortran autoconf automake libtool dpkg-dev
      dropbear-bin openssh-client bc clang libclang-rt-14-dev"
missing=
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "install-deps: apt-get install$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
