#!/bin/bash
# test-install.sh - rdmach as a library people install, in a copy of this
# tree (the tree's own config.mk and build/ are never touched):
#
#   ./configure --prefix=P --with-mpich-src=../fake && make install
#   the exact file list, symlinks, soname, modes; pc file; headers alone
#   a program outside the tree, built with `pkg-config --cflags --libs
#   rdmach`, run on 2 processes (it starts itself) and under the installed
#   rdmach_run on 3, byte-checked; a corrupt byte must fail it
#   the same program linked statically (`pkg-config --static`)
#   rdmach_info / rdmach_run --help: man-style sections; --version
#   make install DESTDIR=S; make uninstall removes exactly what install put
#   make mpich gets MPICH_SRC from configure, the environment and the
#   command line (only its fetch step runs, from fake MPICH trees)
#   ./configure --without-ib: the tree builds, rdmach_info's memory model
#   and the conformance and shm tests run
#
# Ends with "N passed, M failed"; exit status 0 only when nothing failed.
# Environment: JOBS (make -j, 2), CC (cc), KEEP=1 keeps the temp directory.
set -u
cd "$(dirname "$0")/.." || exit 2
# Nothing of the caller's make or install settings leaks into the copy.
unset MAKEFLAGS MFLAGS MAKELEVEL MPICH_SRC PREFIX DESTDIR BUILD O PKG_CONFIG_PATH
repo=$(pwd)
jobs=${JOBS:-2}
cc=${CC:-cc}
t0=$(date +%s)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rdmach-install.XXXXXX") || exit 2
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
src=$tmp/src			# the copy of the tree
prefix=$tmp/opt/rdmach		# ./configure --prefix
stage=$tmp/stage		# make install DESTDIR=
app=$tmp/app			# the program outside the tree
log=$tmp/log
pass=0
fail=0

ok() { echo "ok $1"; pass=$((pass + 1)); }
bad() {
	echo "FAIL $1"
	[ -s "$log" ] && sed 's/^/    | /' "$log" | tail -n 25
	fail=$((fail + 1))
}
# check NAME command...: passes when the command succeeds (output in $log)
check() {
	local name=$1; shift
	if "$@" >"$log" 2>&1; then ok "$name"; else bad "$name"; fi
}
# check_not NAME command...: passes when the command fails
check_not() {
	local name=$1; shift
	if "$@" >"$log" 2>&1; then bad "$name (it succeeded)"; else ok "$name"; fi
}
# same NAME WANT GOT: passes when the two strings are equal
same() {
	if [ "$2" = "$3" ]; then ok "$1"; return 0; fi
	printf 'want:\n%s\ngot:\n%s\n' "$2" "$3" >"$log"
	bad "$1"
	return 1
}
finish() {
	echo "test-install: $(($(date +%s) - t0)) s"
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ]
	exit
}

# A fake MPICH tree (what build-mpich.sh's fetch checks for) and a mark
# saying which one fetch took.
fake_mpich() {
	mkdir -p "$1/src/mpid/ch3/channels/sock" && echo "$2" >"$1/fake-mark"
}

# --- a copy of the tree, configured with a prefix --------------------------
mkdir -p "$src" "$app" "$tmp/stub"
tar -C "$repo" --exclude=./.git --exclude='./build*' --exclude=./config.mk \
	--exclude=./results -cf - . | tar -C "$src" -xf - ||
	{ echo "test-install: cannot copy the tree" >&2; echo "0 passed, 1 failed"; exit 1; }
fake_mpich "$tmp/mpich-conf" conf
# A file of someone else's under the prefix: uninstall must keep it.
mkdir -p "$prefix/share" && echo keep >"$prefix/share/keep.txt"

check "configure --prefix --with-mpich-src (relative path)" \
	sh -c "cd '$src' && ./configure --prefix='$prefix' --with-mpich-src=../mpich-conf"
