#!/bin/sh
# bench_seed001_count.sh KARUI_BENCH: seed001.count gives EPC-N's and
# EPC-S's instructions per call, NullProc and ArgRtn_Copy at 8 KiB; EPC-S
# costs more than EPC-N, and ArgRtn_Copy (8192 lookups) more than 8192
# instructions over NullProc; EPC-H's rows are there, natively or counted
# in the VM (then beside the VM's EPC-N, which it costs more than), or it
# says why it is skipped.  No row failed.
kb=$1
out=$("$kb" run seed001.count --json 2>/dev/null) || { echo "$out"; exit 1; }
echo "$out"
fail=0
val() { # system metric -> its value, or nothing
	echo "$out" | sed -n "s/^{\"experiment\":\"seed001.count\",\"system\":\"$1\",\"metric\":\"$2\",\"value\":\([0-9.e+]*\),.*/\1/p"
}
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; }
check() { gt "$2" "$3" || { echo "not $1: $2 > $3"; fail=1; }; }
for s in karui-epc-n karui-epc-s; do
	n=$(val $s NullProc) c=$(val $s ArgRtn_Copy)
	[ -n "$n" ] && [ -n "$c" ] || { echo "no rows for $s"; fail=1; continue; }
	check "$s: copy over null" "$c" "$(awk -v n="$n" 'BEGIN { print n + 8192 }')"
done
check "EPC-S over EPC-N" "$(val karui-epc-s NullProc)" "$(val karui-epc-n NullProc)"
h=$(val karui-epc-h NullProc)
if [ -n "$h" ]; then
	base=$(val karui-epc-n-vm NullProc)
	check "EPC-H over EPC-N" "$h" "${base:-$(val karui-epc-n NullProc)}"
	[ -n "$(val karui-epc-h ArgRtn_Copy)" ] || { echo "no EPC-H ArgRtn_Copy"; fail=1; }
else
	echo "$out" | grep -q '"system":"karui-epc-h","skipped":"no protection keys on this CPU, and' ||
		{ echo "EPC-H neither counted nor skipped"; fail=1; }
fi
if echo "$out" | grep -q '"failed":'; then
	echo "a row failed"
	fail=1
fi
exit $fail
