#!/bin/sh
# report.sh KARUI_BENCH REPORT: scripts/report makes REPORT.md and a plot
# from a real run of one quick experiment (yield, karui and the bare switch),
# with the machine recorded in the same run; the seeds' tables that the run
# lacks say "not run"; a line that is not JSON is refused with its number.
# Ratios are peer / karui everywhere: the report says so once at the top, a
# ratio column's header says so, and for http rows written here (requests
# per second, where the better side is below 1×) the plot of ratios draws
# the very ratios of the table.
# seed003.table2's and seed003.table5's targets, seed003.table6's table and
# seed003.table3's rows beside the seed's, from rows written here: a target
# met and one not, a region, a system that failed.
# seed001.ipc's section, from rows written here: the seed's figures beside
# today's, ratios to karui's EPC-S row, a failed system's reason.
# The section of Debian's programs as μprocesses, from rows written here:
# ratios, an output that differs, a program not installed, a failed make.
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
need '^### Table 2: starting and ending a null program$'
need '^### Table 6: the memory of a hello program$'
need '^### Table 5: a procedure call between μprocesses$'
need '^### Table 3: a context switch$'
need '^### CGI programs over HTTP \(§7\.2\)$'
need "^### Debian's programs as μprocesses$"
need '^\*not run \(this run has no rows for it\)\*$'
need '^\*\*Ratios\.\*\* Every ratio in this report, in its tables and its plots, is \*\*peer / karui\*\*'
need '^\| system \| metric \| median \| min \.\. max \|( n \|)? peer/karui \|$'
echo '{"experiment":"yield"' > "$dir/bad.jsonl"
err=$("$report" --out "$dir" "$dir/bad.jsonl" 2>&1) && { echo "bad input accepted"; fail=1; }
echo "$err" | grep -q "bad.jsonl:1: not a JSON line" || { echo "bad input: $err"; fail=1; }
mkdir "$dir/http"
for r in 'karui","metric":"requests","value":100000,"unit":"req/s","x":2' \
	'go","metric":"requests","value":50000,"unit":"req/s","x":2' \
	'karui","metric":"CPU per request","value":10,"unit":"us/req","x":2' \
	'go","metric":"CPU per request","value":15,"unit":"us/req","x":2'; do
	echo "{\"experiment\":\"http\",\"system\":\"$r}"
done >"$dir/http/results.jsonl"
"$report" --out "$dir/http" "$dir/http/results.jsonl" || exit 1
grep -Fqx '| go | requests (x = 2) | 50,000 req/s | – .. – | 0.5× |' "$dir/http/REPORT.md" ||
	{ echo "http: no go row of ratio 0.5×"; fail=1; }
# The bars of the plot of ratios, against the ratios of the http table.
/usr/bin/python3 - "$report" "$dir/http" <<'EOF' || fail=1
import importlib.machinery, importlib.util, os, re, sys
loader = importlib.machinery.SourceFileLoader("report", sys.argv[1])
report = importlib.util.module_from_spec(importlib.util.spec_from_loader("report", loader))
loader.exec_module(report)
with open(os.path.join(sys.argv[2], "results.jsonl")) as f:
    _, rows = report.load(f, "results.jsonl")
lower, higher = report.Report(report.Run(rows), sys.argv[2], None, "").ratio_bars_of_run()
with open(os.path.join(sys.argv[2], "REPORT.md")) as f:
    table = {m[1]: float(m[2]) for m in re.finditer(
        r"^\| go \| (.*) \(x = 2\) \|.* \| ([0-9.]+)× \|$", f.read(), re.M)}
plot = {g.split(": ")[1].split(",")[0]: v for g, s, v in lower + higher if s == "go"}
want = {"requests": 0.5, "CPU per request": 1.5}
if not (table == want and plot == want and [b[0] for b in higher] ==
        ["http: requests, 2 threads (req/s)"]):
    sys.exit(f"http ratios: table {table}, plot {plot}, higher is better: {higher}")
