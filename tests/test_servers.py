#!/usr/bin/env python3
"""The example servers, driven as a client would: examples/echo_server and
examples/httpd started on a free port, checked byte for byte over many
concurrent connections, then stopped with SIGTERM (each must exit 0).
Usage: test_servers.py BIN_DIR   (KARUI_IO=epoll in the environment picks
the fallback back end)."""
import os, select, signal, socket, subprocess, sys, tempfile, threading, time

BIN = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("  check failed:", what, file=sys.stderr)


def start(name, *args):
    p = subprocess.Popen([os.path.join(BIN, name), "--vps", "2", *args],
                         stdout=subprocess.PIPE, text=True)
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


def http_keepalive_client(port, i, results):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        # three pipelined requests, then ten one at a time
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
        want = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
        ok = recv_exact(s, 3 * len(want)) == want * 3
        for _ in range(10):
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            ok &= recv_exact(s, len(want)) == want
        results[i] = ok


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

def put_file(path, content):
    with open(path + ".new", "wb") as f:
        f.write(content)
    os.replace(path + ".new", path)


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

print(f"servers on the {backend} back end: {'ok' if not failures else 'FAILED'}")
sys.exit(1 if failures else 0)
