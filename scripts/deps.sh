#!/usr/bin/env bash
# Install the Debian packages karui's build, tests and benchmarks need, and
# only those that are missing (apt-get update runs once, and only then).
set -euo pipefail

need=()
lean=() # installed without their recommends
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
want() { have_pkg "$1" || need+=("$1"); }
want_lean() { have_pkg "$1" || lean+=("$1"); }

have_cmd cmake || want cmake
have_cmd ninja || want ninja-build
have_cmd gcc || want gcc
have_cmd g++ || want g++
have_cmd objdump || want binutils   # test_x86dec compares with its listings
have_cmd python3 || want python3
have_cmd pkg-config || want pkgconf
have_cmd valgrind || want valgrind
have_cmd qemu-aarch64 || want qemu-user
have_cmd aarch64-linux-gnu-gcc || want gcc-aarch64-linux-gnu
[ -e /usr/aarch64-linux-gnu/include/stdio.h ] || want libc6-dev-arm64-cross
[ -e /usr/include/liburing.h ] || want liburing-dev
# examples/crypt_server and crypt_host: libcrypt's crypt() and crypt_r()
[ -e /usr/include/crypt.h ] || want libcrypt-dev
[ -e /usr/include/boost/context/detail/fcontext.hpp ] || want libboost-context-dev
[ -e /usr/include/boost/fiber/all.hpp ] || want libboost-fiber-dev
# seed001.ipc's Sun RPC peer: libtirpc and rpcgen, which makes its stubs
[ -e /usr/include/tirpc/rpc/rpc.h ] || want libtirpc-dev
have_cmd rpcgen || want rpcsvc-proto
# karui-sh: line editing, and the word list its tests pipe through programs
[ -e /usr/include/editline/readline.h ] || want libedit-dev
[ -e /usr/share/dict/words ] || want wamerican
# karui-sh's scripts are compared with dash's runs of them
have_cmd dash || want dash
# test_uproc compares threaded programs' output with their native runs
have_cmd xz || want xz-utils
have_cmd zstd || want zstd
have_cmd pigz || want pigz
# the pthread layer's test and pthread.compat run sysbench's threads and mutex
have_cmd sysbench || want sysbench
# libkarui-mpi (src/mpi), its tests under mpirun and mpi.wave: Open MPI
want libopenmpi-dev
have_cmd mpirun || want openmpi-bin
# tests/test_gdb.sh drives gdb; in the aarch64 build, gdb-multiarch attaches
# to qemu-user's gdbstub
have_cmd gdb || want gdb
have_cmd gdb-multiarch || want gdb-multiarch
# Go is a benchmark peer only; a toolchain already on the machine will do.
have_cmd go || [ -x /usr/local/go/bin/go ] || want golang-go
# scripts/report's plots (its test too): the distribution's matplotlib, for
# the distribution's python3
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || want python3-matplotlib
# scripts/pku-vm, which runs the protection-key tests in a VM: the system
# emulator (its recommends are a desktop's worth, not needed) and a static
# busybox for the VM's initramfs
have_cmd qemu-system-x86_64 || want_lean qemu-system-x86
have_pkg busybox-static || want_lean busybox-static
if [ "${1:-}" = "--demo" ]; then
	have_cmd wrk || want wrk
	# seed003.pipeline: `cat words | grep zonation` under bash and dash
	[ -e /usr/share/dict/words ] || want wamerican
	# seed003.cgi: lighttpd's mod_cgi, the peer of karui's CGI server (its
	# test, cgi_httpd_like_lighttpd, is skipped without it)
	have_cmd lighttpd || [ -x /usr/sbin/lighttpd ] || want lighttpd
fi

[ ${#need[@]} -eq 0 ] && [ ${#lean[@]} -eq 0 ] && exit 0
echo "karui: installing" "${need[@]}" "${lean[@]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
[ ${#need[@]} -eq 0 ] || $sudo apt-get install -y -qq "${need[@]}" >/dev/null
[ ${#lean[@]} -eq 0 ] ||
	$sudo apt-get install -y -qq --no-install-recommends "${lean[@]}" >/dev/null