EOF
# written NAME PREFIX ROW...: a report in $dir/NAME of the rows written here,
# each a JSON object that starts {"experiment":"PREFIX then ROW
written() {
	d=$dir/$1 prefix=$2
	shift 2
	mkdir "$d"
	for r; do
		echo "{\"experiment\":\"$prefix$r}"
	done >"$d/results.jsonl"
	"$report" --out "$d" "$d/results.jsonl" >/dev/null || exit 1
}
# has NAME LINE...: $dir/NAME/REPORT.md has each LINE whole
has() {
	d=$dir/$1
	shift
	for line; do
		grep -Fqx "$line" "$d/REPORT.md" || { echo "$d: no line $line"; fail=1; }
	done
}
# seed003.cgi's section from rows written here: karui / lighttpd, the target.
written cgi 'seed003.cgi","system":"' \
	'karui","metric":"hello.c requests","value":8000,"unit":"req/s"' \
	'lighttpd","metric":"hello.c requests","value":2000,"unit":"req/s"' \
	'lighttpd","metric":"hello.c latency","value":10,"unit":"ms"' \
	'karui","metric":"hello.pl requests","value":300,"unit":"req/s"' \
	'lighttpd","failed":"wrk reported errors"'
has cgi '| hello.c | lighttpd | 2,000 req/s | 10 ms | – | 4× |' \
	'| hello.pl | lighttpd | failed: wrk reported errors |  |  |  |' \
	"Target: karui ≥ 3× lighttpd's requests per second with hello.c: met (4×)."
# seed003.table2's targets and seed003.table6's table from rows written here.
written seed003 'seed003.' \
	'table2","system":"karui","metric":"start+exit","value":15,"unit":"us"' \
	'table2","system":"pthread","metric":"start+exit","value":10,"unit":"us"' \
	'table2","system":"fork-exec","metric":"start+exit","value":120,"unit":"us"' \
	'table6","system":"karui","metric":"text address space","value":4,"unit":"KiB"' \
	'table6","system":"karui","metric":"total address space","value":13000,"unit":"KiB"' \
	'table6","system":"process","metric":"text address space","value":4,"unit":"KiB"' \
	'table6","system":"karui","metric":"fit","value":3000,"unit":"uprocs","note":"vm.max_map_count 65530"' \
	'table6","system":"process","failed":"its maps or pagemap: Permission denied"' \
	'table5","system":"karui","metric":"call","value":80,"unit":"ns"' \
	'table5","system":"function","metric":"call","value":2,"unit":"ns"' \
	'table5","system":"msgq","metric":"call","value":3200,"unit":"ns"' \
	'table3","system":"karui","metric":"switch","value":250,"unit":"ns"' \
	'table3","system":"karui","metric":"hop","value":320,"unit":"ns"' \
	'table3","system":"process","metric":"switch","value":900,"unit":"ns"' \
	'table3","system":"process","metric":"hop","value":1600,"unit":"ns"' \
	'table3","system":"karui-threads","failed":"ping ended with status 1, not 0"'
has seed003 '| **karui** | ProcThread | 250 ns | 320 ns |' \
	'| process | UNIX process (lmbench) | 900 ns (3.6×) | 1,600 ns (5×) |' \
	'| karui-threads | – | failed: ping ended with status 1, not 0 |  |' \
	'| *paper, Pentium 133 MHz, NetBSD 1.4.1* | UNIX process (lmbench) | 82,000 ns (42.1×) |  |' \
	'| **karui** | μprocess procedure call | 80 ns |' \
	'| *paper, Pentium 133 MHz, NetBSD 1.4.1* | message queue | 125,000 ns (30.5×) |' \
	"Targets for a call into a μprocess: at most 100 ns: met (80 ns); at least 50× faster than the message queue: not met (40×)." \
	"Targets for a reused μprocess: at most 2× a thread's start + join: met (1.5×); at least 10× faster than fork + exec: not met (8×)." \
	'| text | 4 | – | – | – | 4 | – | – | – | 8 KB (text + data) |' \
	'*process: failed: its maps or pagemap: Permission denied*'
