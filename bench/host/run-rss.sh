#!/bin/sh
# run-rss.sh - RSS after free() and the cost of the free() hook under the
# four malloc policies of bench/src/rdmach_rss_free.c: Debian's glibc without
# rdmach (plain), rdmach linked without a registration cache (linked),
# with a cache in use (cache), and glibc tuned at load the way registration
# caches commonly do (tuned: M_MMAP_MAX=0, M_TRIM_THRESHOLD=max).  One process
# per policy (tracking and mallopt last for the process's life).
#
#   bench/host/run-rss.sh            after `make` (O=build-asan for that tree)
#
# Prints the table: MiB resident before, with the memory touched, after
# free; ns per malloc(64)+free pair.  Needs ~1.1 GiB of free memory.
set -eu
cd "$(dirname "$0")/../.."
O=${O:-build}
plain=$O/bin/rss_free_plain
[ -x "$O/bin/rdmach_rss_free" ] || { echo "run-rss.sh: run make first" >&2; exit 1; }
${CC:-cc} -O2 -g -std=gnu11 -Wall -Wextra -Werror -DRSS_NO_RDMACH \
	-o "$plain" bench/src/rdmach_rss_free.c
echo "# uptime: $(uptime)"
echo "# mode   test   MiB-before MiB-touched MiB-after-free | free_ns: ns per malloc(64)+free"
"$plain" plain
for m in linked cache tuned; do
	"$O/bin/rdmach_rss_free" "$m"
done
