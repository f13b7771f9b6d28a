#!/usr/bin/env bash
# run-ib-vm.sh - the rdma_ib test suite: the conformance, fault and API
# suites with RDMACH_TRANSPORT=ib (and again with RDMACH_CONNECT=demand),
# test_connect (connections on demand), test_ib_srq and the conformance
# suite on a tiny shared receive pool and across promotion (the shared
# receive path of cold peers), plus the test_ib_* tests (test_ib_zcopy: zero-copy
# and the registration cache; test_ib_spipe: the superpipeline and the
# per-message choice; the conformance suite again under each RDMACH_LARGE
# protocol: zero-copy from 1 KiB and 4 KiB, the superpipeline from 1 KiB
# with triple and with tightly folded double buffering, and the ring only;
# the fault suite under the superpipeline), in ONE boot of the
# Soft-RoCE VM (test/vm/vm-run.sh), or natively when this host has an RDMA
# device (/sys/class/infiniband).  Prints each suite's result and ends with
# "N passed, M failed"; exit status 0 only if nothing failed.
#
# usage: test/run-ib-vm.sh [build-dir]     (default: build; built if needed)
# env:   RDMACH_TEST_SCALE (default here 0.1: keeps one VM run to minutes)
#        RDMACH_IB_VM_NATIVE=1 forces the native path
#        RDMACH_VM_TIMEOUT (s, default here 1800): the VM's limit
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac

inner() {
	cd "$ROOT" || exit 2
	export RDMACH_TEST_SCALE=${RDMACH_TEST_SCALE:-0.1}
	local pass=0 fail=0 out p f name t0 start=$SECONDS
	# name | environment | command
	while IFS='|' read -r name envs cmd; do
		[ -n "$name" ] || continue
		if [ ! -x "$BUILD/test/${cmd%% *}" ]; then
			echo "== $name: $BUILD/test/${cmd%% *} missing"; fail=$((fail + 1)); continue
		fi
		t0=$SECONDS
		out=$(env $envs timeout 300 "$BUILD/test/"$cmd 2>&1)
		echo "== $name ($((SECONDS - t0)) s)"
		echo "$out" | grep -Ev '^ok ' | grep -v '^$' | tail -n 40
		p=$(echo "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' | tail -n1)
		f=$(echo "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' | tail -n1)
		if [ -z "$p" ]; then
			echo "   $name ended without a summary"; p=0; f=1
		fi
		pass=$((pass + p)); fail=$((fail + f))
	done <<-EOF
	ring unit tests||test_ib_ring
	superpipeline unit tests||test_spipe
	conformance (ib)|RDMACH_TRANSPORT=ib|test_conformance
	conformance (ib, connections on demand)|RDMACH_TRANSPORT=ib RDMACH_CONNECT=demand|test_conformance
	connections on demand|RDMACH_TRANSPORT=ib|test_connect
	shared receive path|RDMACH_TRANSPORT=ib|test_ib_srq
	conformance (ib, demand, shared pool of 4 x 256 B)|RDMACH_TRANSPORT=ib RDMACH_CONNECT=demand RDMACH_IB_SRQ_BUFS=4 RDMACH_IB_SRQ_CREDITS=2 RDMACH_IB_SRQ_BUF_SIZE=256|test_conformance
	conformance (ib, demand, rings after 3 messages, at most 2)|RDMACH_TRANSPORT=ib RDMACH_CONNECT=demand RDMACH_IB_RING_AFTER=3 RDMACH_IB_RINGS_MAX=2|test_conformance
	faults (ib)|RDMACH_TRANSPORT=ib|test_faults
	faults (ib, connections on demand)|RDMACH_TRANSPORT=ib RDMACH_CONNECT=demand|test_faults
	api (ib)|RDMACH_TRANSPORT=ib|test_api
	api (ib, connections on demand)|RDMACH_TRANSPORT=ib RDMACH_CONNECT=demand|test_api
	ib modes|RDMACH_TRANSPORT=ib|test_ib_modes
	zero-copy|RDMACH_TRANSPORT=ib|test_ib_zcopy zcopy_
	rcache eviction, 10000 buffers|RDMACH_TRANSPORT=ib RDMACH_TEST_TIMEOUT=280|test_ib_zcopy rcache_
	superpipeline and auto choice|RDMACH_TRANSPORT=ib|test_ib_spipe
	conformance (ib, zero-copy from 1K)|RDMACH_TRANSPORT=ib RDMACH_LARGE=zcopy RDMACH_ZCOPY_THRESHOLD=1K|test_conformance
	conformance (ib, zero-copy from 4K)|RDMACH_TRANSPORT=ib RDMACH_LARGE=zcopy RDMACH_ZCOPY_THRESHOLD=4K|test_conformance
	conformance (ib, superpipeline from 1K)|RDMACH_TRANSPORT=ib RDMACH_LARGE=superpipeline RDMACH_SPIPE_THRESHOLD=1K|test_conformance
	conformance (ib, superpipeline, 2 x 16K buffers)|RDMACH_TRANSPORT=ib RDMACH_LARGE=superpipeline RDMACH_SPIPE_THRESHOLD=1K RDMACH_SPIPE_BUFS=2 RDMACH_SPIPE_BUF_SIZE=16K RDMACH_SPIPE_BLOCK=2K|test_conformance
	conformance (ib, ring only)|RDMACH_TRANSPORT=ib RDMACH_LARGE=pipeline|test_conformance
	faults (ib, superpipeline)|RDMACH_TRANSPORT=ib RDMACH_LARGE=superpipeline RDMACH_SPIPE_THRESHOLD=16K|test_faults
	EOF
	echo "# all suites: $((SECONDS - start)) s"
	echo "$pass passed, $fail failed"
	[ "$fail" = 0 ]
}

if [ "${1:-}" = --inner ]; then
	BUILD=$2
	inner
	exit
fi
if [ ! -x "$BUILD/test/test_conformance" ] || [ ! -x "$BUILD/test/test_ib_modes" ] ||
   [ ! -x "$BUILD/test/test_ib_zcopy" ] || [ ! -x "$BUILD/test/test_ib_spipe" ]; then
	make -C "$ROOT" -j2 O="$BUILD" >/dev/null || { echo "build failed"; exit 2; }
fi
if [ "${RDMACH_IB_VM_NATIVE:-0}" = 1 ] ||
   [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	echo "RDMA device found: running natively"
	inner
	exit
fi
# the suites take 7-10 min of the emulated CPU (under demand too): the
# VM's limit leaves room for a busy host
RDMACH_VM_TIMEOUT=${RDMACH_VM_TIMEOUT:-1800} \
RDMACH_VM_PASSENV="RDMACH_TEST_SCALE RDMACH_VERBOSE" \
	"$ROOT/test/vm/vm-run.sh" "$ROOT" \
	"test/run-ib-vm.sh --inner $(printf %q "$BUILD")"