grep -q '^Mappings: .* hold 3,000 such μprocesses (vm.max_map_count 65530)\.' "$dir/seed003/REPORT.md" ||
	{ echo "seed003.table6: no count of μprocesses that fit"; fail=1; }
# uproc.threads, uproc.make and uproc.script from rows written here: ratios
# to karui (to karui-sh for the script), a run whose output differs, a
# program not installed, a failed make, the time per command.
written uprun 'uproc.' \
	'threads","system":"karui","metric":"xz","value":200,"unit":"ms","note":"same output as native"' \
	'threads","system":"native","metric":"xz","value":100,"unit":"ms"' \
	'threads","system":"karui","failed":"pigz: output DIFFERS from native"' \
	'threads","system":"native","metric":"pigz","value":30,"unit":"ms"' \
	'threads","system":"pbzip2","skipped":"not installed"' \
	'make","system":"karui","failed":"make -j2: karui-run ended with status 2: no cc1"' \
	'make","system":"native","metric":"make -j2","value":500,"unit":"ms"' \
	'script","system":"karui-sh","metric":"script","value":100,"unit":"ms","note":"1000 commands"' \
	'script","system":"dash","metric":"script","value":1000,"unit":"ms"'
has uprun '| xz | native | 100 ms (0.5×) | – | the reference |' \
	'| pigz | karui | failed: pigz: output DIFFERS from native |  | **DIFFERS** |' \
	'| pbzip2 |  | skipped: not installed |  |  |' \
	'| karui | failed: make -j2: karui-run ended with status 2: no cc1 |  |  |' \
	'| dash | 1,000 ms (10×) | – | same | 1,000 µs |'
# seed001.ipc's section from rows written here: today's 8 KiB figures beside
# the seed's in ms, NullProc without a size, ratios to karui's EPC-S row.
written seed001 'seed001.ipc","system":"' \
	'karui-epc-s","metric":"ArgRtn_Copy","value":2,"unit":"us","x":8' \
	'udp-rpc","metric":"NullProc","value":5,"unit":"us"' \
	'udp-rpc","metric":"ArgRtn_Copy","value":10,"unit":"us","x":8' \
	'udp-rpc","metric":"ArgRtn_Copy","value":7,"unit":"us","x":2' \
	'sysv-msgq","failed":"starting its server: No space left on device"'
has seed001 '| udp-rpc | UDP socket | 5 µs | – | – | 10 µs (5×) |' \
	'| sysv-msgq | – | failed: starting its server: No space left on device |  |  |  |' \
	'| *seed 001, 486DX2-66* | UDP socket | 0.953 ms (5.85×) | 3.18 ms (19.5×) | 5.3 ms (32.5×) | 5.53 ms (5.17×) |' \
	'| *seed 001, 486DX2-66* | EPC-H | 0.001 ms (0.00613×) † | 0.001 ms (0.00613×) † | 0.001 ms (0.00613×) † | 0.62 ms (0.579×) |' \
	'| udp-rpc | ArgRtn_Copy | 7 µs | – | 10 µs (5×) |'
grep -q '^### IPC: synchronous calls between a client and a server$' "$md" &&
	grep -A8 '^### IPC: synchronous' "$md" | grep -q '^\*not run' ||
	{ echo "REPORT.md: seed001.ipc's section does not say it was not run"; fail=1; }
[ $fail -eq 0 ] || exit 1
if grep -q "matplotlib is not installed" "$md"; then
	echo "skipped: matplotlib is not installed"
	exit 77
fi
grep -Fq '![karui against its peers, same run: peer / karui](core-ratios.png)' "$md" ||
	{ echo "REPORT.md: no link to core-ratios.png"; exit 1; }
for png in core-ratios.png seed001/seed001-ipc.png; do
	[ "$(head -c 8 "$dir/$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
		{ echo "$png is not a PNG"; exit 1; }
done
