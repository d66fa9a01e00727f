#!/bin/sh
# tools/gdb/karui.py on a live process and on a core: gdb_target
# stops with microprocesses parked in parked_in_alpha, parked_in_beta and
# sleeping_in_gamma; `info microprocesses` must list them and
# `microprocess N bt` must show each one's function.
# usage: test_gdb.sh GDB_TARGET KARUI_PY [EMULATOR...]    (exit 77: skipped)
# With an emulator (a cross build's: qemu-aarch64 -L SYSROOT), the target
# runs under it, stopped for gdb-multiarch, which attaches to its gdbstub
# (qemu-user's -g, on a Unix socket); its core is the one qemu-user writes
# (qemu_PROGRAM_DATE-PID.core), which leaves out the program's own ELF
# mappings, so the test tells gdb where the program was loaded
# (symbol-file -o: AT_PHDR less the ELF header's e_phoff).
target=$1 py=$2
shift 2
case $target in /*) ;; *) target=$PWD/$target ;; esac # the core part runs elsewhere
gdb=gdb sysroot= arch= emu="$*"
if [ $# -gt 0 ]; then
	gdb=gdb-multiarch
	arch=${1##*qemu-}
	a=$(printf ' %s' "$@")
	case $a in *' -L '*) sysroot=${a#* -L } sysroot=${sysroot%% *} ;; esac
fi
command -v $gdb >/dev/null 2>&1 || { echo "skip: no $gdb"; exit 77; }
$gdb -nx -batch -ex 'python import gdb.unwinder' >/dev/null 2>&1 ||
	{ echo "skip: $gdb has no Python (or no unwinder API)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap '[ -n "$KEEP" ] || rm -rf "$tmp"' EXIT
# run_stopped OUT GDB_ARGS...: gdb runs the target to gdb_target_stop, then
# does what GDB_ARGS say (after `set`s, `source`s and the breakpoint)
run_stopped() {
	out=$1
	shift
	if [ -z "$arch" ]; then
		timeout 120 $gdb -nx -batch -ex 'break gdb_target_stop' -ex run "$@" "$target" \
			> "$out" 2>&1
		return
	fi
	# the emulator waits for gdb on the socket; it ends when gdb kills
	# the target or the target dies (a core is written before), or at
	# the latest when its own timeout does
	rm -f "$tmp/sock"
	timeout -s KILL 150 $emu -g "$tmp/sock" "$target" &
	emu_pid=$!
	n=0
	while [ ! -S "$tmp/sock" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
	timeout 120 $gdb -nx -batch -ex "set architecture $arch" -ex "set sysroot $sysroot" \
		-ex "file $target" -ex "target remote $tmp/sock" -ex 'break gdb_target_stop' \
		-ex continue "$@" > "$out" 2>&1
	wait $emu_pid
}
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
    if len(f) > 4 and f[4] == "not_run_yet":
        try:
            gdb.execute("microprocess %s bt" % f[0].lstrip("*"), to_string=True)
        except gdb.error as e:
            print("REFUSED " + str(e))
gdb.execute("microprocess %s" % [l.split()[0] for l in gdb.execute("info microprocesses", to_string=True).splitlines() if "parked_in_beta" in l][0])
print("SEL " + gdb.execute("frame", to_string=True).splitlines()[0])
gdb.execute("up")
print("UP " + gdb.execute("frame", to_string=True).splitlines()[0])
if "aarch64" in gdb.selected_frame().architecture().name():
    gdb.execute("microprocess %s" % [l.split()[0] for l in gdb.execute("info microprocesses", to_string=True).splitlines() if "parked_in_alpha" in l][0])
    print("D8 " + gdb.execute("frame", to_string=True).splitlines()[0] + " " + gdb.execute("print $d8.f", to_string=True).strip())
gdb.execute("microprocess none")
end'
printf '%s\n' "$cmds" > "$tmp/cmds"
run_stopped "$tmp/live" -ex "source $py" -x "$tmp/cmds" -ex kill
if ! grep -q '^Breakpoint 1, gdb_target_stop' "$tmp/live"; then
	cat "$tmp/live"
	if [ -n "$arch" ]; then
		echo "skip: $gdb could not attach to $emu's gdbstub"
	else
		echo "skip: gdb could not run the target (ptrace refused?)"
	fi
	exit 77
fi
cat "$tmp/live"
# A core the kernel writes (the target stopped as before, then SIGABRT):
# gcore's leaves the stack regions out (docs/gdb.md).  Where the kernel
# writes none into the working directory (core_pattern a pipe, a limit),
# that part is skipped, and says so.  Under qemu-user, the core is qemu's
# (it writes it in its working directory whatever core_pattern says), but
# the kernel then writes qemu's own as well: where that would go elsewhere
# than this test's directory the part is skipped too.
forms=live
pattern=$(cat /proc/sys/kernel/core_pattern 2>/dev/null)
case $pattern in
'|'* | */*) echo "skip: the core dump part: core_pattern is '$pattern'" ;;
*)
	(cd "$tmp" && ulimit -c unlimited 2>/dev/null &&
		run_stopped "$tmp/abort" -ex 'signal SIGABRT')
	if [ -n "$arch" ]; then
		core=$(ls "$tmp"/qemu_*.core 2>/dev/null | head -1)
	else
		core=$(ls "$tmp"/core* 2>/dev/null | head -1)
	fi
	if [ -n "$core" ] && [ -s "$core" ]; then
		forms="live core"
	else
		by=the\ kernel
		[ -z "$arch" ] || by=qemu
		echo "skip: the core dump part: $by wrote no core (ulimit -c: $(ulimit -c))"
	fi
	;;
esac
for f in $forms; do
	if [ $f = core ]; then
		if [ -n "$arch" ]; then
			cat > "$tmp/reloc" <<-EOF
			python
			import re, struct
			aux = gdb.execute("info auxv", to_string=True)
			phdr = int(re.search(r"AT_PHDR .* (0x[0-9a-f]+)\$", aux, re.M).group(1), 16)
			with open("$target", "rb") as f:
			    e_type, = struct.unpack_from("<H", f.read(64), 16)
			    f.seek(32)
			    e_phoff, = struct.unpack("<Q", f.read(8))
			base = phdr - e_phoff if e_type == 3 else 0
			gdb.execute("symbol-file -o 0x%x $target" % base)
			end
			EOF
			timeout 120 $gdb -nx -batch -ex "set architecture $arch" \
				-ex "set sysroot $sysroot" -ex "source $py" -ex "core $core" \
				-x "$tmp/reloc" -x "$tmp/cmds" > "$tmp/core.out" 2>&1
		else
			timeout 120 gdb -nx -batch -ex "source $py" -x "$tmp/cmds" "$target" \
				"$core" > "$tmp/core.out" 2>&1
		fi
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
	check $out '^LIST .* new .* not_run_yet  *-$' "$f: a microprocess that never ran is new"
	check $out '^REFUSED .* is new: it has no frames' "$f: a new one has no backtrace"
	check $out "^BT sleeping_in_gamma #.* in [a-z_]* () at .*src/core/park.c" "$f: gamma's bt shows its wait in the core"
	check $out '^SEL #1 .* parked_in_beta' "$f: microprocess N selects its frame"
	check $out '^UP #2 .* mp_entry' "$f: up goes to its caller"
	[ -z "$arch" ] && [ "$(uname -m)" != aarch64 ] ||
		check $out '^D8 #1 .* parked_in_alpha .* = 2.5$' "$f: d8 is the parked microprocess's"
done
[ $fail = 0 ] && echo "test_gdb: all passed" || echo "test_gdb: FAILED"
exit $fail
