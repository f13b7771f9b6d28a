#!/bin/bash
# run-tests.sh - what `make check` runs (after `make` built everything).
#
#   0. test/check-layers.sh: the library's layers include only downwards;
#      test/check-knobs.sh: every knob is in a table, and doc/knobs.md's
#      knob table is what rdmach_info --markdown prints;
#      test/check-docs.sh: every relative Markdown link resolves, and
#      README.md's headline commands exist and take their options
#   1. every $O/test/test_* natively (shared memory on this host)
#  1b. test/test-install.sh: ./configure --prefix + make install in a copy
#      of the tree, a program outside it built with pkg-config and run,
#      make uninstall; where make mpich takes MPICH_SRC from
#   2. the conformance suite again with tiny rings/thresholds, without
#      cross-memory attach, and with a tiny copy area taking every put from
#      300 bytes up (CMA for those not in cache), so wraparound and
#      protocol switches happen a lot
#   3. a negative control: a corrupted byte must make the suite fail
#   4. the conformance suite under Hydra: mpiexec -n 4 (the PMI-1 path)
#   5. `make BUILD=asan` and every test again from the ASan+UBSan build
#  5b. the libFuzzer harnesses of test/fuzz/, FUZZ_CHECK_TIME (5) s each
#   6. valgrind --leak-check=full on the conformance suite, volume reduced
#   7. test/run-ib-vm.sh (verbs tests in the Soft-RoCE VM), if present
#   8. `make mpich` and MPI programs + a fixed subset of MPICH's test suite,
#      Debian's MPICH programs on ours (test-mpich.sh dropin),
#      then nas/test-nas.sh, all with a shim first in PATH whose bare
#      mpiexec, mpicc, ... fail (another MPI's): it must never be called (NAS IS and CG class S, and the runner's failures);
#      8b. MPICH $MPICH_NEWER (5.0.1) from $MPICH_TARBALLS built lean with
#      the channel (channel/check-mpich.sh) and its MPI programs at 4
#   9. test/run-cluster.sh smoke: 2 Soft-RoCE VMs, ranks on both (Hydra
#      over ssh): the conformance suite across hosts and an MPI program
#
# Each binary ends with "N passed, M failed"; this script adds them up and
# ends with one total line of the same form; exit status 0 only if nothing
# failed.  Environment:
#   O=dir                 build directory (default build)
#   RDMACH_TEST_SCALE     volume factor for steps 1-4 (default 1)
#   SKIP="install asan fuzz valgrind mpiexec vm small negative mpich nas
#         mpich-newer cluster"
#                         steps to leave out
#   TEST_TIMEOUT          seconds per binary (default 900)
set -u
cd "$(dirname "$0")/.." || exit 2

O=${O:-build}
ASAN_O=build-asan
[ "$O" != build ] && ASAN_O=$O-asan
SKIP=${SKIP:-}
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
LOGS=$O/test-logs
mkdir -p "$LOGS"

total_pass=0
total_fail=0
summary=()
failures=()	# the first FAIL lines of each failed step, repeated at the end

skipped() { case " $SKIP " in *" $1 "*) return 0 ;; esac; return 1; }

note() { printf '\n=== %s\n' "$*"; }

# record LABEL PASS FAIL
record() {
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	summary+=("$(printf '%-46s %4d passed, %d failed' "$1" "$2" "$3")")
}

