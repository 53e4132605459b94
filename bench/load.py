"""Webhook acknowledgement under load: the web server as `issue-sorter web` runs it, real Redis, loopback only.

    REDIS_URL=redis://127.0.0.1:6379/6 .venv/bin/python -m bench.load --rates 100 500 --duration 60

For each rate, signed `issues.opened` deliveries (each a new delivery id, so each is verified, parsed and
enqueued) go to POST /webhook at that steady rate, open loop, and as many POSTs to a bare route of the same
Flask app on the same server that answers 202 and does nothing (the floor), interleaved, in the same run.
Latency is from connecting to the last byte of the answer. Then, with the queue emptied, a warm
`issue-sorter worker` and the fake GitHub: webhook -> label latency of deliveries sent one a second.
REDIS_URL's database is flushed before and after: give it one of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from bench.service import (
    CLI,
    INSTALLATION,
    arguments,
    delivery_body,
    own_redis,
    post,
    prepared,
    print_report,
    signed_headers,
    started,
    wait_up,
)
from simulation.fake_github import FakeGitHub

REPO = "Codertocat/Hello-World"


def floor_app():
    """The served app: the bot's own, plus POST /floor answering 202 with nothing done (the floor)."""
    from bot.app import create_app_from_env

    app = create_app_from_env()
    app.add_url_rule("/floor", "floor", lambda: ("", 202), methods=["POST"])
    return app


def opened(number: int, repo_id: int) -> bytes:
    issue = {"repo": REPO, "number": number, "title": f"App crashes on start {number}",
             "body": "Traceback (most recent call last): ...", "installation": INSTALLATION}
    return delivery_body(issue, repo_id)


def request_bytes(path: str, number: int, port: int, repo_id: int) -> bytes:
    """A signed issues.opened delivery (or the same bytes to the floor) as raw HTTP/1.1."""
    body = opened(number, repo_id)
    headers = "".join(f"{k}: {v}\r\n" for k, v in signed_headers("issues", body, str(uuid.uuid4())).items())
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n{headers}"
            "Connection: close\r\n\r\n")
    return head.encode() + body


async def one(port: int, raw: bytes, results: list, kind: str) -> None:
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(raw)
        await writer.drain()
        answer = await reader.read()  # the request says Connection: close
        writer.close()
        status = int(answer.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        status = 0
    results.append((kind, status, time.perf_counter() - started))


async def load(port: int, repo_id: int, rate: float, duration: float, sequential: bool) -> tuple[list, float]:
    """`rate` deliveries a second and as many floor requests, open loop: interleaved (the server sees
    2 x rate), or, `sequential`, the floor's `duration` first and then the webhooks' (it sees rate)."""
    count = int(rate * duration)
    webhooks = [request_bytes("/webhook", 100000 + i, port, repo_id) for i in range(count)]
    floor = request_bytes("/floor", 1, port, repo_id)
    if sequential:
        plan = [(i / rate, "floor", floor) for i in range(count)]
        plan += [(duration + i / rate, "webhook", webhooks[i]) for i in range(count)]
    else:
        plan = [(i / rate + offset, kind, raw) for i in range(count)
                for offset, kind, raw in ((0.0, "webhook", webhooks[i]), (0.5 / rate, "floor", floor))]
    results: list = []
    tasks = []
    started = time.perf_counter()
    for at, kind, raw in plan:
        delay = started + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(port, raw, results, kind)))
    sent_in = time.perf_counter() - started
    await asyncio.gather(*tasks)
    return results, sent_in


def summary(results: list, kind: str) -> dict:
    """Percentiles over the answered requests; `unanswered` counts refused or reset connections."""
    times = sorted(t * 1000 for k, status, t in results if k == kind and status)
    statuses = dict(Counter(str(status) for k, status, _ in results if k == kind))
    if not times:
        return {"n": 0, "statuses": statuses}
    return {"n": len(times), "p50_ms": round(statistics.median(times), 2),
            "p99_ms": round(times[int(0.99 * (len(times) - 1))], 2), "max_ms": round(times[-1], 2),
            "statuses": statuses, "unanswered": statuses.get("0", 0)}


def label_latency(base: str, fake: FakeGitHub, env: dict, workdir: Path, count: int) -> dict:
    """Deliveries one a second to a warm worker: seconds from POST to the label on GitHub."""
    seconds = []
    with started({"worker": [*CLI, "worker"]}, env, workdir):
        for i in range(count + 1):  # the first one warms the worker up and is not counted
            number = i + 1
            fake.add_issue(REPO, number, f"App crashes on start {i}", "Traceback (most recent call last): ...")
            sent = time.perf_counter()
            post(base, "issues", opened(number, fake.repo_id(REPO)), timeout=10)
            while not fake.issue_labels(REPO, number) and time.perf_counter() - sent < 120:
                time.sleep(0.01)
            if i:
                seconds.append(time.perf_counter() - sent)
            time.sleep(max(0.0, 1.0 - (time.perf_counter() - sent)))
    seconds.sort()
    return {"n": len(seconds), "p50_s": round(statistics.median(seconds), 3),
            "p99_s": round(seconds[int(0.99 * (len(seconds) - 1))], 3), "max_s": round(seconds[-1], 3)}


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--rates", type=float, nargs="+", default=[100, 500])
    parser.add_argument("--duration", type=float, default=60)
    parser.add_argument("--serve-on", type=int, help=argparse.SUPPRESS)  # the server's own process
    parser.add_argument("--sequential", action="store_true",
                        help="the floor's requests first, then the webhooks' (not interleaved: half the load)")
    parser.add_argument("--labels", type=int, default=30, help="deliveries for the label latency")
    args = parser.parse_args(argv)
    if args.serve_on:
        from issue_sorter.web_server import WebLimits, make_server

        make_server(floor_app(), WebLimits(), host="127.0.0.1", port=args.serve_on).run()
        return 0
    redis = own_redis()
    workdir = Path(tempfile.mkdtemp(prefix="load-"))
    report = {"server": "issue_sorter.web_server (defaults)", "duration_s": args.duration,
              "sequential": args.sequential, "rates": {}}
    web = [sys.executable, "-m", "bench.load", "--serve-on"]
    try:
        with (prepared(workdir, {REPO: INSTALLATION}, args.model, GITHUB_WRITE_INTERVAL="0") as (fake, env),
              started({"web": [*web, env["PORT"]]}, env, workdir)):
            port, base = int(env["PORT"]), f"http://127.0.0.1:{env['PORT']}"
            wait_up(f"{base}/healthz")
            for rate in args.rates:
                results, sent_in = asyncio.run(load(port, fake.repo_id(REPO), rate, args.duration, args.sequential))
                hook, floor = summary(results, "webhook"), summary(results, "floor")
                report["rates"][str(int(rate))] = {
                    "sent_in_s": round(sent_in, 1), "webhook": hook, "floor": floor,
                    "p99_ratio": round(hook["p99_ms"] / floor["p99_ms"], 2) if hook["n"] and floor["n"] else None,
                    "p50_ratio": round(hook["p50_ms"] / floor["p50_ms"], 2) if hook["n"] and floor["n"] else None,
                    "queued": redis.llen("rq:queue:labeling")}
                redis.flushdb()
            report["webhook_to_label"] = label_latency(base, fake, env, workdir, args.labels)
    finally:
        redis.flushdb()
    print_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
