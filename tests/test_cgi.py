#!/usr/bin/env python3
"""examples/cgi_httpd driven as a client would, over raw sockets.

  test_cgi.py BIN_DIR [EMULATOR...]             the server's own checks
  test_cgi.py --lighttpd BIN_DIR [EMULATOR...]  the same requests to lighttpd's
                                                mod_cgi: identical responses

The programs are examples/cgi's, built into BIN_DIR/cgi-bin.  Each answer of
hello and hello.pl is compared byte for byte with a reference: the same
program run here as a process, with the environment and stdin that CGI/1.1
gives it for that request, its output split into header and body as a
server must.  Then keep-alive and pipelining, a body of 200 KiB (written by
a microprocess of its own, answered chunked), chunked request bodies
(decoded as the same body with a Content-Length, written a byte at a time,
pipelined, malformed, oversized, a size line of megabytes), a crash (502, and the next
request on the same connection answered), a hang (504 within the timeout
and a margin), output that is no CGI response (502), a program that writes
forever (cut at --max-output), path traversal in plain and encoded forms,
bad and oversized heads and bodies, a slow client (closed after
--read-timeout while others are served), 50 requests at once, HEAD and
Expect: 100-continue, a shell script (run as a child process); the kept
images' reuse is read from the server's
last line.  Skipped (77) where μprocesses cannot run (the server says so)."""
import os, shutil, signal, socket, subprocess, sys, tempfile, threading, time

args = sys.argv[1:]
LIGHTTPD = bool(args) and args[0] == "--lighttpd"
if LIGHTTPD:
    args = args[1:]
BIN, EMU = os.path.abspath(args[0]), args[1:]
CGI = os.path.join(BIN, "cgi-bin")
TIMEOUT_MS, READ_TIMEOUT_MS, MAX_OUTPUT = 1000, 1000, 1 << 20
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("  check failed:", what, file=sys.stderr)
    return cond


