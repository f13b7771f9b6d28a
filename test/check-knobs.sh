#!/bin/sh
# check-knobs.sh - every RDMACH_* knob the project reads goes through a
# knob table (core/knob.h: listed by rdmach_info, checked, a bad value
# refused naming it), and every knob in the tables is documented in
# README.md's knob table.  Ends with "N passed, M failed".
#
# usage: test/check-knobs.sh [build-dir]
cd "$(dirname "$0")/.." || exit 2
O=${1:-build}
info=$O/bin/rdmach_info
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# 1. no module reads the environment around the knob tables
for f in core/*.c proto/*.c mem/*.c pmi/*.c rdma_shm/*.c rdma_ib/*.c \
	 channel/*.c tools/*.c; do
	[ -f "$f" ] || continue
	[ "$f" = core/knob.c ] && continue
	if grep -n 'getenv("RDMACH_' "$f"; then
		bad "$f reads an RDMACH_* variable with getenv, not through a knob table"
	else
		ok
	fi
done

# 2. every knob rdmach_info lists is in README.md's knob table; a row may
#    name a family: `RDMACH_IB_SQ_DEPTH`, `_INLINE` stands for
#    RDMACH_IB_INLINE (the first name minus one or more trailing words,
#    plus the suffix)
documented() {
	grep '^| `RDMACH_' README.md | while IFS= read -r row; do
		first=$(echo "$row" | sed -n 's/^| `\(RDMACH_[A-Z0-9_]*\)`.*/\1/p')
		echo "$first"
		for suffix in $(echo "$row" | cut -d'|' -f2 |
				grep -o '`_[A-Z0-9_]*`' | tr -d '`'); do
			base=$first
			while [ "$base" != "${base%_*}" ]; do
				base=${base%_*}
				echo "$base$suffix"
			done
		done
	done
}
if [ ! -x "$info" ]; then
	bad "$info missing: run make first"
else
	docs=$(documented)
	for k in $("$info" | sed -n 's/^\(RDMACH_[A-Z0-9_]*\) .*/\1/p'); do
		if echo "$docs" | grep -qx "$k"; then
			ok
		else
			bad "knob $k is not in README.md's knob table"
		fi
	done
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
