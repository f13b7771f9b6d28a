# stats.sh - helpers the bench/host/ and bench/vm/ drivers scripts source.
# value FILE: the value of the last row of an OSU-format file.
value() { awk '!/^#/ && NF >= 2 {v = $2} END {print v}' "$1"; }
# median: of the numbers on stdin, one per line.
median() { sort -g | awk '{a[NR] = $1} END {if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
