"""A client of `efr-sandbox serve` for the benchmarks: one connection, `hello`, then one
`sandbox.launch` of `true` in the project PROJ on BACKEND for each line read on stdin; prints
the microseconds from the request to its `end` frame, one line each (as efrd sees a call).
Usage: python3 rpc-launch.py SOCKET PROJ BACKEND"""
import json, socket, struct, sys, time

path, proj, backend = sys.argv[1:4]
for _ in range(200):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit(f"no server at {path}")


def send(v):
    b = json.dumps(v).encode()
    s.sendall(struct.pack(">I", len(b)) + b)


def recv():
    h = b""
    while len(h) < 4:
        c = s.recv(4 - len(h))
        if not c:
            sys.exit("server closed")
        h += c
    (n,) = struct.unpack(">I", h)
    b = b""
    while len(b) < n:
        b += s.recv(n - len(b))
    return json.loads(b)


send({"id": 0, "method": "hello", "params": {"protocol": 1, "client": "bench"}})
recv()
i = 0
for _ in sys.stdin:
    i += 1
    p = {"line": "true", "cwd": proj, "projects": [proj], "backend": backend}
    t0 = time.perf_counter_ns()
    send({"id": i, "method": "sandbox.launch", "params": p})
    while True:
        f = recv()
        if "item" not in f:
            break
    t = (time.perf_counter_ns() - t0) // 1000
    if "end" not in f or f["end"].get("exit_status") != 0:
        sys.exit(f"launch {i}: {f}")
    print(t, flush=True)
