#!/bin/sh
# tools/gdb/karui.py on a live process: gdb_target
# stops with microprocesses parked in parked_in_alpha, parked_in_beta and
# sleeping_in_gamma; `info microprocesses` must list them and
# `microprocess N bt` must show each one's function.
# usage: test_gdb.sh GDB_TARGET KARUI_PY    (exit 77: skipped)
target=$1 py=$2
command -v gdb >/dev/null 2>&1 || { echo "skip: no gdb"; exit 77; }
gdb -nx -batch -ex 'python import gdb.unwinder' >/dev/null 2>&1 ||
	{ echo "skip: gdb has no Python (or no unwinder API)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap '[ -n "$KEEP" ] || rm -rf "$tmp"' EXIT
fail=0
check() { # FILE PATTERN WHAT
	if grep -q -- "$2" "$1"; then echo "ok: $3"; else echo "FAIL: $3"; fail=1; fi
}
# the ids are those of `info microprocesses`: N for the line whose entry is F
cmds='set pagination off
set confirm off
python
import gdb
for line in gdb.execute("info microprocesses", to_string=True).splitlines():
    print("LIST " + line)
    f = line.split()
    if len(f) > 4 and f[4] in ("parked_in_alpha", "parked_in_beta", "sleeping_in_gamma"):
        bt = gdb.execute("microprocess %s bt" % f[0].lstrip("*"), to_string=True)
        for l in bt.splitlines():
            print("BT %s %s" % (f[4], l))
gdb.execute("microprocess %s" % [l.split()[0] for l in gdb.execute("info microprocesses", to_string=True).splitlines() if "parked_in_beta" in l][0])
print("SEL " + gdb.execute("frame", to_string=True).splitlines()[0])
gdb.execute("up")
print("UP " + gdb.execute("frame", to_string=True).splitlines()[0])
gdb.execute("microprocess none")
end'
printf '%s\n' "$cmds" > "$tmp/cmds"
timeout 120 gdb -nx -batch -ex "source $py" -ex 'break gdb_target_stop' -ex run \
	-x "$tmp/cmds" -ex kill "$target" > "$tmp/live" 2>&1
if ! grep -q '^Breakpoint 1, gdb_target_stop' "$tmp/live"; then
	cat "$tmp/live"
	echo "skip: gdb could not run the target (ptrace refused?)"
	exit 77
fi
cat "$tmp/live"
# A core the kernel writes (the target stopped as before, then SIGABRT):
# gcore's leaves the stack regions out (docs/gdb.md).  Where the kernel
# writes none into the working directory (core_pattern a pipe, a limit),
# that part is skipped, and says so.
forms=live
pattern=$(cat /proc/sys/kernel/core_pattern 2>/dev/null)
case $pattern in
'|'* | */*) echo "skip: the core dump part: core_pattern is '$pattern'" ;;
*)
	(cd "$tmp" && ulimit -c unlimited 2>/dev/null &&
		timeout 120 gdb -nx -batch -ex 'break gdb_target_stop' -ex run \
			-ex 'signal SIGABRT' "$target" > "$tmp/abort" 2>&1)
	core=$(ls "$tmp"/core* 2>/dev/null | head -1)
	if [ -n "$core" ] && [ -s "$core" ]; then
		forms="live core"
	else
		echo "skip: the core dump part: the kernel wrote no core (ulimit -c: $(ulimit -c))"
	fi
	;;
esac
for f in $forms; do
	if [ $f = core ]; then
		timeout 120 gdb -nx -batch -ex "source $py" -x "$tmp/cmds" "$target" "$core" \
			> "$tmp/core.out" 2>&1
		cat "$tmp/core.out"
		out=$tmp/core.out
	else
		out=$tmp/live
	fi
	check $out '^LIST Id  *State' "$f: info microprocesses prints its header"
	check $out '^LIST  0 .*(main)' "$f: the main microprocess is listed"
	for fn in parked_in_alpha parked_in_beta sleeping_in_gamma; do
		check $out "^LIST .* parked .* $fn  *$fn\$" "$f: $fn listed, parked, waiting in itself"
		check $out "^BT $fn #.* in $fn () at .*gdb_target.c" "$f: bt of $fn shows it"
		check $out "^BT $fn #.* in mp_entry ()" "$f: bt of $fn reaches karui's entry"
	done
	check $out "^BT sleeping_in_gamma #.* in [a-z_]* () at .*src/core/park.c" "$f: gamma's bt shows its wait in the core"
	check $out '^SEL #1 .* parked_in_beta' "$f: microprocess N selects its frame"
	check $out '^UP #2 .* mp_entry' "$f: up goes to its caller"
done
[ $fail = 0 ] && echo "test_gdb: all passed" || echo "test_gdb: FAILED"
exit $fail
