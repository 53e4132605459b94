"""The service under load, on loopback against the fake GitHub (bench.service): one command per benchmark.
Each command's function says what it measures (docs/BENCHMARKS.md has the runs); its report printed as JSON.

    REDIS_URL=redis://127.0.0.1:6379/6 .venv/bin/python -m bench.load receiver --rates 100 500 --duration 60
    REDIS_URL=redis://127.0.0.1:6379/3 .venv/bin/python -m bench.load flood --flood 100 --strangers 30 --workers 4
    REDIS_URL=redis://127.0.0.1:6379/4 .venv/bin/python -m bench.load slow-clients --slow 20 --pings 50
    .venv/bin/python -m bench.load areas [--labels 5000] [--areas 7000 50]

REDIS_URL's database is flushed before and after: give it one of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import itertools
import json
import re
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import service
from core.own_labels.candidates import PREFIX_ENDS, compile_areas
from issue_sorter.run import WEB_COMMAND
from simulation.fake_github import WRITE_METHODS, FakeGitHub
from tests.issue_sorter.running import Service
from tests.paths import WEBHOOKS

RECEIVER = (service.INSTALLATION, "Codertocat/Hello-World")
FLOODED, QUIET = (1, "flood-org/busy"), (2, "quiet-org/calm")
COMMENT_SHAPE = WEBHOOKS / "issue_comment" / "created.with-installation.payload.json"
PING = b'{"zen": "Design for failure.", "hook_id": 1}'


def opened(where: tuple[int, str], number: int, repo_id: int) -> bytes:
    issue = {"repo": where[1], "number": number, "title": f"App crashes on start ({number})",
             "body": "Traceback (most recent call last): ...", "installation": where[0]}
    return service.delivery_body(issue, repo_id)


def send(base: str, event: str, body: bytes, kind: str) -> int:
    """A signed delivery whose id starts with `kind` (flood, stranger, quiet): its jobs' runs are counted by it."""
    return service.post(base, event, body, f"{kind}-{uuid.uuid4()}")


def wait_labelled(fake: FakeGitHub, repo: str, number: int, deadline: float) -> float | None:
    """When (time.monotonic()) the issue's label is on GitHub; None: not by `deadline`."""
    while time.monotonic() < deadline:
        if fake.issue_labels(repo, number):
            return time.monotonic()
        time.sleep(0.01)
    return None


def labelled_in(base: str, fake: FakeGitHub, where: tuple[int, str], number: int, deadline: float,
                kind: str = "bench") -> float | None:
    """A new issue's delivery: seconds from sending it to its label on GitHub (None: not by `deadline`)."""
    fake.add_issue(where[1], number, f"App crashes on start ({number})", "Traceback ...")
    sent = time.monotonic()
    send(base, "issues", opened(where, number, fake.repo_id(where[1])), kind)
    done = wait_labelled(fake, where[1], number, deadline)
    return None if done is None else done - sent


def one_every(base: str, fake: FakeGitHub, where: tuple[int, str], numbers: Iterable[int], every: float,
              wait: float, waits: list[float], stop: threading.Event, kind: str = "bench") -> None:
    """A new issue every `every` seconds (numbered `numbers`) until `stop`: the seconds from each delivery to
    its label added to `waits` (an issue whose label is not on within `wait` seconds left out)."""
    for number in numbers:
        sent = time.monotonic()
        if (took := labelled_in(base, fake, where, number, sent + wait, kind)) is not None:
            waits.append(took)
        if stop.wait(max(0.0, every - (time.monotonic() - sent))):
            return


def quantiles(values: list[float], unit: str, digits: int) -> dict:
    """How many, the median, the 99th percentile and the largest of `values` (in `unit`)."""
    values = sorted(values)
    points = (("p50", statistics.median(values)), ("p99", values[int(0.99 * (len(values) - 1))]), ("max", values[-1]))
    return {"n": len(values), **{f"{name}_{unit}": round(value, digits) for name, value in points}}


def request_bytes(path: str, number: int, port: int, repo_id: int) -> bytes:
    """A signed issues.opened delivery (or the same bytes to the floor) as raw HTTP/1.1."""
    body = opened(RECEIVER, number, repo_id)
    headers = "".join(f"{k}: {v}\r\n" for k, v in service.signed_headers("issues", body, str(uuid.uuid4())).items())
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
    times = [t * 1000 for k, status, t in results if k == kind and status]
    statuses = dict(Counter(str(status) for k, status, _ in results if k == kind))
    if not times:
        return {"n": 0, "statuses": statuses}
    return {**quantiles(times, "ms", 2), "statuses": statuses, "unanswered": statuses.get("0", 0)}