check "make -j$jobs install" make -C "$src" -j"$jobs" install
[ -f "$prefix/lib/pkgconfig/rdmach.pc" ] || finish

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
version=$(pkg-config --modversion rdmach)
major=$(sed -n 's/^#define RDMACH_API_VERSION \([0-9]*\).*/\1/p' "$src/include/rdmach.h")

# --- what was installed -----------------------------------------------------
installed_list() { # DIR: every non-directory under it, relative, sorted
	(cd "$1" && find . -mindepth 1 ! -type d | sed 's|^\./||' | LC_ALL=C sort)
}
want_list=$(LC_ALL=C sort <<EOF
bin/rdmach_bw
bin/rdmach_info
bin/rdmach_latency
bin/rdmach_run
include/rdmach.h
include/rdmach_launch.h
include/rdmach_pmi.h
lib/librdmach.a
lib/librdmach.so
lib/librdmach.so.$major
lib/librdmach.so.$version
lib/pkgconfig/rdmach.pc
share/keep.txt
EOF
)
same "installed files (public headers only)" "$want_list" "$(installed_list "$prefix")"
case $version in
"$major".*) ok "pc Version $version starts with RDMACH_API_VERSION $major" ;;
*) : >"$log"; bad "pc Version $version does not start with RDMACH_API_VERSION $major" ;;
esac
same "librdmach.so.$major -> librdmach.so.$version" "librdmach.so.$version" \
	"$(readlink "$prefix/lib/librdmach.so.$major")"
same "librdmach.so resolves to librdmach.so.$version" "$prefix/lib/librdmach.so.$version" \
	"$(readlink -f "$prefix/lib/librdmach.so")"
same "soname" "Library soname: [librdmach.so.$major]" \
	"$(readelf -d "$prefix/lib/librdmach.so.$version" | sed -n 's/.*(SONAME) *//p')"
same "modes: programs 755, headers, pc and archive 644" \
	"755 755 755 755 644 644 644 644 644" \
	"$(cd "$prefix" && stat -c %a bin/rdmach_bw bin/rdmach_info bin/rdmach_latency \
		bin/rdmach_run include/rdmach.h include/rdmach_launch.h \
		include/rdmach_pmi.h lib/librdmach.a lib/pkgconfig/rdmach.pc | tr '\n' ' ' | sed 's/ $//')"
same "pc prefix" "$prefix" "$(pkg-config --variable=prefix rdmach)"
same "pc Libs" "-L$prefix/lib -lrdmach" "$(pkg-config --libs rdmach | sed 's/ *$//')"
with_ib=0
"$prefix/bin/rdmach_info" -t | grep -qx ib && with_ib=1
if [ $with_ib = 1 ]; then
	same "pc Libs.private (built with ib)" "-libverbs -pthread" \
		"$(sed -n 's/^Libs.private: //p' "$prefix/lib/pkgconfig/rdmach.pc")"
	if pkg-config --exists libibverbs; then
		same "pc Requires.private" "libibverbs" \
			"$(sed -n 's/^Requires.private: //p' "$prefix/lib/pkgconfig/rdmach.pc")"
	fi
else
	same "pc Libs.private (no ib)" "-pthread" \
		"$(sed -n 's/^Libs.private: //p' "$prefix/lib/pkgconfig/rdmach.pc")"
fi
for h in rdmach.h rdmach_pmi.h rdmach_launch.h; do
	check "$h compiles alone with only the installed include dir" \
		sh -c "echo '#include <$h>' | $cc -std=c99 -Wall -Wextra -Werror -fsyntax-only \
			$(pkg-config --cflags rdmach) -x c -"
done

