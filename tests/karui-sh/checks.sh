#!/bin/sh
# checks.sh KARUI-SH [EMULATOR...]: what the comparison with bash cannot
# show: -v naming how each stage runs (μprocess, child process, built-in),
# the fall-back of a #! script to a child process in a pipeline of
# μprocesses, KARUI_SH_STAGES, scripts and standard input as input, and
# that a stage gets no fd of the shell's own.  Where karui has μprocesses
# (KARUI_SH_STAGES=uproc runs /bin/true) the checks expect them; elsewhere
# they expect child processes, "no μprocesses here".
ksh=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
emu="$*"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
printf 'alpha\nbeta\ngamma\n' >a.txt
mkdir sub
printf '#!/bin/sh\ntr a-z A-Z\n' >up.sh
chmod +x up.sh
ksh() { $emu "$ksh" "$@"; }

failed=0
n=0
# check NAME EXPECTED ACTUAL
check() {
	n=$((n + 1))
	if [ "$2" = "$3" ]; then
		echo "ok      $1"
	else
		failed=$((failed + 1))
		echo "FAIL    $1"
		echo "  expected: $(printf '%s' "$2" | sed '2,$s/^/            /')"
		echo "  got:      $(printf '%s' "$3" | sed '2,$s/^/            /')"
	fi
}

if env KARUI_SH_STAGES=uproc $emu "$ksh" -c /bin/true 2>/dev/null; then
	uproc=yes
	way="μprocess"
	script_way="child process (no μprocess image)"
else
	uproc=no
	way="child process (no μprocesses here)"
	script_way=$way
fi
echo "μprocesses here: $uproc"

err=$(ksh -v -c 'cat a.txt | grep -c a | cat' 2>&1 >/dev/null)
check verbose_names_each_stage_and_its_way "karui-sh: cat: $way
karui-sh: grep: $way
karui-sh: cat: $way" "$err"

err=$(ksh -c 'cat a.txt | grep -c a | cat' 2>&1 >/dev/null)
check without_v_nothing_is_said "" "$err"

if [ $uproc = yes ]; then
	err=$(ksh -v -c 'cat a.txt | grep -c a; cat a.txt | grep -c a' 2>&1 >/dev/null)
	check verbose_names_a_start_from_a_kept_image "karui-sh: cat: $way
karui-sh: grep: $way
karui-sh: cat: $way (kept image)
karui-sh: grep: $way (kept image)" "$err"
fi

out=$(ksh -v -c 'cat a.txt | ./up.sh | cat' 2>err)
check script_stage_runs_as_a_child_between_others "ALPHA
BETA
GAMMA
karui-sh: cat: $way
karui-sh: ./up.sh: $script_way
karui-sh: cat: $way" "$out
$(cat err)"

if [ -r /usr/share/dict/words ]; then
	out=$(ksh -c 'cat /usr/share/dict/words | ./up.sh | grep -c ZO; yes | ./up.sh | head -2')
	check whole_file_and_early_close_pass_a_child_between_others \
		"$(bash -c 'cat /usr/share/dict/words | ./up.sh | grep -c ZO; yes | ./up.sh | head -2')" \
		"$out"
fi

err=$(env KARUI_SH_STAGES=child $emu "$ksh" -v -c 'cat a.txt | wc -l' 2>&1 >/dev/null)
check stages_child_makes_every_stage_a_child "karui-sh: cat: child process (KARUI_SH_STAGES=child)
karui-sh: wc: child process (KARUI_SH_STAGES=child)" "$err"

if [ $uproc = yes ]; then
	out=$(env KARUI_SH_STAGES=uproc $emu "$ksh" -c './up.sh </dev/null; echo $?' 2>&1)
	check stages_uproc_fails_what_cannot_be_a_uprocess \
		"karui-sh: ./up.sh: cannot run as a μprocess: Exec format error
126" "$out"
else
	out=$(env KARUI_SH_STAGES=uproc $emu "$ksh" -c 'cat a.txt' 2>&1; echo "status $?")
	check stages_uproc_fails_where_there_are_none \
		"karui-sh: cat: cannot run as a μprocess: Operation not supported
status 126" "$out"
fi

out=$(env KARUI_SH_STAGES=fast $emu "$ksh" -c 'echo no' 2>&1; echo "status $?")
check stages_of_another_name_are_refused \
	"karui-sh: KARUI_SH_STAGES=fast: not auto, uproc or child
status 2" "$out"

# a program that is not PIE (Debian's python3) as a μprocess, and a second
# one at once as a child process: its link address is taken
py=/usr/bin/python3
if [ "$way" = "μprocess" ] && [ -x $py ] && [ "$(od -An -tx1 -j16 -N1 $py | tr -d ' ')" = 02 ]; then
	out=$(ksh -v -c "$py -c 'import sys,time; time.sleep(0.3); print(sys.stdin.read().strip()+\"!\")' <a.txt |
		$py -c 'import sys; print(sys.stdin.read().replace(chr(10), \" \").strip()+\"?\")'" 2>&1)
	check not_pie_programs_take_their_address_one_at_a_time "karui-sh: $py: μprocess
karui-sh: $py: child process (its fixed address is taken)
alpha beta gamma!?" "$out"
else
	echo "skipped not_pie_programs_take_their_address_one_at_a_time (no μprocesses, or no python3 that is not PIE)"
fi

err=$(ksh -v -c 'cd sub | cat; cd sub' 2>&1)
check verbose_names_built_ins "karui-sh: cd: built-in
karui-sh: cat: $way
karui-sh: cd: built-in" "$err"

out=$(env KARUI_SH_STAGES=child $emu "$ksh" -c 'ls /proc/self/fd' 2>&1)
check a_child_gets_no_fd_of_the_shell "$(bash -c 'ls /proc/self/fd' 2>&1)" "$out"

cat >script.sh <<'SCRIPT'
echo "$0 $# $1 $2"
cat a.txt |
  grep -c a
echo "two
lines" 'and
more'; x=1 \
  y=2; echo $x$y
nosuch
cd sub; ls ../*.txt
echo )
echo never
SCRIPT
out=$(ksh script.sh one two 2>&1; echo "status $?")
check script_runs_line_by_line_and_stops_at_a_syntax_error \
	"$(bash script.sh one two 2>&1; echo "status $?")" "$out"

out=$(printf 'echo a\ncat\nhello\nnosuch\n' | ksh 2>&1; echo "status $?")
check standard_input_is_read_no_further_than_each_line "a
hello
nosuch
status 0" "$out"

out=$(printf 'echo a\nnosuch\necho )\necho b\n' | ksh 2>&1; echo "status $?")
check standard_input_messages_name_the_line \
	"$( (printf 'echo a\nnosuch\necho )\necho b\n' | bash 2>&1; echo "status $?") |
		sed 's/^bash:/karui-sh:/')" \
	"$out"

out=$(ksh -x 2>&1; echo "status $?")
check bad_option_is_refused_with_usage "karui-sh: -x: invalid option
usage: karui-sh [-v] [-c LINE [NAME [ARG...]] | FILE [ARG...]]
status 2" "$out"

out=$(ksh nosuch.sh 2>&1; echo "status $?")
check missing_script_is_127 "karui-sh: nosuch.sh: No such file or directory
status 127" "$out"

out=$(ksh -c 'echo "$0 $1 $#"' name arg 2>&1)
check dash_c_takes_name_and_arguments "name arg 1" "$out"

echo "$((n - failed)) passed, $failed failed"
[ $failed -eq 0 ]
