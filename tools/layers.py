#!/usr/bin/env python3
"""The layer check: each module imports only what its layer may, and docs/architecture.md says the same.

Arrows point one way (docs/architecture.md): the two executables on top (`volley`, the CLI, and `volley-bench`, the
load tools, which alone links VolleyBench), then the service that wires things, the API and the Salesforce
resources, the engine and the providers, the transport and the stores, and VolleyCore at the bottom with no C and
no I/O. The C modules (nghttp2, OpenSSL, hiredis) are imported only by the wrapper files named below, never
publicly. A module is a folder: `Sources/<name>` (its directory name, so the executable `volley-bench` is
`volley-bench`, not its Swift module name `volley_bench`), `tools/VolleyMock*` and the test helper targets in
`Tests/`. A folder without a layer fails the check; a layer without a folder (a target about to be added) does not.

The module table of docs/architecture.md (section "## Modules", columns "module" and "depends on") is checked
against ALLOWED. The "depends on" cell of a row lists, in backticks, the Volley modules the row's modules may
import: for each module named in the row's "module" cell, that set must equal the module's ALLOWED entries that are
Volley modules (ALLOWED's keys and the C modules); outside packages (Foundation, Logging, Crypto, Hummingbird …) are
not listed. A cell without backticked names ("—", "system libraries") means none. Every Volley module has exactly
one row, and a row names only Volley modules. Backticked text that is not a name (a path such as `tools/`) is
ignored. ALLOWED's Volley entries follow the target dependencies in Package.swift (which this script does not
read; `volley` also imports VolleyCore, which comes with VolleyService): change the three together.

    python3 tools/layers.py           check imports and the table; exits 1 and names each problem
    python3 tools/layers.py --table   print the table ALLOWED enforces (module | Volley modules it may import)
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"

SYSTEM = {"Foundation", "Synchronization"}
IO = SYSTEM | {"Dispatch", "Glibc", "Logging"}

# What each module may import. A module missing here fails the check: give it a layer first.
# Lower layers first: `--table` prints the rows, and each row's modules, in this order.
ALLOWED = {
    "VolleyCore": SYSTEM,
    "VolleyHTTP2": IO | {"CNGHTTP2", "COpenSSL", "NIOCore", "VolleyCore"},
    "VolleyHTTP2Server": IO | {"COpenSSL", "VolleyHTTP2"},
    "VolleyRedis": IO | {"CHiredis", "Crypto", "NIOCore", "NIOPosix", "VolleyCore", "VolleyHTTP2"},
    "VolleyStore": IO | {"VolleyCore", "VolleyRedis"},
    "VolleyAPNs": IO | {"Crypto", "VolleyCore", "VolleyHTTP2"},
    "VolleyFCM": IO | {"Crypto", "CryptoExtras", "VolleyCore", "VolleyHTTP2"},
    "VolleyEngine": IO | {"Metrics", "VolleyCore"},
    "VolleyObservability": IO | {"Hummingbird", "Metrics", "Prometheus", "ServiceLifecycle"},
    "VolleyConnect": IO | {"COpenSSL", "Crypto", "CryptoExtras", "VolleyCore"},
    "VolleyAPI": IO | {"Crypto", "Hummingbird", "Metrics", "ServiceLifecycle", "VolleyConnect", "VolleyCore",
                       "VolleyHTTP2", "HummingbirdCore", "NIOCore", "NIOPosix", "Atomics", "Mustache"},
    "VolleyService": IO | {"Metrics", "Prometheus", "ServiceLifecycle", "Yams", "NIOPosix", "VolleyCore", "VolleyHTTP2",
                           "VolleyRedis", "VolleyStore", "VolleyAPNs", "VolleyFCM", "VolleyEngine",
                           "VolleyObservability", "VolleyAPI", "VolleyConnect"},
    "VolleyBench": IO | {"Crypto", "Histogram", "VolleyCore", "VolleyHTTP2", "VolleyHTTP2Server", "VolleyRedis",
                         "VolleyStore", "VolleyAPNs", "VolleyService"},
    "volley": IO | {"ArgumentParser", "VolleyCore", "VolleyService", "VolleyAPI"},
    "volley-bench": IO | {"ArgumentParser", "VolleyCore", "VolleyService", "VolleyBench"},
    "VolleyMock": IO | {"Crypto", "CryptoExtras", "SwiftASN1", "X509", "VolleyCore", "VolleyHTTP2",
                        "VolleyHTTP2Server"},
    "VolleyMockMain": IO | {"ArgumentParser", "VolleyMock"},
    "VolleyTestDoubles": IO | {"VolleyCore"},
    "VolleyTestSupport": IO | {"VolleyMock", "VolleyHTTP2", "VolleyRedis"},
}

# The only files that may import a C module: thin wrappers of that library's calls.
C_MODULES = ("CNGHTTP2", "COpenSSL", "CHiredis")
WRAPPERS = {
    "Sources/VolleyHTTP2/TLS.swift",
    "Sources/VolleyHTTP2/TLSChannelHandler.swift",
    "Sources/VolleyHTTP2/TLSClientSession.swift",
    "Sources/VolleyHTTP2/HTTP2Session.swift",
    "Sources/VolleyHTTP2/HTTP2SessionMemory.swift",
    "Sources/VolleyHTTP2/HTTP2Error+C.swift",
    "Sources/VolleyHTTP2Server/ArrivalTimeBIO.swift",
    "Sources/VolleyConnect/RSAOAEP+OpenSSL.swift",
    "Sources/VolleyRedis/RedisConnection.swift",
    "Sources/VolleyRedis/RedisReplyParser.swift",
}

# The modules the table speaks of, in the order `--table` prints them: the C modules, then ALLOWED's.
VOLLEY_MODULES = list(C_MODULES) + list(ALLOWED)
# Folders outside Sources/ that are modules with a layer (Sources/ is read whole).
OTHER_DIRS = ("tools/VolleyMock", "tools/VolleyMockMain", "Tests/VolleyTestDoubles", "Tests/VolleyTestSupport")

IMPORT = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(public|package|internal|private|fileprivate)\s+)?"
                    r"import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][\w]*)")
# A module name in a table cell: backticked, letters, digits, `_` and `-` (not a path, not a file).
NAME = re.compile(r"`([A-Za-z_][\w-]*)`")


def module_dirs():
    for d in sorted((ROOT / "Sources").iterdir()):
        if d.is_dir() and not (d / "module.modulemap").exists():
            yield d.name, d
    for rel in OTHER_DIRS:
        d = ROOT / rel
        if d.is_dir():
            yield d.name, d


def volley_deps(module):
    """The Volley modules `module` may import (none for a C module)."""
    allowed = ALLOWED.get(module, set())
    return [m for m in VOLLEY_MODULES if m in allowed]


def table():
    """The module table ALLOWED enforces, as markdown."""
    rows = ["| module | may import (Volley modules only) |", "|---|---|"]
    for module in VOLLEY_MODULES:
        deps = volley_deps(module)
        rows.append(f"| `{module}` | {', '.join(f'`{d}`' for d in deps) if deps else '—'} |")
    return "\n".join(rows)


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def doc_table_problems():
    """Compares the "depends on" column of docs/architecture.md's module table with ALLOWED."""
    doc = DOC.relative_to(ROOT)
    if not DOC.exists():
        return [f"{doc}: missing (the module table lives there)"]
    lines = DOC.read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index("## Modules")
    except ValueError:
        return [f"{doc}: no section \"## Modules\""]
    n = start + 1
    while n < len(lines) and not lines[n].startswith("|") and not lines[n].startswith("## "):
        n += 1
    if n >= len(lines) or not lines[n].startswith("|"):
        return [f"{doc}:{start + 1}: no table under \"## Modules\""]
    header = [c.lower() for c in cells(lines[n])]
    if "module" not in header or "depends on" not in header:
        return [f"{doc}:{n + 1}: the module table needs the columns \"module\" and \"depends on\""]
    mod_col, dep_col = header.index("module"), header.index("depends on")
    problems = []
    seen = {}
    for i in range(n + 2, len(lines)):
        line = lines[i]
        if not line.startswith("|"):
            break
        where = f"{doc}:{i + 1}"
        row = cells(line)
        if len(row) <= max(mod_col, dep_col):
            problems.append(f"{where}: a row with {len(row)} cells, the table has {len(header)}")
            continue
        modules = NAME.findall(row[mod_col])
        listed = NAME.findall(row[dep_col])
        for name in [m for m in modules + listed if m not in VOLLEY_MODULES]:
            problems.append(f"{where}: `{name}` is not a Volley module (a key of ALLOWED or a C module): give it a "
                            f"layer in tools/layers.py, or name it in the \"holds\" column")
        listed = {m for m in listed if m in VOLLEY_MODULES}
        for module in modules:
            if module not in VOLLEY_MODULES:
                continue
            if module in seen:
                problems.append(f"{where}: {module} has a row already (line {seen[module]})")
                continue
            seen[module] = i + 1
            allowed = set(volley_deps(module))
            missing = [m for m in VOLLEY_MODULES if m in allowed - listed]
            extra = [m for m in VOLLEY_MODULES if m in listed - allowed]
            if missing:
                problems.append(f"{where}: {module}: \"depends on\" leaves out {', '.join(missing)}, "
                                f"which tools/layers.py lets it import")
            if extra:
                problems.append(f"{where}: {module}: \"depends on\" lists {', '.join(extra)}, "
                                f"which tools/layers.py does not let it import")
    for module in VOLLEY_MODULES:
        if module not in seen:
            deps = ", ".join(volley_deps(module)) or "none"
            problems.append(f"{doc}:{n + 1}: {module} has no row in the module table (it depends on: {deps})")
    return problems


def import_problems():
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
    return problems


def main(argv):
    if argv == ["--table"]:
        print(table())
        return 0
    if argv:
        print("usage: python3 tools/layers.py [--table]", file=sys.stderr)
        return 2
    problems = import_problems() + doc_table_problems()
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