# --- a program outside the tree ---------------------------------------------
cat >"$app/pipe.c" <<'EOC'
/* Every rank sends every other rank 1 MiB + 3 B in pieces and checks each
 * byte it gets.  Not under a PMI server, it starts 2 copies of itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rdmach.h>
#include <rdmach_launch.h>
#include <rdmach_pmi.h>

#define LEN ((1 << 20) + 3)

static unsigned char pattern(int from, int to, size_t i)
{
	return (unsigned char)(i * 7 + from * 31 + to * 101);
}

int main(int argc, char *argv[])
{
	rdmach_oob_t oob;
	rdmach_pmi_t *pmi;
	rdmach_ctx_t *ctx;
	unsigned char *out, *in;
	size_t *sent, *got, i;
	time_t deadline = time(NULL) + 60;
	int me, np, p, busy, rc;

	rc = rdmach_launch_self(argc, argv, 2, 120);
	if (rc || rdmach_pmi_init(&pmi, &oob) || rdmach_init(&ctx, &oob) ||
	    rdmach_connect(ctx)) {
		fprintf(stderr, "pipe: start-up failed\n");
		return 1;
	}
	me = oob.rank;
	np = oob.size;
	out = malloc((size_t)np * LEN);
	in = malloc((size_t)np * LEN);
	sent = calloc(np, sizeof(*sent));
	got = calloc(np, sizeof(*got));
	if (!out || !in || !sent || !got)
		return 1;
	for (p = 0; p < np; p++)
		for (i = 0; i < LEN; i++)
			out[(size_t)p * LEN + i] = pattern(me, p, i);
	do {
		busy = 0;
		for (p = 0; p < np; p++) {
			rdmach_conn_t *c;
			struct iovec iov;
			ssize_t n;

			if (p == me || rdmach_conn(ctx, p, &c))
				continue;
			if (sent[p] < LEN) {	/* pieces of 1 B .. 512 KiB */
				size_t left = LEN - sent[p];
				iov.iov_base = out + (size_t)p * LEN + sent[p];
				iov.iov_len = left < 1 + sent[p] % 524288 ? left : 1 + sent[p] % 524288;
				n = rdmach_put(c, &iov, 1);
				if (n < 0) {
					rc = (int)n;
					goto err;
				}
				sent[p] += (size_t)n;
			}
			if (got[p] < LEN) {
				iov.iov_base = in + (size_t)p * LEN + got[p];
				iov.iov_len = LEN - got[p];
				n = rdmach_get(c, &iov, 1);
				if (n < 0) {
					rc = (int)n;
					goto err;
				}
				got[p] += (size_t)n;
			}
			busy |= sent[p] < LEN || got[p] < LEN;
		}
	} while (busy && time(NULL) < deadline);
	if (busy) {
		fprintf(stderr, "pipe: rank %d: timed out\n", me);
		return 1;
	}
	if (getenv("PIPE_CORRUPT") && me == 0)	/* negative control */
		in[(size_t)1 * LEN + 777] ^= 1;
	for (p = 0; p < np; p++)
		for (i = 0; p != me && i < LEN; i++)
			if (in[(size_t)p * LEN + i] != pattern(p, me, i)) {
				fprintf(stderr, "pipe: rank %d: byte %zu from rank %d wrong\n",
					me, i, p);
				return 1;
			}
	printf("pipe: rank %d of %d: %d bytes from each peer ok\n", me, np, LEN);
	if (rdmach_finalize(&ctx) || rdmach_pmi_finalize(pmi))
		return 1;
	return 0;
err:
	fprintf(stderr, "pipe: rank %d: %s\n", me, rdmach_strerror(rc));
	return 1;
}
EOC

cflags=$(pkg-config --cflags rdmach)
check "cc pipe.c \$(pkg-config --cflags --libs rdmach)" \
	sh -c "cd '$app' && $cc -std=gnu11 -Wall -Wextra -Werror -o pipe pipe.c $cflags $(pkg-config --libs rdmach)"
