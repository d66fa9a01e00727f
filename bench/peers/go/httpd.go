// The Go peer of karui's example HTTP server (examples/httpd.c with
// examples/http_min.h): the same minimal HTTP/1.1 handling, one goroutine
// per connection, on Go's network poller, GOMAXPROCS from the environment
// (karui-bench's http experiment sets 2 and 1).
//
// Usage: benchpeer httpd   (listens on 127.0.0.1, any free port, and says
// which on stdout; SIGTERM ends it)

package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
)

var hello = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")
var helloClose = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
var notFound = []byte("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found")

// parse returns the bytes the request at the start of b takes (0: not all
// there yet, -1: bad), whether it is for "/", and whether to keep alive.
func parse(b []byte) (int, bool, bool) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) >= 8192 {
			return -1, false, false
		}
		return 0, false, false
	}
	line := b[:end]
	if !bytes.HasPrefix(line, []byte("GET ")) {
		return -1, false, false
	}
	rest := line[4:]
	sp := bytes.IndexByte(rest, ' ')
	if sp < 0 {
		return -1, false, false
	}
	root := sp == 1 && rest[0] == '/'
	keep := bytes.HasPrefix(rest[sp+1:], []byte("HTTP/1.1"))
	if bytes.Contains(bytes.ToLower(rest[sp+1:]), []byte("\nconnection: close")) {
		keep = false
	}
	return end + 4, root, keep
}

func serveConn(c net.Conn) {
	defer c.Close()
	in := make([]byte, 8192)
	out := make([]byte, 0, 8192)
	have := 0
	for {
		n, err := c.Read(in[have:])
		if n <= 0 || err != nil {
			return
		}
		have += n
		used, open := 0, true
		out = out[:0]
		for open {
			took, root, keep := parse(in[used:have])
			if took == 0 {
				break
			}
			if took < 0 {
				open = false
				break
			}
			used += took
			switch {
			case !root:
				out = append(out, notFound...)
				open = false
			case keep:
				out = append(out, hello...)
			default:
				out = append(out, helloClose...)
				open = false
			}
		}
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
		}
		if !open {
			return
		}
		copy(in, in[used:have])
		have -= used
	}
}

func httpd() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchpeer httpd:", err)
		os.Exit(1)
	}
	fmt.Printf("go-httpd: listening on %s\n", l.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		os.Exit(0)
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			continue
		}
		go serveConn(c)
	}
}
