#!/bin/sh
# bench_seed004.sh PROGRAM: seed 004's workloads (bench/seed004) give the
# same checksum in every mode: MULT, FORCE and WAVE at a tiny size, each on
# pthreads, on karui with 1 and 2 VPs, and on karui with the C-area (a
# segment of its own, removed at the end), which must attach to it.  No
# timing is asserted.
prog=$1
seg=/karui-carea-test-$$
trap 'rm -f /dev/shm$seg' EXIT
fail=0
for w in "mult --size 64" "force --size 32 --steps 50" "wave --steps 20 --grain 10"; do
	set -- $w
	name=$1
	shift
	ref=
	for mode in pthread "karui --vps 1" "karui --vps 2" "carea --segment $seg"; do
		out=$("$prog" "$name" $mode "$@") || { echo "$name $mode: exit status $?"; fail=1; continue; }
		echo "$out"
		sum=$(echo "$out" | sed -n 's/.* checksum=\([0-9a-f]\{16\}\) .*/\1/p')
		[ -n "$sum" ] || { echo "$name $mode: no checksum"; fail=1; continue; }
		[ -n "$ref" ] || ref=$sum
		[ "$sum" = "$ref" ] || { echo "$name $mode: checksum $sum, not $ref"; fail=1; }
		case $mode in carea*)
			echo "$out" | grep -q ' attached=1 ' || { echo "$name: not in the C-area"; fail=1; }
		esac
	done
done
exit $fail
