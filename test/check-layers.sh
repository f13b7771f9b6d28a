#!/bin/sh
# check-layers.sh - the library's dependency direction, checked on its
# #include lines: a directory includes from itself and from layers below
# it, never from its own layer's siblings or from above.
#
#   include/                    public headers                 layer 0
#   core/                       context, dispatch, knobs, log  layer 1
#   proto/ mem/ pmi/            ring protocol; registration
#                               cache + memory hooks; PMI-1    layer 2
#   rdma_shm/ rdma_ib/          transports                     layer 3
#
# Prints each violation and ends with "N passed, M failed".
cd "$(dirname "$0")/.." || exit 2
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
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
