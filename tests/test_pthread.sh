#!/bin/sh
# The pthread layer (src/pthread): programs with threads run with
# LD_PRELOAD=libkarui-pthread.so give what they give natively, byte for
# byte, with the same status.
# usage: test_pthread.sh LIBKARUI_PTHREAD PTHREAD_PROBE UTHREAD_PROBE
#        (exit 77: skipped)
lib=$1 pprobe=$2 tprobe=$3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fail=1; }

# Where μprocesses cannot run (no Syscall User Dispatch), the layer says
# so and the program does not run: skipped.
if ! LD_PRELOAD=$lib /bin/true 2>"$tmp/err"; then
	echo "skip: the layer cannot run programs here: $(cat "$tmp/err")"
	exit 77
fi

# same NAME CMD...: stdout, stderr and status, natively and under the layer
same() {
	name=$1
	shift
	"$@" >"$tmp/n.out" 2>"$tmp/n.err"
	ns=$?
	LD_PRELOAD=$lib "$@" >"$tmp/k.out" 2>"$tmp/k.err"
	ks=$?
	if [ "$ns" = "$ks" ] && cmp -s "$tmp/n.out" "$tmp/k.out" &&
		cmp -s "$tmp/n.err" "$tmp/k.err"; then
		ok "$name: the same output and status ($ns)"
	else
		bad "$name: native status $ns, layer $ks"
		diff "$tmp/n.out" "$tmp/k.out" | head -20
		diff "$tmp/n.err" "$tmp/k.err" | head -20
	fi
}

# the pthread calls of the layer's list, each checked by the program
same "pthread_probe" "$pprobe"
grep -q '^mutex-robust ok$' "$tmp/k.out" && grep -q '^cancel ok$' "$tmp/k.out" &&
	grep -q '^fork ok$' "$tmp/k.out" || bad "pthread_probe: its checks"
for vps in 1 3; do
	KARUI_VPS=$vps LD_PRELOAD=$lib "$pprobe" >"$tmp/v.out" 2>&1
	if [ $? = 0 ] && cmp -s "$tmp/v.out" "$tmp/n.out"; then
		ok "pthread_probe on $vps VPs"
	else
		bad "pthread_probe on $vps VPs"
		head -20 "$tmp/v.out"
	fi
done
# C++: std::thread, std::mutex, std::condition_variable, std::async,
# thread_local, barriers, signals to threads
same "uthread_probe" "$tprobe" run

# Debian's threaded programs over a text made here
i=0
while [ $i -lt 40000 ]; do
	echo "line $i of the text, $((i * 7919 % 10007)) and $((i * 104729 % 65521))"
	i=$((i + 1))
done >"$tmp/in"
for p in "pigz -p 4 -b 128 -c" "zstd -q -T4 -B262144 -c" "xz -T4 --block-size=256KiB -c" \
	"sort --parallel=4 -S 10M"; do
	set -- $p
	if command -v "$1" >/dev/null 2>&1; then
		same "$p" "$@" "$tmp/in"
	else
		echo "skip: $1 is not installed"
	fi
done

# sysbench: its own figures differ from run to run; its counts do not
if command -v sysbench >/dev/null 2>&1; then
	for t in "threads --events=500 --time=0" "mutex --mutex-locks=2000"; do
		LD_PRELOAD=$lib sysbench $t --threads=4 run >"$tmp/s.out" 2>&1
		st=$?
		if [ $st = 0 ] && grep -q 'Number of threads: 4' "$tmp/s.out" &&
			grep -Eq 'total number of events: +[1-9]' "$tmp/s.out"; then
			ok "sysbench $t"
		else
			bad "sysbench $t: status $st"
			tail -5 "$tmp/s.out"
		fi
	done
else
	echo "skip: sysbench is not installed"
fi

# statuses: an exit code, a signal that ends the program (the process
# ends by the same signal), a signal sent to the process reaching the
# program's handler
same "exit 3" sh -c 'exit 3'
same "exit 130 is no signal" sh -c 'exit 130'
same "killed by SIGTERM" sh -c 'kill -TERM $$'
sh -c "LD_PRELOAD=$lib sh -c 'trap \"echo caught; exit 7\" TERM; while :; do sleep 0.05; done' &
	pid=\$!; sleep 0.5; kill -TERM \$pid; wait \$pid; echo status \$?" >"$tmp/t.out" 2>&1
if [ "$(cat "$tmp/t.out")" = "caught
status 7" ]; then
	ok "a SIGTERM sent to the process runs the program's handler"
else
	bad "SIGTERM forwarding: $(cat "$tmp/t.out")"
fi

# the layer's own errors
KARUI_VPS=0 LD_PRELOAD=$lib /bin/true 2>"$tmp/e"
if [ $? = 126 ] && grep -q 'KARUI_VPS=0' "$tmp/e"; then
	ok "KARUI_VPS=0 refused"
else
	bad "KARUI_VPS=0: $(cat "$tmp/e")"
fi
KARUI_PTHREAD=off LD_PRELOAD=$lib sh -c 'cat /proc/self/maps' | grep -q libkarui-pthread &&
	ok "KARUI_PTHREAD=off runs the program natively" ||
	bad "KARUI_PTHREAD=off"
[ $fail = 0 ] && echo "the pthread layer: all checks passed"
exit $fail
