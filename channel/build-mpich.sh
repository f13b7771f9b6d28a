#!/bin/bash
# build-mpich.sh - fetch MPICH 4.x, insert the CH3 channel "rdma" (this
# directory), regenerate, configure --with-device=ch3:rdma, build, install.
#
# Usage: channel/build-mpich.sh [step...]     (default: all steps)
#   steps: fetch insert autogen configure build install
#
# Environment (all optional):
#   MPICH_SRC=path      an MPICH 4.x tarball (.tar.gz/.tar.bz2/.tar.xz) or an
#                       unpacked tree; default: `apt-get source mpich` (Debian)
#   MPICH_WORK=dir      where the source and build trees go (build/mpich)
#   PREFIX=dir          install prefix (build/mpich-install; for
#                       CHANNEL=sock|nemesis: build/mpich-CHANNEL-install)
#   CHANNEL=rdma|sock|nemesis   rdma (default), or sock / nemesis, the
#                       reference builds from the
#                       same source tree
#   RDMACH_BUILD=dir    rdmach build dir holding lib/librdmach.a (build)
#   JOBS=n              parallel make jobs (2)
#   LINK=symlink|copy   how the channel enters the MPICH tree (symlink: edits
#                       here are rebuilt by `make` in the MPICH build dir)
#   CONFIGURE_EXTRA=... more configure arguments
#
# fetch, insert, autogen and configure leave a stamp file and are skipped
# when it exists, unless named on the command line; build and install always
# run (incremental: only what changed in channel/ or librdmach.a is redone).
# Times of each step go to $MPICH_WORK/times.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
channel=${CHANNEL:-rdma}
work=${MPICH_WORK:-$repo/build/mpich}
src=$work/src
jobs=${JOBS:-2}
link=${LINK:-symlink}
rdmach_build=${RDMACH_BUILD:-$repo/build}
case $channel in
rdma) prefix=${PREFIX:-$repo/build/mpich-install} ;;
sock) prefix=${PREFIX:-$repo/build/mpich-sock-install} ;;
nemesis) prefix=${PREFIX:-$repo/build/mpich-nemesis-install} ;;
*) echo "build-mpich: CHANNEL must be rdma, sock or nemesis, not '$channel'" >&2; exit 2 ;;
esac
objdir=$work/build-$channel

die() { echo "build-mpich: $*" >&2; exit 1; }
log() { echo "build-mpich: $*"; }

need_pkgs() {
	local missing=() p
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || die "missing packages: ${missing[*]} (apt-get install them as root)"
	log "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
}

# deb-src entries mirroring the binary ones of debian.sources
enable_deb_src() {
	local f=/etc/apt/sources.list.d/rdmach-src.sources
	if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ &&
	   ! grep -qs '^deb-src' /etc/apt/sources.list; then
		[ "$(id -u)" -eq 0 ] || die "no deb-src entry in apt sources; add one or set MPICH_SRC="
		local base=/etc/apt/sources.list.d/debian.sources
		[ -f $base ] || die "$base not found: set MPICH_SRC= to an MPICH tarball"
		# first stanza of debian.sources with Types: deb-src
		awk 'BEGIN{RS="";ORS="\n\n"} NR==1{sub(/Types: deb/,"Types: deb-src");print}' $base >$f
		log "wrote $f"
	fi
	apt-get update -q >/dev/null
}

step_fetch() {
	rm -rf "$src" "$work/fetch"
	mkdir -p "$work/fetch"
	if [ -n "${MPICH_SRC:-}" ]; then
		if [ -d "$MPICH_SRC" ]; then
			log "copying tree $MPICH_SRC"
			cp -a "$MPICH_SRC" "$src"
		else
			log "unpacking $MPICH_SRC"
			tar -C "$work/fetch" -xf "$MPICH_SRC"
			mv "$work/fetch"/mpich-*/ "$src"
		fi
	else
		need_pkgs dpkg-dev
		enable_deb_src
		(cd "$work/fetch" && apt-get source -q mpich >/dev/null)
		mv "$work/fetch"/mpich-*/ "$src"
	fi
	[ -d "$src/src/mpid/ch3/channels/sock" ] || die "$src has no ch3 (need MPICH 4.x)"
	rm -rf "$work/fetch"
}

