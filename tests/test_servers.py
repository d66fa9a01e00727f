#!/usr/bin/env python3
"""The example servers, driven as a client would: examples/echo_server and
examples/httpd started on a free port, checked byte for byte over many
concurrent connections and with replies of megabytes, then stopped with
SIGTERM (each must exit 0); then each again with fewer fds than
connections.
Usage: test_servers.py BIN_DIR   (KARUI_IO=epoll in the environment picks
the fallback back end)."""
import atexit, os, resource, select, signal, socket, subprocess, sys, tempfile, threading, time

BIN = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("  check failed:", what, file=sys.stderr)


def start(name, *args, **popen):
    p = subprocess.Popen([os.path.join(BIN, name), "--vps", "2", *args],
                         stdout=subprocess.PIPE, text=True, **popen)
    atexit.register(lambda: p.poll() is None and p.kill())  # should the test fail on the way
    line = p.stdout.readline()
    check("listening on 127.0.0.1:" in line, f"{name} says where it listens: {line!r}")
    return p, int(line.rsplit(":", 1)[1])


def stop(p, name):
    p.send_signal(signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        out = ""
        check(False, f"{name} stops on SIGTERM")
    check(p.returncode == 0, f"{name} exits 0 (got {p.returncode})")
    return out


def recv_exact(s, n, b=b""):
    b = bytearray(b)
    while len(b) < n:
        c = s.recv(min(n - len(b), 1 << 20))
        if not c:
            break
        b += c
    return bytes(b)


def echo_client(port, i, results):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        ok = True
        for k in range(20):
            msg = f"client {i} line {k} ".encode() * (1 + k * 50)
            s.sendall(msg)
            ok &= recv_exact(s, len(msg)) == msg
        results[i] = ok


def echo_flood(port, size):
    """Send size bytes, reading nothing until the sending stalls for a
    second (the buffers both ways are full: the server's sends come up
    short and it must wait) or ends; then read while sending the rest.
    What comes back, within a minute."""
    data = memoryview(os.urandom(size))
    got = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.setblocking(False)
        sent, reading, end = 0, False, time.monotonic() + 60
        while len(got) < size and time.monotonic() < end:
            r, w, _ = select.select([s] if reading else [], [s] if sent < size else [], [], 1)
            try:
                if w:
                    sent += s.send(data[sent:sent + 65536])
                if r:
                    c = s.recv(1 << 20)
                    if not c:
                        break
                    got += c
            except BlockingIOError:
                pass
            except OSError:
                break
            reading |= sent == size or not (r or w)
    return data == got


def http_get(port, path, close=False):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        hdr = "Connection: close\r\n" if close else ""
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{hdr}\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(65536)
        head, body = data.split(b"\r\n\r\n", 1)
        length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
        body += recv_exact(s, length - len(body))
        return head.split(b"\r\n")[0].decode(), body


def http_pipelined(port, paths):
    """GET each of paths, pipelined on one keep-alive connection: the
    (status line, body) of each reply, its body read by its Content-Length
    (so a wrong length shows in the body, or in the reply after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(b"".join(f"GET {p} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for p in paths))
        data, replies = b"", []
        for _ in paths:
            while b"\r\n\r\n" not in data:
                c = s.recv(65536)
                if not c:
                    return replies
                data += c
            head, data = data.split(b"\r\n\r\n", 1)
            length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
            data = recv_exact(s, length, data)
            replies.append((head.split(b"\r\n")[0].decode(), data[:length]))
            data = data[length:]
        return replies


def put_file(path, content):
    with open(path + ".new", "wb") as f:
        f.write(content)
    os.replace(path + ".new", path)


HELLO = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"


def http_keepalive_client(port, i, results):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        # three pipelined requests, then ten one at a time
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
        ok = recv_exact(s, 3 * len(HELLO)) == HELLO * 3
        for _ in range(10):
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            ok &= recv_exact(s, len(HELLO)) == HELLO
        results[i] = ok


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        f = stat.read().rsplit(")", 1)[1].split()  # utime and stime, in ticks
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def out_of_fds(name, request, reply):
    """name started with 32 fds, one connection served, then 100 more
    than it has fds for: while they wait, it must go on serving the first,
    not spin (under 10% of a CPU over 2 s; a loop that retries at once
    takes nearly all of one), and log fewer than 100 lines; once they close, it
    must serve a new connection."""
    def talk(s):
        s.sendall(request)
        return recv_exact(s, len(reply)) == reply

    with tempfile.TemporaryFile("w+") as log:
        p, port = start(name, stderr=log,
                        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32)))
        with socket.create_connection(("127.0.0.1", port), timeout=20) as first:
            check(talk(first), f"{name}: served before the overload")
            extra = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(100)]
            end = time.monotonic() + 20
            while os.fstat(log.fileno()).st_size == 0 and time.monotonic() < end:
                time.sleep(0.1)
            c0, t0 = cpu_seconds(p.pid), time.monotonic()
            time.sleep(2)
            c1, t1 = cpu_seconds(p.pid), time.monotonic()
            check(c1 - c0 < 0.1 * (t1 - t0), f"{name}: out of fds, used {c1 - c0:.2f} s of CPU in {t1 - t0:.2f} s")
            check(talk(first), f"{name}: out of fds, goes on serving the connection it has")
            for s in extra:
                s.close()
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            check(talk(s), f"{name}: serves a new connection once the others have closed")
        stop(p, name)
        log.seek(0)
        lines = log.read().splitlines()
        check(0 < len(lines) < 100, f"{name}: out of fds, logged {len(lines)} lines")


def many(target, port, n):
    results = [False] * n
    ts = [threading.Thread(target=target, args=(port, i, results)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(results)


backend = os.environ.get("KARUI_IO", "default")
p, port = start("echo_server")
check(many(echo_client, port, 100) == 100, "echo: 100 clients × 20 messages come back intact")
check(echo_flood(port, 8 << 20), "echo: 8 MiB sent before reading come back intact")
out = stop(p, "echo_server")
check("stopped after 101 connections" in out, f"echo_server counted its connections: {out!r}")
out_of_fds("echo_server", b"ping", b"ping")

tmp = tempfile.TemporaryDirectory()
path = os.path.join(tmp.name, "file")
content = os.urandom(200_000)
put_file(path, content)
p, port = start("httpd", "--file", path)
check(http_get(port, "/") == ("HTTP/1.1 200 OK", b"hello"), "GET / is hello")
check(http_get(port, "/file", close=True) == ("HTTP/1.1 200 OK", content), "GET /file is the file")
check(http_get(port, "/nope")[0] == "HTTP/1.1 404 Not Found", "an unknown path is 404")
check(many(http_keepalive_client, port, 100) == 100, "100 keep-alive clients, pipelined")
# the file is read for each request: larger ones, each followed on the
# same connection by a "/", which its Content-Length must leave intact
for mib in (12, 20):
    big = os.urandom(mib << 20)
    put_file(path, big)
    check(http_pipelined(port, ["/file", "/"]) == [("HTTP/1.1 200 OK", big), ("HTTP/1.1 200 OK", b"hello")],
          f"GET /file of {mib} MiB is the whole file, then GET / is hello")
out = stop(p, "httpd")
tmp.cleanup()
check("stopped after 1307 requests" in out, f"httpd counted every request: {out!r}")
out_of_fds("httpd", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", HELLO)

print(f"servers on the {backend} back end: {'ok' if not failures else 'FAILED'}")
sys.exit(1 if failures else 0)