def start_server():
    p = subprocess.Popen(EMU + [os.path.join(BIN, "cgi_httpd"), "--cgi-dir", CGI, "--vps", "2",
                                "--timeout", str(TIMEOUT_MS), "--read-timeout",
                                str(READ_TIMEOUT_MS), "--max-output", str(MAX_OUTPUT),
                                "--max-body", str(1 << 20), "--quiet"],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "listening on 127.0.0.1:" not in line:
        p.kill()
        sys.exit(f"cgi_httpd did not start: {line!r}")
    port = int(line.rsplit(":", 1)[1])
    mode = p.stdout.readline()
    if "no μprocesses here" in mode:
        p.kill()
        p.wait()
        print("skipped: no μprocesses here:", mode.strip())
        sys.exit(77)
    return p, port


# ------------------------------------------------------------------ the client
class Conn:
    def __init__(self, port, timeout=20):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def send(self, b):
        self.s.sendall(b)

    def _fill(self):
        c = self.s.recv(1 << 20)
        if not c:
            raise EOFError
        self.buf += c

    def _until(self, sep):
        while sep not in self.buf:
            self._fill()
        i = self.buf.index(sep)
        out, self.buf = self.buf[:i], self.buf[i + len(sep):]
        return out

    def _exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def response(self, head=False):
        """(status, {header: value}, body, complete): a chunked body is decoded;
        complete is False when the connection ended before the body did"""
        lines = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        h = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            h[k.strip().lower()] = v.strip()
        if status == 100:
            return self.response(head)
        body, complete = b"", True
        try:
            if head or status in (204, 304):
                pass
            elif h.get("transfer-encoding") == "chunked":
                while True:
                    n = int(self._until(b"\r\n"), 16)
                    if n == 0:
                        self._until(b"\r\n")
                        break
                    body += self._exact(n)
                    self._exact(2)
            elif "content-length" in h:
                body = self._exact(int(h["content-length"]))
            else:
                while True:
                    try:
                        self._fill()
                    except EOFError:
                        break
                body, self.buf = self.buf, b""
        except (EOFError, ConnectionError):
            body, self.buf, complete = body + self.buf, b"", False
        return status, h, body, complete

    def closed(self, within):
        """True if the server closes the connection within `within` seconds"""
        self.s.settimeout(within)
        try:
            while True:
                if not self.s.recv(65536):
                    return True
        except socket.timeout:
            return False
        except ConnectionError:
            return True

    def close(self):
        self.s.close()


def req(method, path, headers=(), body=b"", version="HTTP/1.1", close=False):
    h = [f"{method} {path} {version}", "Host: 127.0.0.1"] + list(headers)
    if body or method == "POST":
        h.append(f"Content-Length: {len(body)}")
    if close:
        h.append("Connection: close")
    return ("\r\n".join(h) + "\r\n\r\n").encode() + body


def once(port, raw, head=False, timeout=20):
    c = Conn(port, timeout)
    try:
        c.send(raw)
        return c.response(head)
    finally:
        c.close()


# ------------------------------------------------------------------ the reference
def reference(prog, method, path, query, headers, body, path_info=None):
    """The program run here as a process with the CGI/1.1 environment of the
    request (the meta-variables hello prints): (status, content type, body)"""
    env = {"GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PROTOCOL": "HTTP/1.1",
           "REQUEST_METHOD": method, "QUERY_STRING": query, "CONTENT_LENGTH": str(len(body)),
           "SCRIPT_NAME": "/cgi-bin/" + prog, "REMOTE_ADDR": "127.0.0.1",
           "PATH": "/usr/local/bin:/usr/bin:/bin"}
    if path_info:
        env["PATH_INFO"] = path_info
    for k, v in headers:
        if k.lower() == "content-type":
            env["CONTENT_TYPE"] = v
        else:
            env["HTTP_" + k.upper().replace("-", "_")] = v
    out = subprocess.run([os.path.join(CGI, prog)], input=body, env=env, cwd=CGI,
                         capture_output=True).stdout
    i = out.find(b"\r\n\r\n")
    head, rest = out[:i].decode(), out[i + 4:]
    status, ctype = 200, None
    for l in head.split("\r\n"):
        k, _, v = l.partition(":")
        if k.lower() == "status":
            status = int(v.split()[0])
        elif k.lower() == "content-type":
            ctype = v.strip()
    return status, ctype, rest


CASES = [  # method, path after /cgi-bin/PROG, query, headers, body
    ("GET", "", "", [], b""),
    ("GET", "", "a=1&b=%20x&c", [("X-CGI-Test", "yes, it is")], b""),
    ("GET", "/extra/p%20x", "q=1", [], b""),
    ("POST", "", "", [("Content-Type", "application/x-www-form-urlencoded")], b"abc=def&g=h"),
    ("POST", "", "status=201", [("Content-Type", "text/plain")], bytes(range(256)) * 4),
    ("GET", "", "status=404", [], b""),
]


def url(prog, extra, query):
    return f"/cgi-bin/{prog}{extra}" + (f"?{query}" if query else "")


def check_reference(port):
    for prog in ("hello", "hello.pl"):
        for method, extra, query, headers, body in CASES:
            pi = extra.replace("%20", " ") or None
            want = reference(prog, method, extra, query, headers, body, pi)
            st, h, got, _ = once(port, req(method, url(prog, extra, query),
                                           [f"{k}: {v}" for k, v in headers], body))
            what = f"{prog} {method} {url(prog, extra, query)}"
            check(st == want[0], f"{what}: status {st}, the program's {want[0]}")
            check(h.get("content-type") == want[1], f"{what}: content type {h.get('content-type')}")
            check(got == want[2], f"{what}: body differs from the program's own\n"
                                  f"    got  {got[:200]!r}\n    want {want[2][:200]!r}")
    # the two programs print the same
    a = once(port, req("POST", "/cgi-bin/hello?x=1", [], b"same"))
    b = once(port, req("POST", "/cgi-bin/hello.pl?x=1", [], b"same"))
    check(a[2].replace(b"/hello", b"") == b[2].replace(b"/hello.pl", b""),
          "hello and hello.pl answer alike")


def check_keepalive(port):
    c = Conn(port)
    c.send(req("GET", "/cgi-bin/hello?n=0"))
    r = [c.response()]
    c.send(b"".join(req("GET", f"/cgi-bin/hello?n={i}") for i in range(1, 6)))
    r += [c.response() for _ in range(5)]
    ok = all(s == 200 and f"QUERY_STRING=n={i}\n".encode() in b for i, (s, _, b, _) in enumerate(r))
    check(ok, "keep-alive: six answers on one connection, five of them pipelined, in order")
    c.send(req("GET", "/cgi-bin/crash"))
    check(c.response()[0] == 502, "crash: 502")
    c.send(req("GET", "/cgi-bin/hello?after=crash"))
    s, _, b, _ = c.response()
    check(s == 200 and b"QUERY_STRING=after=crash" in b, "after a crash, the next request on "
                                                        "the same connection is answered")
    c.send(req("GET", "/cgi-bin/badhdr"))
    check(c.response()[0] == 502, "output that is no CGI response: 502")
    c.send(req("HEAD", "/cgi-bin/hello"))
    s, h, b, _ = c.response(head=True)
    check(s == 200 and b == b"" and int(h.get("content-length", 0)) > 100,
          f"HEAD: 200, a Content-Length, no body ({s}, {h})")
    c.send(req("GET", "/cgi-bin/hello", close=True))
    s, h, b, _ = c.response()
    check(s == 200 and h.get("connection") == "close" and c.closed(5),
          "Connection: close is honoured")
    c.close()
    s, h, b, _ = once(port, req("GET", "/cgi-bin/hello", version="HTTP/1.0"))
    check(s == 200 and b"SERVER_PROTOCOL=HTTP/1.0" in b, "HTTP/1.0")


def check_big_body(port):
    body = os.urandom(200 * 1024)
    s, h, b, complete = once(port, req("POST", "/cgi-bin/hello", [], body))
    check(s == 200 and complete and h.get("transfer-encoding") == "chunked"
          and b.endswith(b"\nbody bytes: %d\n" % len(body)) and body in b,
          "a body of 200 KiB reaches the program and comes back, chunked")
    c = Conn(port)
    c.send(req("POST", "/cgi-bin/hello.pl", ["Expect: 100-continue"], b"")[:-2]
           .replace(b"Content-Length: 0", b"Content-Length: 5") + b"\r\n")
    c.s.settimeout(5)
    interim = c.s.recv(100)
    check(interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), f"Expect: 100-continue ({interim!r})")
    c.buf = interim[25:]
    c.send(b"hello")
    s, _, b, _ = c.response()
    check(s == 200 and b"body: hello\n" in b, "the body after 100 Continue")
    c.close()


