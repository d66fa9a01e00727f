#!/bin/sh
# bench_seed001.sh KARUI_BENCH: seed001.ipc ran whole, 100 calls per repeat.
# Every system, karui's and the peers', gives NullProc once (no x) and the
# three other patterns at 2, 4 and 8 KiB, in µs, with no failed or skipped
# row (a wrong result fails its row: this is also the check that every
# server computed what its client recomputed) but karui-epc-h where the CPU
# has no protection keys; the peers' rows have their ratio to EPC-S; Sun RPC needed no portmapper; where msgmax leaves no room for
# 8 KiB and a header, sysv-msgq's 8 KiB rows say in how many messages they
# went; and no SysV message queue is left behind.
kb=$1
queues() { ipcs -q 2>/dev/null | awk '$2 ~ /^[0-9]+$/ { print $2 }' | sort; }
before=$(queues)
out=$("$kb" run seed001.ipc --quick --n 100 --json) || { echo "$out"; exit 1; }
after=$(queues)
echo "$out"
fail=0
need() {
	echo "$out" | grep -Eq "$1" || { echo "no line matches: $1"; fail=1; }
}
num='[0-9.e+-]+'
row='^[{]"experiment":"seed001.ipc","system":"'
for sys in karui-epc-s karui-epc-n karui-epc-s-switch karui-itc-1vp karui-itc-2vp \
	pipe-rpc unix-rpc udp-rpc sysv-msgq sun-rpc-udp; do
	need "$row$sys\",\"metric\":\"NullProc\",\"value\":$num,\"unit\":\"us\",.*\"runs\":5(,\"ratio_to_karui\":$num)?(,\"note\":.*)?[}]$"
	for m in ArgNoRtn ArgRtn_NoCopy ArgRtn_Copy; do
		for x in 2 4 8; do
			need "$row$sys\",\"metric\":\"$m\",\"value\":$num,\"unit\":\"us\",.*\"x\":$x[,}]"
		done
	done
done
need "${row}pipe-rpc\",\"metric\":\"ArgRtn_Copy\",.*\"x\":8,\"ratio_to_karui\":$num"
if echo "$out" | grep -E '"(failed|skipped)":' |
	grep -v '"system":"karui-epc-h","skipped":"no protection keys on this CPU"'; then
	echo "a system did not run whole"
	fail=1
fi
if [ "$(cat /proc/sys/kernel/msgmax 2>/dev/null || echo 0)" -lt 8208 ]; then
	need "${row}sysv-msgq\",\"metric\":\"ArgRtn_Copy\",.*\"x\":8,(\"ratio_to_karui\":$num,)?\"note\":\"2 messages per request, 2 per reply"
fi
[ "$before" = "$after" ] || { echo "SysV message queues left behind:"; echo "$after"; fail=1; }
exit $fail
