#!/bin/sh
# bench_mpi_wave.sh MPI_WAVE SEED004: seed 004's WAVE over MPI ranks
# (bench/seed004/mpi_wave.c) computes what the one-process WAVE does: at a
# small size, on karui (1 and 2 VPs per rank) and on pthreads with
# MPI_THREAD_MULTIPLE, on 2 ranks, and on karui on 1 and 3 ranks (uneven
# bands), each run's checksum must be the one of `SEED004 wave karui`.
# Skipped (77) where mpirun cannot start the ranks (tests/mpi_run.sh).  No
# timing is asserted.
prog=$1 seed004=$2
here=$(dirname "$0")
size="--steps 200 --grain 10"
ref=$("$seed004" wave karui --vps 1 $size | sed -n 's/.* checksum=\([0-9a-f]\{16\}\) .*/\1/p')
[ -n "$ref" ] || { echo "no reference checksum"; exit 1; }
echo "reference (one process): $ref"
fail=0
for run in "2 karui --vps 1" "2 karui --vps 2" "2 pthread" "1 karui --vps 1" "3 karui --vps 1"; do
	set -- $run
	np=$1
	shift
	out=$(sh "$here/mpi_run.sh" "$np" "$prog" "$@" $size)
	st=$?
	[ $st -eq 77 ] && { echo "$out"; exit 77; }
	echo "$out"
	[ $st -eq 0 ] || { echo "$run: exit status $st"; fail=1; continue; }
	sum=$(echo "$out" | sed -n 's/^wave .* checksum=\([0-9a-f]\{16\}\) .*/\1/p')
	[ -n "$sum" ] || { echo "$run: no checksum"; fail=1; continue; }
	echo "$out" | grep -q "^wave .* ranks=$np " || { echo "$run: not on $np ranks"; fail=1; }
	[ "$sum" = "$ref" ] || { echo "$run: checksum $sum, not $ref"; fail=1; }
done
exit $fail