step_insert() {
	local dst=$src/src/mpid/ch3/channels/rdma mk=$src/src/mpid/ch3/channels/Makefile.mk
	rm -rf "$dst"
	if [ "$link" = copy ]; then
		mkdir -p "$dst" && cp "$here"/*.c "$here"/*.h "$here"/*.m4 "$here"/Makefile.mk "$dst"/
	else
		ln -s "$here" "$dst"
	fi
	grep -q channels/rdma/Makefile.mk "$mk" ||
		echo 'include $(top_srcdir)/src/mpid/ch3/channels/rdma/Makefile.mk' >>"$mk"
}

# Only the top-level configure needs regenerating: the channel adds a
# subconfigure.m4 (listed in subsys_include.m4) and a Makefile.mk.  The
# bundled sub-packages (mpl, hwloc, yaksa, romio, hydra, ...) keep the
# configure scripts of the release tarball.
step_autogen() {
	need_pkgs autoconf automake libtool
	cd "$src"
	./maint/gen_subcfg_m4 >/dev/null
	grep -q channels/rdma/subconfigure.m4 subsys_include.m4 ||
		die "gen_subcfg_m4 did not pick up the rdma channel"
	autoreconf -fi >"$work/autoreconf.log" 2>&1 ||
		{ tail -30 "$work/autoreconf.log"; die "autoreconf failed (log: $work/autoreconf.log)"; }
}

configure_args() {
	local args=(--prefix="$prefix" --with-device=ch3:$channel
		    --disable-static --enable-fortran=all
		    --disable-doc --with-pm=hydra)
	if [ "$channel" = rdma ]; then
		args+=(--with-rdmach="$repo" --with-rdmach-lib="$rdmach_build/lib/librdmach.a")
	fi
	printf '%s\n' "${args[@]}" ${CONFIGURE_EXTRA:-}
}

step_configure() {
	need_pkgs gfortran
	local args
	mapfile -t args < <(configure_args)
	if [ "$channel" = rdma ] && [ ! -f "$rdmach_build/lib/librdmach.a" ]; then
		die "$rdmach_build/lib/librdmach.a missing: run make in $repo first"
	fi
	rm -rf "$objdir" && mkdir -p "$objdir" && cd "$objdir"
	# gfortran >= 10 rejects the MPI F77 binding's argument mismatches
	# (also kept in mpif77/mpif90 for user code, as Debian does).
	FFLAGS="-O2 -fallow-argument-mismatch" FCFLAGS="-O2 -fallow-argument-mismatch" \
	MPICHLIB_CFLAGS="-O2 -g" \
		"$src/configure" "${args[@]}" >"$objdir/configure.out" 2>&1 ||
		{ tail -30 "$objdir/configure.out"; die "configure failed (log: $objdir/config.log)"; }
	configure_args >"$objdir/.configure-args"
}

step_build() {
	cd "$objdir"
	# libmpi does not depend on librdmach.a in MPICH's makefiles: relink by hand
	if [ "$channel" = rdma ] && [ -f lib/libmpi.la ] &&
	   [ "$rdmach_build/lib/librdmach.a" -nt lib/libmpi.la ]; then
		rm -f lib/libmpi.la
	fi
	make -j"$jobs" >"$objdir/make.out" 2>&1 ||
		{ grep -n -B2 -A8 'error' "$objdir/make.out" | tail -40; die "make failed (log: $objdir/make.out)"; }
}

# MPICH's ABI (libmpi.so.12 from 3.1 to 5.0): a program built with
# Debian's MPICH links libmpich.so.12 (Fortran: libmpichfort.so.12, C++:
# libmpichcxx.so.12), the same libraries under other names, so those
# names make this install its drop-in
# (LD_LIBRARY_PATH=$prefix/lib).  Another soname (a git tree's
# libmpi_so_version 0:0:0 gives libmpi.so.0) loads for neither: said so.
abi_names() {
	local lib=$prefix/lib so
	so=$(objdump -p "$lib/libmpi.so" 2>/dev/null | sed -n 's/^ *SONAME *//p')
	if [ "$so" != libmpi.so.12 ]; then
		echo "build-mpich: warning: $lib/libmpi.so is ${so:-without a soname}, not" \
			"libmpi.so.12 (the MPICH ABI): programs built with another MPICH" \
			"(Debian's libmpich.so.12) cannot use it; a release tarball's" \
			"maint/version.m4 sets the ABI version" >&2
		return 0
	fi
	ln -sf libmpi.so.12 "$lib/libmpich.so.12"
	# and Debian's names of the Fortran and C++ bindings, when built
	[ ! -e "$lib/libmpifort.so.12" ] || ln -sf libmpifort.so.12 "$lib/libmpichfort.so.12"
	[ ! -e "$lib/libmpicxx.so.12" ] || ln -sf libmpicxx.so.12 "$lib/libmpichcxx.so.12"
}

step_install() {
	cd "$objdir"
	make install >"$objdir/install.out" 2>&1 ||
		{ tail -30 "$objdir/install.out"; die "make install failed"; }
	abi_names
	log "installed into $prefix ($prefix/bin/mpicc, mpif90, mpiexec)"
}

stamp_of() {
	case $1 in
	fetch|insert|autogen) echo "$work/.stamp-$1" ;;
	*) echo "$objdir/.stamp-$1" ;;
	esac
}

run_step() {
	local s=$1 force=$2 t0 t1 stamp
	stamp=$(stamp_of "$s")
	# a configure with other arguments (e.g. another RDMACH_BUILD) is redone
	if [ "$s" = configure ] && ! configure_args | cmp -s - "$objdir/.configure-args"; then
		force=1
	fi
	if [ "$force" = 0 ] && [ -f "$stamp" ] && [ "$s" != build ] && [ "$s" != install ]; then
		return 0
	fi
	log "step $s (channel $channel)"
	t0=$(date +%s)
	"step_$s"
	t1=$(date +%s)
	mkdir -p "$(dirname "$stamp")" && touch "$stamp"
	echo "$(date -Is) $channel $s $((t1 - t0))s" >>"$work/times.log"
	log "step $s done in $((t1 - t0)) s"
}

mkdir -p "$work"
all=(fetch insert autogen configure build install)
if [ $# -gt 0 ]; then
	for s in "$@"; do
		case " ${all[*]} " in *" $s "*) ;; *) die "unknown step '$s'" ;; esac
		run_step "$s" 1
	done
else
	# A new fetch invalidates what was derived from the old tree.
	for s in "${all[@]}"; do
		run_step "$s" 0
	done
fi
