#!/bin/sh
# libkarui.a's code in a section of its own, `karui_text`, so that a
# program linked with it statically still has karui's code in one range
# (the linker's __start_karui_text / __stop_karui_text), which L2 reads to
# know where a microprocess may not be stopped (src/core/preempt.c).  The
# archive's objects become one relocatable object whose code sections are
# renamed.  Two members of one name would be one file once extracted: the
# build stops then.  Usage: karui-text.sh AR LD OBJCOPY ARCHIVE
set -eu
ar=$1 ld=$2 objcopy=$3 lib=$4
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cd "$d"
dup=$("$ar" t "$lib" | sort | uniq -d)
if [ -n "$dup" ]; then
	echo "karui-text.sh: $lib has two objects named $dup: rename a source file" >&2
	exit 1
fi
"$ar" x "$lib"
"$ld" -r -o karui.o ./*.o
"$objcopy" --rename-section .text=karui_text \
	--rename-section .text.unlikely=karui_text \
	--rename-section .text.hot=karui_text \
	--rename-section .text.startup=karui_text karui.o
rm -f "$lib"
"$ar" rcs "$lib" karui.o
