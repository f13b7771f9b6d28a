#!/bin/bash
# check-docs.sh - the documentation holds together:
#  1. every relative Markdown link of README.md, doc/*.md and */README.md
#     (and test/vm/README.md) leads to a file or folder of the tree, and a
#     "#anchor" to a heading of the page it names (GitHub's slugs: lower
#     case, punctuation dropped, spaces to hyphens, -1, -2 for repeats);
#  2. every command of README.md's headline table (the rows between
#     "<!-- headline" and "<!-- end headline -->", the last cell's code
#     span) exists and takes what it is given: a make target `make -n`
#     accepts; a script or program in the tree or in build/bin; each
#     VAR=VALUE it is given named in the script; each -x/--option in the
#     program's -h output (asked only of commands given options).
# Ends with "N passed, M failed".  Takes seconds.
#
# usage: test/check-docs.sh [build-dir]
cd "$(dirname "$0")/.." || exit 2
O=${1:-build}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

pages=(README.md doc/*.md */README.md test/vm/README.md)

# slugs FILE: the anchor of every heading of FILE, one a line
slugs() {
	awk '
	/^(```|~~~)/ { fence = !fence; next }
	fence || !/^#+ / { next }
	{
		h = $0
		sub(/^#+ +/, "", h); sub(/ +#* *$/, "", h)
		# a link keeps its text
		while (match(h, /\[[^]]*\]\([^)]*\)/)) {
			t = substr(h, RSTART + 1, RLENGTH - 2); sub(/\]\(.*/, "", t)
			h = substr(h, 1, RSTART - 1) t substr(h, RSTART + RLENGTH)
		}
		h = tolower(h)
		gsub(/\xe2\x80[\x93\x94]/, "", h)	# en and em dash
		gsub(/[!-,.\/:-@[-^`{-~]/, "", h)	# ASCII punctuation but - and _
		gsub(/ /, "-", h)
		n = seen[h]++
		print (n ? h "-" n : h)
	}' "$1"
}

# 1. links
for page in "${pages[@]}"; do
	[ -f "$page" ] || continue
	dir=$(dirname "$page")
	# targets of [text](target), outside fenced code and code spans
	targets=$(awk '/^(```|~~~)/ { fence = !fence; next } !fence' "$page" |
		sed 's/`[^`]*`//g' | grep -o '\]([^) ]*)' | sed 's/^](//; s/)$//')
	for t in $targets; do
		case $t in
		http://* | https://* | mailto:* | ftp://*) continue ;;
		esac
		file=${t%%#*} anchor=
		[ "$file" != "$t" ] && anchor=${t#*#}
		if [ -z "$file" ]; then
			target=$page
		elif [ "$dir" = . ]; then
			target=$file
		else
			target=$dir/$file
		fi
		if [ ! -e "$target" ]; then
			bad "$page: link ($t): no $target"
			continue
		fi
		if [ -n "$anchor" ]; then
			if [ -d "$target" ] || [ "${target##*.}" != md ]; then
				bad "$page: link ($t): #$anchor into a file that is not Markdown"
			elif slugs "$target" | grep -qxF -- "$anchor"; then
				ok
			else
				bad "$page: link ($t): $target has no heading #$anchor"
			fi
		else
			ok
		fi
	done
done

# 2. the headline table's commands
cmds=$(awk '/^<!-- headline/ { p = 1; next } /^<!-- end headline/ { p = 0 } p' README.md |
	grep '^| ' | sed 's/ *|$//; s/.*| *//' | grep '^`.*`$' | tr -d '`' | sort -u)
if [ -z "$cmds" ]; then
	bad "README.md: no headline table between '<!-- headline' and '<!-- end headline -->'"
fi
while IFS= read -r cmd; do
	[ -n "$cmd" ] || continue
	# words, quotes honoured (xargs splits as the shell would, no expansion)
	mapfile -t w < <(printf '%s\n' "$cmd" | xargs -n1 printf '%s\n' 2>/dev/null)
	[ "${#w[@]}" -gt 0 ] || { bad "headline command '$cmd': cannot split it"; continue; }
	i=0 vars=()
	while [ $i -lt ${#w[@]} ] && [[ ${w[$i]} =~ ^[A-Z_][A-Z0-9_]*= ]]; do
		vars+=("${w[$i]%%=*}"); i=$((i + 1))
	done
	prog=${w[$i]:-}
	args=("${w[@]:$((i + 1))}")
	if [ "$prog" = make ]; then
		if make -n "${args[@]}" >/dev/null 2>&1; then
			ok
		else
			bad "headline command '$cmd': make -n ${args[*]} fails"
		fi
		continue
	fi
	if [ -f "$prog" ] && [ -x "$prog" ]; then
		exe=$prog
	elif [ -x "$O/bin/$prog" ]; then
		exe=$O/bin/$prog
	else
		bad "headline command '$cmd': no executable $prog in the tree or $O/bin"
		continue
	fi
	ok
	for v in "${vars[@]}"; do
		if [ -f "$exe" ] && grep -qw -- "$v" "$exe" 2>/dev/null; then
			ok
		else
			bad "headline command '$cmd': $prog does not read $v"
		fi
	done
	opts=()
	for a in "${args[@]}"; do
		case $a in
		--[a-z]*) opts+=("${a%%=*}") ;;
		-[A-Za-z]*) opts+=("${a:0:2}") ;;
		esac
	done
	[ ${#opts[@]} -gt 0 ] || continue
	help=$(timeout 10 "$exe" -h 2>&1 </dev/null)
	for o in "${opts[@]}"; do
		if printf '%s\n' "$help" | grep -qE -- "(^|[^A-Za-z0-9-])$o([^A-Za-z0-9-]|$)"; then
			ok
		else
			bad "headline command '$cmd': $prog -h does not list $o"
		fi
	done
done <<<"$cmds"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
