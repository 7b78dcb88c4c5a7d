#!/usr/bin/env python3
# hostile.py - rayboxd under hostile load, on loopback only, bounded in
# count and time: a burst of 2x the connection limit (how many are refused,
# health during and after), 2x-limit slowloris sockets dripping a header
# byte every 0.5 s (when health answers again), and the longest query with
# --max-query-ms 2000 (1M rays x 60K identical boxes: refused up front by
# the estimate, 413, or stopped at the limit, 503), and the server's
# RSS under 16 clients that never read a 4M-ray answer, with and without
# --max-memory 512M, and its RSS after three 1M-box scenes are stored and
# after it has been idle. One line a figure.
#   scripts/hostile.py build/bin/rayboxd [burst|slowloris|query|memory|scenes ...]
import os, socket, subprocess, sys, time, json, threading, urllib.request
BIN = sys.argv[1]
WANT = set(sys.argv[2:]) or {"burst", "slowloris", "query", "memory",
                             "scenes"}
def start(args):
    p = subprocess.Popen([BIN, "--port", "0", "--backend", "cpu", "--quiet"] + args,
                         stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    port = json.loads(line)["port"]
    return p, port
def health(port, timeout=5):
    t = time.time()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    data = b""
    try:
        while True:
            d = s.recv(4096)
            if not d: break
            data += d
    except Exception: pass
    s.close()
    code = data[9:12].decode() if data.startswith(b"HTTP/1.1 ") else "none"
    return code, (time.time() - t) * 1000
LIMIT = 50
def burst():
    p, port = start(["--max-connections", str(LIMIT)])
    socks = []; refused = 0; t0 = time.time()
    for i in range(2 * LIMIT):
        s = socket.create_connection(("127.0.0.1", port)); socks.append(s)
    for s in socks[LIMIT:]:
        s.settimeout(2)
        try:
            d = s.recv(64)
            if d.startswith(b"HTTP/1.1 503"): refused += 1
        except Exception: pass
    lat = [health(port)[1] for _ in range(5)]
    codes = [health(port)[0] for _ in range(3)]
    for s in socks: s.close()
    time.sleep(0.3)
    after = health(port)
    print(f"burst: {2*LIMIT} sockets at --max-connections {LIMIT}: {refused} refused with 503; health during burst {codes} in median {sorted(lat)[2]:.1f} ms; after closing: {after[0]} in {after[1]:.1f} ms")
    p.terminate(); p.wait()
def slowloris():
    global stop
    p, port = start(["--max-connections", str(LIMIT), "--header-timeout", "2"])
    stop = False
    global drip
    drip = []
    for i in range(2 * LIMIT):
        try:
            drip.append(socket.create_connection(("127.0.0.1", port)))
        except Exception: pass
    def dripper():
        msg = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n"
        k = 0
        while not stop:
            for s in drip:
                try: s.send(msg[k % len(msg):k % len(msg) + 1])
                except Exception: pass
            k += 1; time.sleep(0.5)
    th = threading.Thread(target=dripper); th.start()
    t0 = time.time(); first_ok = None; samples = []
    while time.time() - t0 < 6:
        c, ms = health(port, timeout=2); samples.append((round(time.time()-t0,1), c, round(ms,1)))
        if c == "200" and first_ok is None: first_ok = time.time() - t0
        time.sleep(0.25)
    stop = True; th.join()
    for s in drip: s.close()
    print(f"slowloris: {2*LIMIT} dripping sockets at --max-connections {LIMIT} --header-timeout 2: health 200 again {first_ok:.1f} s after they connected; samples (t s, code, ms): {samples[:3]} ... {samples[-3:]}")
    p.terminate(); p.wait()
def query():
    p, port = start(["--max-query-ms", "2000"])
    rays = ",".join(["[-10,0.5,0.5,1,0,0]"] * 1000000)
    boxes = ",".join(["[0,0,0,1,1,1]"] * 60000)
    body = ('{"mode":"count","rays":[%s],"boxes":[%s]}' % (rays, boxes)).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/intersect", data=body, headers={"Content-Type": "application/json"})
    t0 = time.time()
    try:
        urllib.request.urlopen(req, timeout=120); code = 200
    except urllib.error.HTTPError as e:
        code = e.code; detail = e.read().decode()[:200]
    took = time.time() - t0
    m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    stopped = [l for l in m.splitlines() if l.startswith(("raybox_queries_stopped_total", "raybox_queries_refused_estimate_total"))]
    # 413: refused up front by the estimate (parse + a trial); 503: stopped
    # at the limit (parse + 2 s)
    print(f"max-query-ms 2000: 1M rays x 60K identical boxes (count, {len(body)/1e6:.0f} MB JSON): {code} after {took:.2f} s; {detail if code != 200 else ''}; {stopped}")
    p.terminate(); p.wait()

def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0

def memory():
    """16 clients send a 4M-ray binary nearest query each and never read
    the answer; RSS once they are all in, and after they close."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import raybox_client as rc
    n = 4 * 1024 * 1024
    one = rc.encode_request([[-1, 0.5, 0.5, 1, 0, 0]], [[0, 0, 0, 1, 1, 1]])
    head, ray, box = one[:64], one[64:88], one[88:]
    head = head[:16] + n.to_bytes(8, "little") + head[24:]  # n_rays
    body = head + ray * n + box
    for label, args in (("default --max-memory", []),
                        ("--max-memory 512M", ["--max-memory", "512M"])):
        p, port = start(args)
        socks, codes = [], []
        def client():
            s = socket.create_connection(("127.0.0.1", port))
            socks.append(s)
            try:
                s.sendall(b"POST /v1/intersect HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Content-Type: application/x-raybox\r\n"
                          b"Accept: application/x-raybox\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body)
            except OSError:
                pass  # a 503 from the headers closes before the body is in
            try:
                codes.append(s.recv(12)[9:12].decode() or "closed")
            except OSError:
                codes.append("reset")
        th = [threading.Thread(target=client) for _ in range(16)]
        for t in th: t.start()
        for t in th: t.join(timeout=120)
        time.sleep(2)
        held = rss_mb(p.pid)
        hc, hms = health(port)
        for s in socks: s.close()
        time.sleep(2)
        after = rss_mb(p.pid)
        m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
        peak = [l for l in m.splitlines() if l.startswith("raybox_memory_peak_bytes")]
        print(f"memory, {label}: 16 clients that never read a 4M-ray answer "
              f"({len(body) / 1e6:.0f} MB bodies): answers {sorted(codes)}; "
              f"RSS {held:.0f} MB while they wait (health {hc} in {hms:.1f} ms), "
              f"{after:.0f} MB after they close; {peak}")
        p.terminate(); p.wait()

def scenes():
    """A 1M-box binary scene stored three times in a row, then deleted:
    RSS after the builds (each worker's context keeps its build's work
    arrays while scenes come less than a second apart), and after a
    second and a half without jobs (the workers have freed them)."""
    import random
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import raybox_client as rc
    rnd = random.Random(1)
    boxes = []
    for _ in range(1000000):
        x, y, z = rnd.random() * 100, rnd.random() * 100, rnd.random() * 100
        boxes.append((x, y, z, x + 0.5, y + 0.5, z + 0.5))
    body = rc.encode_scene(boxes)  # once: the stores time the server alone
    p, port = start([])
    url = f"http://127.0.0.1:{port}"
    base = rss_mb(p.pid)
    ids, took = [], []
    for _ in range(3):
        t0 = time.time()
        _, data = rc._post(url, "/v1/scenes", body, rc.MEDIA_TYPE,
                           "application/json")
        took.append(time.time() - t0)
        ids.append(json.loads(data)["id"])
    built = rss_mb(p.pid)
    time.sleep(1.5)
    idle = rss_mb(p.pid)
    for i in ids:
        req = urllib.request.Request(f"{url}/v1/scenes/{i}", method="DELETE")
        urllib.request.urlopen(req).read()
    time.sleep(1.5)
    gone = rss_mb(p.pid)
    print(f"scenes: three 1M-box scenes ({len(body) / 1e6:.0f} MB binary "
          f"bodies) stored in {', '.join(f'{t:.2f}' for t in took)} s; RSS "
          f"{base:.0f} MB at start, {built:.0f} MB after the builds, "
          f"{idle:.0f} MB after 1.5 s idle, {gone:.0f} MB after deleting "
          f"them")
    p.terminate(); p.wait()

for name in ("burst", "slowloris", "query", "memory", "scenes"):
    if name in WANT:
        globals()[name]()
