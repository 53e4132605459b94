"""A flood of writes on one installation beside a quiet one: what a write costs, and who waits.

    REDIS_URL=redis://127.0.0.1:6379/3 .venv/bin/python -m bench.flood --flood 100 --strangers 30 --workers 4

`issue-sorter run` with `--workers` labelling workers (bench.service), the fake GitHub on loopback,
GITHUB_WRITE_INTERVAL 1 s. After one warm-up issue per
installation: `--flood` signed `issues.opened` deliveries on installation 1 at once, interleaved with
`--strangers` `/issue-sorter retrain` comments there from people without a role (half with no association,
half collaborators GitHub is asked about, each a new login); meanwhile one issue every `--quiet-every`
seconds on installation 2. It waits for every flood issue's label and reports, for installation 1, GitHub
reads per write and job runs (RQ executions of the labelling and comment jobs, counted by the jobs
themselves: core.metrics) per write; for installation 2, the seconds from delivery to label (its wait
behind the flood); and the smallest gap between two writes of installation 1. REDIS_URL's database is
flushed before and after: give it one of its own.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.service import Service, arguments, delivery_body, own_redis, post, prepared, print_report
from simulation.fake_github import WRITE_METHODS, FakeGitHub
from tests.paths import WEBHOOKS

FLOODED, QUIET = (1, "flood-org/busy"), (2, "quiet-org/calm")
COMMENT_SHAPE = WEBHOOKS / "issue_comment" / "created.with-installation.payload.json"


def opened(installation: tuple[int, str], number: int, repo_id: int) -> bytes:
    issue = {"repo": installation[1], "number": number, "title": f"App crashes on start ({number})",
             "body": "Traceback (most recent call last): ...", "installation": installation[0]}
    return delivery_body(issue, repo_id)


def stranger_command(number: int, repo_id: int, shape: dict) -> bytes:
    """`/issue-sorter retrain` on issue 1 of the flooded repository, by a new login without a role."""
    payload = copy.deepcopy(shape)
    owner, name = FLOODED[1].split("/")
    payload["comment"].update(body="/issue-sorter retrain", id=900000 + number,
                              author_association="NONE" if number % 2 else "COLLABORATOR")
    for who in (payload["comment"]["user"], payload["sender"]):
        who.update(login=f"stranger-{number}", type="User")
    payload["issue"]["number"] = 1
    payload["repository"].update(id=repo_id, name=name, full_name=FLOODED[1])
    payload["repository"]["owner"]["login"] = owner
    payload["installation"] = {"id": FLOODED[0]}
    return json.dumps(payload).encode()


def send(base: str, event: str, body: bytes, kind: str) -> int:
    """A signed delivery whose id starts with `kind` (flood, stranger, quiet): its jobs' runs are counted by it."""
    return post(base, event, body, f"{kind}-{uuid.uuid4()}")


def wait_labelled(fake: FakeGitHub, repo: str, number: int, deadline: float) -> float | None:
    while time.monotonic() < deadline:
        if fake.issue_labels(repo, number):
            return time.monotonic()
        time.sleep(0.02)
    return None


def job_runs(workdir: Path, job: str, kind: str) -> int:
    """RQ's runs of `job` for the deliveries of `kind`, reruns included, as the workers logged each start."""
    start = re.compile(rf": bot\.jobs\.{job}\(.*delivery_id='{kind}-")
    return sum(1 for log in workdir.glob("*.log") for line in log.read_text().splitlines() if start.search(line))


def github_calls(fake: FakeGitHub, repo: str, since: int) -> tuple[int, int]:
    """(reads, writes) of `repo` among the requests after the first `since`."""
    mine = [r for r in fake.requests[since:] if r.path.startswith(f"/repos/{repo}/")]
    writes = sum(1 for r in mine if r.method in WRITE_METHODS)
    return len(mine) - writes, writes


