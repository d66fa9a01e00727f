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
. "$(dirname "$0")/common.sh"
skip_without_uprocs

# run NAME COMMAND...: in a fresh $dir (common.sh's files, the words, and
# hidden ones)
run() {
	name=$1
	shift
	fresh_files
	ln -s $words "$dir/words"
	printf 'hidden\n' >"$dir/sub/.hidden"
	: >"$dir/.dot"
	run_in_dir "$name" "$@"
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