def chunked(body, sizes=(7, 1, 300, 4096), ext=True, trailer=True):
    """body in chunks of the given sizes in turn, some with extensions,
    then the last chunk and a trailer"""
    out, i, k = b"", 0, 0
    while i < len(body):
        n = sizes[k % len(sizes)]
        e = b";name=value; x=\"q\"" if ext and k % 2 else b""
        out += b"%x%s\r\n%s\r\n" % (len(body[i:i + n]), e, body[i:i + n])
        i, k = i + n, k + 1
    return out + (b"0;last\r\nX-Sum: 1\r\nX-Other:\t2\r\n\r\n" if trailer else b"0\r\n\r\n")


def chunked_req(path, body_wire, headers=()):
    h = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Transfer-Encoding: chunked"] + list(headers)
    return ("\r\n".join(h) + "\r\n\r\n").encode() + body_wire


def check_chunked(port):
    """chunked request bodies: decoded, CONTENT_LENGTH the decoded length"""
    body = bytes(range(256)) * 40
    for prog in ("hello", "hello.pl"):
        want = once(port, req("POST", f"/cgi-bin/{prog}?c=1", [], body))
        got = once(port, chunked_req(f"/cgi-bin/{prog}?c=1", chunked(body)))
        check(want[0] == 200 and got[0] == 200 and got[2] == want[2]
              and b"CONTENT_LENGTH=%d\n" % len(body) in got[2],
              f"{prog}: a chunked body answered as the same body with a Content-Length "
              f"({got[0]}, {got[2][:120]!r})")
        ref = reference(prog, "POST", "", "c=1", [], body)
        check(got[2] == ref[2], f"{prog}: a chunked body: the program's own answer")
    s, _, b, _ = once(port, chunked_req("/cgi-bin/hello", b"0\r\n\r\n"))
    check(s == 200 and b"CONTENT_LENGTH=0\n" in b and b.endswith(b"body bytes: 0\n"),
          f"an empty chunked body: CONTENT_LENGTH=0 ({s})")
    # upper-case hex, leading zeros, spaces before an extension
    s, _, b, _ = once(port, chunked_req("/cgi-bin/hello", b"000A ;a\r\n0123456789\r\n"
                                        b"1\t\r\nx\r\n00\r\n\r\n"))
    check(s == 200 and b.endswith(b"body: 0123456789x\nbody bytes: 11\n"),
          f"chunk sizes 000A and 1, blanks before the line's end ({s}, {b[-40:]!r})")
    # every byte of head and body in a write of its own
    small = b"one byte at a time"
    c = Conn(port)
    c.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for ch in chunked_req("/cgi-bin/hello", chunked(small, (5, 1, 3))):
        c.send(bytes([ch]))
    s, _, b, _ = c.response()
    c.close()
    check(s == 200 and b.endswith(b"body: %s\nbody bytes: %d\n" % (small, len(small))),
          f"a chunked request written a byte at a time ({s}, {b[-60:]!r})")
    # 200 KiB in chunks of 3 KiB, answered chunked
    big = os.urandom(200 * 1024)
    s, h, b, complete = once(port, chunked_req("/cgi-bin/hello", chunked(big, (3072,), False)))
    check(s == 200 and complete and big in b and b.endswith(b"body bytes: %d\n" % len(big)),
          "a chunked body of 200 KiB reaches the program whole")
    # keep-alive: chunked requests pipelined with others, answered in order
    c = Conn(port)
    c.send(chunked_req("/cgi-bin/hello?k=0", chunked(b"first")) + req("GET", "/cgi-bin/hello?k=1")
           + chunked_req("/cgi-bin/hello.pl?k=2", chunked(b"third" * 1000, (999,)))
           + req("POST", "/cgi-bin/hello?k=3", [], b"fourth"))
    r = [c.response() for _ in range(4)]
    bodies = [b"first", b"", b"third" * 1000, b"fourth"]
    check(all(s == 200 and f"QUERY_STRING=k={i}\n".encode() in b
              and b.endswith(b"body: %s\nbody bytes: %d\n" % (bodies[i], len(bodies[i])))
              for i, (s, _, b, _) in enumerate(r)),
          "chunked requests pipelined with others on one connection, answered in order")
    # Expect: 100-continue before a chunked body
    c.send(chunked_req("/cgi-bin/hello", b"", ["Expect: 100-continue"]))
    c.s.settimeout(5)
    interim = c._exact(25)
    c.send(chunked(b"after continue"))
    s, _, b, _ = c.response()
    check(interim == b"HTTP/1.1 100 Continue\r\n\r\n" and s == 200
          and b.endswith(b"body: after continue\nbody bytes: 14\n"),
          f"Expect: 100-continue, then a chunked body ({interim!r}, {s})")
    c.close()
    # a client that ends its side mid-body: no answer, the connection closed
    c = Conn(port)
    c.send(chunked_req("/cgi-bin/hello", b"10\r\nonly part"))
    c.s.shutdown(socket.SHUT_WR)
    c.s.settimeout(5)
    try:
        rest = c.s.recv(100)
    except ConnectionError:
        rest = b""
    check(rest == b"", f"a client that ends mid-body: closed without an answer ({rest!r})")
    c.close()


