#!/bin/sh
# report.sh KARUI_BENCH REPORT: scripts/report makes REPORT.md and a plot
# from a real run of one quick experiment (yield, karui and the bare switch),
# with the machine recorded in the same run; the seeds' tables that the run
# lacks say "not run"; a line that is not JSON is refused with its number.
# Skipped when matplotlib is not installed (the Markdown is checked first).
kb=$1
report=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$report" --run "$dir/results.jsonl" --out "$dir" -- \
	"$kb" run yield --quick --only bare-switch --json || exit 1
md=$dir/REPORT.md
cat "$md"
fail=0
need() {
	grep -Eq "$1" "$md" || { echo "REPORT.md: no line matches: $1"; fail=1; }
}
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
need '^## The machine$'
[ -z "$cpu" ] || grep -Fq "| CPU | $cpu" "$md" ||
	{ echo "REPORT.md: no CPU row with '$cpu'"; fail=1; }
need "^\| kernel \| Linux $(uname -r) "
need '^\| commit \| [0-9a-f]{7,}'
need '^\| command \| `.*karui-bench run yield --quick --only bare-switch --json`'
need '^\| \*\*karui\*\* \| yield \| [0-9.]+ ns \|'
need '^\| bare-switch \| yield \| [0-9.]+ ns \| .* \| [0-9.]+× \|$'
need '^### Table 2: process creation and termination$'
need '^### Table 2: starting and ending a program$'
need '^\*not run \(this run has no rows for it\)\*$'
echo '{"experiment":"yield"' > "$dir/bad.jsonl"
err=$("$report" --out "$dir" "$dir/bad.jsonl" 2>&1) && { echo "bad input accepted"; fail=1; }
echo "$err" | grep -q "bad.jsonl:1: not a JSON line" || { echo "bad input: $err"; fail=1; }
[ $fail -eq 0 ] || exit 1
if grep -q "matplotlib is not installed" "$md"; then
	echo "skipped: matplotlib is not installed"
	exit 77
fi
grep -Fq '![karui against its peers, same run](core-ratios.png)' "$md" ||
	{ echo "REPORT.md: no link to core-ratios.png"; exit 1; }
[ "$(head -c 8 "$dir/core-ratios.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
	{ echo "core-ratios.png is not a PNG"; exit 1; }
