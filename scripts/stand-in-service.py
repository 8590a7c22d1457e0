"""A stand-in for `efr-sandbox serve` for the benchmarks: it answers `hello` and
`sandbox.run` at once, with a `started` item and an `end` of status 0, and runs nothing.
`efr-sandbox run` through it costs what the CLI costs on its own (its exec and start, the
connection, the request with its fds, its exit): the floor under the `cli` row of
scripts/bench-launch.sh, whatever the service does. Not a service: no checks, one
connection at a time, the fds it is sent closed unread.
Usage: python3 stand-in-service.py SOCKET   (runs until killed)"""
import array, json, os, socket, struct, sys

path = sys.argv[1]
HELLO = {
    "protocol": 1,
    "server": "efr-sandbox",
    "version": "stand-in",
    "methods": ["hello", "sandbox.run"],
}


def frame(v):
    b = json.dumps(v).encode()
    return struct.pack(">I", len(b)) + b


def answers(req):
    """The frames that answer one request."""
    rid = req.get("id")
    if req.get("method") == "hello":
        return frame({"id": rid, "end": HELLO})
    if req.get("method") == "sandbox.run":
        started = {
            "kind": "started",
            "launcher_pid": os.getpid(),
            "pid": 1,
            "backend": "native",
            "seccomp": True,
            "cgroup": None,
        }
        end = {"sandbox_summary": {}, "code": 0, "exit_status": 0, "duration_ms": 0}
        return frame({"id": rid, "item": started}) + frame({"id": rid, "end": end})
    err = {"code": "invalid", "message": "the stand-in answers hello and sandbox.run only"}
    return frame({"id": rid, "error": err})


def serve(c):
    buf = b""
    while True:
        data, anc, _, _ = c.recvmsg(65536, socket.CMSG_SPACE(16 * 4))
        for level, kind, d in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(d[: len(d) - len(d) % fds.itemsize])
                for fd in fds:
                    os.close(fd)
        if not data:
            return
        buf += data
        while len(buf) >= 4:
            (n,) = struct.unpack(">I", buf[:4])
            if len(buf) < 4 + n:
                break
            req, buf = json.loads(buf[4 : 4 + n]), buf[4 + n :]
            c.sendall(answers(req))
            if req.get("method") == "sandbox.run":
                return


try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(64)
while True:
    c, _ = s.accept()
    with c:
        try:
            serve(c)
        except (OSError, ValueError):
            pass
