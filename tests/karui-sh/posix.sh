#!/bin/sh
# posix.sh KARUI-SH CASES STAGES [EMULATOR...]: run every script of CASES
# (posix.txt) with dash and with karui-sh, each in the same freshly made
# directory and environment, and fail on any difference in stdout, exit
# status or stderr.  dash is the reference (karui-sh's language is POSIX
# sh with dash's semantics), except where a case's header says:
#
#   #### NAME              stdout, stderr and status against dash's
#   #### NAME err=bash     stderr against bash's instead: the shell's own
#                          messages, which karui-sh words as bash does
#                          (bash's "bash: " and "bash: line N: " read as
#                          "karui-sh: "); stdout and status still dash's
#   #### NAME err=none     stderr not compared: dash and bash disagree on
#                          the error itself (a dash-only error, such as
#                          dash's "Illegal number"), karui-sh follows dash
#                          and says it in words of its own
#   ... file               run as a script file (script.sh in the
#                          directory), not with -c
#
# The lines after a header, up to the next one, are the script.  STAGES is
# KARUI_SH_STAGES for karui-sh, as compare.sh takes it; uproc reports
# "skipped" (77) where karui-sh cannot run μprocesses here, and the whole
# test is skipped without dash (scripts/deps.sh installs it).
ksh=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cases=$2
stages=$3
shift 3
emu="$*"
if ! command -v dash >/dev/null 2>&1; then
	echo "skipped: no dash (scripts/deps.sh installs it)"
	exit 77
fi
. "$(dirname "$0")/common.sh"
skip_without_uprocs

# run NAME MODE SCRIPT SHELL...: in a fresh $dir (common.sh's files and a
# script for `.`), its stdin /dev/null
run() {
	name=$1 mode=$2 script=$3
	shift 3
	fresh_files
	printf 'echo sourced $#; x=from_dot; return 4; echo never\n' >"$dir/dot.sh"
	if [ "$mode" = file ]; then
		printf '%s\n' "$script" >"$dir/script.sh"
		set -- "$@" script.sh
	else
		set -- "$@" -c "$script"
	fi
	run_in_dir "$name" "$@" </dev/null
}

n=0
failed=0
# check NAME ERR MODE SCRIPT
check() {
	[ -n "$1" ] || return 0
	n=$((n + 1))
	run dash "$3" "$4" dash
	run ksh "$3" "$4" $emu "$ksh"
	ref_err=$root/dash.err
	if [ "$2" = bash ]; then
		run bash "$3" "$4" bash
		sed -E 's/^bash: (line [0-9]+: )?/karui-sh: /' "$root/bash.err" >"$root/bash.err.n"
		ref_err=$root/bash.err.n
	fi
	diff=""
	cmp -s "$root/dash.out" "$root/ksh.out" || diff="$diff stdout"
	[ "$2" = none ] || cmp -s "$ref_err" "$root/ksh.err" || diff="$diff stderr"
	cmp -s "$root/dash.status" "$root/ksh.status" || diff="$diff status"
	[ -z "$diff" ] && return 0
	failed=$((failed + 1))
	echo "DIFFERS ($diff ): $1"
	printf '%s\n' "$4" | sed 's/^/  > /' | head -20
	for f in out err status; do
		b=$root/dash.$f
		[ $f = err ] && b=$ref_err
		cmp -s "$b" "$root/ksh.$f" && continue
		echo "  -- reference $f:"
		sed 's/^/  | /' "$b" | head -20
		echo "  -- karui-sh $f:"
		sed 's/^/  | /' "$root/ksh.$f" | head -20
	done
}

name="" err="" mode="" script=""
nl='
'
while IFS= read -r line; do
	case $line in
	'#### '*)
		check "$name" "$err" "$mode" "$script"
		set -- ${line#'#### '}
		name=$1 err=dash mode=c script=""
		shift
		for w; do
			case $w in
			err=*) err=${w#err=} ;;
			file) mode=file ;;
			esac
		done
		;;
	*)
		[ -z "$name" ] && continue
		if [ -z "$script" ]; then script=$line; else script=$script$nl$line; fi
		;;
	esac
done <"$cases"
check "$name" "$err" "$mode" "$script"
echo "karui-sh (KARUI_SH_STAGES=$stages) and dash: $n scripts, $failed differ"
[ $n -ge 50 ] && [ $failed -eq 0 ]
