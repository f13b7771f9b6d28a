#!/bin/bash
# run-list.sh DIR MPIEXEC - run the precompiled MPICH tests listed in
# DIR/list ("prog nprocs args") with MPIEXEC; used by
# `test-mpich.sh vm-ib` inside the Soft-RoCE VM (RDMACH_TRANSPORT=ib).
cd "$1" || exit 2
M=$2
pass=0; n=0
while read -r prog np args; do
	n=$((n + 1))
	out=$(timeout 120 $M -n "$np" ./$prog $args 2>&1 </dev/null)
	rc=$?
	if [ $rc -eq 0 ] && echo "$out" | grep -q "No Errors"; then
		pass=$((pass + 1)); echo "PASS $prog $np"
	else
		echo "FAIL $prog $np rc=$rc: $(echo "$out" | tail -3 | tr '\n' ' ' | cut -c1-300)"
	fi
done < list
echo "${RDMACH_TRANSPORT:-auto}: $pass / $n passed"
[ "$pass" -eq "$n" ]
