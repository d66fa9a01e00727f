#!/usr/bin/env python3
"""The scheduling trace (src/core/trace.c, docs/trace.md), read back.

trace_target (tests/trace_target.c) runs a known schedule with KARUI_TRACE
set; each test loads the JSON (json.load: it must be valid) and checks it
event by event.  Prints "N passed, N failed" as the C tests do.

Usage: test_trace.py TRACE_TARGET
"""
import json
import os
import subprocess
import sys
import tempfile
import traceback

TARGET = sys.argv[1]
PREFIX = sys.argv[2:]  # the emulator of a cross build (qemu-aarch64 -L ...)
N, M = 40, 25  # semaphore and channel round trips


def run(vps, path, env_extra=None, n=N, m=M):
    env = dict(os.environ, KARUI_TRACE=path)
    env.pop("KARUI_TRACE_SIZE", None)
    env.update(env_extra or {})
    p = subprocess.run(PREFIX + [TARGET, str(vps), str(n), str(m)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, f"trace_target exited {p.returncode}: {p.stderr}"
    return json.loads(p.stdout), p.stderr


def load(path):
    with open(path) as f:
        return json.load(f)  # the whole file is one valid JSON object


def mp_events(trace, name, tid=None):
    return [e for e in trace["traceEvents"]
            if e.get("pid") == 2 and e["name"] == name and (tid is None or e["tid"] == tid)]


def check_vp_slices_do_not_overlap(trace):
    runs = {}
    for e in trace["traceEvents"]:
        if e.get("pid") == 1 and e["ph"] == "X":
            assert e["dur"] >= 0, e
            runs.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    assert runs, "no run on any VP"
    for vp, v in runs.items():
        v.sort()
        for a, b in zip(v, v[1:]):
            # ts and dur are printed in µs with ns kept: 1 ns of slack
            assert a[1] <= b[0] + 0.001, f"VP {vp}: {a} overlaps {b}"
    return runs


def check_common(trace, ids):
    other = trace["otherData"]
    assert other["clock"] == "CLOCK_MONOTONIC"
    assert other["dropped"] == 0, other
    check_vp_slices_do_not_overlap(trace)
    workers = [v for k, v in ids.items() if k != "main"]
    creates = mp_events(trace, "create")
    assert sorted(e["tid"] for e in creates) == sorted(workers), creates
    assert all(e["args"]["by"] == ids["main"] for e in creates)
    exits = mp_events(trace, "exit")
    assert sorted(e["tid"] for e in exits) == sorted(workers), exits
    # every microprocess's track: states one after another, no gap, no overlap
    for mp in ids.values():
        states = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in trace["traceEvents"]
                        if e.get("pid") == 2 and e["ph"] == "X" and e["tid"] == mp)
        assert states, f"mp {mp} has no states"
        for a, b in zip(states, states[1:]):
            assert abs(a[1] - b[0]) <= 0.001, f"mp {mp}: {a} then {b}"


def parks(trace, mp):
    return [e["args"]["why"] for e in mp_events(trace, "park", mp)]


def unparks(trace, mp):
    return [e["args"] for e in mp_events(trace, "unpark", mp)]


def trace_of_one_vp_names_every_reason_and_waker():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        ids, _ = run(1, path)
        t = load(path)
    check_common(t, ids)
    ping, pong, ca, cb = ids["ping"], ids["pong"], ids["chan_a"], ids["chan_b"]
    # on one VP every wait of the ping-pong parks: N each (pong's first
    # wait and ping's last), each woken by the other
    for me, partner in ((ping, pong), (pong, ping)):
        assert parks(t, me) == ["semaphore"] * N, parks(t, me)
        u = unparks(t, me)
        assert len(u) == N and all(a["by"] == partner for a in u), u
    for me, partner in ((ca, cb), (cb, ca)):
        p = parks(t, me)
        assert p and set(p) == {"channel"}, p
        u = unparks(t, me)
        assert len(u) == len(p) and all(a["by"] == partner for a in u), (p, u)
    assert parks(t, ids["sleeper"]) == ["sleep"], parks(t, ids["sleeper"])
    assert [a["by_kind"] for a in unparks(t, ids["sleeper"])] == ["timer"], unparks(t, ids["sleeper"])
    assert parks(t, ids["yielder"]) == [], parks(t, ids["yielder"])
    assert not mp_events(t, "migrate"), "one VP: nothing moves"
    # main joins in reverse order of creation: each join that parked (one
    # whose microprocess had not ended yet: under load the sleeper's time
    # may pass first) is ended by the one it joined
    joined = [a["by"] for a in unparks(t, ids["main"])]
    assert set(parks(t, ids["main"])) <= {"join"}, parks(t, ids["main"])
    assert len(joined) == len(parks(t, ids["main"])), (joined, parks(t, ids["main"]))
    assert set(joined) <= set(v for k, v in ids.items() if k != "main"), joined
    # every flow starts on its waker's track and ends on the wakee's
    flows = {}
    for e in t["traceEvents"]:
        if e["ph"] in "sf":
            flows.setdefault(e["id"], {})[e["ph"]] = e["tid"]
    assert flows and all(set(f) == {"s", "f"} for f in flows.values()), flows


def trace_of_two_vps_is_whole_and_consistent():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        ids, _ = run(2, path, n=400, m=200)
        t = load(path)
    check_common(t, ids)
    for me in ("ping", "pong"):
        assert set(parks(t, ids[me])) <= {"semaphore"}
    for me in ("chan_a", "chan_b"):
        assert set(parks(t, ids[me])) <= {"channel"}
    partner = {"ping": "pong", "pong": "ping", "chan_a": "chan_b", "chan_b": "chan_a"}
    for me, other in partner.items():
        for a in unparks(t, ids[me]):
            assert a["by"] == ids[other], (me, a)
    for e in mp_events(t, "migrate"):
        assert e["args"]["from_vp"] != e["args"]["to_vp"] and {e["args"]["from_vp"], e["args"]["to_vp"]} <= {0, 1}


def full_buffer_drops_and_counts_what_it_drops():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        ids, _ = run(1, path, {"KARUI_TRACE_SIZE": "4K"}, n=2000, m=0)
        t = load(path)
    other = t["otherData"]
    assert other["buffer_bytes"] == 4096
    assert other["dropped"] > 0 and other["dropped_by_vp"]["0"] == other["dropped"], other
    check_vp_slices_do_not_overlap(t)


def unwritable_trace_is_reported_and_the_program_runs():
    path = "/nonexistent-dir/trace.json"
    ids, err = run(1, path)
    assert "cannot write the trace to " + path in err, err
    assert "untraced" in err and not os.path.exists(path)
    assert ids["ping"] and ids["pong"]


def bad_trace_size_is_reported_and_the_default_taken():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        ids, err = run(1, path, {"KARUI_TRACE_SIZE": "lots"})
        t = load(path)
    assert "KARUI_TRACE_SIZE=lots" in err, err
    assert t["otherData"]["buffer_bytes"] == 1 << 20


TESTS = [trace_of_one_vp_names_every_reason_and_waker, trace_of_two_vps_is_whole_and_consistent,
         full_buffer_drops_and_counts_what_it_drops,
         unwritable_trace_is_reported_and_the_program_runs,
         bad_trace_size_is_reported_and_the_default_taken]

passed = failed = 0
for test in TESTS:
    try:
        test()
        passed += 1
        print(f"ok   {test.__name__}")
    except Exception as e:  # a failed check names its test and goes on
        failed += 1
        line = traceback.extract_tb(e.__traceback__)[-1].lineno
        print(f"FAIL {test.__name__} (line {line}): {type(e).__name__}: {e}")
print(f"{passed} passed, {failed} failed, 0 skipped")
sys.exit(1 if failed else 0)
