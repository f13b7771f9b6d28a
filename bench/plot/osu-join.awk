# osu-join.awk - join OSU-format outputs (rows "size value", '#' lines
# ignored) into one table: a row per size, ascending, a column per file in
# argument order, "-" where a file has no row for that size.
#   awk -v w=WIDTH -f bench/plot/osu-join.awk FILE...     (w: column width, 12)
BEGIN {
	if (!w) w = 12
	for (i = 1; i < ARGC; i++) col[ARGV[i]] = i
	ncol = ARGC - 1
}
!/^#/ && NF >= 2 {
	if (!($1 in seen)) { seen[$1] = 1; size[++n] = $1 + 0 }
	v[col[FILENAME], $1 + 0] = $2
}
END {
	for (i = 2; i <= n; i++)	# insertion sort: a few dozen sizes
		for (j = i; j > 1 && size[j - 1] > size[j]; j--) {
			t = size[j]; size[j] = size[j - 1]; size[j - 1] = t
		}
	for (i = 1; i <= n; i++) {
		s = size[i]; printf "%-10d", s
		for (j = 1; j <= ncol; j++)
			if ((j, s) in v) printf " %" w ".2f", v[j, s]
			else printf " %" w "s", "-"
		printf "\n"
	}
}
