// benchpeer: the Go peer of karui-bench (goroutines, on one P unless said).
//
// Usage: benchpeer EXPERIMENT ITERS N REPEATS
//        benchpeer httpd     (httpd.go: the HTTP server peer)
//
//	yield        two goroutines alternate through a shared turn counter,
//	             each calling runtime.Gosched(); one op = one flip of the turn
//	create_join  go f(wg) + wg.Wait(), one at a time, ITERS times
//	create_batch N goroutines, then wait for all; ns per goroutine
//	many         N goroutines blocked on one channel until it is closed;
//	             ns per spawn and RSS growth (VmRSS) while all are alive
//	mutex        sync.Mutex Lock + Unlock, uncontended
//	monitor      Lock, sync.Cond.Signal with no waiter, Unlock
//	condvar_pingpong  the main goroutine and one other, two sync.Conds on
//	             one sync.Mutex and a turn counter; one op = one round trip
//	chan_pingpong  the main goroutine sends v on an unbuffered chan int and
//	             receives it back on another; one op = one round trip
//	chan_relay   chan_pingpong with both goroutines in relay(): each
//	             receives on its own chan and sends on the other's, so both
//	             block under the same return addresses; one op = one round trip
//	rendezvous   an entry call: the main goroutine sends request{v, reply}
//	             on an unbuffered chan to a server goroutine, which replies
//	             v+1 on the caller's reply chan (made once); one op = one call
//	stream       ITERS blocks of 4096 bytes through an io.Pipe from the main
//	             goroutine to a reader goroutine that reads into a 4096-byte
//	             buffer and checks the total; one op = one block
//	skynet       a tree of goroutines, 10 children each, down to N leaves;
//	             a leaf sends its number on its parent's channel (buffered,
//	             10), a parent the sum of what it received; the root checks
//	             the total; one op = the tree; "peak" = the most goroutines
//	             alive (runtime.NumGoroutine) sampled at every 1024th leaf
//	prodcons     64 producer and 64 consumer goroutines, a 64-slot buffer
//	             under one sync.Mutex with two sync.Conds; ITERS items; each
//	             producer sleeps 2 ms (time.Sleep) after every 1000th item;
//	             the consumers' total is checked; one op = the whole run
//
//	chain        seed000.table2, in a fresh process: a chain of N goroutines,
//	             each starting the next and waiting for it to end (a channel
//	             closed at its end), run 1 + ITERS times; prints one line
//	             {"first": ns per goroutine of the first pass, "cached": of
//	             the later ones}, with no warm-up (REPEATS must be 1)
//
// GOMAXPROCS is 1 for every experiment but skynet and prodcons, which run
// with 2 (the default on a 2-CPU machine, and karui's 2 VPs).  A first run
// warms up and prints nothing; then each repeat prints one line:
//
//	{"ns_per_op": <float>, "rss_kib": <float or -1>[, "peak": <float>]}
//
// A broken run (a wrong reply or byte count) prints to stderr and exits 1.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	nsPerOp float64
	rssKiB  float64
	peak    float64 // -1: none
}

// rssKiB returns VmRSS from /proc/self/status in KiB, or -1.
func rssKiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
					return v
				}
			}
			return -1
		}
	}
	return -1
}

func nsPer(d time.Duration, ops int64) float64 {
	return float64(d.Nanoseconds()) / float64(ops)
}

func yield(iters int64) result {
	var turn atomic.Int64
	var wg sync.WaitGroup
	body := func(me int64) {
		defer wg.Done()
		for {
			t := turn.Load()
			if t >= iters {
				return
			}
			if t&1 == me {
				turn.Store(t + 1)
			}
			runtime.Gosched()
		}
	}
	start := time.Now()
	wg.Add(2)
	go body(0)
	go body(1)
	wg.Wait()
	return result{nsPer(time.Since(start), iters), -1, -1}
}

func empty(wg *sync.WaitGroup) {
	wg.Done()
}

