#!/bin/sh
# libkarui.a's code in a section of its own, `karui_text`, so that a
# program linked with it statically still has karui's code in one range
# (the linker's __start_karui_text / __stop_karui_text), which the C-area
# reads to know where a microprocess may not be stopped (src/carea).  The
# archive's objects become one relocatable object whose code sections are
# renamed.  Usage: karui-text.sh AR LD OBJCOPY ARCHIVE
set -eu
ar=$1 ld=$2 objcopy=$3 lib=$4
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cd "$d"
"$ar" x "$lib"
"$ld" -r -o karui.o ./*.o
"$objcopy" --rename-section .text=karui_text \
	--rename-section .text.unlikely=karui_text \
	--rename-section .text.hot=karui_text \
	--rename-section .text.startup=karui_text karui.o
rm -f "$lib"
"$ar" rcs "$lib" karui.o
