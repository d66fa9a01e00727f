#!/bin/sh
# test_install.sh SOURCE WORK CMAKE GENERATOR CC VERSION: build the library
# alone from SOURCE (tests, examples, bench off) in WORK, install it into
# WORK/prefix, then build tests/install/hello.c against the installed copy
# with pkg-config (shared, then static) and with find_package(karui), and
# run each.  Every step must succeed and print what it should.  The shared
# build follows README.md: with neither rpath nor LD_LIBRARY_PATH it must fail
# to start as README.md says, and with either it must run.
set -eu
src=$1 work=$2 cmake=$3 gen=$4 cc=$5 version=$6
prefix=$work/prefix
expect="^karui $(echo "$version" | sed 's/\./\\./g') \([0-9]+\): a microprocess returned 42$"

fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== $*"; }
# run NAME COMMAND...: COMMAND's output must contain a line matching $expect
run() {
	name=$1
	shift
	out=$("$@" 2>&1) || { echo "$out"; fail "$name exited with $?"; }
	echo "$out"
	echo "$out" | grep -Eq "$expect" || fail "$name: no line matches $expect"
}
# needed BINARY: the shared libraries BINARY needs
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

command -v pkg-config >/dev/null || fail "no pkg-config (scripts/deps.sh installs pkgconf)"
rm -rf "$work"
mkdir -p "$work"

step "configure, build and install karui into $prefix"
"$cmake" -G "$gen" -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCMAKE_C_COMPILER="$cc" -DKARUI_BUILD_TESTS=OFF -DKARUI_BUILD_EXAMPLES=OFF \
	-DKARUI_BENCH=OFF -DKARUI_INSTALL=ON >"$work/configure.log" 2>&1 ||
	{ cat "$work/configure.log"; fail "configure"; }
"$cmake" --build "$work/build" >"$work/build.log" 2>&1 ||
	{ cat "$work/build.log"; fail "build"; }
# --prefix differs from the configured one: the installed files must not
# depend on it.
"$cmake" --install "$work/build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
	{ cat "$work/install.log"; fail "install"; }
(cd "$prefix" && find . ! -type d | sort)

pc=$(find "$prefix" -name karui.pc)
[ -n "$pc" ] || fail "no karui.pc"
libdir=$(dirname "$(dirname "$pc")")
for f in include/karui.h include/karui/version.h include/karui/vp.h \
	include/karui/ctx.h include/karui/core.h include/karui/sched.h \
	include/karui/sync.h include/karui/io.h; do
	[ -f "$prefix/$f" ] || fail "not installed: $f"
done
for f in libkarui.a libkarui.so libkarui.so.2 libkarui.so.$version \
	cmake/karui/karuiConfig.cmake cmake/karui/karuiConfigVersion.cmake \
	cmake/karui/karuiTargets.cmake; do
	[ -e "$libdir/$f" ] || fail "not installed: $libdir/$f"
done
[ "$(readlink "$libdir/libkarui.so")" = libkarui.so.2 ] || fail "libkarui.so is no link to libkarui.so.2"
[ "$(readlink "$libdir/libkarui.so.2")" = "libkarui.so.$version" ] || fail "libkarui.so.2 is no link to libkarui.so.$version"
readelf -d "$libdir/libkarui.so.$version" | grep -q 'SONAME.*\[libkarui\.so\.2\]' || fail "soname is not libkarui.so.2"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
step "pkg-config: $(pkg-config --modversion karui): $(pkg-config --cflags --libs karui)"
[ "$(pkg-config --modversion karui)" = "$version" ] || fail "karui.pc's version"
# README.md's commands ("Using karui in your program"), run as written in
# $work/app on app.c (hello.c), with cc the compiler under test and none of
# the caller's LD_LIBRARY_PATH.  said LINE: README.md must hold LINE.
said() { grep -Fq -- "$1" "$src/README.md" || fail "README.md no longer says: $1"; }
readme() {
	(
		cd "$work/app"
		unset LD_LIBRARY_PATH
		cc() { "$compiler" "$@"; }
		eval "$1"
	)
}
compiler=$cc
mkdir "$work/app"
cp "$src/tests/install/hello.c" "$work/app/app.c"
build='cc -o app app.c $(pkg-config --cflags --libs karui)'
rpath="$build -Wl,-rpath,\$(pkg-config --variable=libdir karui)"
ldpath='LD_LIBRARY_PATH=$(pkg-config --variable=libdir karui) ./app'
nolib='./app: error while loading shared libraries: libkarui.so.2: cannot open shared object file: No such file or directory'
for line in "$build" "$rpath" "$ldpath" "$nolib"; do said "$line"; done

step "README: $build"
readme "$build" || fail "$build"
needed "$work/app/app" | grep -qx libkarui.so.2 || fail "app does not need libkarui.so.2"
if ldconfig -p 2>/dev/null | grep -q 'libkarui\.so\.2 '; then
	echo "not checked that ./app fails: the dynamic linker knows another libkarui.so.2"
else
	out=$(readme ./app 2>&1) && fail "./app started with no rpath nor LD_LIBRARY_PATH"
	status=$?
	echo "$out"
	[ $status -eq 127 ] || fail "./app exited with $status, not 127"
	echo "$out" | grep -Fqx "$nolib" || fail "./app did not say: $nolib"
fi
step "README: $ldpath"
run "LD_LIBRARY_PATH ./app" readme "$ldpath"

step "README: $rpath"
readme "$rpath" || fail "$rpath"
run "./app with its rpath" readme ./app

# The whole of libkarui.a is linked in, so that every library it needs
# must be in karui.pc's Libs.private (hello.c alone pulls in no I/O).
static_libs=$(pkg-config --static --libs karui)
step "pkg-config --static: $static_libs"
# shellcheck disable=SC2046
"$cc" -static -o "$work/hello_pc_static" "$src/tests/install/hello.c" \
	$(pkg-config --cflags karui) $(echo "$static_libs" |
	sed 's/-lkarui/-Wl,--whole-archive -lkarui -Wl,--no-whole-archive/') ||
	fail "cc -static with pkg-config --static --libs karui"
[ -z "$(needed "$work/hello_pc_static")" ] || fail "hello_pc_static is not static"
run hello_pc_static "$work/hello_pc_static"

step "CMake: find_package(karui 2.0), karui::karui and karui::karui_static"
"$cmake" -G "$gen" -S "$src/tests/install" -B "$work/hello" -DCMAKE_C_COMPILER="$cc" \
	-DCMAKE_PREFIX_PATH="$prefix" >"$work/hello-configure.log" 2>&1 ||
	{ cat "$work/hello-configure.log"; fail "find_package(karui 2.0)"; }
"$cmake" --build "$work/hello" >"$work/hello-build.log" 2>&1 ||
	{ cat "$work/hello-build.log"; fail "build against karui::karui and karui::karui_static"; }
needed "$work/hello/hello" | grep -qx libkarui.so.2 || fail "karui::karui is not the shared library"
needed "$work/hello/hello_static" | grep -q libkarui && fail "karui::karui_static needs libkarui.so"
run hello "$work/hello/hello"
run hello_static "$work/hello/hello_static"

echo "install: all passed"