def check_chunked_hostile(port):
    ok = chunked_req("/cgi-bin/hello", b"")
    te = b"POST /cgi-bin/hello HTTP/1.1\r\nHost: x\r\n"
    for wire, want, what in (
            (b"zz\r\nab\r\n0\r\n\r\n", 400, "a size that is no hex"),
            (b"-1\r\na\r\n0\r\n\r\n", 400, "a negative size"),
            (b"0x10\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n", 400, "a 0x prefix"),
            (b"+5\r\nabcde\r\n0\r\n\r\n", 400, "a sign"),
            (b"\r\nabc\r\n0\r\n\r\n", 400, "no size"),
            (b" 3\r\nabc\r\n0\r\n\r\n", 400, "a blank before the size"),
            (b"1" + b"0" * 16 + b"\r\n", 400, "a size over 64 bits"),
            (b"F" * 40 + b"\r\n", 400, "a size of 40 hex digits"),
            (b"FFFFFFFFFFFFFFFF\r\n", 413, "a size of 2^64-1"),
            (b"100001\r\n", 413, "a chunk over --max-body"),
            (b"3\r\nabcX\r\n0\r\n\r\n", 400, "data longer than its size"),
            (b"5\r\nabc\r\n0\r\n\r\n", 400, "data shorter than its size"),
            (b"3\nabc\r\n0\r\n\r\n", 400, "a bare LF"),
            (b"3\rabc\r\n0\r\n\r\n", 400, "a bare CR"),
            (b"3\r\nabc\r\n0\r\nno colon\r\n\r\n", 400, "a trailer line that is no field"),
            (b"3\r\nabc\r\n0\r\n" + b"".join(b"X-T%d: %s\r\n" % (i, b"v" * 1000)
                                              for i in range(20)) + b"\r\n", 431,
             "a trailer of 20 KiB")):
        try:
            s = once(port, ok + wire)[0]
        except (EOFError, ConnectionError) as e:
            s = repr(e)
        check(s == want, f"chunked, {what}: {want} (got {s})")
    for head, want, what in (
            (b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", 400,
             "Transfer-Encoding and Content-Length"),
            (b"Transfer-Encoding: gzip, chunked\r\n", 501, "gzip, chunked"),
            (b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", 501,
             "gzip then chunked in two fields"),
            (b"Transfer-Encoding: chunked, gzip\r\n", 400, "chunked, gzip"),
            (b"Transfer-Encoding: chunked, chunked\r\n", 400, "chunked twice"),
            (b"Transfer-Encoding: chunked\r\nTransfer-Encoding:\r\n", 400,
             "an empty Transfer-Encoding after chunked"),
            (b"Transfer-Encoding: identity\r\n", 400, "identity")):
        s = once(port, te + head + b"\r\n0\r\n\r\n")[0]
        check(s == want, f"{what}: {want} (got {s})")
    s = once(port, b"POST /cgi-bin/hello HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"0\r\n\r\n")[0]
    check(s == 400, f"chunked in HTTP/1.0: 400 (got {s})")
    # chunks that add up to more than --max-body, each under it
    half = b"a" * (1 << 19)
    s = once(port, ok + b"80000\r\n" + half + b"\r\n80001\r\n")[0]
    check(s == 413, f"chunks adding up over --max-body: 413 (got {s})")
    # a size line without CRLF for megabytes: refused after a few KiB, not
    # taken in; the client cannot write them all
    total, sent, res = 32 << 20, [0], []
    c = Conn(port)

    def flood():
        try:
            c.send(ok + b"1;")
            piece = b"x" * 65536
            while sent[0] < total:
                c.s.sendall(piece)
                sent[0] += len(piece)
        except OSError:
            pass
    t = threading.Thread(target=flood)
    t.start()
    try:
        res.append(c.response()[0])
    except ConnectionResetError:
        res.append("reset")  # the 400 lost to the reset of what was left unread
    except (EOFError, ConnectionError) as e:
        res.append(repr(e))
    t.join()
    c.close()
    check(sent[0] < total and res[0] in (400, "reset"),
          f"a chunk size line of megabytes: refused unread ({res[0]}, {sent[0]} of {total} "
          f"bytes written)")
    check(once(port, req("GET", "/cgi-bin/hello"))[0] == 200, "served after the chunked attacks")


def check_timeouts(port):
    t = time.monotonic()
    s = once(port, req("GET", "/cgi-bin/hang"))[0]
    dt = time.monotonic() - t
    check(s == 504 and TIMEOUT_MS / 1000 * 0.9 <= dt <= TIMEOUT_MS / 1000 + 2,
          f"hang: 504 after the timeout ({s} after {dt:.2f} s)")
    s, h, b, complete = once(port, req("GET", "/cgi-bin/flood"))
    check(not complete and MAX_OUTPUT // 2 <= len(b) <= MAX_OUTPUT and set(b) <= {ord("x")},
          f"flood: cut at --max-output, the connection closed ({len(b)} bytes, "
          f"complete {complete})")
    check(once(port, req("GET", "/cgi-bin/hello"))[0] == 200, "served after hang and flood")


def check_hostile(port):
    for path, want in (("/cgi-bin/../cgi-bin/hello", 403), ("/cgi-bin/%2e%2e/cgi-bin/hello", 403),
                       ("/cgi-bin/hello%2f..%2f..%2fhello", 403), ("/cgi-bin/./hello", 403),
                       ("/cgi-bin/%2E%2e%2Fetc%2Fpasswd", 403), ("/cgi-bin/hello%00", 400),
                       ("/cgi-bin/hello%zz", 400), ("/cgi-bin/nosuch", 404), ("/cgi-bin/", 404),
                       ("/cgi-bin/.hidden", 404), ("/etc/passwd", 404), ("/", 404),
                       ("/cgi-bin/hello.c", 404)):
        s, _, b, _ = once(port, req("GET", path))
        check(s == want and b"GATEWAY" not in b, f"{path}: {want} (got {s})")
    for raw, want, what in (
            (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "a request line of 9 KiB"),
            (b"GET /cgi-bin/hello HTTP/1.1\r\n" + b"X-Long: " + b"b" * 20000 + b"\r\n\r\n", 431,
             "a header of 20 KiB"),
            (b"GET /cgi-bin/hello HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(120))
             + b"\r\n", 431, "120 header fields"),
            (b"POST /cgi-bin/hello HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400, "Content-Length abc"),
            (b"POST /cgi-bin/hello HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length -1"),
            (b"POST /cgi-bin/hello HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
             400, "two Content-Lengths"),
            (b"POST /cgi-bin/hello HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", 413,
             "a body over --max-body"),
            (b"GET /cgi-bin/hello HTTP/1.1\r\n folded: x\r\n\r\n", 400, "an obs-fold"),
            (b"GET /cgi-bin/hello HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "a space in a field name"),
            (b"GET /cgi-bin/hello HTTP/2.0\r\n\r\n", 505, "HTTP/2.0"),
            (b"GET  /cgi-bin/hello HTTP/1.1\r\n\r\n", 400, "two spaces"),
            (b"DELETE /cgi-bin/hello HTTP/1.1\r\n\r\n", 501, "DELETE"),
            (b"GET http://x/cgi-bin/hello HTTP/1.1\r\n\r\n", 400, "an absolute URI")):
        try:
            s = once(port, raw)[0]
        except (EOFError, ConnectionError) as e:
            s = repr(e)
        check(s == want, f"{what}: {want} (got {s})")
    # Proxy: never HTTP_PROXY; a field with '_' is not passed (it could pose as another)
    s, _, b, _ = once(port, req("GET", "/cgi-bin/hello", ["X_CGI_Test: sneaky", "Proxy: evil"]))
    check(s == 200 and b"HTTP_X_CGI_TEST=(unset)" in b, "a field name with '_' is not passed")
    # a slow client is closed after --read-timeout; others are served meanwhile
    slow = Conn(port)
    slow.send(b"GET /cgi-bin/hello HTTP/1.1\r\nHost: x\r\n")
    t = time.monotonic()
    check(once(port, req("GET", "/cgi-bin/hello"))[0] == 200, "served beside a slow client")
    closed = slow.closed(READ_TIMEOUT_MS / 1000 + 3)
    dt = time.monotonic() - t
    check(closed and dt <= READ_TIMEOUT_MS / 1000 + 2,
          f"a slow client's connection is closed after the read timeout ({dt:.2f} s)")
    slow.close()
    idle = Conn(port)
    check(idle.closed(READ_TIMEOUT_MS / 1000 + 3), "an idle connection is closed")
    idle.close()


def check_child(port):
    """a shell script runs as a child process: the fallback's pipes and wait"""
    s, h, b, _ = once(port, req("POST", "/cgi-bin/hello.sh?as=child", [], b"from the body"))
    check(s == 200 and b == b"REQUEST_METHOD=POST\nQUERY_STRING=as=child\nbody: from the body\n",
          f"a shell script, as a child process, with its body ({s}, {b!r})")
    c = Conn(port)
    for i in range(3):
        c.send(req("GET", f"/cgi-bin/hello.sh?i={i}"))
        s, _, b, _ = c.response()
        check(s == 200 and f"QUERY_STRING=i={i}\n".encode() in b, f"hello.sh keep-alive {i}")
    c.close()


def check_concurrent(port, n=50):
    results = [None] * n

    def one(i):
        try:
            s, _, b, _ = once(port, req("POST", f"/cgi-bin/hello?i={i}", [], b"x" * i), timeout=60)
            results[i] = s == 200 and f"QUERY_STRING=i={i}\n".encode() in b \
                and b.endswith(b"body: " + b"x" * i + b"\nbody bytes: %d\n" % i)
        except Exception as e:  # noqa: BLE001 - the check says which failed
            results[i] = repr(e)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    bad = [i for i, r in enumerate(results) if r is not True]
    check(not bad, f"{n} requests at once, each answered for itself (wrong: {bad[:5]} "
                   f"{[results[i] for i in bad[:3]]})")


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        out = ""
    check(p.returncode == 0, f"the server stops on SIGTERM with 0 (got {p.returncode})")
    return out


def main_server():
    p, port = start_server()
    try:
        # identical requests: the first loads hello, the others reuse its image
        for _ in range(20):
            once(port, req("GET", "/cgi-bin/hello?same=1"))
        check_reference(port)
        check_keepalive(port)
        check_big_body(port)
        check_chunked(port)
        check_chunked_hostile(port)
        check_timeouts(port)
        check_hostile(port)
        check_child(port)
        check_concurrent(port)
        check(once(port, req("GET", "/cgi-bin/hello"))[0] == 200, "still serving at the end")
    finally:
        out = stop(p)
    last = out.strip().splitlines()[-1] if out.strip() else ""
    print(last)
    import re
    m = re.search(r"(\d+) programs run as μprocesses \((\d+) from kept images\), (\d+) as child "
                  r"processes; (\d+) timed out, (\d+) crashed, (\d+) bad output, (\d+) cut", last)
    if check(m, f"the server's last line counts its runs: {last!r}"):
        up, reused, child, to, crashed, bad, cut = map(int, m.groups())
        check(up > 100 and child == 4, f"every program but the shell script's 4 runs ran as a "
                                       f"μprocess ({up}, {child})")
        check(reused >= 19, f"identical requests reuse kept images ({reused} of {up})")
        check(to == 1 and crashed == 1 and bad == 1 and cut == 1,
              "one timeout, one crash, one bad output, one cut counted")


# ------------------------------------------------------------------ lighttpd
def main_lighttpd():
    lt = shutil.which("lighttpd") or ("/usr/sbin/lighttpd" if os.path.exists("/usr/sbin/lighttpd")
                                      else None)
    if not lt:
        print("skipped: lighttpd not installed (scripts/deps.sh --demo installs it)")
        sys.exit(77)
    p, port = start_server()
    d = tempfile.mkdtemp()
    try:
        root = os.path.join(d, "root")
        os.mkdir(root)
        os.symlink(os.path.abspath(CGI), os.path.join(root, "cgi-bin"))
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        lport = s.getsockname()[1]
        s.close()
        with open(os.path.join(d, "lighttpd.conf"), "w") as f:
            f.write(f'server.document-root = "{root}"\nserver.port = {lport}\n'
                    f'server.bind = "127.0.0.1"\nserver.modules = ("mod_cgi")\n'
                    f'server.errorlog = "{d}/error.log"\n'
                    '$HTTP["url"] =~ "^/cgi-bin/" { cgi.assign = ("" => "") }\n')
        lp = subprocess.Popen([lt, "-D", "-f", os.path.join(d, "lighttpd.conf")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", lport), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            n = 0
            for prog in ("hello", "hello.pl"):
                for method, extra, query, headers, body in CASES + [
                        ("HEAD", "", "", [], b""),
                        ("POST", "", "big", [], os.urandom(100 * 1024))]:
                    raw = req(method, url(prog, extra, query), [f"{k}: {v}" for k, v in headers],
                              body)
                    a = once(port, raw, head=method == "HEAD")
                    b = once(lport, raw, head=method == "HEAD")
                    what = f"{prog} {method} {url(prog, extra, query)}"
                    check(a[0] == b[0], f"{what}: status karui {a[0]}, lighttpd {b[0]}")
                    check(a[1].get("content-type") == b[1].get("content-type"),
                          f"{what}: content type")
                    check(a[2] == b[2], f"{what}: bodies differ\n    karui    {a[2][:160]!r}\n"
                                        f"    lighttpd {b[2][:160]!r}")
                    n += 1
            for prog in ("hello", "hello.pl"):
                raw = chunked_req(f"/cgi-bin/{prog}?chunked", chunked(os.urandom(50 * 1024)))
                a, b = once(port, raw), once(lport, raw)
                check(a[0] == b[0] == 200 and a[2] == b[2],
                      f"{prog}: a chunked body: karui {a[0]}, lighttpd {b[0]}, bodies alike "
                      f"{a[2] == b[2]}")
                n += 1
            print(f"{n} requests answered alike by karui's cgi_httpd and lighttpd's mod_cgi")
        finally:
            lp.terminate()
            lp.wait()
    finally:
        stop(p)
        shutil.rmtree(d, ignore_errors=True)


t0 = time.monotonic()
main_lighttpd() if LIGHTTPD else main_server()
print(f"{'test_cgi --lighttpd' if LIGHTTPD else 'test_cgi'}: {len(failures)} failed checks "
      f"({time.monotonic() - t0:.1f} s)")
sys.exit(1 if failures else 0)
