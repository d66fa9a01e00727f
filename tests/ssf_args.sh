#!/bin/sh
# ssf_args.sh KARUI-SSF [EMULATOR...]: karui-ssf refuses bad arguments with
# a message and exit status 2, and a good run prints its check and exits 0.
ssf=$1
shift
emu="$*"
fail=0
bad() {
	out=$($emu "$ssf" "$@" 2>&1)
	st=$?
	if [ $st -ne 2 ] || ! echo "$out" | grep -q "karui-ssf: "; then
		echo "karui-ssf $*: exit $st, said: $out"
		fail=1
	fi
}
bad --backend lwp
bad --program quicksort
bad --cpus 0
bad --cpus 33
bad --cpus 4x
bad --scale 0
bad --scale -1
bad --scale
bad --frobnicate 1
bad --program prodcons --cpus 1
out=$($emu "$ssf" --backend all --program sum --cpus 2) || { echo "$out"; fail=1; }
echo "$out" | grep -Eq "^sum +pthread +2 CPUs +ok: sum 528 \(expected 528\); [0-9]+ cycles" ||
	{ echo "no pthread line in: $out"; fail=1; }
exit $fail
