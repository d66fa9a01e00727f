#!/bin/sh
# binary.sh KARUI-SH [EMULATOR...]: binary input, as bash takes it.  A
# file that the kernel refuses and that looks binary (an ELF header, or a
# NUL byte in its first line) is refused with bash's "cannot execute
# binary file" and status 126, whether it is run as a command (an ELF
# file of another architecture, one cut short, a script with a NUL byte)
# or given as a script; a NUL byte later in a script or on standard input
# is dropped.  Each run ends within 20 seconds and leaves no process
# behind (none with the test's directory in its command line).  Under an
# emulator (qemu-user) the cases that run a file as a command are
# skipped: the emulator's own execve answers for the kernel there.
ksh=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
emu="$*"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1

failed=0
n=0
skipped=0
# run ARG...: karui-sh's stdout and stderr, then "status N"
run() {
	timeout -k 5 20 $emu "$ksh" "$@" 2>&1
	echo "status $?"
}
# as_command NAME EXPECTED ARG...: check NAME for `karui-sh ARG...`, which
# runs a file as a command
as_command() {
	if [ -n "$emu" ]; then
		skipped=$((skipped + 1))
		echo "skipped $1 (run under an emulator, whose execve answers)"
		return
	fi
	name=$1 want=$2
	shift 2
	check "$name" "$want" "$(run "$@")"
}
# check NAME EXPECTED ACTUAL
check() {
	n=$((n + 1))
	left=$(pgrep -f "$dir")
	if [ "$2" = "$3" ] && [ -z "$left" ]; then
		echo "ok      $1"
	else
		failed=$((failed + 1))
		echo "FAIL    $1"
		echo "  expected: $(printf '%s' "$2" | sed '2,$s/^/            /')"
		echo "  got:      $(printf '%s' "$3" | sed '2,$s/^/            /')"
		[ -z "$left" ] || { echo "  left behind:"; ps -o pid,stat,time,args -p "$left"; }
	fi
}

printf 'echo a\000b\necho c\n' >nul1
printf 'echo x\necho a\000b\necho c\n' >nul2
head -c 100 /bin/true >cut
# /bin/true with aarch64's e_machine (183)
{ head -c 18 /bin/true; printf '\267\000'; tail -c +21 /bin/true; } >arm
chmod +x nul1 nul2 cut arm

as_command a_nul_in_a_commands_first_line_is_a_binary_file \
	"karui-sh: ./nul1: cannot execute binary file: Exec format error
status 126" -c ./nul1
check a_script_with_a_nul_in_its_first_line_is_refused \
	"karui-sh: nul1: cannot execute binary file
status 126" "$(run nul1)"
check a_nul_in_a_later_line_is_dropped "x
ab
c
status 0" "$(run nul2)"
as_command a_command_with_a_nul_in_a_later_line_runs_as_a_script "x
ab
c
status 0" -c ./nul2
check a_nul_on_standard_input_is_dropped "ab
c
status 0" "$(printf 'echo a\000b\necho c\n' | run)"
as_command a_binary_cut_short_is_a_binary_file \
	"karui-sh: ./cut: cannot execute binary file: Exec format error
status 126" -c ./cut
check a_binary_cut_short_is_no_script \
	"karui-sh: cut: cannot execute binary file
status 126" "$(run cut)"
if grep -qs '^enabled' /proc/sys/fs/binfmt_misc/*aarch64*; then
	echo "skipped another_architecture_is_a_binary_file (binfmt_misc runs aarch64 here)"
else
	as_command another_architecture_is_a_binary_file \
		"karui-sh: ./arm: cannot execute binary file: Exec format error
status 126" -c ./arm
fi
as_command a_binary_in_a_pipeline_fails_its_stage_alone \
	"karui-sh: ./cut: cannot execute binary file: Exec format error
0
status 0" -c 'echo a | ./cut | wc -l'

echo "$((n - failed)) passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
