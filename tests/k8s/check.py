#!/usr/bin/env python3
"""test_k8s: the manifests of deploy/k8s, offline (no cluster).

    check.py KUBECTL VENV SOURCE_DIR

For each variant (deploy/k8s: CPU, deploy/k8s/gpu: NVIDIA) it renders
`KUBECTL kustomize`, validates the result with `VENV/bin/kubernetes-validate
--strict` (schemas of the Kubernetes API, unknown fields refused), then
checks what a schema cannot: probes on /v1/health at the container's port,
resource requests, a termination grace longer than the preStop pause plus
the drain timeout, Service and autoscaler pointing at their own
Deployment (and not at the other variant's pods), the GPU variant asking
for nvidia.com/gpu, the user and cache directory of the Dockerfile.

Fails, never skips: no kubectl (Debian package kubernetes-client) or no
venv (the build makes it from tests/k8s/requirements.txt; its log is
VENV.log) are failures that say so. KUBECTL=path in the environment
overrides the kubectl CMake found.
"""
import os
import re
import subprocess
import sys
import tempfile


def fail(msg):
    print(f"test_k8s: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def need(cond, msg):
    if not cond:
        fail(msg)


def main():
    if len(sys.argv) != 4:
        fail("usage: check.py KUBECTL VENV SOURCE_DIR")
    kubectl, venv, src = sys.argv[1:4]
    kubectl = os.environ.get("KUBECTL") or kubectl
    validate = os.path.join(venv, "bin", "kubernetes-validate")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(validate) or \
            not os.path.exists(os.path.join(venv, ".raybox-stamp")):
        log = venv + ".log"
        why = open(log).read()[-2000:] if os.path.exists(log) else \
            "(no log: was the build run?)"
        fail(f"{validate} is missing: the build could not make the venv "
             f"with tests/k8s/requirements.txt (python3-venv and PyPI are "
             f"needed; `make build` retries). Its log, {log}:\n{why}")
    if not kubectl or not os.access(kubectl, os.X_OK):
        fail(f"no kubectl ({kubectl or 'not found by CMake'}): install the "
             f"Debian package kubernetes-client (make deps does)")
    if os.environ.get("RAYBOX_K8S_IN_VENV") != "1":
        # PyYAML comes with kubernetes-validate: the rest runs in the venv.
        os.environ["RAYBOX_K8S_IN_VENV"] = "1"
        os.environ["KUBECTL"] = kubectl
        os.execv(py, [py] + sys.argv)
    import yaml

    dockerfile = open(os.path.join(src, "Dockerfile")).read()
    m = re.search(r"useradd[^\n]*--uid (\d+)", dockerfile)
    need(m, "Dockerfile: no useradd --uid")
    uid = int(m.group(1))
    m = re.search(r"RAYBOX_CACHE_DIR=(\S+)", dockerfile)
    need(m, "Dockerfile: no RAYBOX_CACHE_DIR")
    cache_dir = m.group(1)

    pods = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant, rel in (("cpu", "deploy/k8s"), ("gpu", "deploy/k8s/gpu")):
            d = os.path.join(src, rel)
            out = os.path.join(tmp, variant + ".yaml")
            r = subprocess.run([kubectl, "kustomize", d], capture_output=True,
                               text=True)
            need(r.returncode == 0,
                 f"{kubectl} kustomize {rel}: exit {r.returncode}: {r.stderr}")
            rendered = r.stdout
            open(out, "w").write(rendered)
            r = subprocess.run([validate, "--strict", out],
                               capture_output=True, text=True)
            need(r.returncode == 0, f"kubernetes-validate --strict on "
                 f"{rel}: exit {r.returncode}:\n{r.stdout}{r.stderr}")
            docs = [x for x in yaml.safe_load_all(rendered) if x]
            pods[variant] = check_variant(variant, rel, docs, uid, cache_dir)
            print(f"test_k8s: {rel}: kustomize, kubernetes-validate --strict "
                  f"and the checks passed ({len(docs)} objects)")
        check_batch_job(src, tmp, validate, yaml, uid, cache_dir)
    # Each variant's selectors see only its own pods.
    for a, b in (("cpu", "gpu"), ("gpu", "cpu")):
        for kind, sel in pods[a]["selectors"].items():
            need(not selects(sel, pods[b]["labels"]),
                 f"the {a} {kind} selector {sel} also selects the {b} pods")
    print("test_k8s: passed")


def check_batch_job(src, tmp, validate, yaml, uid, cache_dir):
    """deploy/batch/visibility-job.yaml: an Indexed Job whose pods run
    raybox visibility, shard JOB_COMPLETION_INDEX of as many as there are
    completions."""
    rel = "deploy/batch/visibility-job.yaml"
    path = os.path.join(src, rel)
    r = subprocess.run([validate, "--strict", path], capture_output=True,
                       text=True)
    need(r.returncode == 0, f"kubernetes-validate --strict on {rel}: exit "
         f"{r.returncode}:\n{r.stdout}{r.stderr}")
    job = yaml.safe_load(open(path))
    spec = job["spec"]
    need(spec.get("completionMode") == "Indexed",
         f"{rel}: completionMode {spec.get('completionMode')}, not Indexed")
    n = spec["completions"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    cmd = " ".join(c.get("command", []) + c.get("args", []))
    m = re.search(r"--shard\s+\"?\$\{?JOB_COMPLETION_INDEX\}?/(\d+)", cmd)
    need(m, f"{rel}: the command does not pass --shard "
         f"$JOB_COMPLETION_INDEX/N: {cmd}")
    need(int(m.group(1)) == n, f"{rel}: --shard .../{m.group(1)} but "
         f"{n} completions")
    need("raybox visibility" in cmd, f"{rel}: not raybox visibility: {cmd}")
    need(spec.get("parallelism", 1) <= n, f"{rel}: parallelism > completions")
    sc = pod.get("securityContext", {})
    need(sc.get("runAsNonRoot") is True and sc.get("runAsUser") == uid,
         f"{rel}: runAsNonRoot and runAsUser {uid} expected, got {sc}")
    mounts = [v["mountPath"] for v in c.get("volumeMounts", [])]
    need(any(cache_dir.startswith(m.rstrip("/") + "/") or cache_dir == m
             for m in mounts), f"{rel}: no writable volume holds {cache_dir}")
    out = re.search(r"-o\s+(\S+)", cmd)
    need(out and any(out.group(1).startswith(m.rstrip("/") + "/")
                     for m in mounts),
         f"{rel}: the output is on no mounted volume")
    print(f"test_k8s: {rel}: kubernetes-validate --strict and the checks "
          f"passed ({n} shards)")


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def check_variant(variant, rel, docs, uid, cache_dir):
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    for kind in ("Deployment", "Service", "HorizontalPodAutoscaler",
                 "PodDisruptionBudget"):
        need(len(by_kind.get(kind, [])) == 1,
             f"{rel}: {len(by_kind.get(kind, []))} {kind} objects, not 1")
    dep = by_kind["Deployment"][0]
    svc = by_kind["Service"][0]
    hpa = by_kind["HorizontalPodAutoscaler"][0]
    pdb = by_kind["PodDisruptionBudget"][0]
    name = dep["metadata"]["name"]
    pod = dep["spec"]["template"]
    spec = pod["spec"]
    labels = pod["metadata"]["labels"]
    where = f"{rel}: Deployment {name}"
    need(len(spec["containers"]) == 1, f"{where}: not one container")
    c = spec["containers"][0]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    need("http" in ports, f"{where}: no container port named http")
    need(str(ports["http"]) == env.get("RAYBOX_PORT"),
         f"{where}: RAYBOX_PORT {env.get('RAYBOX_PORT')} is not the "
         f"container port {ports['http']} (the image's HEALTHCHECK and "
         f"the probes read it)")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        need(p and "httpGet" in p, f"{where}: no {probe} with httpGet")
        g = p["httpGet"]
        need(g.get("path") == "/v1/health", f"{where}: {probe} path "
             f"{g.get('path')}, not /v1/health")
        need(g.get("port") in ("http", ports["http"]),
             f"{where}: {probe} port {g.get('port')}")
    req = c.get("resources", {}).get("requests", {})
    need("cpu" in req and "memory" in req,
         f"{where}: resources.requests needs cpu (the autoscaler's base) "
         f"and memory")
    need("memory" in c["resources"].get("limits", {}),
         f"{where}: no memory limit")
    drain = int(env.get("RAYBOX_DRAIN_TIMEOUT", "20"))
    pause = 0
    pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {})
    cmd = pre.get("command", [])
    if len(cmd) == 2 and cmd[0] == "sleep":
        pause = int(cmd[1])
    grace = spec.get("terminationGracePeriodSeconds", 30)
    need(grace > pause + drain, f"{where}: terminationGracePeriodSeconds "
         f"{grace} is not longer than the preStop pause {pause} s plus "
         f"RAYBOX_DRAIN_TIMEOUT {drain} s")
    sc = spec.get("securityContext", {})
    need(sc.get("runAsNonRoot") is True and sc.get("runAsUser") == uid,
         f"{where}: runAsNonRoot and runAsUser {uid} (the Dockerfile's "
         f"user) expected, got {sc}")
    mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
    need(any(cache_dir == m or cache_dir.startswith(m.rstrip("/") + "/")
             for m in mounts),
         f"{where}: no writable volume holds RAYBOX_CACHE_DIR {cache_dir} "
         f"(the root filesystem is read-only)")
    if env.get("RAYBOX_AUTH_TOKEN_FILE"):
        need(any(env["RAYBOX_AUTH_TOKEN_FILE"].startswith(m + "/")
                 for m in mounts),
             f"{where}: RAYBOX_AUTH_TOKEN_FILE is in no mounted volume")
    else:
        need("--insecure" in c.get("args", []),
             f"{where}: neither tokens nor --insecure")

    sel = svc["spec"]["selector"]
    need(selects(sel, labels), f"{rel}: Service selector {sel} does not "
         f"select the pods {labels}")
    target = svc["spec"]["ports"][0]["targetPort"]
    need(target in ("http", ports["http"]), f"{rel}: Service targetPort "
         f"{target}")
    dsel = dep["spec"]["selector"]["matchLabels"]
    need(selects(dsel, labels), f"{where}: selector {dsel} misses its pods")
    ref = hpa["spec"]["scaleTargetRef"]
    need(ref["kind"] == "Deployment" and ref["name"] == name,
         f"{rel}: the autoscaler scales {ref}, not Deployment {name}")
    need(hpa["spec"]["minReplicas"] >= 1 and
         hpa["spec"]["maxReplicas"] >= hpa["spec"]["minReplicas"],
         f"{rel}: autoscaler replicas")
    psel = pdb["spec"]["selector"]["matchLabels"]
    need(selects(psel, labels), f"{rel}: PodDisruptionBudget misses pods")

    image = c["image"]
    limits = c["resources"].get("limits", {})
    if variant == "gpu":
        need(image.endswith(":nvidia"), f"{where}: image {image}, not the "
             f"nvidia target")
        need(str(limits.get("nvidia.com/gpu")) == "1",
             f"{where}: limits nvidia.com/gpu {limits.get('nvidia.com/gpu')}")
        need(env.get("RAYBOX_BACKEND") == "opencl",
             f"{where}: RAYBOX_BACKEND {env.get('RAYBOX_BACKEND')}")
    else:
        need(image.endswith(":cpu"), f"{where}: image {image}, not cpu")
        need("nvidia.com/gpu" not in limits, f"{where}: asks for a GPU")
    return {"labels": labels,
            "selectors": {"Service": sel, "Deployment": dsel,
                          "PodDisruptionBudget": psel}}


if __name__ == "__main__":
    main()
