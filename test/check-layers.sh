#!/bin/sh
# check-layers.sh - the library's dependency direction.  Between
# directories, checked on the #include lines: a directory includes from
# itself and from layers below it, never from its own layer's siblings or
# from above.
#
#   include/                    public headers                 layer 0
#   core/                       context, dispatch, knobs, log  layer 1
#   proto/ mem/ pmi/            ring protocol; registration
#                               cache + memory hooks; PMI-1    layer 2
#   rdma_shm/ rdma_ib/          transports                     layer 3
#
# Inside each directory, its units (x.c with its x.h) depend on one another
# in one direction only: no cycle among their #include lines, nor among
# their calls (read from the objects of build-dir: a unit's undefined
# symbols that a sibling's object defines).
#
# usage: test/check-layers.sh [build-dir]     (default: build)
# Prints each violation and ends with "N passed, M failed".
cd "$(dirname "$0")/.." || exit 2
O=${1:-build}
layer() {
	case $1 in
	include) echo 0 ;; core) echo 1 ;; proto|mem|pmi) echo 2 ;;
	rdma_shm|rdma_ib) echo 3 ;; *) echo 9 ;;
	esac
}
pass=0 fail=0
for dir in core proto mem pmi rdma_shm rdma_ib; do
	me=$(layer $dir)
	for f in "$dir"/*.[ch]; do
		bad=
		for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
			case $inc in
			*/*) d=${inc%%/*} ;;
			rdmach*.h) d=include ;;
			*) d=$dir ;;
			esac
			[ "$d" = "$dir" ] && continue
			l=$(layer "$d")
			if [ "$l" -ge "$me" ]; then
				echo "FAIL $f includes $inc ($d is layer $l, $dir is layer $me)"
				bad=1
			fi
		done
		if [ -n "$bad" ]; then fail=$((fail + 1)); else pass=$((pass + 1)); fi
	done
done
# Inside a directory: its units (x.c with x.h) call and include one
# another in one direction only.  Include edges come from the #include
# lines, call edges from the objects: a unit's undefined symbols that a
# sibling object defines.  tsort finds any cycle.
unit() { f=${1##*/}; echo "${f%.*}"; }

include_edges() {
	for f in "$1"/*.[ch]; do
		for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
			case $inc in */*) [ "${inc%/*}" = "$1" ] || continue ;; esac
			[ -f "$1/${inc##*/}" ] || continue
			echo "$(unit "$f") $(unit "$inc")"
		done
	done
}

call_edges() {
	{ nm -A --defined-only -g "$2"/*.o | awk '{print "def", $1, $NF}'
	  nm -A -u "$2"/*.o | awk '{print "use", $1, $NF}'; } |
	awk '{ sub(/\.o:.*/, "", $2); sub(/.*\//, "", $2) }
	     $1 == "def" { def[$3] = $2; next }
	     { use[++n] = $2 " " $3 }
	     END { for (i = 1; i <= n; i++) { split(use[i], u, " ")
		     if (u[2] in def) print u[1], def[u[2]] } }'
}

# acyclic KIND DIR EDGES: EDGES are "from to" lines; self-edges do not count
acyclic() {
	edges=$(echo "$3" | awk 'NF == 2 && $1 != $2' | sort -u)
	loop=$(echo "$edges" | tsort 2>&1 >/dev/null |
		sed -n 's/^tsort: \([A-Za-z0-9_]*\)$/\1/p' | sort -u)
	if [ -z "$loop" ]; then
		pass=$((pass + 1))
	else
		echo "FAIL $2: $1 cycle between its units (through" $loop"):"
		echo "$edges" | sed "s/^/    $1 edge: /"
		fail=$((fail + 1))
	fi
}

for dir in core proto mem pmi rdma_shm rdma_ib; do
	acyclic include "$dir" "$(include_edges "$dir")"
	objs=$O/obj/$dir
	if ls "$objs"/*.o >/dev/null 2>&1; then
		acyclic call "$dir" "$(call_edges "$dir" "$objs")"
	elif [ "$dir" != rdma_ib ]; then
		echo "FAIL $objs: no objects (run make first)"
		fail=$((fail + 1))
	fi
done

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