if [ -x "$app/pipe" ]; then
	same "pipe needs librdmach.so.$major" "Shared library: [librdmach.so.$major]" \
		"$(readelf -d "$app/pipe" | grep -o 'Shared library: \[librdmach[^]]*\]')"
	same "the loader finds it in the prefix" "$prefix/lib/librdmach.so.$major" \
		"$(LD_LIBRARY_PATH=$prefix/lib ldd "$app/pipe" | sed -n 's/.*librdmach.so.* => \([^ ]*\) .*/\1/p')"
	check "pipe: 2 processes (it starts itself)" \
		env LD_LIBRARY_PATH="$prefix/lib" timeout 150 "$app/pipe"
	[ "$(grep -c 'bytes from each peer ok' "$log")" = 2 ] || bad "pipe: 2 ranks reported ok"
	check "pipe: 3 processes under the installed rdmach_run" \
		env LD_LIBRARY_PATH="$prefix/lib" timeout 150 "$prefix/bin/rdmach_run" -t 120 -n 3 "$app/pipe"
	[ "$(grep -c 'bytes from each peer ok' "$log")" = 3 ] || bad "pipe: 3 ranks reported ok"
	check_not "pipe: a corrupt byte fails it (negative control)" \
		env PIPE_CORRUPT=1 LD_LIBRARY_PATH="$prefix/lib" timeout 150 "$app/pipe"
	grep -q "byte 777 from rank 1 wrong" "$log" || bad "pipe: the corrupt byte is named"
fi

# Static: librdmach.a by name (-l:librdmach.a), the rest from --static.
static_libs=$(pkg-config --static --libs rdmach | sed 's/-lrdmach\( \|$\)/-l:librdmach.a\1/')
check "cc pipe.c static (pkg-config --static --libs rdmach)" \
	sh -c "cd '$app' && $cc -std=gnu11 -o pipe-static pipe.c $cflags $static_libs"
if [ -x "$app/pipe-static" ]; then
	check_not "pipe-static needs no librdmach.so" \
		sh -c "readelf -d '$app/pipe-static' | grep librdmach"
	check "pipe-static: 2 processes, no library path" timeout 150 "$app/pipe-static"
fi
if [ $with_ib = 1 ]; then
	check_not "static link without Libs.private fails (so -libverbs there matters)" \
		sh -c "cd '$app' && $cc -o pipe-bad pipe.c $cflags \
			$(pkg-config --libs rdmach | sed 's/-lrdmach\( \|$\)/-l:librdmach.a\1/')"
	grep -q "undefined reference to .ibv_" "$log" || bad "that link failed for want of libibverbs"
fi

# --- the installed programs -------------------------------------------------
sections() { # PROGRAM: its --help must have the man page sections
	local s miss=
	for s in NAME SYNOPSIS DESCRIPTION OPTIONS ENVIRONMENT "EXIT STATUS"; do
		grep -qx "$s" "$log" || miss="$miss '$s'"
	done
	if [ -z "$miss" ]; then ok "$1 --help: man-style sections"
	else bad "$1 --help: missing$miss"; fi
}
check "rdmach_info --help" "$prefix/bin/rdmach_info" --help && sections rdmach_info
for o in -c -t --version; do
	grep -q -- "^ *$o\b\|, $o\b" "$log" || bad "rdmach_info --help documents $o"
done
grep -q "rdmach_info -c" "$log" || bad "rdmach_info --help ENVIRONMENT points to the knob list"
check "rdmach_info -v" "$prefix/bin/rdmach_info" -v
grep -q "version $version," "$log" || bad "rdmach_info -v says $version"
check "rdmach_info -c lists the knobs" "$prefix/bin/rdmach_info" -c
grep -q "^RDMACH_TRANSPORT " "$log" || bad "rdmach_info -c has RDMACH_TRANSPORT"
check_not "rdmach_info -x is refused" "$prefix/bin/rdmach_info" -x
check "rdmach_run --help" "$prefix/bin/rdmach_run" --help && sections rdmach_run
check "rdmach_run --version" "$prefix/bin/rdmach_run" --version
grep -q "$version" "$log" || bad "rdmach_run --version says $version"
check "installed rdmach_latency (validated, 2 processes)" \
	timeout 120 "$prefix/bin/rdmach_latency" -m 8:8 -i 200 -I 20 -v
grep -q "^8 " "$log" || bad "rdmach_latency printed its 8 B row"

# --- DESTDIR, then uninstall --------------------------------------------------
check "make install DESTDIR=" make -C "$src" install DESTDIR="$stage"
same "DESTDIR: the same files under the stage" "$(echo "$want_list" | grep -v keep.txt)" \
	"$(installed_list "$stage$prefix")"
