#!/usr/bin/env python3
"""Runs a program that writes a profiler trace (argv[1], given argv[2] as the
path), parses the Chrome trace-event JSON with json and checks its shape:
spans of the expected ops and backward nodes, spans nested per thread, every
thread named by an "M" record, flows paired, the memory counter present, the
OpenMP workers' spans of a large op.
With --env PROG PATH: PROG runs with TENET_PROFILE=PATH, which must leave a
trace with spans and named threads at its exit."""
import json
import os
import subprocess
import sys

EPS = 0.002  # ts and dur are each rounded to 1 ns


def fail(msg):
    print("check_trace: " + msg)
    sys.exit(1)


def thread_names(events):
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in events:
        if e["ph"] != "M" and e["tid"] not in names:
            fail("tid %d has no thread_name record" % e["tid"])
    return names


def check_env(prog, path):
    env = dict(os.environ, TENET_PROFILE=path)
    if subprocess.run([prog], env=env, capture_output=True).returncode != 0:
        fail("%s failed under TENET_PROFILE" % prog)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    thread_names(events)
    if not any(e["ph"] == "X" for e in events):
        fail("TENET_PROFILE: no span in %s" % path)
    print("check_trace: TENET_PROFILE wrote %d events" % len(events))


def check_nesting(spans):
    by_tid = {}
    for e in spans:
        by_tid.setdefault(e["tid"], []).append(e)
    nested = 0
    for tid, evs in by_tid.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + EPS:
                stack.pop()
            if stack:
                top = stack[-1]
                if e["ts"] + e["dur"] > top["ts"] + top["dur"] + EPS:
                    fail("tid %d: %s overlaps %s without nesting" % (tid, e["name"], top["name"]))
                if top["cat"] == "backward" and e["cat"] == "op":
                    nested += 1
            stack.append(e)
    if nested == 0:
        fail("no op span inside a backward node span")
    return by_tid


def enclosing(spans, ev, cat):
    return [s for s in spans if s["tid"] == ev["tid"] and s["cat"] == cat and
            s["ts"] - EPS <= ev["ts"] <= s["ts"] + s["dur"] + EPS]


def check_omp(spans, summary):
    """The large add's OpenMP workers: one span each (team, member), member 0 inside the add's
    span on the calling thread, the others on threads of their own; none in the summary."""
    omp = [e for e in spans if e["cat"] == "omp"]
    work = [e for e in omp if e["name"] == "omp elementwise" and enclosing(spans, e, "op") and
            any(s["name"] == "add" for s in enclosing(spans, e, "op"))]
    if os.environ.get("TENET_OPENMP", "ON").upper() in ("OFF", "0", "FALSE", "NO"):
        if omp:
            fail("OpenMP spans in a build without OpenMP: %s" % omp[0])
        print("check_trace: built without OpenMP: no OpenMP spans, as expected")
        return
    if not work:
        fail("no 'omp elementwise' span inside the add's span")
    team = work[0]["args"]["team"]
    for e in omp:
        if not e["name"].startswith("omp ") or set(e["args"]) != {"team", "member"} or \
                not 0 <= e["args"]["member"] < e["args"]["team"] or e["args"]["team"] < 2:
            fail("omp span malformed: %s" % e)
    # the add's team ran on team distinct threads, members 0 .. team - 1
    add = [s for s in enclosing(spans, work[-1], "op") if s["name"] == "add"][0]
    region = [e for e in omp if e["name"] == "omp elementwise" and
              e["ts"] < add["ts"] + add["dur"] and e["ts"] + e["dur"] > add["ts"]]
    tids = {e["tid"] for e in region}
    members = {e["args"]["member"] for e in region}
    if len(tids) < team or members != set(range(team)):
        fail("the add's team of %d: members %s on threads %s" % (team, members, tids))
    if "omp " in summary:
        fail("OpenMP spans in the op summary")
    print("check_trace: %d OpenMP worker spans (the add's team: %d)" % (len(omp), team))


def main():
    out = subprocess.run([sys.argv[1], sys.argv[2]], capture_output=True, text=True)
    print(out.stdout)
    if out.returncode != 0:
        fail("%s failed: %s" % (sys.argv[1], out.stderr))
    if "MulBackward0" not in out.stdout:
        fail("the summary lacks MulBackward0")
    with open(sys.argv[2]) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    names = thread_names(events)
    spans = [e for e in events if e["ph"] == "X"]
    for want in ("prof-main", "prof-a", "prof-b"):
        if want not in names.values():
            fail("no thread named %s (names: %s)" % (want, sorted(names.values())))
    span_names = {e["name"] for e in spans}
    for want in ("matmul", "relu", "mul", "sum", "MmBackward0", "ReluBackward0",
                 "MulBackward0", "SumBackward0"):
        if want not in span_names:
            fail("no span named %s" % want)
    for e in spans:
        if e["cat"] == "op" and not ("shapes" in e["args"] and "dtype" in e["args"]
                                     and e["args"]["bytes"] > 0):
            fail("op span without shapes, dtype and bytes: %s" % e)
        if e["name"] == "matmul":  # 2-d here: [M, K] @ [K, N]
            (m, k), (_, n) = e["args"]["shapes"]
            if e["args"]["flops"] != 2 * m * k * n:
                fail("matmul args: %s" % e["args"])
    if not any(e["name"] == "matmul" and e["args"]["shapes"] == [[8, 16], [16, 32]]
               for e in spans):
        fail("no span of the forward matmul [8, 16] @ [16, 32]")
    by_tid = check_nesting(spans)
    if len([t for t, evs in by_tid.items() if any(e["cat"] == "backward" for e in evs)]) < 3:
        fail("backward spans on fewer than 3 threads")
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    if not starts or set(starts) != set(ends):
        fail("flows unpaired: %d starts, %d ends" % (len(starts), len(ends)))
    for i, s in starts.items():
        if not enclosing(spans, s, "op") or not enclosing(spans, ends[i], "backward"):
            fail("flow %s does not go from an op span to a backward span" % i)
    if not any(e["name"] in ("MulBackward0", "MmBackward0") for e in spans
               for f in ends.values() if f["tid"] == e["tid"] and abs(f["ts"] - e["ts"]) < EPS):
        fail("no flow ends on MulBackward0 or MmBackward0")
    check_omp(spans, out.stdout)
    counters = [e for e in events if e["ph"] == "C"]
    if not counters or any("bytes_live" not in e["args"] for e in counters):
        fail("no memory counter")
    print("check_trace: %d spans on %d threads, %d flows, %d counter samples"
          % (len(spans), len(by_tid), len(starts), len(counters)))


if sys.argv[1] == "--env":
    check_env(sys.argv[2], sys.argv[3])
else:
    main()
