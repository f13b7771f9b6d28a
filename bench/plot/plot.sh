#!/bin/bash
# plot.sh - one PNG of several OSU-format series (latency or bandwidth
# against message size, log2 size axis), like the papers' figures.
#
#   bench/plot/plot.sh -o OUT.png -t TITLE -y YLABEL [-l] [-x MIN:MAX] LABEL=FILE...
#     -l         logarithmic y axis (latency over the whole size range)
#     -x MIN:MAX only sizes in this range (bytes; K/M suffixes)
#   FILE: rows "size value" as the benchmarks print them; '#' lines ignored;
#   size-0 rows are left out (no place on a log axis).
#
# Needs gnuplot (Debian: gnuplot-nox); uses pngcairo, else png.
set -euo pipefail

usage() { sed -n '2,11s/^# \{0,1\}//p' "$0"; exit "${1:-2}"; }

bytes() { # 4K -> 4096
	local v=$1
	case $v in
	*[kK]) echo $(( ${v%?} << 10 )) ;;
	*[mM]) echo $(( ${v%?} << 20 )) ;;
	*) echo $(( v )) ;;
	esac
}

out= title= ylabel= logy=0 xmin= xmax=
while getopts "o:t:y:lx:h" opt; do
	case $opt in
	o) out=$OPTARG ;;
	t) title=$OPTARG ;;
	y) ylabel=$OPTARG ;;
	l) logy=1 ;;
	x) xmin=$(bytes "${OPTARG%%:*}"); xmax=$(bytes "${OPTARG##*:}") ;;
	h) usage 0 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ -n "$out" ] && [ $# -gt 0 ] || usage
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox); no plot" >&2; exit 1; }

term='png noenhanced'
if echo 'set terminal' | gnuplot 2>&1 | grep -q pngcairo; then
	term="pngcairo noenhanced font 'Sans,11' linewidth 1.5"
fi

# Size labels: 1, 4, 16, 64, 256, 1K, ... 64M (every other power of two).
xtics=
for ((e = 0; e <= 26; e += 2)); do
	s=$((1 << e))
	if ((s >= 1 << 20)); then l="$((s >> 20))M"
	elif ((s >= 1 << 10)); then l="$((s >> 10))K"
	else l=$s; fi
	xtics+="${xtics:+, }\"$l\" $s"
done

plots=
styles=(7 5 9 11 13 4 6 8 10 12)
colors=('#1f77b4' '#d62728' '#2ca02c' '#9467bd' '#ff7f0e' '#8c564b' '#17becf' '#7f7f7f' '#e377c2' '#000000')
i=0
for arg in "$@"; do
	label=${arg%%=*}
	file=${arg#*=}
	[ "$label" != "$arg" ] || { echo "plot.sh: '$arg' is not LABEL=FILE" >&2; exit 2; }
	[ -s "$file" ] || { echo "plot.sh: $file: missing or empty" >&2; exit 1; }
	pt=${styles[$((i % ${#styles[@]}))]}
	lc=${colors[$((i % ${#colors[@]}))]}
	plots+="${plots:+, }'$file' using (\$1 > 0 ? \$1 : 1/0):2 with linespoints pt $pt ps 0.9 lc rgb '$lc' title '${label//\'/}'"
	i=$((i + 1))
done

{
	echo "set terminal $term size 1000,640"
	echo "set output '$out'"
	echo "set title '${title//\'/}' font ',13'"
	echo "set xlabel 'Message size (bytes)'"
	echo "set ylabel '${ylabel//\'/}'"
	echo "set logscale x 2"
	echo "set xtics ($xtics)"
	[ $logy = 1 ] && echo "set logscale y 10" && echo "set format y '%g'"
	[ -n "$xmin" ] && echo "set xrange [$((xmin > 0 ? xmin : 1)):$xmax]"
	echo "set grid xtics ytics mytics lc rgb '#d0d0d0'"
	echo "set key top left reverse Left box opaque"
	echo "set datafile commentschars '#'"
	echo "plot $plots"
} | gnuplot
echo "plot.sh: wrote $out"
