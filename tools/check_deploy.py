#!/usr/bin/env python3
"""Consistency checks of deploy/ that promtool and kubernetes-validate do not make (run by tools/check-deploy).

Without arguments: the Grafana dashboard is valid JSON with unique panel ids and a query in every panel; every
alert has a runbook anchor that docs/operations-deploy.md defines; every Deployment's terminationGracePeriodSeconds
is above the ConfigMap's worker.drainSeconds; every Deployment's probes use /livez and /readyz.

With --ldd BINARY: the binary's shared libraries (ldd) map, through dpkg, to exactly the runtime packages plus the
base packages; a library no package provides fails the check. With --toolchain-lib DIR, the Swift runtime libraries
under DIR (the standard library, Foundation, Dispatch) are set aside: the container's release build links them
statically (--static-swift-stdlib), so an ordinary debug or release binary answers the same question, which C
libraries Volley needs at run time, without a static build of its own.
"""
import argparse
import json
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
problems = []


def check_dashboard():
    path = os.path.join(ROOT, "deploy/grafana/volley.json")
    with open(path) as f:
        dash = json.load(f)
    ids = [p["id"] for p in dash["panels"]]
    if len(ids) != len(set(ids)):
        problems.append(f"{path}: duplicate panel ids")
    for p in dash["panels"]:
        targets = p.get("targets") or []
        if p["type"] != "row" and (not targets or not all(t.get("expr") for t in targets)):
            problems.append(f"{path}: panel '{p['title']}' has no query")


def anchors(markdown):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in markdown.splitlines():
        m = re.match(r"^#+\s+(.*)$", line)
        if m:
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            out.add(text.replace(" ", "-"))
    return out


def check_alerts():
    with open(os.path.join(ROOT, "deploy/prometheus/volley-alerts.yaml")) as f:
        rules = yaml.safe_load(f)
    with open(os.path.join(ROOT, "docs/operations-deploy.md")) as f:
        defined = anchors(f.read())
    for group in rules["groups"]:
        for rule in group["rules"]:
            runbook = rule.get("annotations", {}).get("runbook", "")
            doc, _, anchor = runbook.partition("#")
            if doc != "docs/operations-deploy.md" or anchor not in defined:
                problems.append(f"alert {rule['alert']}: runbook '{runbook}' is not a heading of {doc or 'a doc'}")


def check_k8s():
    docs = []
    k8s = os.path.join(ROOT, "deploy/k8s")
    for name in sorted(os.listdir(k8s)):
        with open(os.path.join(k8s, name)) as f:
            docs += [(name, d) for d in yaml.safe_load_all(f) if d]
    config = next(d for _, d in docs if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == "volley-config")
    volley = yaml.safe_load(config["data"]["volley.yaml"])
    drain = float(volley.get("worker", {}).get("drainSeconds", 20))
    for name, d in docs:
        if d.get("kind") != "Deployment":
            continue
        spec = d["spec"]["template"]["spec"]
        grace = spec.get("terminationGracePeriodSeconds", 30)
        if grace <= drain:
            problems.append(f"{name}: terminationGracePeriodSeconds {grace} is not above worker.drainSeconds {drain}")
        for c in spec["containers"]:
            for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
                got = c.get(probe, {}).get("httpGet", {}).get("path")
                if got != path:
                    problems.append(f"{name}: container {c['name']} {probe} is on {got}, not {path}")
            if "cpu" not in c.get("resources", {}).get("requests", {}):
                problems.append(f"{name}: container {c['name']} requests no CPU")


def package_of(path):
    """The Debian package that owns a library file, trying the usr-merged spellings of its path."""
    real = os.path.realpath(path)
    candidates = {path, real}
    for p in list(candidates):
        if p.startswith("/usr/"):
            candidates.add(p[4:])
        else:
            candidates.add("/usr" + p)
    for p in sorted(candidates):
        r = subprocess.run(["dpkg-query", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def check_ldd(binary, runtime, base, toolchain_lib=None):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    allowed = set(runtime) | set(base)
    used = set()
    toolchain = os.path.realpath(toolchain_lib) + os.sep if toolchain_lib else None
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if not m:
            continue  # linux-vdso and the dynamic loader itself (libc6)
        lib, path = m.groups()
        if path == "not":
            problems.append(f"{binary}: {lib} is not found")
            continue
        if toolchain and os.path.realpath(path).startswith(toolchain):
            continue  # linked statically into the container's binary
        pkg = package_of(path)
        if pkg is None:
            problems.append(f"{binary}: {lib} ({path}) comes from no Debian package (a toolchain library?)")
        elif pkg.split(":")[0] not in allowed:
            problems.append(f"{binary}: {lib} comes from {pkg}, which the runtime image does not install")
        else:
            used.add(pkg.split(":")[0])
    for pkg in runtime:
        if pkg != "ca-certificates" and pkg not in used:
            problems.append(f"runtime package {pkg} provides no library the binary uses: drop it from the image")
    print(f"check-deploy: {binary} uses {' '.join(sorted(used))}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ldd")
    parser.add_argument("--runtime-packages", default="")
    parser.add_argument("--base-packages", default="")
    parser.add_argument("--toolchain-lib")
    args = parser.parse_args()
    if args.ldd:
        check_ldd(args.ldd, args.runtime_packages.split(), args.base_packages.split(), args.toolchain_lib)
    else:
        check_dashboard()
        check_alerts()
        check_k8s()
    for p in problems:
        print(f"check-deploy: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