def receiver(args, workdir: Path, redis) -> dict:
    """Webhook acknowledgement under load: the web server as `issue-sorter web` runs it. For each rate, signed
    `issues.opened` deliveries (each a new delivery id: verified, parsed, enqueued) to POST /webhook at that
    steady rate, open loop, and as many to POST /floor, which answers 202 and does nothing (`load`). Latency
    from connecting to the last byte of the answer. Then, the queue emptied, a warm `issue-sorter worker`:
    webhook -> label latency of deliveries sent one a second (the first not counted)."""
    report = {"server": "issue_sorter.web_server (defaults)", "duration_s": args.duration,
              "sequential": args.sequential, "rates": {}}
    web = [sys.executable, "-m", "bench.load", "receiver", "--serve-on"]
    with (service.prepared(workdir, {RECEIVER[1]: RECEIVER[0]}, args.model, GITHUB_WRITE_INTERVAL="0") as (fake, env),
          service.started({"web": [*web, env["PORT"]]}, env, workdir)):
        port, base = int(env["PORT"]), f"http://127.0.0.1:{env['PORT']}"
        answering(base)
        for rate in args.rates:
            results, sent_in = asyncio.run(load(port, fake.repo_id(RECEIVER[1]), rate, args.duration, args.sequential))
            hook, floor = summary(results, "webhook"), summary(results, "floor")
            ratio = {f"{p}_ratio": round(hook[f"{p}_ms"] / floor[f"{p}_ms"], 2) if hook["n"] and floor["n"] else None
                     for p in ("p99", "p50")}
            report["rates"][str(int(rate))] = {"sent_in_s": round(sent_in, 1), "webhook": hook, "floor": floor,
                                               **ratio, "queued": redis.llen("rq:queue:labeling")}
            redis.flushdb()
        seconds: list[float] = []
        with service.started({"worker": [*service.CLI, "worker"]}, env, workdir):
            one_every(base, fake, RECEIVER, range(1, args.labels + 2), 1.0, 120, seconds, threading.Event())
        report["webhook_to_label"] = quantiles(seconds[1:], "s", 3)  # the first warmed the worker up
    return report


def stranger_command(number: int, repo_id: int, shape: dict) -> bytes:
    """`/issue-sorter retrain` on issue 1 of the flooded repository, by a new login without a role."""
    payload, (owner, name) = copy.deepcopy(shape), FLOODED[1].split("/")
    payload["comment"].update(body="/issue-sorter retrain", id=900000 + number,
                              author_association="NONE" if number % 2 else "COLLABORATOR")
    for who in (payload["comment"]["user"], payload["sender"]):
        who.update(login=f"stranger-{number}", type="User")
    payload["issue"]["number"] = 1
    payload["repository"].update(id=repo_id, name=name, full_name=FLOODED[1])
    payload["repository"]["owner"]["login"] = owner
    payload["installation"] = {"id": FLOODED[0]}
    return json.dumps(payload).encode()


def job_runs(workdir: Path, job: str, kind: str) -> int:
    """RQ's runs of `job` for the deliveries of `kind`, reruns included, as the workers logged each start."""
    start = re.compile(rf": bot\.jobs\.{job}\(.*delivery_id='{kind}-")
    return sum(1 for log in workdir.glob("*.log") for line in log.read_text().splitlines() if start.search(line))


def github_calls(fake: FakeGitHub, repo: str, since: int) -> tuple[int, int]:
    """(reads, writes) of `repo` among the requests after the first `since`."""
    mine = [r for r in fake.requests[since:] if r.path.startswith(f"/repos/{repo}/")]
    writes = sum(1 for r in mine if r.method in WRITE_METHODS)
    return len(mine) - writes, writes


