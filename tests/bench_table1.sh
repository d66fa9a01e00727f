#!/bin/sh
# bench_table1.sh KARUI_BENCH: seed004.table1's rows.  Every operation of
# karui and of Boost.Fiber has a count of at least one instruction (an
# operation's region between the marks is never empty, and a mark that did
# not toggle collection would leave 0 or a negative count; fractions come
# from regions that alternate, and from karui's look at its timers at every
# 8th scheduling point), and each Boost.Fiber row carries its ratio to
# karui's.  Skipped without valgrind.
kb=$1
out=$("$kb" run seed004.table1 --quick --json) || { echo "$out"; exit 1; }
echo "$out"
case $out in *'"skipped":"valgrind not installed"'*) exit 77 ;; esac
fail=0
for sys in karui boost-fiber; do
	for m in create stop resume switch exit; do
		pat="^[{]\"experiment\":\"seed004.table1\",\"system\":\"$sys\",\"metric\":\"$m\",\"value\":[1-9][0-9]*(\\.[0-9]+)?,\"unit\":\"instr\""
		[ $sys = karui ] || pat="$pat.*\"ratio_to_karui\":[0-9.e+-]+[}]$"
		echo "$out" | grep -Eq "$pat" || { echo "no line matches: $pat"; fail=1; }
	done
done
exit $fail
