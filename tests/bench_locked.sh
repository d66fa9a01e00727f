#!/bin/sh
# bench_locked.sh KARUI_BENCH: the locked-instruction counts of
# karui-bench's `instructions` experiment and of `karui-bench locked`.
# Known from the code: a spin lock's lock + unlock is one locked
# instruction (the exchange; the unlock is a release store), and the bare
# switch has none.  karui's counts are whole numbers (its paths have no
# loop that retries uncontended) and small; on one VP (every experiment's
# configuration) a channel round trip takes its channels' locks and no
# other locked instruction, and a condvar round trip its variables' locks
# and the mutex's hand-over: at most 6 each (issue 15).  Skipped without
# valgrind.
kb=$1
out=$("$kb" run instructions --quick --only spin-lock --json) || { echo "$out"; exit 1; }
echo "$out"
case $out in *'"skipped":"valgrind not installed"'*) exit 77 ;; esac
where=$("$kb" locked spin-lock mutex 2000) || { echo "$where"; exit 1; }
echo "$where"
fail=0
need() {
	echo "$1" | grep -Eq "$2" || { echo "no line matches: $2"; fail=1; }
}
num='"value":[0-9]+,"unit":"locked"'
need "$out" '"system":"spin-lock","metric":"mutex.locked","value":1,"unit":"locked"'
need "$out" '"system":"spin-lock","metric":"mutex","value":[0-9.]+,"unit":"instr"'
need "$out" '"system":"karui","metric":"yield.locked","value":[0-7],"unit":"locked"'
for m in switch_to create_join create mutex condvar_pingpong chan_pingpong chan_relay \
	sem_pingpong rendezvous; do
	need "$out" "\"system\":\"karui\",\"metric\":\"$m.locked\",$num"
done
for m in chan_pingpong chan_relay condvar_pingpong; do
	need "$out" "\"system\":\"karui\",\"metric\":\"$m.locked\",\"value\":[0-6],\"unit\":\"locked\""
done
need "$where" '^spin-lock mutex: [0-9]+ instructions, 1 locked'
need "$where" '^ +1  .*spin.*\[karui-bench 0x[0-9a-f]+\]$'
exit $fail
