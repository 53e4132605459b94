"""Scale-out: what 1, 2 and 4 labelling workers of `issue-sorter run` label per second, in one run.

    .venv/bin/python -m bench.scale --configs 1x1 2x1 4x1 --repeat 2 --n 800 [--github-latency 50] [--cold]

Each configuration (workers x inference threads, `[:NAME=VALUE,...]` its own settings) is `issue-sorter
run` on a fresh PostgreSQL database against the fake GitHub, warmed up unless `--cold`; labels/s from the
first delivery to the last label, and where each labelling worker's time went. Results: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from bench.service import (
    LABEL_POST,
    LABELLING_WORKER,
    arguments,
    prepared,
    real_issues,
    send_at_rate,
    served_model,
)
from bench.serving import cpu_line, ms_each
from simulation.fake_github import FakeGitHub
from tests.issue_sorter.running import Service

TOKEN_POST = r"/app/installations/\d+/access_tokens"
WARM_UP_PASSES = 6  # per labelling worker: passes until every worker holds every installation's token


def task_times(pid: int) -> tuple[float, float]:
    """Seconds on a CPU and waiting for one, summed over every thread of `pid` (0, 0 once it is gone)."""
    on_cpu = waiting = 0.0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return 0.0, 0.0
    for task in tasks:
        try:
            ran, waited, _ = Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()
        except (FileNotFoundError, ValueError):
            continue
        on_cpu, waiting = on_cpu + int(ran) / 1e9, waiting + int(waited) / 1e9
    return on_cpu, waiting


# Who a command line belongs to, for the machine's CPU over the window (first match wins).
MACHINE_ROLES = [("labelling workers", LABELLING_WORKER),
                 ("feedback worker", r"issue_sorter\.cli worker --queues feedback"),
                 ("training worker", r"issue_sorter\.cli training-worker"),
                 ("cron", r"issue_sorter\.cli cron"), ("web (gunicorn)", r"gunicorn|issue_sorter\.cli web"),
                 ("supervisor", r"issue_sorter\.cli run|issue-sorter run"),
                 ("PostgreSQL", r"^postgres"), ("Redis", r"valkey|redis-server")]


def process_cpu() -> dict[int, tuple[str, float]]:
    """Every process's command line and its CPU seconds so far (user and system, all its threads)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            args = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command's name: state, ppid, ... utime, stime
        out[int(entry)] = (args.strip() or stat.split("(", 1)[1].rsplit(")", 1)[0],
                           (int(fields[11]) + int(fields[12])) / tick)
    return out


def cpu_ticks() -> tuple[int, int]:
    """The machine's CPU time so far, in ticks: all of it, and what the hypervisor stole (/proc/stat)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields[:8]), fields[7] if len(fields) > 7 else 0


def machine_cpu(before: dict, after: dict, labelled: int) -> dict[str, float]:
    """CPU milliseconds per issue labelled, by role, over the window: every process of the machine. The
    bench's own process is the fake GitHub and the sender (what GitHub would spend, not the service);
    RQ's scheduler, forked by each worker, has the worker's command line and counts with it."""
    import re

    spent: dict[str, float] = {}
    for pid, (args, seconds) in after.items():
        used = seconds - before.get(pid, (args, 0.0))[1]
        if pid == os.getpid():
            role = "the bench (fake GitHub, sender)"
        else:
            role = next((name for name, pattern in MACHINE_ROLES if re.search(pattern, args)), "other")
        spent[role] = spent.get(role, 0.0) + used
    return {role: round(1000 * seconds / max(1, labelled), 1)
            for role, seconds in sorted(spent.items(), key=lambda item: -item[1]) if seconds > 0}


def model_alone(model_dir: Path, texts: list[str], threads: int) -> float:
    """Seconds per issue the model takes alone here, one issue per call as a job asks."""
    from core.classifier import load_classifier

    classifier = load_classifier(model_dir, threads=threads)
    ask = getattr(classifier, "predict_and_embed", classifier.predict)
    ms_each(lambda text: ask([text]), texts[:5])  # warm-up
    return sum(ms_each(lambda text: ask([text]), texts)) / 1000 / len(texts)


@contextlib.contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new PostgreSQL database's URL, the database dropped at the end."""
    from sqlalchemy import create_engine, text

    name = f"scale_{uuid.uuid4().hex[:10]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with engine.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