def flood(args, workdir: Path, redis) -> dict:
    """A flood of writes on one installation beside a quiet one: what a write costs, and who waits. After a
    warm-up issue per installation, `--flood` issues opened at once on installation 1 among `--strangers`
    `/issue-sorter retrain` comments from people without a role (half with no association, half collaborators
    GitHub is asked about), and an issue every `--quiet-every` seconds on installation 2, until the flood is
    labelled: installation 1's GitHub reads and job runs (as the workers logged them) per write and its
    smallest gap between writes; installation 2's seconds from delivery to label (its wait behind the flood)."""
    repos = {repo: installation for installation, repo in (FLOODED, QUIET)}
    with (service.prepared(workdir, repos, args.model, GITHUB_WRITE_INTERVAL=str(args.write_interval),
                           ISSUE_SORTER_LABELLING_WORKERS=str(args.workers)) as (fake, env),
          Service(workdir, env) as run):
        run.wait_healthy()
        for where in (FLOODED, QUIET):  # warm-up: the labels listed once
            if labelled_in(run.base, fake, where, 1, time.monotonic() + 300, "warm-up") is None:
                raise SystemExit(f"the warm-up issue of {where[1]} was not labelled; logs in {workdir}")
        time.sleep(args.write_interval + 1)
        repo_id, numbers = fake.repo_id(FLOODED[1]), range(2, args.flood + 2)
        for number in numbers:
            fake.add_issue(FLOODED[1], number, f"App crashes on start ({number})", "Traceback ...")
        before_requests = len(fake.requests)
        shape = json.loads(COMMENT_SHAPE.read_text())
        sends = [("issues", opened(FLOODED, number, repo_id), "flood") for number in numbers]
        for i in range(args.strangers):  # spread among the issues
            sends.insert(i * len(sends) // max(1, args.strangers),
                         ("issue_comment", stranger_command(i, repo_id, shape), "stranger"))
        deadline = time.monotonic() + args.timeout
        stop, waits = threading.Event(), []
        quiet = threading.Thread(target=one_every, args=(run.base, fake, QUIET, itertools.count(2), args.quiet_every,
                                                         args.timeout, waits, stop, "quiet"))
        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda delivery: send(run.base, *delivery), sends))
        quiet.start()
        last = [wait_labelled(fake, FLOODED[1], number, deadline) for number in numbers]
        stop.set()
        quiet.join()
        time.sleep(2)  # the comment jobs' last runs
        reads, writes = github_calls(fake, FLOODED[1], before_requests)
        runs = {"label_issue": job_runs(workdir, "label_issue", "flood"),
                "handle_comment": job_runs(workdir, "handle_comment", "stranger")}
        quiet_reads, quiet_writes = github_calls(fake, QUIET[1], before_requests)
        times = [t for t in fake.write_times().get(FLOODED[0], []) if t >= time.time() - (time.monotonic() - started)]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        labelled = [t for t in last if t is not None]
        return {
            "workers": args.workers, "write_interval_s": args.write_interval,
            "flooded": {"issues": args.flood, "strangers_commands": args.strangers,
                        "answers": {str(code): answers.count(code) for code in set(answers)},
                        "labelled": len(labelled), "github_reads": reads, "github_writes": writes,
                        "reads_per_write": round(reads / writes, 2) if writes else None,
                        "label_issue_runs": runs["label_issue"], "handle_comment_runs": runs["handle_comment"],
                        "label_runs_per_issue": round(runs["label_issue"] / args.flood, 2),
                        "job_runs_per_write": round(sum(runs.values()) / writes, 2) if writes else None,
                        "drained_s": round(max(labelled) - started, 1) if labelled else None,
                        "smallest_write_gap_s": round(min(gaps), 3) if gaps else None},
            "quiet": {"issues": len(waits), "reads": quiet_reads, "writes": quiet_writes,
                      "label_issue_runs": job_runs(workdir, "label_issue", "quiet"),
                      "wait_p50_s": round(statistics.median(waits), 3) if waits else None,
                      "wait_max_s": round(max(waits), 3) if waits else None},
        }


def pings(base: str, count: int) -> dict:
    """`count` signed pings one after another: milliseconds to each answer (inf when not 200 within 30 s)."""
    ms = []
    for _ in range(count):
        sent = time.perf_counter()
        answered = service.post(base, "ping", PING, "bench") == 200
        ms.append((time.perf_counter() - sent) * 1000 if answered else float("inf"))
    return {**quantiles(ms, "ms", 1), "answered": sum(m != float("inf") for m in ms)}


def answering(base: str, seconds: float = 60) -> None:
    """Until the web server answers a signed ping."""
    deadline = time.monotonic() + seconds
    while not pings(base, 1)["answered"]:
        if time.monotonic() > deadline:
            raise SystemExit(f"{base} did not answer")
        time.sleep(0.3)


def trickle(port: int, count: int, stop: threading.Event) -> None:
    """`count` connections, each sending part of a request's headers, then a byte every 2 s, reconnecting
    whenever the server closes one."""
    socks: dict[int, socket.socket] = {}
    while not stop.is_set():
        for index in range(count):
            try:
                if index not in socks:
                    socks[index] = socket.create_connection(("127.0.0.1", port))
                    socks[index].sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                socks[index].sendall(b"a")
            except OSError:
                socks.pop(index, None)
        stop.wait(2)
    for sock in socks.values():
        sock.close()


