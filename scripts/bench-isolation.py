"""The service under a neighbour's proxy flood: the RPC's latency (`sandbox.status`) and a
well-behaved call's (`sandbox.launch` of a line making 20 requests through its own proxy,
each refused at once: the proxy's answer time, not a server's), with no neighbour and while
a neighbour call loads its own proxy (or a processor: `spin`). The RPC is asked every 20 ms
during the calls, so its percentiles rest on hundreds of samples. Rounds
alternate (quiet, flood, quiet, flood, ...) so both see the same moment of the machine.
Prints p50 and p99 of each, milliseconds, and the ratios flood/quiet.
Usage: python3 bench-isolation.py SOCKET PROJ ROUNDS SAMPLES [MODES [EFR_SANDBOX]]
   (modes: spin,spin4,conns,requests,heads,requests-own,heads-own)"""
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

# A neighbour that keeps its proxy parsing: 64 connections, each sending a request to a
# refused host as soon as the last one was answered (the proxy reads the head, decides,
# records the refusal, answers and closes), so the proxy works flat out.
REQUESTS = r'''
import os, selectors, socket, sys, time
host, port = os.environ["HTTP_PROXY"].split("//")[1].strip("/").rsplit(":", 1)
sel = selectors.DefaultSelector()
REQ = b"CONNECT nothere.test:443 HTTP/1.1\r\nHost: nothere.test:443\r\n\r\n"
def opened():
    s = socket.socket(); s.connect((host, int(port))); s.sendall(REQ); s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
for _ in range(64):
    opened()
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for key, _ in sel.select(timeout=0.2):
        s = key.fileobj
        try: s.recv(4096)
        except OSError: pass
        sel.unregister(s); s.close(); opened()
'''

# A neighbour that sends heads a byte short of the limit, in small writes, on 64 connections
# (the proxy reads and scans each piece), reopening each connection the proxy ends.
HEADS = r'''
import os, selectors, socket, sys, time
host, port = os.environ["HTTP_PROXY"].split("//")[1].strip("/").rsplit(":", 1)
sel = selectors.DefaultSelector()
LINE = b"X-Pad: " + b"a" * 90 + b"\r\n"
def opened():
    s = socket.socket(); s.connect((host, int(port))); s.setblocking(False)
    s.send(b"GET http://nothere.test/ HTTP/1.1\r\n")
    sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
for _ in range(64):
    opened()
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for key, ev in sel.select(timeout=0.2):
        s = key.fileobj
        try:
            if ev & selectors.EVENT_READ:
                s.recv(4096); raise OSError
            s.send(LINE)
        except OSError:
            sel.unregister(s); s.close(); opened()
'''

# No proxy load at all: a line that keeps one processor busy, the floor any neighbour
# costs on a shared machine (what the proxy's isolation cannot take away).
SPIN = r'''
import sys, time
end = time.time() + float(sys.argv[1])
while time.time() < end:
    pass
'''

MODES = {"spin": "spin.py", "conns": "flood.py", "requests": "requests.py", "heads": "heads.py"}
# Four processes that each keep a processor busy: the call competes for the processors as
# one (its launcher leads a session of its own: one scheduling group), not as four.
SPIN4 = "sh -c 'for i in 1 2 3 4; do python3 spin.py SECS & done; wait'"
# The other design, a proxy process per call in the call's own session (and so in its
# scheduling group): the neighbour runs the standalone proxy (`efr-sandbox proxy`, the same
# server and policy checks) inside its own call and floods that one.
OWN = ("sh -c 'EXE proxy --listen-tcp 127.0.0.1:18080 >/dev/null 2>&1 & sleep 0.5; "
       "HTTP_PROXY=http://127.0.0.1:18080 python3 SCRIPT SECS; kill $!'")
OWN_MODES = {"requests-own": "requests.py", "heads-own": "heads.py"}

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
open(f"{proj}/requests.py", "w").write(REQUESTS)
open(f"{proj}/heads.py", "w").write(HEADS)
open(f"{proj}/spin.py", "w").write(SPIN)
open(f"{proj}/probe.py", "w").write(PROBE)
modes = sys.argv[5].split(",") if len(sys.argv) > 5 else list(MODES)
exe = sys.argv[6] if len(sys.argv) > 6 else "efr-sandbox"
rpc, call = Client(), Client()
# Warm-up (the first status runs the probe, the first launches fill the page cache).
rpc.send("sandbox.status", None)
rpc.recv()
for _ in range(3):
    launch(call, "python3 probe.py")
res = {k: {"rpc": [], "call": []} for k in ["quiet"] + modes}
for r in range(rounds):
    for mode in ["quiet"] + modes:
        flooder = None
        if mode != "quiet":
            fc = Client()
            secs = 4 + samples * 0.8  # outlasts the samples below
            if mode == "spin4":
                line = SPIN4.replace("SECS", str(secs))
            elif mode in OWN_MODES:
                line = OWN.replace("EXE", exe).replace("SCRIPT", OWN_MODES[mode])
                line = line.replace("SECS", str(secs))
            else:
                line = f"python3 {MODES[mode]} {secs}"
            fc.send("sandbox.launch", {"line": line, "cwd": proj, "projects": [proj]})
            flooder = threading.Thread(target=fc.until_end)
            flooder.start()
            time.sleep(3)  # the flood under way
        # The RPC is asked every 20 ms while the calls run (hundreds of samples, so its p99
        # is not one unlucky sample), the calls one after the other.
        calls_done = threading.Event()

        def ping():
            while not calls_done.is_set():
                res[mode]["rpc"].append(
                    timed(lambda: (rpc.send("sandbox.status", None), rpc.recv())))
                time.sleep(0.02)
        pinger = threading.Thread(target=ping)
        pinger.start()
        for _ in range(samples):
            res[mode]["call"].append(timed(lambda: launch(call, "python3 probe.py")))
        calls_done.set()
        pinger.join()
        if flooder:
            flooder.join()
print("| what | neighbour | quiet p50 / p99 | with it p50 / p99 | ratio p50 | ratio p99 |")
print("|---|---|---:|---:|---:|---:|")
for what, name in (("rpc", "RPC `sandbox.status`"), ("call", "well-behaved call")):
    q = res["quiet"][what]
    for mode in modes:
        f = res[mode][what]
        a50, b50, a99, b99 = pct(q, 50), pct(f, 50), pct(q, 99), pct(f, 99)
        print(f"| {name} | {mode} | {a50:.1f} / {a99:.1f} | {b50:.1f} / {b99:.1f} "
              f"| {b50 / a50:.2f} | {b99 / a99:.2f} |")