def job_seconds(service: Service) -> dict[str, tuple[int, float]]:
    """Per job name: how many ran and their summed seconds (core.metrics's histogram)."""
    from redis import Redis

    from core.metrics import JOB_KEY, JOBS_KEY

    redis = Redis.from_url(service.redis_url())
    out = {}
    for name in redis.smembers(JOBS_KEY):
        fields = redis.hgetall(JOB_KEY.format(name.decode()))
        out[name.decode()] = (int(fields.get(b"count", 0)), float(fields.get(b"sum", 0.0)))
    return out


def wait_for_labels(fake: FakeGitHub, count: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while len(fake.calls("POST", LABEL_POST)) < count and time.monotonic() < deadline:
        time.sleep(0.1)


def wait_for_feedback(service: Service, seconds: float = 300) -> None:
    """Until the feedback queue has nothing queued or running (the memories' first fills)."""
    from redis import Redis
    from rq import Queue

    from core.queues import FEEDBACK_QUEUE

    queue = Queue(FEEDBACK_QUEUE, connection=Redis.from_url(service.redis_url()))
    deadline = time.monotonic() + seconds
    while (len(queue) or queue.started_job_registry.count) and time.monotonic() < deadline:
        time.sleep(0.2)


def tokens_issued(fake: FakeGitHub) -> dict[int, int]:
    """Per installation, how many installation tokens GitHub has issued (one per worker that asked)."""
    return Counter(int(call.path.split("/")[3]) for call in fake.calls("POST", TOKEN_POST))


def warm_every_worker(service, fake: FakeGitHub, spare: list[dict], repo_ids: dict[str, int], workers: int,
                      args) -> int:
    """Warm-up passes, each one more issue (from `spare`) for each installation whose token fewer than
    `workers` workers hold, until none is short or the passes run out; the issues this labelled."""
    sent, left = 0, list(spare)
    for _ in range(WARM_UP_PASSES * workers if workers > 1 else 0):
        issued = tokens_issued(fake)
        short = {installation for installation in {i["installation"] for i in spare}
                 if issued.get(installation, 0) < workers}
        batch = [next(i for i in left if i["installation"] == installation) for installation in sorted(short)
                 if any(i["installation"] == installation for i in left)]
        if not batch:
            break
        for issue in batch:
            left.remove(issue)
        labelled = len(fake.calls("POST", LABEL_POST))
        send_at_rate(service.base, batch, repo_ids, args.rate)
        wait_for_labels(fake, labelled + len(batch), args.timeout)
        sent += len(batch)
    return sent


def parse_config(config: str) -> tuple[int, int, dict[str, str]]:
    """"4x1" → (4, 1, {}); "4x1:NAME=VALUE,NAME=VALUE" → workers, threads each, and those settings."""
    shape, _, settings = config.partition(":")
    try:
        workers, threads = (int(part) for part in shape.split("x"))
        environ = dict(pair.split("=", 1) for pair in settings.split(",")) if settings else {}
    except ValueError:
        raise SystemExit(f"bench.scale: {config!r} is not WORKERSxTHREADS[:NAME=VALUE,...]") from None
    return workers, threads, environ


def measure(args, workers: int, threads: int, issues: list[dict], model: Path, per_issue: float,
            warm_up: list[dict] = (), spare: list[dict] = (), settings: dict[str, str] | None = None) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix=f"scale-{workers}x{threads}-"))
    repos = {i["repo"]: i["installation"] for i in issues}
    with (fresh_database(args.postgres) as database_url,
          prepared(workdir, repos, model, DATABASE_URL=database_url, GITHUB_WRITE_INTERVAL="1.0",
                   ISSUE_SORTER_REDELIVERY_INTERVAL="900", ISSUE_SORTER_LABELLING_WORKERS=str(workers),
                   ISSUE_SORTER_WORKER_THREADS=str(threads), **(settings or {})) as (fake, env)):
        fake.latency = args.github_latency / 1000
        for issue in [*warm_up, *issues, *spare]:
            fake.add_issue(issue["repo"], issue["number"], issue["title"], issue["body"])
        repo_ids = {repo: fake.repo_id(repo) for repo in repos}
        env.pop("REDIS_URL", None)  # the embedded Redis, each configuration its own
        with Service(workdir, env) as service:
            service.wait_healthy()  # every labelling worker has loaded and warmed up its model
            if warm_up:
                send_at_rate(service.base, warm_up, repo_ids, args.rate)
                wait_for_labels(fake, len(warm_up), args.timeout)
                warm_every_worker(service, fake, spare, repo_ids, workers, args)
                wait_for_feedback(service)
            issued = tokens_issued(fake)  # before the window: what the warm-up left every worker holding
            held = sum(issued.get(i, 0) >= workers for i in {issue["installation"] for issue in issues})
            return {**_run(args, service, fake, issues, repo_ids, workers, threads, per_issue),
                    "settings": settings or {}, "installations_every_worker_holds_a_token_of": held}