def slow_clients(args, workdir: Path, redis) -> dict:
    """A signed delivery's answer while slow clients hold connections: `issue-sorter web` as `issue-sorter run`
    starts it (WEB_COMMAND), `--pings` signed pings alone (the reference), then while `--slow` slowloris
    clients each send a header byte every 2 s."""
    env = service.environment(None, workdir)
    base, stop = f"http://127.0.0.1:{env['PORT']}", threading.Event()
    with service.started({"web": [*service.CLI, *WEB_COMMAND]}, env, workdir):
        try:
            answering(base)
            report = {"web_command": WEB_COMMAND, "slow_clients": args.slow, "alone": pings(base, args.pings)}
            threading.Thread(target=trickle, args=(int(env["PORT"]), args.slow, stop), daemon=True).start()
            time.sleep(3)  # every slow client connected and trickling
            report["with_slow_clients"] = pings(base, args.pings)
        finally:
            stop.set()
    return report


def each_against_each(label: str, areas: tuple[str, ...]) -> bool:
    """The former rule: every entry tried against the label, a prefix by startswith."""
    return any(label == area or (area[-1:] in PREFIX_ENDS and label.startswith(area.rstrip("*"))) for area in areas)


def timed(match, labels: list[str]) -> tuple[float, int]:
    started = time.perf_counter()
    taken = sum(1 for label in labels if match(label))
    return time.perf_counter() - started, taken


def areas(args) -> None:
    """What matching a config's `areas` against a repository's labels costs per issue: compiled (a set lookup
    per prefix length) against each label tried against each entry (the rule before, the reference)."""
    labels = [f"area/component-{n:05d}" for n in range(args.labels)]
    for n_areas in args.areas:  # half names, half prefixes, none of them taking a label: the worst case
        entries = tuple(f"topic-{n:05d}" for n in range(n_areas // 2)) + tuple(
            f"module-{n:05d}:" for n in range(n_areas - n_areas // 2))
        fast, taken_fast = timed(compile_areas(entries).takes, labels)
        slow, taken_slow = timed(lambda label, entries=entries: each_against_each(label, entries), labels)
        assert taken_fast == taken_slow
        print(f"{n_areas} areas × {args.labels} labels: compiled {fast * 1000:.1f} ms, each against each "
              f"{slow * 1000:.1f} ms ({slow / fast:.0f}x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, run, **options) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=run.__doc__.split(":")[0], description=run.__doc__)
        sub.set_defaults(run=run)
        return service.arguments(run.__doc__, parser=sub, **options) if name != "areas" else sub

    sub = command("receiver", receiver)
    sub.add_argument("--rates", type=float, nargs="+", default=[100, 500])
    sub.add_argument("--duration", type=float, default=60)
    sub.add_argument("--serve-on", type=int, help=argparse.SUPPRESS)  # the server's own process
    sub.add_argument("--sequential", action="store_true",
                     help="the floor's requests first, then the webhooks' (not interleaved: half the load)")
    sub.add_argument("--labels", type=int, default=30, help="deliveries for the label latency")
    sub = command("flood", flood)
    sub.add_argument("--flood", type=int, default=100, help="issues opened at once on installation 1")
    sub.add_argument("--strangers", type=int, default=30, help="`/issue-sorter retrain` from people without a role")
    sub.add_argument("--workers", type=int, default=4, help="labelling workers")
    sub.add_argument("--quiet-every", type=float, default=5.0, help="seconds between installation 2's issues")
    sub.add_argument("--write-interval", type=float, default=1.0, help="GITHUB_WRITE_INTERVAL")
    sub.add_argument("--timeout", type=float, default=900, help="seconds to wait for the flood's labels")
    sub = command("slow-clients", slow_clients, model=False)
    sub.add_argument("--slow", type=int, default=20, help="slow connections held open")
    sub.add_argument("--pings", type=int, default=50, help="signed pings in each set")
    sub = command("areas", areas)
    sub.add_argument("--labels", type=int, default=5000, help="the repository's labels")
    sub.add_argument("--areas", type=int, nargs="+", default=[7000, 50], help="entries of `areas`")
    args = parser.parse_args(argv)
    if args.command == "areas":
        return areas(args) or 0
    if getattr(args, "serve_on", None):
        from bot.app import create_app_from_env
        from issue_sorter.web_server import WebLimits, make_server

        app = create_app_from_env()  # the bot's own, plus POST /floor answering 202 with nothing done (the floor)
        app.add_url_rule("/floor", "floor", lambda: ("", 202), methods=["POST"])
        make_server(app, WebLimits(), host="127.0.0.1", port=args.serve_on).run()
        return 0
    redis = service.own_redis()
    try:
        report = args.run(args, Path(tempfile.mkdtemp(prefix=f"{args.command}-")), redis)
    finally:
        redis.flushdb()
    service.print_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
