#!/bin/sh
# bench_uproc.sh KARUI_BENCH: seed 003's μprocess experiments ran whole.
# seed003.pipe: both systems give total and transfer, the transfer no
# longer than the total, the peer's with its ratio to karui (a reader that
# counted a wrong number of bytes fails its row instead).  uproc.count
# --n 100: all 100 cats alive at once, a positive private memory per
# μprocess and the processes' rows beside it.  seed003.table2 --n 5: a
# row for every system, the peers' with their ratio to karui (a start that
# did not reuse the kept image fails karui's row instead).  seed003.table6:
# the μprocess and the process map the same program and C library alike,
# the μprocess's stack has the 8 MiB and more that karui gives it, and a
# count of μprocesses that fit.  seed003.table5 --n 20000: every
# system's call, the peers' with their ratio to karui (a procedure whose
# results do not add up fails karui's row instead).  seed003.table3 --n 2000:
# every system's hop and switch, the switch below the hop (it is the hop
# less a write and a read), the peers' with their ratio to karui, the seed's
# figures on the rows that stand for its systems (a byte that comes back
# changed fails its row instead).  uproc.threads --n 1, uproc.make --n 2
# and uproc.script --n 100, quick, and pthread.compat --n 1 (the same
# programs under LD_PRELOAD=libkarui-pthread.so, and sysbench): every
# program's and shell's rows, or a
# row that says why not (a program not installed; a karui run that
# failed, with its reason), and no output that differs from the native
# run's.  Skipped where μprocesses are not available.
kb=$1
out=$("$kb" run seed003.pipe --quick --json && "$kb" run uproc.count --n 100 --json &&
	"$kb" run seed003.table2 --quick --n 5 --json && "$kb" run seed003.table6 --json &&
	"$kb" run seed003.table5 --quick --n 20000 --json &&
	"$kb" run seed003.table3 --quick --n 2000 --json &&
	"$kb" run uproc.threads --quick --n 1 --json && "$kb" run uproc.make --quick --n 2 --json &&
	"$kb" run uproc.script --quick --n 100 --json &&
	"$kb" run pthread.compat --quick --n 1 --json) ||
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
for sys in karui karui-kept karui-not-kept fork-exec posix-spawn pthread; do
	pat="^[{]\"experiment\":\"seed003.table2\",\"system\":\"$sys\",\"metric\":\"start\+exit\",\"value\":$num,\"unit\":\"us\""
	[ $sys = karui ] || pat="$pat.*\"ratio_to_karui\":$num[}]$"
	need "$pat"
done
t6() { # the value of seed003.table6's row of system $1, metric $2
	echo "$out" | sed -n "s/^{\"experiment\":\"seed003.table6\",\"system\":\"$1\",\"metric\":\"$2\",\"value\":\([^,]*\),.*/\1/p"
}
for m in "text address space" "data address space" "libc address space"; do
	k=$(t6 karui "$m")
	p=$(t6 process "$m")
	[ -n "$k" ] && [ "$k" = "$p" ] && [ "$k" != 0 ] ||
		{ echo "seed003.table6 $m: μprocess '$k', process '$p'"; fail=1; }
done
awk -v s="$(t6 karui "stack address space")" 'BEGIN { exit !(s + 0 >= 8192) }' ||
	{ echo "seed003.table6: the μprocess's stack is not 8 MiB or more"; fail=1; }
for sys in karui function msgq unix-socket; do
	pat="^[{]\"experiment\":\"seed003.table5\",\"system\":\"$sys\",\"metric\":\"call\",\"value\":$num,\"unit\":\"ns\""
	[ $sys = karui ] || pat="$pat.*\"ratio_to_karui\":$num[}]$"
	need "$pat"
done
t3() { # the value of seed003.table3's row of system $1, metric $2
	echo "$out" | sed -n "s/^{\"experiment\":\"seed003.table3\",\"system\":\"$1\",\"metric\":\"$2\",\"value\":\([^,]*\),.*/\1/p"
}
for sys in karui karui-threads karui-mp karui-2vp pthread process pthread-2cpu process-2cpu; do
	for m in hop switch; do
		pat="^[{]\"experiment\":\"seed003.table3\",\"system\":\"$sys\",\"metric\":\"$m\",\"value\":$num,\"unit\":\"ns\""
		[ $sys = karui ] || pat="$pat.*\"ratio_to_karui\":$num"
		need "$pat"
	done
	awk -v h="$(t3 $sys hop)" -v s="$(t3 $sys switch)" 'BEGIN { exit !(h + 0 > 0 && s != "" && s + 0 < h + 0) }' ||
		{ echo "seed003.table3 $sys: hop '$(t3 $sys hop)', switch '$(t3 $sys switch)'"; fail=1; }
done
need '^[{]"experiment":"seed003.table3","system":"karui","metric":"switch",.*"note":"seed 003: ProcThread 1.95 us"'
need '^[{]"experiment":"seed003.table3","system":"process","metric":"switch",.*"note":"seed 003: UNIX process 82 us'
need '^[{]"experiment":"seed003.table6","system":"karui","metric":"fit","value":[1-9][0-9]*,.*"note":"vm.max_map_count [0-9]+"[}]$'
need "^[{]\"experiment\":\"seed003.table6\",\"system\":\"process\",\"metric\":\"total rss\",\"value\":[1-9].*\"ratio_to_karui\":$num[}]$"
# uproc.threads, uproc.make, uproc.script: each system's rows of its
# program (wall, then cpu), the peers' with their ratio to karui, or the
# row that says why not
rows() { # experiment $1, metric $2, base system $3, peers $4...
	exp=$1 metric=$2 base=$3
	shift 3
	pre="^[{]\"experiment\":\"$exp\",\"system\":"
	if echo "$out" | grep -Eq "$pre\"$base\",\"failed\":\"$metric: "; then
		echo "$exp: $base failed: $(echo "$out" | grep -E "$pre\"$base\",\"failed\"")"
	else
		need "$pre\"$base\",\"metric\":\"$metric\",\"value\":$num,\"unit\":\"ms\""
		need "$pre\"$base\",\"metric\":\"$metric cpu\",\"value\":$num,\"unit\":\"ms\""
	fi
	for sys; do
		echo "$out" | grep -Eq "$pre\"$sys\",\"skipped\":\"not installed\"" && continue
		for m in "$metric" "$metric cpu"; do
			pat="$pre\"$sys\",\"metric\":\"$m\",\"value\":$num,\"unit\":\"ms\""
			echo "$out" | grep -Eq "$pre\"$base\",\"failed\"" || pat="$pat.*\"ratio_to_karui\":$num"
			need "$pat"
		done
	done
}
for p in xz zstd pigz sort std::thread; do
	echo "$out" | grep -Fq '{"experiment":"uproc.threads","system":"'$p'","skipped":"not installed"}' ||
		rows uproc.threads $p karui native
done
if ! echo "$out" | grep -Fq '{"experiment":"pthread.compat","system":"karui","skipped":'; then
	for p in "xz -T4" "zstd -T4" "pigz -p 4" "sort --parallel=4" std::thread \
		"sysbench threads" "sysbench mutex"; do
		echo "$out" | grep -Fq '{"experiment":"pthread.compat","system":"'"$p"'","skipped":"not installed"}' ||
			rows pthread.compat "$p" karui native
	done
fi
rows uproc.make "make -j2" karui native
rows uproc.script script karui-sh dash bash
echo "$out" | grep -q DIFFERS && { echo "an output DIFFERS from the native run's"; fail=1; }
exit $fail