func createJoin(iters int64) result {
	var wg sync.WaitGroup
	start := time.Now()
	for i := int64(0); i < iters; i++ {
		wg.Add(1)
		go empty(&wg)
		wg.Wait()
	}
	return result{nsPer(time.Since(start), iters), -1, -1}
}

func createBatch(n int64) result {
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		go empty(&wg)
	}
	wg.Wait()
	return result{nsPer(time.Since(start), n), -1, -1}
}

func many(n int64) result {
	var started, done sync.WaitGroup
	release := make(chan struct{})
	body := func() {
		started.Done()
		<-release
		done.Done()
	}
	// Give back what earlier repeats left (dead goroutines' stacks are freed
	// by a GC, free pages by the scavenger), so growth is measured afresh.
	debug.FreeOSMemory()
	rss0 := rssKiB()
	started.Add(int(n))
	done.Add(int(n))
	start := time.Now()
	for i := int64(0); i < n; i++ {
		go body()
	}
	spawn := time.Since(start)
	started.Wait()
	rss1 := rssKiB()
	close(release)
	done.Wait()
	growth := float64(-1)
	if rss0 >= 0 && rss1 >= 0 {
		growth = rss1 - rss0
	}
	return result{nsPer(spawn, n), growth, -1}
}

func mutex(iters int64) result {
	var mu sync.Mutex
	start := time.Now()
	for i := int64(0); i < iters; i++ {
		mu.Lock()
		mu.Unlock()
	}
	return result{nsPer(time.Since(start), iters), -1, -1}
}

func monitor(iters int64) result {
	var mu sync.Mutex
	c := sync.NewCond(&mu)
	start := time.Now()
	for i := int64(0); i < iters; i++ {
		mu.Lock()
		c.Signal()
		mu.Unlock()
	}
	return result{nsPer(time.Since(start), iters), -1, -1}
}

func condvarPingpong(iters int64) result {
	var mu sync.Mutex
	var wg sync.WaitGroup
	cv := [2]*sync.Cond{sync.NewCond(&mu), sync.NewCond(&mu)}
	turn, end := int64(0), 2*iters
	// flow me passes the turn on when turn%2 == me, up to end
	flow := func(me int64) {
		mu.Lock()
		for {
			for turn&1 != me && turn < end {
				cv[me].Wait()
			}
			if turn >= end {
				break
			}
			turn++
			cv[1-me].Signal()
		}
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		flow(1)
	}()
	start := time.Now()
	flow(0) // end is even: returns when the last round is back
	d := time.Since(start)
	wg.Wait()
	return result{nsPer(d, iters), -1, -1}
}

func chanPingpong(iters int64) result {
	var wg sync.WaitGroup
	c1, c2 := make(chan int), make(chan int)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := range c1 {
			c2 <- v
		}
	}()
	start := time.Now()
	for i := int64(0); i < iters; i++ {
		c1 <- int(i)
		<-c2
	}
	d := time.Since(start)
	close(c1)
	wg.Wait()
	return result{nsPer(d, iters), -1, -1}
}

// relay is one side of chan_relay (see the header); side 0 starts the
// token and keeps the last one, which must be the number of rounds.
//
//go:noinline
func relay(c *[2]chan int, me int, iters int64) int {
	v := 0
	if me == 0 {
		c[1] <- v
	}
	for i := int64(0); i < iters; i++ {
		v = <-c[me]
		v += me
		if me == 1 || i+1 < iters {
			c[1-me] <- v
		}
	}
	return v
}

func chanRelay(iters int64) result {
	var wg sync.WaitGroup
	c := [2]chan int{make(chan int), make(chan int)}
	wg.Add(1)
	go func() {
		defer wg.Done()
		relay(&c, 1, iters)
	}()
	start := time.Now()
	end := relay(&c, 0, iters)
	d := time.Since(start)
	wg.Wait()
	if int64(end) != iters {
		fail(fmt.Sprintf("chan_relay: token came back as %d, want %d", end, iters))
	}
	return result{nsPer(d, iters), -1, -1}
}