def quiet_traffic(base: str, fake: FakeGitHub, repo_id: int, every: float, stop: threading.Event,
                  waits: list[float], deadline: float) -> None:
    """One issue on the quiet installation every `every` seconds until `stop`: seconds to its label."""
    number = 1
    while not stop.is_set():
        number += 1
        fake.add_issue(QUIET[1], number, f"App crashes on start ({number})", "Traceback ...")
        sent = time.monotonic()
        send(base, "issues", opened(QUIET, number, repo_id), "quiet")
        done = wait_labelled(fake, QUIET[1], number, deadline)
        if done is not None:
            waits.append(done - sent)
        stop.wait(max(0.0, every - (time.monotonic() - sent)))


def flood(args, base: str, fake: FakeGitHub, workdir: Path) -> dict:
    repo_ids = {repo: fake.repo_id(repo) for _, repo in (FLOODED, QUIET)}
    for number in range(2, args.flood + 2):
        fake.add_issue(FLOODED[1], number, f"App crashes on start ({number})", "Traceback ...")
    before_requests = len(fake.requests)
    shape = json.loads(COMMENT_SHAPE.read_text())
    sends = [("issues", opened(FLOODED, number, repo_ids[FLOODED[1]]), "flood")
             for number in range(2, args.flood + 2)]
    for i in range(args.strangers):  # spread among the issues
        sends.insert(i * len(sends) // max(1, args.strangers),
                     ("issue_comment", stranger_command(i, repo_ids[FLOODED[1]], shape), "stranger"))
    deadline = time.monotonic() + args.timeout
    stop, waits = threading.Event(), []
    quiet = threading.Thread(target=quiet_traffic, args=(base, fake, repo_ids[QUIET[1]], args.quiet_every, stop,
                                                         waits, deadline))
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda delivery: send(base, *delivery), sends))
    quiet.start()
    last = [wait_labelled(fake, FLOODED[1], number, deadline) for number in range(2, args.flood + 2)]
    stop.set()
    quiet.join()
    time.sleep(2)  # the comment jobs' last runs
    reads, writes = github_calls(fake, FLOODED[1], before_requests)
    runs = {"label_issue": job_runs(workdir, "label_issue", "flood"),
            "handle_comment": job_runs(workdir, "handle_comment", "stranger")}
    quiet_reads, quiet_writes = github_calls(fake, QUIET[1], before_requests)
    times = fake.write_times().get(FLOODED[0], [])
    times = [t for t in times if t >= time.time() - (time.monotonic() - started)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    labelled = [t for t in last if t is not None]
    return {
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


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--flood", type=int, default=100, help="issues opened at once on installation 1")
    parser.add_argument("--strangers", type=int, default=30, help="`/issue-sorter retrain` from people without a role")
    parser.add_argument("--workers", type=int, default=4, help="labelling workers")
    parser.add_argument("--quiet-every", type=float, default=5.0, help="seconds between installation 2's issues")
    parser.add_argument("--write-interval", type=float, default=1.0, help="GITHUB_WRITE_INTERVAL")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for the flood's labels")
    args = parser.parse_args(argv)
    redis = own_redis()
    workdir = Path(tempfile.mkdtemp(prefix="flood-"))
    repos = {repo: installation for installation, repo in (FLOODED, QUIET)}
    try:
        with (prepared(workdir, repos, args.model, GITHUB_WRITE_INTERVAL=str(args.write_interval),
                       ISSUE_SORTER_LABELLING_WORKERS=str(args.workers)) as (fake, env),
              Service(workdir, env) as service):
            service.wait_healthy()
            for installation, repo in (FLOODED, QUIET):  # warm-up: the labels listed once
                fake.add_issue(repo, 1, "App crashes on start (warm-up)", "Traceback ...")
                send(service.base, "issues", opened((installation, repo), 1, fake.repo_id(repo)), "warm-up")
            for _, repo in (FLOODED, QUIET):
                if wait_labelled(fake, repo, 1, time.monotonic() + 300) is None:
                    raise SystemExit(f"the warm-up issue of {repo} was not labelled; logs in {workdir}")
            time.sleep(args.write_interval + 1)
            report = {"workers": args.workers, "write_interval_s": args.write_interval,
                      **flood(args, service.base, fake, workdir)}
    finally:
        redis.flushdb()
    print_report(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
