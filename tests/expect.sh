#!/bin/sh
# expect.sh PATTERN COMMAND...: pass when COMMAND exits 0 and its output
# contains a line matching the extended regular expression PATTERN.
pat=$1
shift
out=$("$@") || { echo "$out"; echo "exit status $?"; exit 1; }
echo "$out"
echo "$out" | grep -Eq "$pat" || { echo "no line matches: $pat"; exit 1; }