# run LABEL [VAR=value...] -- command...: run it, show and log its output,
# count its closing "N passed, M failed" (or 1 pass/fail by exit status).
run() {
	local label=$1; shift
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	local log="$LOGS/$(echo "$label" | tr -c 'A-Za-z0-9_.-' '_').log"
	note "$label: ${envs[*]:-} $*"
	env ${envs[@]+"${envs[@]}"} timeout -k 10 "$TEST_TIMEOUT" "$@" 2>&1 | tee "$log"
	local st=${PIPESTATUS[0]}
	local line p f
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
	if [ -n "$line" ]; then
		p=${line%% passed*}
		f=${line#*passed, }; f=${f%% failed}
		if [ "$st" != 0 ] && [ "$f" = 0 ]; then
			echo "run-tests: $label exited with status $st"
			f=1
		fi
	elif [ "$st" = 0 ]; then
		p=1; f=0
	else
		[ "$st" = 124 ] && echo "run-tests: $label timed out after ${TEST_TIMEOUT} s"
		echo "run-tests: $label exited with status $st and no summary line"
		p=0; f=1
	fi
	record "$label" "$p" "$f"
	[ "$f" = 0 ] || failures+=("$label:" "$(grep -E '^ *FAIL ' "$log" | head -n 5 | cut -c1-300)")
}

# A run that must fail: passes when the binary reports the expected FAIL.
run_negative() {
	local label=$1 want=$2; shift 2
	local log="$LOGS/$(echo "$label" | tr -c 'A-Za-z0-9_.-' '_').log"
	note "$label (must fail): $*"
	timeout -k 10 "$TEST_TIMEOUT" "$@" >"$log" 2>&1
	local st=$?
	grep -E '^(ok|FAIL|skip) ' "$log"
	if [ "$st" != 0 ] && grep -q "$want" "$log"; then
		echo "run-tests: $label failed as it must"
		record "$label" 1 0
	else
		echo "run-tests: $label did NOT catch the corruption (status $st)"
		record "$label" 0 1
	fi
}

tests=()
for t in "$O"/test/test_*; do
	[ -f "$t" ] && [ -x "$t" ] && tests+=("$t")
done
if [ ${#tests[@]} = 0 ]; then
	echo "run-tests: no test binaries in $O/test: run make first" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

# 0. static checks: the library's dependency direction (include lines);
#    every knob read through a table and documented
run "layers (test/check-layers.sh)" -- test/check-layers.sh "$O"
run "knobs (test/check-knobs.sh)" -- test/check-knobs.sh "$O"
run "docs (test/check-docs.sh)" -- test/check-docs.sh "$O"

# 1. native
for t in "${tests[@]}"; do
	run "native $(basename "$t")" -- "$t"
done

# 1b. install: configure --prefix, make install/uninstall, pkg-config
if ! skipped install; then
	run "install (test/test-install.sh)" -- test/test-install.sh
fi

conf=$O/test/test_conformance

# 2. small rings and thresholds
if [ -x "$conf" ] && ! skipped small; then
	run "conformance tiny shm rings" RDMACH_SHM_RING_SIZE=4K \
		RDMACH_SHM_LINE_RING=128 RDMACH_SHM_CHUNK=256 \
		RDMACH_SHM_CMA_THRESHOLD=1K \
		RDMACH_TEST_SCALE="$(awk "BEGIN{print ${RDMACH_TEST_SCALE:-1} * 0.5}")" \
		-- "$conf"
	run "conformance tiny shm copy area" RDMACH_SHM_RING_SIZE=4K \
		RDMACH_SHM_LINE_RING=128 RDMACH_SHM_CHUNK=256 \
		RDMACH_SHM_PIPE_THRESHOLD=300 RDMACH_SHM_PIPE_AREA=4K \
		RDMACH_SHM_PIPE_CHUNK=1K RDMACH_SHM_PIPE_FIRST=64 \
		RDMACH_SHM_CMA_THRESHOLD=2K RDMACH_SHM_CACHE_LIMIT=8K \
		RDMACH_SHM_RECENT=2 RDMACH_SHM_CMA_USE=cold \
		RDMACH_TEST_SCALE="$(awk "BEGIN{print ${RDMACH_TEST_SCALE:-1} * 0.5}")" \
		-- "$conf"
	run "conformance shm, RDMACH_CONNECT=demand" RDMACH_CONNECT=demand \
		RDMACH_TEST_SCALE="$(awk "BEGIN{print ${RDMACH_TEST_SCALE:-1} * 0.5}")" \
		-- "$conf"
	run "conformance shm, idle areas given back after 1 ms" \
		RDMACH_SHM_IDLE_RELEASE_MS=1 RDMACH_SHM_LIVENESS_MS=1 \
		RDMACH_TEST_SCALE="$(awk "BEGIN{print ${RDMACH_TEST_SCALE:-1} * 0.5}")" \
		-- "$conf"
	run "conformance shm, one warm writer, earned after 16K, cold again after 1 ms" \
		RDMACH_SHM_WARM_MAX=1 RDMACH_SHM_WARM_AFTER=16K \
		RDMACH_SHM_IDLE_RELEASE_MS=1 RDMACH_SHM_LIVENESS_MS=1 \
		RDMACH_TEST_SCALE="$(awk "BEGIN{print ${RDMACH_TEST_SCALE:-1} * 0.5}")" \
		-- "$conf"
	run "conformance shm, every writer cold, no CMA" RDMACH_SHM_WARM_MAX=0 \
		RDMACH_SHM_CMA=0 \
		RDMACH_TEST_SCALE="$(awk "BEGIN{print ${RDMACH_TEST_SCALE:-1} * 0.5}")" \
		-- "$conf"
	run "conformance alltoall at 16 and 64 ranks (oversubscribed)" \
		-- "$conf" alltoall_16 alltoall_64
	run "conformance alltoall at 16 and 64 ranks, one warm writer each" \
		RDMACH_SHM_WARM_MAX=1 RDMACH_SHM_WARM_AFTER=16K \
		RDMACH_SHM_IDLE_RELEASE_MS=1 RDMACH_SHM_LIVENESS_MS=1 \
		-- "$conf" alltoall_16 alltoall_64
	run "conformance shm without CMA or line ring" RDMACH_SHM_CMA=0 \
		RDMACH_SHM_LINE_RING=0 \
		RDMACH_SHM_RING_SIZE=16K RDMACH_SHM_CHUNK=1K \
		RDMACH_TEST_SCALE="$(awk "BEGIN{print ${RDMACH_TEST_SCALE:-1} * 0.5}")" \
		-- "$conf"
fi

# 3. negative control: the checks do catch a corrupt byte
if [ -x "$conf" ] && ! skipped negative; then
	run_negative "negative control (corrupt byte)" \
		"FAIL fifo_wrap_fixed: data from rank 0 wrong at stream offset 100003" \
		env RDMACH_TEST_CORRUPT=100003 RDMACH_TEST_SCALE=0.1 \
		"$conf" fifo_wrap_fixed
fi

# 4. under Hydra
if [ -x "$conf" ] && ! skipped mpiexec; then
	# Hydra (PMI-1, what pmi/ speaks) by name: Open MPI's may own `mpiexec`
	hydra=$(command -v mpiexec.hydra || command -v mpiexec.mpich || true)
	if [ -n "$hydra" ]; then
		run "mpiexec -n 4 test_conformance" \
			RDMACH_TEST_SCALE="$(awk "BEGIN{print ${RDMACH_TEST_SCALE:-1} * 0.5}")" \
			-- "$hydra" -n 4 "$conf"
		# Hydra serves PMI_process_mapping: locality from it
		run "mpiexec -n 4 test_conformance, RDMACH_CONNECT=demand" \
			RDMACH_CONNECT=demand \
			RDMACH_TEST_SCALE="$(awk "BEGIN{print ${RDMACH_TEST_SCALE:-1} * 0.3}")" \
			-- "$hydra" -n 4 "$conf"
		[ -x "$O/test/test_api" ] &&
			run "mpiexec -n 2 test_api" -- "$hydra" -n 2 "$O/test/test_api"
		[ -x "$O/test/test_pmi" ] &&
			run "mpiexec -n 4 test_pmi" -- "$hydra" -n 4 "$O/test/test_pmi"
	else
		echo "run-tests: no mpiexec (apt-get install mpich): step skipped"
	fi
fi

# 5. ASan + UBSan
if ! skipped asan; then
	note "make BUILD=asan O=$ASAN_O"
	if make BUILD=asan O="$ASAN_O" -j2 >"$LOGS/asan-build.log" 2>&1; then
		for t in "$ASAN_O"/test/test_*; do
			[ -x "$t" ] || continue
			run "asan $(basename "$t")" \
				ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=1 \
				UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
				RDMACH_TEST_SCALE="$(awk "BEGIN{print ${RDMACH_TEST_SCALE:-1} * 0.25}")" \
				-- "$t"
		done
	else
		tail -n 30 "$LOGS/asan-build.log"
		record "asan build" 0 1
	fi
fi

# 5b. libFuzzer: each harness of test/fuzz/ briefly (`make fuzz` for long)
if ! skipped fuzz; then
	note "make fuzz-build"
	if make fuzz-build >"$LOGS/fuzz-build.log" 2>&1; then
		run "fuzz (libFuzzer, ${FUZZ_CHECK_TIME:-5} s each)" -- \
			test/fuzz/run-fuzz.sh "${FUZZ_CHECK_TIME:-5}" build-fuzz/fuzz_*
	else
		tail -n 30 "$LOGS/fuzz-build.log"
		echo "run-tests: fuzz harnesses did not build (clang and libclang-rt-14-dev: tools/install-deps.sh)"
		record "fuzz build" 0 1
	fi
fi

# 6. valgrind
if [ -x "$conf" ] && ! skipped valgrind; then
	if command -v valgrind >/dev/null 2>&1; then
		# fixed cache limit and choice: no start-up measurement
		run "valgrind test_conformance" RDMACH_TEST_SCALE=0.05 \
			RDMACH_SHM_CACHE_LIMIT=4M RDMACH_SHM_CMA_USE=cold \
			RDMACH_TEST_TIMEOUT=600 RDMACH_TEST_STALL=120 \
			-- valgrind -q --error-exitcode=1 --leak-check=full \
			--errors-for-leak-kinds=definite "$conf"
	else
		echo "run-tests: no valgrind: step skipped"
	fi
fi

# 7. the verbs transport in the Soft-RoCE VM
if [ -x test/run-ib-vm.sh ] && ! skipped vm; then
	run "Soft-RoCE VM (test/run-ib-vm.sh)" -- test/run-ib-vm.sh "$O"
fi

# 8. MPICH built with the CH3 channel "rdma": MPI programs and a fixed
#    subset of MPICH's own test suite (the first run fetches and builds
#    MPICH: ~15-25 min on 2 cores; later runs only relink)
if ! skipped mpich; then
	note "make mpich O=$O (log: $LOGS/mpich-build.log)"
	if make mpich O="$O" >"$LOGS/mpich-build.log" 2>&1; then
		# another MPI owning the bare names (Open MPI by Debian's
		# alternatives): a shim first in PATH whose mpiexec, mpicc, ...
		# fail and log; nothing of this step may call it
		shim=$LOGS/open-mpi-shim
		channel/test-coexist.sh shim "$shim"
		path0=$PATH
		export PATH=$shim:$PATH
		# the shim is what the bare names reach (else this proves nothing)
		if mpiexec -n 1 true 2>/dev/null || [ ! -s "$shim/calls.log" ]; then
			record "MPI steps beside another MPI's mpiexec/mpicc: shim not reached" 0 1
		fi
		: >"$shim/calls.log"
		run "MPICH ch3:rdma: MPI programs, np 2 4 8" NP_LIST="2 4 8" \
			-- channel/test-mpich.sh progs
		run "MPICH ch3:rdma: test/mpi CI subset" -- channel/test-mpich.sh ci
		run "MPICH ch3:rdma: abnormal ends (mpiexec status)" -- \
			channel/test-mpich.sh faults
		run "MPICH ch3:rdma: Debian's NPmpich2 and mpif90.mpich on it" -- \
			channel/test-mpich.sh dropin
		if [ -x nas/test-nas.sh ] && ! skipped nas; then
			run "NAS IS, CG class S np 4 + runner failures" -- nas/test-nas.sh
		fi
		# 8b. the newest release too (C only): the same channel source
		newer=${MPICH_NEWER:-5.0.1}
		tarball=${MPICH_TARBALLS:-/work/shared/mpich}/mpich-$newer.tar.gz
		if skipped mpich-newer; then :
		elif [ -f "$tarball" ]; then
			TEST_TIMEOUT=3000 run "MPICH $newer ch3:rdma (lean build): MPI programs, np 4" \
				CHECKS=progs -- channel/check-mpich.sh "$newer"
		else
			echo "run-tests: no $tarball (MPICH_TARBALLS): MPICH $newer step skipped"
		fi
		export PATH=$path0
		if [ -s "$shim/calls.log" ]; then
			echo "run-tests: the MPI steps called the bare names of $shim:"
			head -n 5 "$shim/calls.log"
			record "MPI steps beside another MPI's mpiexec/mpicc" 0 1
		else
			record "MPI steps beside another MPI's mpiexec/mpicc" 1 0
		fi
	else
		tail -n 40 "$LOGS/mpich-build.log"
		record "make mpich" 0 1
	fi
fi

# 9. across hosts: two Soft-RoCE VMs on one virtual network (the whole
#    cross-host suite is `make check-cluster`)
if [ -x test/run-cluster.sh ] && ! skipped cluster; then
	run "2-VM cluster smoke (test/run-cluster.sh)" -- test/run-cluster.sh smoke "$O"
fi

note "summary (logs in $LOGS)"
for s in "${summary[@]}"; do echo "$s"; done
# the failures again, where a reader of the log's tail sees them
if [ ${#failures[@]} -gt 0 ]; then
	echo "=== failed"
	for s in "${failures[@]}"; do [ -n "$s" ] && echo "$s"; done
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
