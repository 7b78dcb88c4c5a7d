#!/usr/bin/env python3
"""Kill-restart test of rayboxd --data-dir (stdlib only).

Clients create scenes (boxes and every other kind) and PATCH them as fast
as they can, sometimes deleting one; the server is SIGKILLed at a random
moment, sometimes a torn record is added to a log, and the server is
started again on the same directory. Then every scene must be at the
version its client was last told (or the one in flight at the kill), its
elements those of that version - checked by comparing `all` answers with
a scene made afresh from the client's own model - and every acknowledged
DELETE must have stayed deleted. Also: scenes keep their owner token
across a restart, and a corrupt snapshot stops the server with a message
naming the file.

  run.py RAYBOXD [--cycles N] [--clients N] [--seed S]
  run.py RAYBOXD --latency [--patches N]   PATCH latency with and without

Exit 0 when everything held; 1 with the first difference.
"""
import argparse
import atexit
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

MAX_CHUNKS = 6       # appends per scene stop after this many chunks
FAR = 1e30           # "infinite" tmax in JSON


def fail(msg):
    print(f"test_durable: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


RUNNING = set()  # servers to kill if the test ends early


@atexit.register
def _kill_running():
    for p in list(RUNNING):
        if p.poll() is None:
            p.kill()


class Server:
    """rayboxd on a free port; data_dir None: scenes in memory."""

    def __init__(self, exe, data_dir, extra=()):
        self.log = tempfile.TemporaryFile()
        disk = ("--data-dir", data_dir, "--data-merge-bytes", "4K") \
            if data_dir else ()
        self.p = subprocess.Popen(
            [exe, "--port", "0", "--backend", "cpu", "--workers", "2",
             "--quiet", *disk, *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        RUNNING.add(self.p)
        self.port = None
        deadline = time.time() + 30
        while time.time() < deadline and self.port is None:
            if self.p.poll() is not None:
                return
            self.log.seek(0)
            for line in self.log.read().decode(errors="replace").splitlines():
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if ev.get("msg") == "listening":
                    self.port = ev["port"]
            time.sleep(0.01)
        if self.port is None:
            fail("rayboxd did not say it was listening in 30 s")

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()
            fail("rayboxd did not exit within 20 s of SIGTERM")
        if rc != 0:
            fail(f"rayboxd exited {rc} after SIGTERM:\n{self.output()}")


def request(port, method, path, body=None, token=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        c.request(method, path, None if body is None else json.dumps(body),
                  headers)
        r = c.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if data else None)
    finally:
        c.close()


# ---------------------------------------------------------------------------
# The client's model of a scene: chunks (a creation or an append) of
# elements by kind; element ids run through the chunks in order, each
# chunk's kinds in the library's order. Element id i sits at x = 4 i, so
# that rays along +x meet every element.

KINDS = ["boxes", "obbs", "xboxes", "spheres", "planes"]


def element(kind, slot, rng):
    x = 4.0 * slot
    d = rng.randrange(1, 64) / 64.0
    if kind == "boxes":
        return [x, 0.0, 0.0, x + d + 0.5, 1.0, 1.0]
    if kind == "obbs":  # centre, half extents, quaternion about x
        return [x + 0.5, 0.5, 0.5, 0.5, 0.3 + d / 4, 0.3, 0.9, d, 0.0, 0.0]
    if kind == "xboxes":  # local box, then world = A local + t
        return [0.0, 0.0, 0.0, 1.0, 1.0, 1.0,
                1.0 + d, 0.0, 0.0, x, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    if kind == "spheres":
        return [x + 0.5, 0.5, 0.5, 0.2 + d / 4]
    return [-1.0, 0.0, 0.0, -(x + d)]  # planes: x >= x + d


class Model:
    def __init__(self, rng):
        self.chunks = [{k: [] for k in KINDS}]
        n = rng.randrange(3, 9)
        for slot in range(n):
            kind = rng.choice(["boxes"] * 3 + KINDS[1:])
            self.chunks[0][kind].append(None)
        self._place(rng)
        self.version = 1

    def ids(self):
        """(chunk, kind, index) of every id in order."""
        out = []
        for c, ch in enumerate(self.chunks):
            for k in KINDS:
                out += [(c, k, i) for i in range(len(ch[k]))]
        return out

    def _place(self, rng):
        for slot, (c, k, i) in enumerate(self.ids()):
            if self.chunks[c][k][i] is None:
                self.chunks[c][k][i] = element(k, slot, rng)

    def body(self, chunk):
        return {k: v for k, v in chunk.items() if v}

    def change(self, rng):
        """A PATCH body and the model after it (a copy)."""
        nxt = Model.__new__(Model)
        nxt.chunks = [{k: list(v) for k, v in ch.items()} for ch in self.chunks]
        nxt.version = self.version + 1
        ids = nxt.ids()
        body = {}
        if rng.random() < 0.7 or len(nxt.chunks) >= MAX_CHUNKS:
            sets = []
            for _ in range(rng.randrange(1, 4)):
                slot = rng.randrange(len(ids))
                c, k, i = ids[slot]
                e = element(k, slot, rng)
                nxt.chunks[c][k][i] = e
                sets.append([slot] + e)
            body["set"] = sets
        if rng.random() < 0.3 and len(nxt.chunks) < MAX_CHUNKS:
            ch = {k: [] for k in KINDS}
            for _ in range(rng.randrange(1, 3)):
                ch[rng.choice(KINDS[:4])].append(None)
            nxt.chunks.append(ch)
            nxt._place(rng)
            body["append"] = nxt.body(ch)
        return body, nxt


def fingerprint(port, sid, token=None):
    rays = [[-1.0, y, z, 1.0, 0.0, 0.0, 0.0, FAR]
            for y, z in ((0.5, 0.5), (0.1, 0.9), (0.8, 0.3), (0.45, 0.05))]
    st, ans = request(port, "POST", f"/v1/scenes/{sid}/intersect",
                      {"rays": rays, "mode": "all", "max_hits": 4096},
                      token=token)
    if st != 200:
        fail(f"intersect on scene {sid}: {st} {ans}")
    return ans["hits"]


def reference(port, model):
    """A scene made afresh from the model: the creation, then appends."""
    st, made = request(port, "POST", "/v1/scenes", model.body(model.chunks[0]))
    if st != 201:
        fail(f"reference scene: {st} {made}")
    for ch in model.chunks[1:]:
        st, ans = request(port, "PATCH", f"/v1/scenes/{made['id']}",
                          {"append": model.body(ch)})
        if st != 200:
            fail(f"reference append: {st} {ans}")
    return made["id"]


# ---------------------------------------------------------------------------
class Client(threading.Thread):
    """Owns its scenes: sid -> {model, pending (model or None),
    deleted (True, 'pending' or False)}."""

    def __init__(self, rng, scenes):
        super().__init__(daemon=True)
        self.rng = rng
        self.scenes = scenes
        self.port = None
        self.acks = 0

    def run(self):
        rng = self.rng
        while True:
            live = [s for s, v in self.scenes.items() if not v["deleted"]]
            try:
                # A few scenes a client (2 to 6): creations and deletions
                # both happen, and a cycle's checks stay bounded.
                if len(live) < 2 or (len(live) < 6 and rng.random() < 0.03):
                    m = Model(rng)
                    st, ans = request(self.port, "POST", "/v1/scenes",
                                      m.body(m.chunks[0]), timeout=10)
                    if st != 201:
                        fail(f"create: {st} {ans}")
                    self.scenes[ans["id"]] = {"model": m, "pending": None,
                                              "deleted": False}
                elif len(live) > 2 and rng.random() < 0.03:
                    sid = rng.choice(live)
                    self.scenes[sid]["deleted"] = "pending"
                    st, ans = request(self.port, "DELETE",
                                      f"/v1/scenes/{sid}", timeout=10)
                    if st != 204:
                        fail(f"delete {sid}: {st} {ans}")
                    self.scenes[sid]["deleted"] = True
                else:
                    sid = rng.choice(live)
                    sc = self.scenes[sid]
                    body, nxt = sc["model"].change(rng)
                    sc["pending"] = nxt
                    st, ans = request(self.port, "PATCH", f"/v1/scenes/{sid}",
                                      body, timeout=10)
                    if st != 200 or ans["version"] != nxt.version:
                        fail(f"PATCH {sid}: {st} {ans} (want version "
                             f"{nxt.version})")
                    sc["model"], sc["pending"] = nxt, None
                self.acks += 1
            except (OSError, http.client.HTTPException):
                return  # the server is gone: what was in flight stays pending


def tear_a_log(data_dir, rng):
    logs = [f for f in os.listdir(data_dir) if f.endswith(".log")]
    if not logs:
        return None
    name = rng.choice(logs)
    with open(os.path.join(data_dir, name), "ab") as f:
        # what a write cut short leaves: the magic, a length, a few bytes
        f.write(b"RBXP" + bytes(rng.randrange(256) for _ in
                                range(rng.randrange(0, 40))))
    return name


def verify(port, clients, cycle):
    known = set()
    for cl in clients:
        for sid, sc in cl.scenes.items():
            known.add(sid)
            st, ans = request(port, "GET", f"/v1/scenes/{sid}")
            if sc["deleted"] is True:
                if st != 404:
                    fail(f"cycle {cycle}: scene {sid} was deleted (204) but "
                         f"is back: {st}")
                continue
            if st == 404 and sc["deleted"] == "pending":
                sc["deleted"] = True
                continue
            if st != 200:
                fail(f"cycle {cycle}: acknowledged scene {sid} lost: {st} "
                     f"{ans}")
            sc["deleted"] = False
            v, m, p = ans["version"], sc["model"], sc["pending"]
            if p is not None and v == p.version:
                m = sc["model"] = p
            elif v != m.version:
                fail(f"cycle {cycle}: scene {sid} is at version {v}; its "
                     f"client was told {m.version}"
                     + (f" (and had {p.version} in flight)" if p else ""))
            sc["pending"] = None
            ref = reference(port, m)
            got, want = fingerprint(port, sid), fingerprint(port, ref)
            request(port, "DELETE", f"/v1/scenes/{ref}")
            if got != want:
                fail(f"cycle {cycle}: scene {sid} version {v} answers\n"
                     f"  {got}\nbut a scene made from its elements answers\n"
                     f"  {want}")
    # A creation in flight at the kill may have been stored: its client
    # never learnt the id. Nothing else may be there.
    st, ans = request(port, "GET", "/v1/scenes")
    unknown = [s["id"] for s in ans["scenes"] if s["id"] not in known]
    if len(unknown) > len(clients):
        fail(f"cycle {cycle}: {len(unknown)} scenes nobody made: {unknown}")
    for sid in unknown:
        request(port, "DELETE", f"/v1/scenes/{sid}")


def kill_cycles(exe, args):
    rng = random.Random(args.seed)
    d = tempfile.mkdtemp(prefix="raybox-durable-")
    try:
        clients = [Client(random.Random(rng.random()), {})
                   for _ in range(args.clients)]
        acks = torn = 0
        for cycle in range(args.cycles):
            srv = Server(exe, d)
            if srv.port is None:
                fail(f"cycle {cycle}: rayboxd did not start:\n{srv.output()}")
            verify(srv.port, clients, cycle)
            threads = []
            for cl in clients:
                t = Client(cl.rng, cl.scenes)
                t.port = srv.port
                threads.append(t)
                t.start()
            time.sleep(rng.uniform(0.05, 0.6))
            srv.kill()
            for t in threads:
                t.join(timeout=30)
                acks += t.acks
            clients = threads
            if rng.random() < 0.3 and tear_a_log(d, rng):
                torn += 1
            if (cycle + 1) % 25 == 0:
                print(f"test_durable: {cycle + 1}/{args.cycles} cycles, "
                      f"{acks} acknowledged changes", file=sys.stderr,
                      flush=True)
        srv = Server(exe, d)
        verify(srv.port, clients, args.cycles)
        srv.stop()
        n = sum(1 for cl in clients for s in cl.scenes.values()
                if s["deleted"] is not True)
        print(f"test_durable: {args.cycles} SIGKILL cycles, {acks} "
              f"acknowledged changes, {torn} torn log tails, {n} scenes: "
              f"0 acknowledged changes lost")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def owners_and_corruption(exe):
    d = tempfile.mkdtemp(prefix="raybox-durable-")
    try:
        tokens = os.path.join(d, "tokens")
        with open(tokens, "w") as f:
            f.write("token-of-alice\ntoken-of-bob\n")
        data = os.path.join(d, "data")
        extra = ("--auth-token-file", tokens)
        srv = Server(exe, data, extra)
        body = {"boxes": [[0, 0, 0, 1, 1, 1]]}
        st, a = request(srv.port, "POST", "/v1/scenes", body,
                        token="token-of-alice")
        st2, b = request(srv.port, "POST", "/v1/scenes", body,
                         token="token-of-bob")
        if st != 201 or st2 != 201:
            fail(f"create with tokens: {st} {st2}")
        srv.kill()
        # Bob's token gone, a new token first: owners follow the tokens,
        # not their places in the file.
        with open(tokens, "w") as f:
            f.write("token-of-carol\ntoken-of-alice\n")
        srv = Server(exe, data, extra)
        for tok, sid, want in (("token-of-alice", a["id"], 200),
                               ("token-of-carol", a["id"], 404),
                               ("token-of-carol", b["id"], 404),
                               ("token-of-alice", b["id"], 404)):
            st, _ = request(srv.port, "GET", f"/v1/scenes/{sid}", token=tok)
            if st != want:
                fail(f"after restart, {tok} GET scene {sid}: {st}, want "
                     f"{want}")
        srv.stop()
        # A snapshot that is not whole stops the start, naming the file.
        snap = os.path.join(data, a["id"] + ".scene")
        with open(snap, "r+b") as f:
            f.seek(20)
            f.write(b"\xff")
        srv = Server(exe, data, extra)
        try:
            rc = srv.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            srv.kill()
            fail("rayboxd started on a corrupt snapshot")
        if rc == 0 or a["id"] + ".scene" not in srv.output():
            fail(f"corrupt snapshot: exit {rc}, output:\n{srv.output()}")
        print("test_durable: owners kept across a restart; a corrupt "
              "snapshot refused by name")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def latency(exe, args):
    boxes = [[4.0 * i, 0, 0, 4.0 * i + 1, 1, 1] for i in range(10000)]
    for label, with_dir in (("memory", False), ("--data-dir", True)):
        d = tempfile.mkdtemp(prefix="raybox-durable-",
                             dir=args.dir or None)
        try:
            srv = Server(exe, d if with_dir else None)
            st, made = request(srv.port, "POST", "/v1/scenes",
                               {"boxes": boxes})
            c = http.client.HTTPConnection("127.0.0.1", srv.port)
            times = []
            for k in range(args.patches):
                body = json.dumps({"set": [[k % 10000, 4.0 * (k % 10000), 0,
                                            0, 4.0 * (k % 10000) + 1.5, 1,
                                            1]]})
                t0 = time.perf_counter()
                c.request("PATCH", f"/v1/scenes/{made['id']}", body,
                          {"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                times.append(time.perf_counter() - t0)
                if r.status != 200:
                    fail(f"PATCH: {r.status}")
            times.sort()
            med = times[len(times) // 2] * 1e3
            p99 = times[int(len(times) * 0.99)] * 1e3
            print(f"PATCH of 1 box in a 10,000-box scene, {label}: median "
                  f"{med:.3f} ms, p99 {p99:.3f} ms ({args.patches} PATCHes)")
            srv.stop()
        finally:
            shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rayboxd")
    ap.add_argument("--cycles", type=int, default=15)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--patches", type=int, default=1000)
    ap.add_argument("--dir", help="--latency: where the data dir goes")
    args = ap.parse_args()
    if args.latency:
        latency(args.rayboxd, args)
        return
    print(f"test_durable: seed {args.seed}")
    kill_cycles(args.rayboxd, args)
    owners_and_corruption(args.rayboxd)


if __name__ == "__main__":
    main()
