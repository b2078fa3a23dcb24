#!/usr/bin/env python3
# Process start -> `initialize` answered, for a lode binary: python3 scripts/bench_initialize.py target/dist/lode 30
import json, subprocess, sys, time, statistics, os, tempfile
exe = sys.argv[1]
vault = tempfile.mkdtemp()
def frame(obj):
    b = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(b) + b
def read_msg(p):
    n = None
    while True:
        line = p.stdout.readline()
        if line in (b"\r\n", b"\n"): break
        if line.lower().startswith(b"content-length:"): n = int(line.split(b":")[1])
    return json.loads(p.stdout.read(n))
ts = []
for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 20):
    t = time.perf_counter()
    p = subprocess.Popen([exe, "serve", "--vault", vault], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": "file://" + vault, "capabilities": {}}})); p.stdin.flush()
    while True:
        m = read_msg(p)
        if m.get("id") == 1: break
    ts.append((time.perf_counter() - t) * 1000)
    p.kill(); p.wait()
ts.sort()
print(json.dumps({"exe": exe, "n": len(ts), "p50_ms": round(statistics.median(ts), 2), "min_ms": round(ts[0], 2), "p90_ms": round(ts[int(len(ts)*0.9)], 2)}))
