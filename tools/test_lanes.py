#!/usr/bin/env python3
"""The test lanes: which suites carry the `unit` tag and which the `integration` tag (Swift Testing tags, declared
in Tests/VolleyTestTags), as the `--filter` regular expression `swift test` takes.

This toolchain's `swift test` filters by name, not by tag, so the tags in the source are read here and turned into
names: `tools/test --unit` runs what is tagged `unit`, then `tools/test` runs the rest. Every suite (a top-level
type with tests, or a top-level @Test function) must carry exactly one of the two tags: an untagged one fails the
check, so nothing falls between the lanes.
    python3 tools/test_lanes.py unit|integration   # prints the --filter pattern of that lane
    python3 tools/test_lanes.py --check            # fails naming every untagged suite
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TYPE = re.compile(r"^(?:@Suite(?:\((.*)\))?\s+)?(?:(?:final|public)\s+)*(?:struct|class|enum|actor)\s+(\w+)")
FUNC = re.compile(r"\bfunc\s+(\w+)")
TAG = re.compile(r"\.tags\(\.(unit|integration)\)")


def suites():
    """(target, name, lane or None, file, line) for every top-level type with tests and top-level @Test function."""
    out = []
    for path in sorted(ROOT.glob("Tests/*Tests/*.swift")):
        target = path.parent.name
        lines = path.read_text(encoding="utf-8").split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            m = TYPE.match(line)
            if m and not line.startswith("extension"):
                end = i + 1
                while end < len(lines) and lines[end] != "}":
                    end += 1
                if any("@Test" in l for l in lines[i:end]):
                    attrs = line if m.group(1) is not None or line.startswith("@Suite") else ""
                    if i > 0 and lines[i - 1].startswith("@Suite"):
                        attrs += lines[i - 1]
                    lane = TAG.search(attrs)
                    out.append((target, m.group(2), lane.group(1) if lane else None, path, i + 1))
                i = end + 1
                continue
            if line.startswith("@Test"):
                # The function follows on the same line or after the attribute's arguments.
                j = i
                while j < len(lines) and not FUNC.search(lines[j]):
                    j += 1
                lane = TAG.search(" ".join(lines[i:j + 1]))
                out.append((target, FUNC.search(lines[j]).group(1), lane.group(1) if lane else None, path, i + 1))
                i = j + 1
                continue
            i += 1
    return out


def main():
    found = suites()
    if sys.argv[1:] == ["--check"]:
        untagged = [s for s in found if s[2] is None]
        for target, name, _, path, line in untagged:
            print(f"{path.relative_to(ROOT)}:{line}: {target}.{name} has neither .tags(.unit) nor .tags(.integration)",
                  file=sys.stderr)
        sys.exit(1 if untagged else 0)
    if len(sys.argv) != 2 or sys.argv[1] not in ("unit", "integration"):
        print("usage: test_lanes.py unit|integration|--check", file=sys.stderr)
        sys.exit(2)
    names = sorted({f"{re.escape(t)}\\.{re.escape(n)}" for t, n, lane, _, _ in found if lane == sys.argv[1]})
    print("^(" + "|".join(names) + ")(/|\\(|$)")


if __name__ == "__main__":
    main()
