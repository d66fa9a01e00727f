#!/bin/sh
# bench_sim.sh KARUI_BENCH: seed004.sim, seed 004's emulator, on 1 to 4
# processes (--quick --n 4) with no valgrind on the PATH, so with the paper's
# costs alone, which a skipped row for karui's counts says.  Two runs print
# the same lines (fixed seed, no clock); on WAVE at 4 processes the proposed
# scheme costs no more than scheduler activations and less than two-level and
# k-only; k-only's cost grows from 1 to 4 processes, and so do its
# address-space switches; each workload alone has Table 2's mean parallelism
# within 5%; every gain over another system on WAVE is above zero.
kb=$1
run() { PATH=/nonexistent "$kb" run seed004.sim --quick --json --n 4 2>/dev/null; }
a=$(run) || { echo "$a"; echo "exit status $?"; exit 1; }
b=$(run) || { echo "second run: exit status $?"; exit 1; }
echo "$a"
fail=0
[ "$a" = "$b" ] || { echo "two runs differ"; fail=1; }
echo "$a" | grep -q '^[{]"experiment":"seed004.sim","system":"karui-costs","skipped":' ||
	{ echo "no skipped row for karui's counts"; fail=1; }
# val SYSTEM METRIC [X]: the value of that row, or nothing
val() {
	x=${3:+,\"x\":$3[,\}]}
	echo "$a" | grep "\"system\":\"$1\",\"metric\":\"$2\",.*\"runs\":1$x" |
		sed -n 's/.*"value":\([0-9.e+-]*\),.*/\1/p' | head -1
}
# holds A OP B WHAT: A OP B numerically (OP: < <= >)
holds() {
	if [ -z "$1" ] || [ -z "$3" ]; then
		echo "missing row: $4"
		fail=1
	elif ! awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
		exit !(op == "<" ? a + 0 < b + 0 : op == "<=" ? a + 0 <= b + 0 : a + 0 > b + 0) }'; then
		echo "does not hold: $4 ($1 $2 $3)"
		fail=1
	fi
}
p=$(val proposed wave 4)
holds "$p" "<=" "$(val sched-act wave 4)" "proposed <= sched-act, WAVE, 4 processes"
holds "$p" "<" "$(val two-level wave 4)" "proposed < two-level, WAVE, 4 processes"
holds "$p" "<" "$(val k-only wave 4)" "proposed < k-only, WAVE, 4 processes"
holds "$(val k-only wave 4)" ">" "$(val k-only wave 1)" "k-only's cost grows, WAVE, 1 to 4"
holds "$(val k-only wave.as-switches 4)" ">" "$(val k-only wave.as-switches 1)" \
	"k-only's address-space switches grow, WAVE, 1 to 4"
for w in mult:7.86 force:7.85 wave:4.10; do
	v=$(val "${w%:*}" parallelism)
	holds "$v" ">" "$(awk "BEGIN { print ${w#*:} * 0.95 }")" "${w%:*} parallelism near ${w#*:}"
	holds "$v" "<" "$(awk "BEGIN { print ${w#*:} * 1.05 }")" "${w%:*} parallelism near ${w#*:}"
done
for s in k-only two-level sched-act; do
	holds "$(val $s gain.wave)" ">" 0 "the proposed scheme gains over $s on WAVE"
done
exit $fail
