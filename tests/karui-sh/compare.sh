#!/bin/sh
# compare.sh KARUI-SH LINES STAGES [EMULATOR...]: run every command line of
# LINES (lines.txt) with `bash -c` and with `karui-sh -c`, each in the same
# freshly made directory and environment, and fail on any difference in
# stdout, stderr or exit status.  In the shell's own messages bash's
# "bash: " and "bash: line N: " become "karui-sh: "; messages of the
# programs run are compared as they are.
#
# STAGES is KARUI_SH_STAGES for karui-sh: auto (μprocesses where karui has
# them, child processes else), child, or uproc: every stage a μprocess or
# the line fails; uproc reports "skipped" (77) where karui-sh says that it
# cannot run μprocesses here.
ksh=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
lines=$2
stages=$3
shift 3
emu="$*"
words=/usr/share/dict/words
if [ ! -r $words ]; then
	echo "skipped: no $words (Debian's wamerican; scripts/deps.sh installs it)"
	exit 77
fi
if [ "$stages" = uproc ] &&
   ! why=$(env KARUI_SH_STAGES=uproc $emu "$ksh" -c /bin/true 2>&1); then
	echo "skipped: no μprocesses here: $why"
	exit 77
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dir=$root/t

fresh() {
	rm -rf "$dir"
	mkdir -p "$dir/sub" "$dir/home"
	ln -s $words "$dir/words"
	printf 'alpha\nbeta\ngamma\nbeta\n' >"$dir/a.txt"
	printf 'one two three\nfour five six\n' >"$dir/b.txt"
	printf 'in sub\n' >"$dir/sub/c.txt"
	printf 'hidden\n' >"$dir/sub/.hidden"
	: >"$dir/.dot"
}

# run NAME COMMAND...: in a fresh $dir, with a fixed environment (and the
# sanitizer's options of an ASan build)
run() {
	name=$1
	shift
	fresh
	(cd "$dir" && env -i PATH=/usr/bin:/bin HOME="$dir/home" LC_ALL=C X=exported \
		KARUI_SH_STAGES="$stages" ${LSAN_OPTIONS:+LSAN_OPTIONS="$LSAN_OPTIONS"} \
		"$@" >"$root/$name.out" 2>"$root/$name.err")
	echo $? >"$root/$name.status"
}

n=0
failed=0
while IFS= read -r line; do
	case $line in '' | '#'*) continue ;; esac
	n=$((n + 1))
	run bash bash -c "$line"
	run ksh $emu "$ksh" -c "$line"
	sed -E 's/^bash: (line [0-9]+: )?/karui-sh: /' "$root/bash.err" >"$root/bash.err.n"
	diff=""
	cmp -s "$root/bash.out" "$root/ksh.out" || diff="$diff stdout"
	cmp -s "$root/bash.err.n" "$root/ksh.err" || diff="$diff stderr"
	cmp -s "$root/bash.status" "$root/ksh.status" || diff="$diff status"
	if [ -n "$diff" ]; then
		failed=$((failed + 1))
		echo "DIFFERS ($diff ): $line"
		for f in out err status; do
			b=$root/bash.$f
			[ $f = err ] && b=$root/bash.err.n
			cmp -s "$b" "$root/ksh.$f" && continue
			echo "  -- bash $f:"
			sed 's/^/  | /' "$b" | head -20
			echo "  -- karui-sh $f:"
			sed 's/^/  | /' "$root/ksh.$f" | head -20
		done
	fi
done <"$lines"
echo "karui-sh (KARUI_SH_STAGES=$stages) and bash: $n command lines, $failed differ"
[ $n -ge 50 ] && [ $failed -eq 0 ]