def _run(args, service, fake, issues, repo_ids, workers, threads, per_issue) -> dict:
    pids = service.child_pids(LABELLING_WORKER)
    before = {pid: task_times(pid) for pid in pids}
    machine_before, ticks_before = process_cpu(), cpu_ticks()
    jobs_before, requests_before = job_seconds(service), len(fake.requests)
    earlier = len(fake.calls("POST", LABEL_POST))  # the warm-up's
    started_wall, started = time.time(), time.monotonic()
    send_at_rate(service.base, issues, repo_ids, args.rate)
    wait_for_labels(fake, earlier + len(issues), args.timeout)
    window = time.monotonic() - started
    after = {pid: task_times(pid) for pid in pids}
    machine_after, ticks_after = process_cpu(), cpu_ticks()
    stolen = (ticks_after[1] - ticks_before[1]) / max(1, ticks_after[0] - ticks_before[0])
    posts = fake.calls("POST", LABEL_POST)[earlier:]
    done = {(p.path.split("/")[2], p.path.split("/")[3], p.path.split("/")[5]) for p in posts}
    last = max(p.received_at for p in posts) - started_wall if posts else window
    on_cpu = [after[p][0] - before[p][0] for p in pids]
    waiting = [after[p][1] - before[p][1] for p in pids]
    jobs = {name: (count - jobs_before.get(name, (0, 0.0))[0], seconds - jobs_before.get(name, (0, 0.0))[1])
            for name, (count, seconds) in job_seconds(service).items()}
    in_jobs = sum(seconds for name, (_, seconds) in jobs.items() if "label" in name or "issue" in name)
    labelled_each = len(done) / workers
    share = lambda seconds: round(100 * seconds / window, 1)
    return {
        "workers": workers, "threads_each": threads, "n": len(issues), "labelled": len(done),
        "labels_per_s": round(len(done) / last, 2), "window_s": round(window, 1),
        "warm_up_labelled": earlier,
        "github_requests_per_issue": round((len(fake.requests) - requests_before) / max(1, len(done)), 1),
        "per_worker_percent_of_wall": {
            "on_cpu": share(statistics.mean(on_cpu)), "waiting_for_cpu": share(statistics.mean(waiting)),
            "asleep": share(window - statistics.mean(on_cpu) - statistics.mean(waiting)),
            "model_alone_cpu": share(labelled_each * per_issue * threads),
            "in_jobs": share(in_jobs / workers), "between_jobs": share(window - in_jobs / workers)},
        "model_alone_ms_per_issue": round(per_issue * 1000, 1),
        "machine_cpu_ms_per_issue": machine_cpu(machine_before, machine_after, len(done)),
        # the hypervisor's share of this virtual machine's CPU time over the window: a slow spell that no
        # process of the machine shows (every role's CPU per issue grows at once)
        "stolen_percent": round(100 * stolen, 1),
        "jobs": {name: {"count": count, "mean_ms": round(1000 * seconds / max(1, count), 1)}
                 for name, (count, seconds) in jobs.items() if count},
    }


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--configs", nargs="+", default=["1x1", "1x2", "2x1", "4x1"],
                        help="labelling workers x inference threads each, [:NAME=VALUE,...] its own settings")
    parser.add_argument("--n", type=int, default=400, help="deliveries per configuration")
    parser.add_argument("--rate", type=float, default=50.0, help="deliveries per second (above any throughput)")
    parser.add_argument("--installations", type=int, default=200)
    parser.add_argument("--github-latency", type=float, default=0.0, metavar="MS",
                        help="milliseconds every answer of the fake GitHub waits (0: loopback's, the "
                             "CPU-bound case; GitHub's own round trip is tens to hundreds)")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--max-length", type=int, default=128, help="tokens the trained model reads")
    parser.add_argument("--postgres", default=os.environ.get(
        "POSTGRES_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of every configuration (the median reported)")
    parser.add_argument("--cold", action="store_true",
                        help="no warm-up: every installation's first issue falls in the window")
    args = parser.parse_args(argv)
    # a SIGTERM (kill, a CI timeout) unwinds like Ctrl-C: each service's processes stopped, its database dropped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    warm = 0 if args.cold else args.installations
    # next issues, other installations: the first `warm` are one per installation, in the repository its
    # window's issues go to (installations a multiple of NLBSE's 5 repositories)
    # after them the window's, then spare issues for the passes that warm every worker's tokens
    configs = {config: parse_config(config) for config in args.configs}
    spares = warm * WARM_UP_PASSES * max(workers for workers, _, _ in configs.values())
    everything = real_issues(warm + args.n + spares, args.installations, together=1)
    warm_up, issues, spare = everything[:warm], everything[warm:warm + args.n], everything[warm + args.n:]
    model = (without_thresholds(args.model) if args.model
             else served_model(None, Path(tempfile.mkdtemp(prefix="scale-model-")), max_length=args.max_length))
    texts = [f"{i['title']}\n\n{i['body']}" for i in issues[:60]]
    alone = {threads: model_alone(model, texts, threads) for threads in sorted({
        threads for _, threads, _ in configs.values()})}
    results = []
    for round_ in range(args.repeat):  # round-robin, so that a slower spell of the machine hits every config
        for config in args.configs:
            workers, threads, settings = configs[config]
            measured = measure(args, workers, threads, issues, model, alone[threads], warm_up, spare,
                               settings)
            results.append({"round": round_ + 1, "config": config, **measured})
            print(json.dumps(results[-1]), flush=True)
    report = {"date": datetime.date.today().isoformat(), "cpu": cpu_line(), "cores": os.cpu_count(),
              "github_latency_ms": args.github_latency,
              "warm_up_per_configuration": len(warm_up),
              "load_before": os.getloadavg(), "results": results, "median_labels_per_s": medians(results)}
    print(json.dumps(report["median_labels_per_s"]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def medians(results: list[dict]) -> dict[str, float]:
    """Per configuration ("2x1", "4x1:NAME=VALUE"), the median labels/s of its rounds."""
    rounds: dict[str, list[float]] = {}
    for result in results:
        rounds.setdefault(result["config"], []).append(result["labels_per_s"])
    return {config: round(statistics.median(values), 2) for config, values in rounds.items()}


def without_thresholds(model: Path) -> Path:
    """A copy of `model` whose cards keep no per-label thresholds, so that every job ends in its label
    write (ISSUE_SORTER_THRESHOLD=0 does the rest, as in bench.latency): the bench counts labels at
    GitHub, and a served model abstains on some issues (its card's thresholds)."""
    import shutil

    copy = Path(tempfile.mkdtemp(prefix="scale-model-")) / model.name
    shutil.copytree(model, copy)
    for card in copy.rglob("issue_sorter.json"):
        fields = json.loads(card.read_text())
        fields["thresholds"] = {}
        card.write_text(json.dumps(fields, indent=2))
    return copy


if __name__ == "__main__":
    sys.exit(main())
