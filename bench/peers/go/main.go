// benchpeer: the Go peer of karui-bench (goroutines on one P).
//
// Usage: benchpeer EXPERIMENT ITERS N REPEATS
//
//	yield        two goroutines alternate through a shared turn counter,
//	             each calling runtime.Gosched(); one op = one flip of the turn
//	create_join  go f(wg) + wg.Wait(), one at a time, ITERS times
//	create_batch N goroutines, then wait for all; ns per goroutine
//	many         N goroutines blocked on one channel until it is closed;
//	             ns per spawn and RSS growth (VmRSS) while all are alive
//
// GOMAXPROCS is 1 for every experiment.  Each repeat prints one line:
//
//	{"ns_per_op": <float>, "rss_kib": <float or -1>}
package main

import (
	"bufio"
	"fmt"
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
	return result{nsPer(time.Since(start), iters), -1}
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
	return result{nsPer(time.Since(start), iters), -1}
}

func createBatch(n int64) result {
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		go empty(&wg)
	}
	wg.Wait()
	return result{nsPer(time.Since(start), n), -1}
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
	return result{nsPer(spawn, n), growth}
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "benchpeer: %s\n", msg)
	fmt.Fprintln(os.Stderr, "usage: benchpeer yield|create_join|create_batch|many ITERS N REPEATS")
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
	if len(os.Args) != 5 {
		usage("expected 4 arguments")
	}
	iters := posArg("ITERS", os.Args[2])
	n := posArg("N", os.Args[3])
	repeats := posArg("REPEATS", os.Args[4])
	var run func() result
	switch os.Args[1] {
	case "yield":
		run = func() result { return yield(iters) }
	case "create_join":
		run = func() result { return createJoin(iters) }
	case "create_batch":
		run = func() result { return createBatch(n) }
	case "many":
		run = func() result { return many(n) }
	default:
		usage(fmt.Sprintf("unknown experiment %q", os.Args[1]))
	}
	runtime.GOMAXPROCS(1)
	for i := int64(0); i < repeats; i++ {
		r := run()
		fmt.Printf("{\"ns_per_op\": %.3f, \"rss_kib\": %.1f}\n", r.nsPerOp, r.rssKiB)
	}
}