same "DESTDIR: pc prefix is the final one" "prefix=$prefix" \
	"$(grep '^prefix=' "$stage$prefix/lib/pkgconfig/rdmach.pc")"
check "make uninstall" make -C "$src" uninstall
same "uninstall: only the file not ours is left under the prefix" "share/keep.txt" \
	"$(installed_list "$prefix")"
same "uninstall: directories install created are gone" "" \
	"$(cd "$prefix" && find . -mindepth 1 -type d ! -name share)"
check_not "uninstall: the stage (created by install) is gone" test -e "$stage"
check_not "uninstall: the manifest is gone" test -e "$src/build/install-manifest.txt"
# Without the manifest: the files this configuration installs.
make -C "$src" install >/dev/null 2>&1 && rm -f "$src/build/install-manifest.txt"
check "make uninstall without a manifest" make -C "$src" uninstall
same "uninstall without a manifest removes every file" "share/keep.txt" \
	"$(installed_list "$prefix")"

# --- make mpich: where MPICH's source comes from ----------------------------
# Only the fetch step runs.  apt-get is a stub that fails: a lost MPICH_SRC
# (build-mpich.sh then fetches Debian's source) fails fast, with no download.
printf '#!/bin/sh\necho "apt-get $*: MPICH_SRC did not reach build-mpich.sh" >&2\nexit 1\n' \
	>"$tmp/stub/apt-get"
chmod +x "$tmp/stub/apt-get"
fake_mpich "$tmp/mpich-env" env
fake_mpich "$tmp/mpich-cmd" cmd
fake_mpich "$tmp/tar/mpich-9.9.9" tar && tar -C "$tmp/tar" -czf "$tmp/mpich-9.9.9.tar.gz" mpich-9.9.9
n=0
# fetched NAME WANT [VAR=value...] [-- make arguments...]
fetched() {
	local name=$1 want=$2 envs=() work=$tmp/mpich-work-$((n += 1)); shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	env PATH="$tmp/stub:$PATH" MPICH_WORK="$work" ${envs[@]+"${envs[@]}"} \
		make -C "$src" mpich MPICH_STEPS=fetch "$@" >"$tmp/fetch.log" 2>&1
	same "$name" "$want" "$(cat "$work/src/fake-mark" 2>/dev/null || echo "(nothing fetched)")" ||
		sed 's/^/    | /' "$tmp/fetch.log" | tail -n 8
}
fetched "make mpich: ./configure --with-mpich-src" conf
fetched "make mpich: MPICH_SRC in the environment beats configure's" env \
	MPICH_SRC="$tmp/mpich-env"
fetched "make mpich: MPICH_SRC on the command line beats configure's" cmd \
	-- MPICH_SRC="$tmp/mpich-cmd"
check "configure without --with-mpich-src" \
	sh -c "cd '$src' && ./configure --prefix='$prefix'"
grep -qx 'MPICH_SRC := *' "$src/config.mk" || bad "config.mk has an empty MPICH_SRC"
fetched "make mpich: MPICH_SRC (a tarball) in the environment, config.mk's empty" tar \
	MPICH_SRC="$tmp/mpich-9.9.9.tar.gz"

# --- the same tree without rdma_ib ---------------------------------------------
rm -rf "$src/build"
check "configure --without-ib" sh -c "cd '$src' && ./configure --without-ib"
check "make -j$jobs without ib" make -C "$src" -j"$jobs"
check "rdmach_info -m 64 without ib (the shm memory model)" \
	"$src/build/bin/rdmach_info" -m 64
grep -q "per ordered pair that talks" "$log" || bad "rdmach_info -m printed its model"
check "test_conformance without ib (shared memory, volume 0.1)" \
	env RDMACH_TEST_SCALE=0.1 timeout 300 "$src/build/test/test_conformance"
check "test_shm without ib" timeout 300 "$src/build/test/test_shm"

finish
