#!/bin/sh
# mpi_run.sh NP PROGRAM [ARGS...]: PROGRAM on NP ranks of this machine under
# Open MPI's mpirun, with the shared-memory and self transports only (the
# machine may have no network but loopback), as root if need be, more ranks
# than processors allowed, no binding; at most KARUI_MPI_TIMEOUT seconds
# (default 240).  Exit status: PROGRAM's, or 77 (skipped) when there is no
# mpirun, or it cannot start NP ranks of `true` here.
np=$1
shift
command -v mpirun >/dev/null 2>&1 ||
	{ echo "skipped: no mpirun (scripts/deps.sh installs openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# vader's single-copy path (CMA) needs ptrace rights that containers may
# withhold: large messages go through the shared segment instead
opts="--allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader
	--mca btl_vader_single_copy_mechanism none -np $np"
if ! timeout 60 mpirun $opts true >/dev/null 2>&1 </dev/null; then
	echo "skipped: mpirun cannot start $np ranks here"
	exit 77
fi
exec timeout "${KARUI_MPI_TIMEOUT:-240}" mpirun $opts "$@" </dev/null
