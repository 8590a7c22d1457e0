"""The service under a neighbour's proxy flood: the RPC's latency (`sandbox.status`) and a
well-behaved call's (`sandbox.launch` of a line making 20 requests through its own proxy,
each refused at once: the proxy's answer time, not a server's), with no neighbour and while
another call holds 3,000 connections to its proxy and reopens each one ended. Rounds
alternate (quiet, flood, quiet, flood, ...) so both see the same moment of the machine.
Prints p50 and p99 of each, milliseconds, and the ratios flood/quiet.
Usage: python3 bench-isolation.py SOCKET PROJ ROUNDS SAMPLES"""
import json, socket, struct, sys, threading, time

path, proj = sys.argv[1], sys.argv[2]
rounds, samples = int(sys.argv[3]), int(sys.argv[4])

FLOOD = r'''
import os, resource, selectors, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
host, port = os.environ["HTTP_PROXY"].split("//")[1].strip("/").rsplit(":", 1)
sel = selectors.DefaultSelector()
def opened():
    s = socket.socket(); s.setblocking(False); s.connect_ex((host, int(port)))
    sel.register(s, selectors.EVENT_READ)
for _ in range(3000):
    opened()
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for key, _ in sel.select(timeout=0.2):
        s = key.fileobj
        try: s.recv(4096)
        except OSError: pass
        sel.unregister(s); s.close(); opened()
'''

PROBE = r'''
import os, socket
host, port = os.environ["HTTP_PROXY"].split("//")[1].strip("/").rsplit(":", 1)
for _ in range(20):
    s = socket.create_connection((host, int(port)))
    s.sendall(b"CONNECT nothere.test:443 HTTP/1.1\r\nHost: nothere.test:443\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 403"), "not refused"
    s.close()
'''


class Client:
    def __init__(self):
        for _ in range(200):
            try:
                self.s = socket.socket(socket.AF_UNIX)
                self.s.connect(path)
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit(f"no server at {path}")
        self.n = 0
        self.send("hello", {"protocol": 1, "client": "bench"})
        self.recv()

    def send(self, method, params):
        self.n += 1
        b = json.dumps({"id": self.n, "method": method, "params": params}).encode()
        self.s.sendall(struct.pack(">I", len(b)) + b)

    def recv(self):
        def exact(n):
            b = b""
            while len(b) < n:
                c = self.s.recv(n - len(b))
                if not c:
                    sys.exit("server closed")
                b += c
            return b
        (n,) = struct.unpack(">I", exact(4))
        return json.loads(exact(n))

    def until_end(self):
        while True:
            f = self.recv()
            if "item" not in f:
                return f


def launch(c, line):
    c.send("sandbox.launch", {"line": line, "cwd": proj, "projects": [proj]})
    f = c.until_end()
    if "end" not in f or f["end"].get("exit_status") != 0:
        sys.exit(f"launch failed: {f}")


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


open(f"{proj}/flood.py", "w").write(FLOOD)
open(f"{proj}/probe.py", "w").write(PROBE)
rpc, call = Client(), Client()
# Warm-up (the first status runs the probe, the first launches fill the page cache).
rpc.send("sandbox.status", None)
rpc.recv()
for _ in range(3):
    launch(call, "python3 probe.py")
res = {k: {"rpc": [], "call": []} for k in ("quiet", "flood")}
for r in range(rounds):
    for mode in ("quiet", "flood"):
        flooder = None
        if mode == "flood":
            fc = Client()
            secs = 4 + samples * 0.8  # outlasts the samples below
            line = f"python3 flood.py {secs}"
            fc.send("sandbox.launch", {"line": line, "cwd": proj, "projects": [proj]})
            flooder = threading.Thread(target=fc.until_end)
            flooder.start()
            time.sleep(3)  # the flood under way: 3,000 connections opened
        for _ in range(samples):
            res[mode]["rpc"].append(timed(lambda: (rpc.send("sandbox.status", None), rpc.recv())))
            res[mode]["call"].append(timed(lambda: launch(call, "python3 probe.py")))
        if flooder:
            flooder.join()
for what in ("rpc", "call"):
    q, f = res["quiet"][what], res["flood"][what]
    for p in (50, 99):
        a, b = pct(q, p), pct(f, p)
        print(f"{what} p{p}: quiet {a:.1f} ms, flood {b:.1f} ms, ratio {b / a:.2f}")
