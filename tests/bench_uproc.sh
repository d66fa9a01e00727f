#!/bin/sh
# bench_uproc.sh KARUI_BENCH: seed 003's μprocess experiments ran whole.
# seed003.pipe: both systems give total and transfer, the transfer no
# longer than the total, the peer's with its ratio to karui (a reader that
# counted a wrong number of bytes fails its row instead).  uproc.count
# --n 100: all 100 cats alive at once, a positive private memory per
# μprocess and the processes' rows beside it.  Skipped where μprocesses
# are not available.
kb=$1
out=$("$kb" run seed003.pipe --quick --json && "$kb" run uproc.count --n 100 --json) ||
	{ echo "$out"; exit 1; }
echo "$out"
case $out in *'"skipped":"μprocesses unavailable here'*) exit 77 ;; esac
fail=0
need() {
	echo "$out" | grep -Eq "$1" || { echo "no line matches: $1"; fail=1; }
}
num='[0-9.e+-]+'
for sys in karui unix-pipe; do
	for m in total transfer; do
		pat="^[{]\"experiment\":\"seed003.pipe\",\"system\":\"$sys\",\"metric\":\"$m\",\"value\":$num,\"unit\":\"ms\""
		[ $sys = karui ] || pat="$pat.*\"ratio_to_karui\":$num[}]$"
		need "$pat"
	done
	t=$(echo "$out" | sed -n "s/.*\"system\":\"$sys\",\"metric\":\"total\",\"value\":\([^,]*\),.*/\1/p")
	x=$(echo "$out" | sed -n "s/.*\"system\":\"$sys\",\"metric\":\"transfer\",\"value\":\([^,]*\),.*/\1/p")
	awk -v t="$t" -v x="$x" 'BEGIN { exit !(t != "" && x != "" && x + 0 <= t + 0) }' ||
		{ echo "$sys: transfer $x ms is not within total $t ms"; fail=1; }
done
need '^[{]"experiment":"uproc.count","system":"karui","metric":"count","value":100,'
need '^[{]"experiment":"uproc.count","system":"karui","metric":"private dirty","value":[1-9]'
need "^[{]\"experiment\":\"uproc.count\",\"system\":\"process\",\"metric\":\"private dirty\",\"value\":[1-9].*\"ratio_to_karui\":$num[}]$"
exit $fail
