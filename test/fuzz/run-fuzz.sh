#!/bin/sh
# run-fuzz.sh - run libFuzzer harnesses (built by `make fuzz-build`) for
# SECONDS each, from the seed corpus test/fuzz/corpus/NAME/ (new inputs go
# to build-fuzz/corpus/NAME/, crashes to build-fuzz/artifacts/).  Prints
# per harness its executions, executions per second and verdict, then
# "N passed, M failed"; exits 1 if any harness found a crash, a leak or a
# timeout.
#
# usage: test/fuzz/run-fuzz.sh SECONDS build-fuzz/fuzz_NAME...
cd "$(dirname "$0")/../.." || exit 2
secs=${1:?usage: run-fuzz.sh SECONDS HARNESS...}
shift
pass=0 fail=0
mkdir -p build-fuzz/artifacts build-fuzz/logs
for bin; do
	name=$(basename "$bin")
	work=build-fuzz/corpus/$name
	log=build-fuzz/logs/$name.log
	mkdir -p "$work"
	# -close_fd_mask=2: the library's error messages (every input is
	# refused somewhere) stay out; libFuzzer's and the sanitizers'
	# reports still come through
	"$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
		-max_len=4096 -print_final_stats=1 -close_fd_mask=2 \
		-artifact_prefix=build-fuzz/artifacts/"$name"- \
		"$work" "test/fuzz/corpus/$name" >"$log" 2>&1
	st=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	if [ "$st" = 0 ]; then
		pass=$((pass + 1))
		echo "ok $name: ${execs:-?} executions in ${secs} s (${rate:-?}/s)"
	else
		fail=$((fail + 1))
		echo "FAIL $name: exit status $st after ${execs:-?} executions (log $log):"
		grep -E 'ERROR|SUMMARY|Test unit written|==[0-9]+==' "$log" | head -n 20
	fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
