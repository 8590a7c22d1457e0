"""The servers come from `cargo run --release -p efr-proxy --example bench_broker`; mitmproxy
(regular mode, upstream verified with the test CA) from a venv. One curl per measurement:
a 200 MB download (throughput), then 1,000 requests for a 2-byte body on one HTTP/1.1
keep-alive connection (p50 of curl's per-transfer time after the first, minus the same
without any proxy: the latency each proxy adds)."""

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("MITM_VENV", "/var/tmp/efr-bench-mitmproxy")
SIZE = 200 << 20
SMALL = 1000
ROUNDS = 3
PH = "ghp_benchPLACEHOLDERbenchPLACEHOLD76543"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def mitmdump():
    exe = os.path.join(VENV, "bin", "mitmdump")
    if not os.path.exists(exe):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([os.path.join(VENV, "bin", "pip"), "install", "-q", "mitmproxy"], check=True)
    return exe


def curl(proxy, cacert, url, *extra):
    cmd = ["curl", "-sS", "--http1.1", "--noproxy", "", "--cacert", cacert,
           "-H", f"Authorization: Bearer {PH}"]
    if proxy:
        cmd += ["--proxy", f"http://127.0.0.1:{proxy}"]
    return subprocess.run(cmd + list(extra) + [url], check=True, capture_output=True, text=True).stdout


def download(proxy, cacert, port):
    out = curl(proxy, cacert, f"https://localhost:{port}/big/{SIZE}", "-o", "/dev/null",
               "-w", "%{size_download} %{time_total}")
    n, t = out.split()
    assert int(n) == SIZE, out
    return SIZE / float(t)


def small(proxy, cacert, port, tmp):
    cfg = os.path.join(tmp, "small.curlrc")
    with open(cfg, "w") as f:
        for _ in range(SMALL):
            f.write(f'url = "https://localhost:{port}/small"\noutput = "/dev/null"\n')
    t0 = time.monotonic()
    out = curl(proxy, cacert, f"https://localhost:{port}/small", "-o", "/dev/null", "-K", cfg,
               "-w", "%{time_total} %{num_connects}\n")
    wall = time.monotonic() - t0
    rows = [l.split() for l in out.strip().splitlines()]
    assert len(rows) == SMALL + 1, len(rows)
    assert sum(int(c) for _, c in rows[1:]) == 0, "one keep-alive connection"
    return statistics.median(float(t) for t, _ in rows[1:]), wall


def main():
    tmp = tempfile.mkdtemp(prefix="efr-bench-broker-")
    env = dict(os.environ)
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "efr-proxy", "--example", "bench_broker"],
                   cwd=ROOT, check=True, env=env)
    target = env.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    srv = subprocess.Popen([os.path.join(target, "release", "examples", "bench_broker"), tmp],
                           stdout=subprocess.PIPE, text=True)
    info = json.loads(srv.stdout.readline())
    test_ca = os.path.join(tmp, "test-ca.pem")
    mport = free_port()
    conf = os.path.join(tmp, "mitm")
    mitm = subprocess.Popen([mitmdump(), "-q", "--mode", "regular", "--listen-host", "127.0.0.1",
                             "--listen-port", str(mport), "--set", f"confdir={conf}",
                             "--set", f"ssl_verify_upstream_trusted_ca={test_ca}"])
    mitm_ca = os.path.join(conf, "mitmproxy-ca-cert.pem")
    for _ in range(200):
        if os.path.exists(mitm_ca):
            try:
                socket.create_connection(("127.0.0.1", mport)).close()
                break
            except OSError:
                pass
        time.sleep(0.05)
    up = info["upstream"]
    ways = [("direct", None, test_ca), ("tunnel", info["tunnel"], test_ca),
            ("broker", info["broker"], info["broker_ca"]), ("mitmproxy", mport, mitm_ca)]
    res = {w: {"mbps": [], "p50": [], "wall": []} for w, _, _ in ways}
    try:
        for _ in range(ROUNDS):
            for w, proxy, ca in ways:
                res[w]["mbps"].append(download(proxy, ca, up) / 1e6)
                p50, wall = small(proxy, ca, up, tmp)
                res[w]["p50"].append(p50 * 1e3)
                res[w]["wall"].append(wall)
    finally:
        mitm.terminate()
        srv.terminate()
        mitm.wait()
        srv.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"{SIZE >> 20} MB download; {SMALL} requests on one keep-alive HTTP/1.1 connection "
          "(p50 of curl's time_total per transfer after the first; wall time of the whole curl run)")
    print(f"load average at the end: {' '.join(load)}; {ROUNDS} rounds, best of each")
    best = {w: (max(r["mbps"]), min(r["p50"]), min(r["wall"])) for w, r in res.items()}
    d_p50 = best["direct"][1]
    print(f"{'way':<10} {'200 MB MB/s':>12} {'x tunnel':>9} {'p50 ms':>8} {'added p50 ms':>13} "
          f"{'1,000 req s':>12} {'x tunnel':>9}")
    for w, (mbps, p50, wall) in best.items():
        print(f"{w:<10} {mbps:>12.0f} {mbps / best['tunnel'][0]:>9.2f} {p50:>8.3f} {p50 - d_p50:>13.3f} "
              f"{wall:>12.3f} {wall / best['tunnel'][2]:>9.2f}")
    b, m = best["broker"], best["mitmproxy"]
    print(f"broker / mitmproxy throughput: {b[0] / m[0]:.2f}x; "
          f"added p50 broker {b[1] - d_p50:.3f} ms vs mitmproxy {m[1] - d_p50:.3f} ms")


if __name__ == "__main__":
    main()
