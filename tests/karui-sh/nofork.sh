#!/bin/sh
# nofork.sh KARUI-SH: a pipeline of μprocesses starts no process.  strace
# follows karui-sh and everything it starts and lists every process-making
# call: the one execve that starts karui-sh, clones of threads (its VPs)
# and nothing else — no fork, vfork, process clone or further execve.
# Skipped without strace, or where karui has no μprocesses.
ksh=$1
command -v strace >/dev/null 2>&1 || { echo "skipped: no strace"; exit 77; }
env KARUI_SH_STAGES=uproc "$ksh" -c /bin/true 2>/dev/null ||
	{ echo "skipped: no μprocesses here"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
seq 1 20000 >"$dir/in"
log=$dir/log
out=$(cd "$dir" && strace -f -qq -e signal=none -e trace=fork,vfork,clone,clone3,execve \
	-o "$log" "$ksh" -c 'cat in | grep 7 | sort -r | uniq | wc -l; echo $?')
want=$(cd "$dir" && sh -c 'cat in | grep 7 | sort -r | uniq | wc -l; echo $?')
failed=0
[ "$out" = "$want" ] || { echo "FAIL    the pipeline's output: '$out', not '$want'"; failed=1; }
execs=$(grep -c 'execve(' "$log")
[ "$execs" = 1 ] || { echo "FAIL    $execs execve calls, not 1:"; grep 'execve(' "$log"; failed=1; }
others=$(grep -E 'fork\(|clone3?\(' "$log" | grep -v CLONE_THREAD)
[ -z "$others" ] || { echo "FAIL    calls that make processes:"; echo "$others"; failed=1; }
threads=$(grep -E 'clone3?\(' "$log" | grep -c CLONE_THREAD)
[ "$failed" = 0 ] && echo "ok      a_pipeline_of_five_uprocs_starts_no_process ($threads threads, 1 execve)"
exit $failed