type request struct {
	v     int
	reply chan int
}

func rendezvous(iters int64) result {
	var wg sync.WaitGroup
	entry, reply := make(chan request), make(chan int)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for req := range entry {
			req.reply <- req.v + 1
		}
	}()
	v := 0
	start := time.Now()
	for i := int64(0); i < iters; i++ {
		entry <- request{v, reply}
		v = <-reply
	}
	d := time.Since(start)
	close(entry)
	wg.Wait()
	if int64(v) != iters {
		fail("rendezvous: wrong replies")
	}
	return result{nsPer(d, iters), -1, -1}
}

const block = 4096

func stream(blocks int64) result {
	pr, pw := io.Pipe()
	got := make(chan int64)
	go func() {
		buf := make([]byte, block)
		var n int64
		for {
			k, err := pr.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		got <- n
	}()
	buf := bytes.Repeat([]byte{'k'}, block)
	start := time.Now()
	for i := int64(0); i < blocks; i++ {
		if _, err := pw.Write(buf); err != nil {
			fail("stream: " + err.Error())
		}
	}
	pw.Close()
	n := <-got
	d := time.Since(start)
	if n != blocks*block {
		fail(fmt.Sprintf("stream: read %d bytes, want %d", n, blocks*block))
	}
	return result{nsPer(d, blocks), -1, -1}
}

const skyDiv, skySample = 10, 1024

var skyPeak atomic.Int64

func skyNote() {
	n := int64(runtime.NumGoroutine())
	for {
		p := skyPeak.Load()
		if n <= p || skyPeak.CompareAndSwap(p, n) {
			return
		}
	}
}

func sky(c chan int64, num, size int64) {
	if size == 1 {
		if num%skySample == 0 {
			skyNote()
		}
		c <- num
		return
	}
	rc := make(chan int64, skyDiv)
	sub := size / skyDiv
	for i := int64(0); i < skyDiv; i++ {
		go sky(rc, num+i*sub, sub)
	}
	var sum int64
	for i := 0; i < skyDiv; i++ {
		sum += <-rc
	}
	c <- sum
}

func skynet(leaves int64) result {
	skyPeak.Store(0)
	c := make(chan int64, 1)
	start := time.Now()
	go sky(c, 0, leaves)
	sum := <-c
	d := time.Since(start)
	if sum != leaves*(leaves-1)/2 {
		fail(fmt.Sprintf("skynet: sum %d, want %d", sum, leaves*(leaves-1)/2))
	}
	return result{float64(d.Nanoseconds()), -1, float64(skyPeak.Load())}
}

const pcFlows, pcSlots, pcPauseEvery = 64, 64, 1000

func prodcons(items int64) result {
	var mu sync.Mutex
	notFull, notEmpty := sync.NewCond(&mu), sync.NewCond(&mu)
	var buf [pcSlots]int64
	var head, count, total int64
	var wg sync.WaitGroup
	share := func(i int64) (int64, int64) {
		return items * i / pcFlows, items * (i + 1) / pcFlows
	}
	producer := func(i int64) {
		defer wg.Done()
		lo, hi := share(i)
		for v := lo; v < hi; v++ {
			mu.Lock()
			for count == pcSlots {
				notFull.Wait()
			}
			buf[(head+count)%pcSlots] = v
			count++
			notEmpty.Signal()
			mu.Unlock()
			if (v-lo+1)%pcPauseEvery == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}
	consumer := func(i int64) {
		defer wg.Done()
		lo, hi := share(i)
		var sum int64
		for n := lo; n < hi; n++ {
			mu.Lock()
			for count == 0 {
				notEmpty.Wait()
			}
			sum += buf[head]
			head = (head + 1) % pcSlots
			count--
			notFull.Signal()
			mu.Unlock()
		}
		mu.Lock()
		total += sum
		mu.Unlock()
	}
	start := time.Now()
	wg.Add(2 * pcFlows)
	for i := int64(0); i < pcFlows; i++ {
		go producer(i)
		go consumer(i)
	}
	wg.Wait()
	d := time.Since(start)
	if total != items*(items-1)/2 {
		fail(fmt.Sprintf("prodcons: total %d, want %d", total, items*(items-1)/2))
	}
	return result{float64(d.Nanoseconds()), -1, -1}
}

func chainFrom(d, n int64) {
	if d < n {
		done := make(chan struct{})
		go func() {
			chainFrom(d+1, n)
			close(done)
		}()
		<-done
	}
}

func chain(n, m int64) {
	start := time.Now()
	chainFrom(0, n)
	first := time.Since(start)
	start = time.Now()
	for i := int64(0); i < m; i++ {
		chainFrom(0, n)
	}
	fmt.Printf("{\"first\": %.3f, \"cached\": %.3f}\n", nsPer(first, n),
		nsPer(time.Since(start), n*m))
}

func fail(msg string) {
	fmt.Fprintf(os.Stderr, "benchpeer: %s\n", msg)
	os.Exit(1)
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "benchpeer: %s\n", msg)
	fmt.Fprintln(os.Stderr, "usage: benchpeer EXPERIMENT ITERS N REPEATS")
	fmt.Fprintln(os.Stderr, "experiments: yield create_join create_batch many mutex monitor")
	fmt.Fprintln(os.Stderr, "             condvar_pingpong chan_pingpong chan_relay rendezvous stream")
	fmt.Fprintln(os.Stderr, "             skynet prodcons chain")
	os.Exit(2)
}

func posArg(name, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 1 {
		usage(fmt.Sprintf("%s must be a positive integer, got %q", name, s))
	}
	return v
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "httpd" {
		httpd()
		return
	}
	if len(os.Args) != 5 {
		usage("expected 4 arguments")
	}
	iters := posArg("ITERS", os.Args[2])
	n := posArg("N", os.Args[3])
	repeats := posArg("REPEATS", os.Args[4])
	var run func() result
	procs := 1
	if os.Args[1] == "chain" {
		if repeats != 1 {
			usage("chain runs once per process: REPEATS must be 1")
		}
		runtime.GOMAXPROCS(procs)
		chain(n, iters)
		return
	}
	switch os.Args[1] {
	case "yield":
		run = func() result { return yield(iters) }
	case "create_join":
		run = func() result { return createJoin(iters) }
	case "create_batch":
		run = func() result { return createBatch(n) }
	case "many":
		run = func() result { return many(n) }
	case "mutex":
		run = func() result { return mutex(iters) }
	case "monitor":
		run = func() result { return monitor(iters) }
	case "condvar_pingpong":
		run = func() result { return condvarPingpong(iters) }
	case "chan_pingpong":
		run = func() result { return chanPingpong(iters) }
	case "chan_relay":
		run = func() result { return chanRelay(iters) }
	case "rendezvous":
		run = func() result { return rendezvous(iters) }
	case "stream":
		run = func() result { return stream(iters) }
	case "skynet":
		procs = 2
		run = func() result { return skynet(n) }
	case "prodcons":
		procs = 2
		run = func() result { return prodcons(iters) }
	default:
		usage(fmt.Sprintf("unknown experiment %q", os.Args[1]))
	}
	runtime.GOMAXPROCS(procs)
	run() // the warm-up, not printed (karui-bench's rule for every system)
	for i := int64(0); i < repeats; i++ {
		r := run()
		if r.peak >= 0 {
			fmt.Printf("{\"ns_per_op\": %.3f, \"rss_kib\": %.1f, \"peak\": %.0f}\n",
				r.nsPerOp, r.rssKiB, r.peak)
		} else {
			fmt.Printf("{\"ns_per_op\": %.3f, \"rss_kib\": %.1f}\n", r.nsPerOp, r.rssKiB)
		}
	}
}
