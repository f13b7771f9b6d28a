# mpicmd.sh - sourced: mpi_cmd PREFIX NAME prints the path of an MPI's
# command (mpicc, mpif90, mpiexec, mpichversion) under PREFIX.  Debian's
# MPICH in /usr names its own PREFIX/bin/NAME.mpich: the bare names are
# alternatives that Open MPI, when installed, may own.
mpi_cmd() {
	if [ -x "$1/bin/$2.mpich" ]; then echo "$1/bin/$2.mpich"; else echo "$1/bin/$2"; fi
}
