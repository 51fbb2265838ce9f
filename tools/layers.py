#!/usr/bin/env python3
"""The layer check: each module imports only what its layer may.

Arrows point one way (docs/architecture.md): the CLI on top, then benchmarks, the service that wires things,
the engine and the providers, the transport and the stores, and VolleyCore at the bottom with no C and no I/O.
The C modules (nghttp2, OpenSSL, hiredis) are imported only by the wrapper files named below, never publicly.
Exits 1 and names each file and import that breaks a rule.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

SYSTEM = {"Foundation", "Synchronization"}
IO = SYSTEM | {"Dispatch", "Glibc", "Logging"}

# What each module may import. A module missing here fails the check: give it a layer first.
ALLOWED = {
    "VolleyCore": SYSTEM,
    "VolleyHTTP2": IO | {"CNGHTTP2", "COpenSSL"},
    "VolleyHTTP2Server": IO | {"CNGHTTP2", "COpenSSL", "VolleyHTTP2"},
    "VolleyRedis": IO | {"CHiredis", "Crypto", "NIOCore", "NIOPosix"},
    "VolleyStore": IO | {"VolleyCore", "VolleyRedis"},
    "VolleyAPNs": IO | {"Crypto", "VolleyCore", "VolleyHTTP2"},
    "VolleyFCM": IO | {"Crypto", "CryptoExtras", "VolleyCore", "VolleyHTTP2"},
    "VolleyEngine": IO | {"Metrics", "VolleyCore"},
    "VolleyObservability": IO | {"Hummingbird", "Metrics", "Prometheus", "ServiceLifecycle"},
    "VolleyConnect": IO | {"VolleyCore"},
    "VolleyAPI": IO | {"Crypto", "Hummingbird", "Metrics", "ServiceLifecycle", "VolleyConnect", "VolleyCore",
                       "HummingbirdCore", "HummingbirdTLS", "NIOSSL", "NIOCore", "NIOPosix"},
    "VolleyService": IO | {"Metrics", "Prometheus", "ServiceLifecycle", "Yams", "NIOPosix", "VolleyCore", "VolleyHTTP2",
                           "VolleyRedis", "VolleyStore", "VolleyAPNs", "VolleyFCM", "VolleyEngine",
                           "VolleyObservability", "VolleyAPI", "VolleyConnect"},
    "VolleyBench": IO | {"Crypto", "Histogram", "VolleyCore", "VolleyHTTP2", "VolleyHTTP2Server", "VolleyRedis",
                         "VolleyStore",
                         "VolleyAPNs", "VolleyFCM", "VolleyEngine", "VolleyService"},
    "volley": IO | {"ArgumentParser", "VolleyCore", "VolleyService", "VolleyBench", "VolleyAPI"},
    "VolleyMock": IO | {"Crypto", "CryptoExtras", "SwiftASN1", "X509", "VolleyHTTP2", "VolleyHTTP2Server"},
    "VolleyMockMain": IO | {"ArgumentParser", "VolleyMock"},
}

# The only files that may import a C module: thin wrappers of that library's calls.
C_MODULES = {"CNGHTTP2", "COpenSSL", "CHiredis"}
WRAPPERS = {
    "Sources/VolleyHTTP2/TLS.swift",
    "Sources/VolleyHTTP2/HTTP2Session.swift",
    "Sources/VolleyHTTP2/HTTP2SessionMemory.swift",
    "Sources/VolleyHTTP2/HTTP2Error+C.swift",
    "Sources/VolleyHTTP2/HTTP2Server.swift",
    "Sources/VolleyHTTP2Server/ArrivalTimeBIO.swift",
    "Sources/VolleyRedis/RedisConnection.swift",
    "Sources/VolleyRedis/RedisReplyParser.swift",
}

IMPORT = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(public|package|internal|private|fileprivate)\s+)?"
                    r"import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][\w]*)")


def module_dirs():
    for d in sorted((ROOT / "Sources").iterdir()):
        if d.is_dir() and not (d / "module.modulemap").exists():
            yield d.name, d
    for name in ("VolleyMock", "VolleyMockMain"):
        d = ROOT / "tools" / name
        if d.is_dir():
            yield name, d


def main():
    problems = []
    for module, directory in module_dirs():
        allowed = ALLOWED.get(module)
        if allowed is None:
            problems.append(f"{directory.relative_to(ROOT)}: module {module} has no layer in tools/layers.py")
            continue
        for path in sorted(directory.rglob("*.swift")):
            rel = str(path.relative_to(ROOT))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = IMPORT.match(line)
                if not m:
                    continue
                access, imported = m.group(1), m.group(2)
                if imported not in allowed:
                    problems.append(f"{rel}:{n}: {module} may not import {imported}")
                if imported in C_MODULES:
                    if rel not in WRAPPERS:
                        problems.append(f"{rel}:{n}: only the C wrapper files may import {imported}")
                    # `package` shares the wrapper's C types with the package's other transport module only.
                    if access in (None, "public"):
                        problems.append(f"{rel}:{n}: import {imported} as package, internal or private, never public")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
