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
#
#   tools/install-deps.sh slurm   only the optional group for the cluster's
#                                 Slurm boot (test/run-cluster.sh, boot S):
#                                 slurmd slurmctld slurm-client munge; the
#                                 VMs run the daemons, this host does not
#                                 (a policy-rc.d keeps them from starting
#                                 while they are installed, unless one is
#                                 already there)
set -e
GROUP=${1:-base}
case $GROUP in
base|slurm) ;;
*) echo "usage: $0 [slurm]" >&2; exit 2 ;;
esac
PKGS="build-essential pkg-config libibverbs-dev librdmacm-dev rdma-core
      ibverbs-providers ibverbs-utils rdmacm-utils perftest mpich libmpich-dev
      netpipe-mpich2
      gnuplot-nox valgrind qemu-system-x86 busybox-static kmod cpio xz-utils
      iproute2 util-linux gfortran autoconf automake libtool dpkg-dev
      dropbear-bin openssh-client bc clang libclang-rt-14-dev"
[ "$GROUP" = base ] || PKGS="slurmd slurmctld slurm-client munge"
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
RC=
if [ "$GROUP" = slurm ] && [ ! -e /usr/sbin/policy-rc.d ]; then
	# no daemon starts on this host while the packages are installed
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
	$SUDO chmod 755 /usr/sbin/policy-rc.d
	RC=/usr/sbin/policy-rc.d
	trap '$SUDO rm -f $RC' EXIT
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
