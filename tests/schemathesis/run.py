#!/usr/bin/env python3
"""test_schemathesis: Schemathesis against a live rayboxd and docs/openapi.yaml.

    run.py RAYBOXD SPEC VENV [schemathesis options...]

Starts RAYBOXD --port 0 on loopback (the port comes from its first log
line), runs VENV/bin/schemathesis on SPEC with every check, a bounded
number of examples per operation (RAYBOX_SCHEMATHESIS_EXAMPLES, 25) and a
fixed seed (RAYBOX_SCHEMATHESIS_SEED; "random" for a new one each run),
then stops the server with SIGTERM. Fails when the venv is missing (the
build could not make it: see VENV.log), when Schemathesis reports any
failure or error, or when rayboxd does not exit 0 (a sanitizer report
included).
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_RESULTS = 65536  # all mode stays small under ASan (hooks.py keeps to it)


def fail(msg):
    print("test_schemathesis: FAILED: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def main():
    if len(sys.argv) < 4:
        fail("usage: run.py RAYBOXD SPEC VENV [schemathesis options]")
    rayboxd, spec, venv = sys.argv[1:4]
    st = os.path.join(venv, "bin", "schemathesis")
    if not os.access(st, os.X_OK) or \
            not os.path.exists(os.path.join(venv, ".raybox-stamp")):
        log = venv + ".log"
        why = open(log).read()[-2000:] if os.path.exists(log) else \
            "(no log: was the build run?)"
        fail(f"{st} is missing: the build could not make the Python venv "
             f"with tests/schemathesis/requirements.txt (python3-venv and "
             f"PyPI are needed; `make build` retries). Its log, {log}:\n"
             f"{why}")
    examples = os.environ.get("RAYBOX_SCHEMATHESIS_EXAMPLES", "25")
    seed = os.environ.get("RAYBOX_SCHEMATHESIS_SEED", "20261201")

    server = subprocess.Popen(
        [rayboxd, "--bind", "127.0.0.1", "--port", "0", "--backend", "cpu",
         "--workers", "2", "--max-results", str(MAX_RESULTS),
         "--max-scenes", "100000", "--quiet"],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        errors="replace")
    line = server.stderr.readline()
    try:
        port = json.loads(line)["port"]
    except (ValueError, KeyError, TypeError):
        server.kill()
        fail(f"rayboxd's first log line names no port: {line!r}"
             f"{server.stderr.read()[-4000:]}")
    url = f"http://127.0.0.1:{port}"
    print(f"rayboxd on {url}", flush=True)

    env = dict(os.environ)
    env["SCHEMATHESIS_HOOKS"] = "hooks"
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    env["RAYBOX_URL"] = url
    env["RAYBOX_MAX_RESULTS"] = str(MAX_RESULTS)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
              "ALL_PROXY", "all_proxy"):
        env.pop(k, None)
    # The run must not depend on what earlier runs found (no database).
    cmd = [st, "run", os.path.abspath(spec), "--url", url,
           "--checks", "all", "--max-examples", examples, "--workers", "2",
           "--generation-database", "none", "--request-timeout", "60",
           "--no-color"]
    if seed != "random":
        cmd += ["--seed", seed]
    cmd += sys.argv[4:]
    print(" ".join(cmd), flush=True)
    t0 = time.monotonic()
    # Schemathesis keeps a cache of crashes in its working directory, which
    # a later run would replay: a fresh one each run, outside the sources.
    with tempfile.TemporaryDirectory(prefix="schemathesis-") as work:
        rc = subprocess.call(cmd, env=env, cwd=work)
    print(f"schemathesis exit status {rc} after {time.monotonic() - t0:.0f} s",
          flush=True)

    server.send_signal(signal.SIGTERM)
    try:
        tail = server.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        server.kill()
        tail = server.communicate()[1]
        fail("rayboxd did not stop within 60 s of SIGTERM")
    if server.returncode != 0:
        fail(f"rayboxd exited {server.returncode}:\n{tail[-6000:]}")
    if rc != 0:
        fail(f"schemathesis reported failures (exit status {rc}); rerun "
             f"with the seed above and the same number of examples")
    print("test_schemathesis: passed", flush=True)


if __name__ == "__main__":
    main()
