#!/usr/bin/env python3
"""A hand-written reader stays only while it is at least twice as fast as Foundation's decoding of the same bytes.

Reads the JMH export of the `reader:` micro-benchmarks (Benchmarks/, `--format jmh`), pairs each
`reader: <input>, <hand-written reader>` with `reader: <input>, Foundation JSONDecoder`, prints their throughputs
and ratio, and exits 1 when a ratio is below 2.0 (or a pair is missing).
    python3 tools/reader_ratio.py DIR_WITH_JMH_JSON
"""
import glob
import json
import sys

MIN_RATIO = 2.0


def main():
    files = glob.glob(f"{sys.argv[1]}/*.jmh.json")
    if not files:
        print(f"reader_ratio: no *.jmh.json under {sys.argv[1]}", file=sys.stderr)
        sys.exit(1)
    throughput = {}
    for path in files:
        with open(path) as f:
            for element in json.load(f):
                # "package.benchmark.VolleyMicro.reader:_job,_Foundation_JSONDecoder": the export writes spaces as _.
                name = element["benchmark"].replace("_", " ")
                at = name.find("reader: ")
                if at >= 0:
                    throughput[name[at:]] = element["primaryMetric"]["score"]
    inputs = {}
    for name, score in throughput.items():
        subject, _, reader = name[len("reader: "):].partition(", ")
        inputs.setdefault(subject, {})[reader] = score
    failed = not inputs
    if not inputs:
        print("reader_ratio: no reader: benchmarks in the export", file=sys.stderr)
    for subject, readers in sorted(inputs.items()):
        foundation = readers.pop("Foundation JSONDecoder", None)
        if foundation is None or len(readers) != 1:
            print(f"reader_ratio: {subject}: needs one hand-written reader and Foundation JSONDecoder", file=sys.stderr)
            failed = True
            continue
        (reader, score), = readers.items()
        ratio = score / foundation if foundation else float("inf")
        verdict = "ok" if ratio >= MIN_RATIO else f"below {MIN_RATIO}x: decode with Foundation instead"
        print(f"{subject}: {reader} {score:,.0f}/s, Foundation {foundation:,.0f}/s, {ratio:.2f}x ({verdict})")
        failed |= ratio < MIN_RATIO
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
