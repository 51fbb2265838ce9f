#!/usr/bin/env python3
"""The Python peer for `volley-bench e2e --compare`: aioapns (from PyPI) sending APNs token-auth pushes to volley-mock.

aioapns hard-codes Apple's hosts: this driver points its protocol classes at the mock's host/port and trusts the
mock's CA through an ssl context (certificate and host name are still verified). Everything else is stock aioapns.

Prints one JSON object: requests, accepted, seconds, rate, cpu_s, cpu_us (process CPU per request, user + system,
measured around the timed phase only), connections, concurrency.
"""
import argparse
import asyncio
import json
import resource
import ssl
import sys
import time
import uuid

from aioapns import APNs, NotificationRequest, PushType
from aioapns import connection as aioconn


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", required=True, help="volley-mock endpoints.json")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--connections", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=100, help="requests in flight per connection")
    ap.add_argument("--body-bytes", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=200)
    a = ap.parse_args()

    e = json.load(open(a.endpoints))
    # Point aioapns at the mock (it normally connects to api.push.apple.com:443).
    for cls in (aioconn.APNsProductionClientProtocol, aioconn.APNsDevelopmentClientProtocol):
        cls.APNS_SERVER = e["host"]
        cls.APNS_PORT = e["port"]
    ctx = ssl.create_default_context(cafile=e["ca_file"])
    ctx.set_alpn_protocols(["h2"])
    key = open(e["apns"]["p8_file"]).read()
    client = APNs(key=key, key_id=e["apns"]["key_id"], team_id=e["apns"]["team_id"], topic=e["apns"]["topic"],
                  max_connections=a.connections, use_sandbox=False, ssl_context=ctx)

    filler = "x" * max(1, a.body_bytes - 60)
    message = {"aps": {"alert": {"title": "Volley", "body": filler}}}
    token = "ab" * 32
    in_flight = max(1, a.connections * a.concurrency)
    accepted = 0
    failed = {}

    async def one() -> None:
        nonlocal accepted
        r = await client.send_notification(NotificationRequest(device_token=token, message=message,
                                                               notification_id=str(uuid.uuid4()),
                                                               push_type=PushType.ALERT))
        if r.is_successful:
            accepted += 1
        else:
            failed[r.description] = failed.get(r.description, 0) + 1

    async def run(n: int) -> None:
        sem = asyncio.Semaphore(in_flight)

        async def guarded() -> None:
            async with sem:
                await one()

        # Keep at most `in_flight` tasks alive at once, topping up as they finish.
        pending = set()
        for _ in range(n):
            if len(pending) >= in_flight * 2:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            pending.add(asyncio.ensure_future(guarded()))
        if pending:
            await asyncio.wait(pending)

    await run(a.warmup)
    accepted = 0
    failed.clear()
    c0, t0 = cpu_seconds(), time.perf_counter()
    await run(a.requests)
    t1, c1 = time.perf_counter(), cpu_seconds()
    secs = t1 - t0
    out = {"requests": a.requests, "accepted": accepted, "failed": failed, "seconds": secs,
           "rate": accepted / secs if secs > 0 else 0, "cpu_s": c1 - c0,
           "cpu_us": (c1 - c0) / max(1, a.requests) * 1e6, "connections": a.connections,
           "concurrency": a.concurrency, "aioapns": getattr(sys.modules.get("aioapns"), "__version__", "")}
    print(json.dumps(out))
    return 0 if accepted > 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
