"""Webhook → label latency of `issue-sorter run` on embedded defaults, against the fake GitHub on loopback.

Measured from the start of the signed POST /webhook to the moment the label request (POST
/repos/{repo}/issues/{n}/labels) reaches the fake GitHub, for: the first issue, sent the moment `run` says
it is ready ("Issue Sorter is up.", printed once the labelling worker has loaded and warmed up its model:
issue_sorter.readiness), also timed from that moment (`first_label_after_ready_ms`: the target is 500 ms);
then steady deliveries at each --rates (deliveries per second, round-robin over five repositories in
five installations, on a fixed schedule) for --seconds each. The service runs with its defaults, the
client-side throttle included (writes 1 s apart per installation). Loopback only; every loop is bounded.

    .venv/bin/python -m bench.latency [--rates 1 5] [--seconds 20] [--model DIR]

Without --model, a MiniLM encoder is fine-tuned for a few steps on 48 NLBSE issues (128 tokens, the served
model's length): latency depends on the architecture, not on how well it was trained.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tests.paths import NLBSE, WEBHOOKS  # the shared data's location, one definition
from tests.tiny_model import train_tiny_model  # the tests' tiny model, here at 128 tokens

REPOS = [(f"bench-org-{i}/service-{i}", 100 + i) for i in range(5)]  # (repository, installation id)
APP_ID = 4711
DRAIN_SECONDS = 60  # after the last delivery, how long to wait for its label at most


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[1.0, 5.0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--model", type=Path, help="a saved model directory (default: fine-tune a small one)")
    parser.add_argument("--worker-threads", type=int, help="ISSUE_SORTER_WORKER_THREADS (default: the service's)")
    parser.add_argument("--repositories", type=int, default=len(REPOS), choices=range(1, len(REPOS) + 1),
                        help="deliveries round-robin over this many repositories, each in its own installation")
    args = parser.parse_args()
    texts = issue_texts()
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as folder:
        extra = {"ISSUE_SORTER_WORKER_THREADS": str(args.worker_threads)} if args.worker_threads else {}
        model = args.model or train_tiny_model(Path(folder) / "model", max_length=128, version="bench")
        results = measure(Path(folder), model, texts, args.rates, args.seconds, extra, REPOS[:args.repositories])
    print(json.dumps(results, indent=2))
    return 0


def issue_texts() -> list[tuple[str, str]]:
    from trainer.dataset import load_file

    return [(e.title, e.body) for e in load_file(NLBSE / "issues_test.csv")]


def measure(folder: Path, model: Path, texts: list, rates: list[float], seconds: float,
            extra_env: dict[str, str], repos: list[tuple[str, int]]) -> dict:
    from core.migrate import upgrade
    from simulation.fake_github import FakeGitHub
    from tests.conftest import promote_model
    from tests.issue_sorter.running import running_service
    from tests.ports import free_port

    database = f"sqlite:///{folder / 'var' / 'issue-sorter.db'}"
    (folder / "var").mkdir(exist_ok=True)
    upgrade(database)
    promote_model(database, folder / "var" / "models", model)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "ISSUE_SORTER_"))
           and k not in ("REDIS_URL", "DATABASE_URL", "MODEL_DIR")}
    with FakeGitHub(app_id=APP_ID) as fake:
        for repo, installation in repos:
            fake.add_repo(repo, labels=["bug", "enhancement", "question", "documentation"],
                          installation_id=installation)
        # threshold 0: every issue gets a label, so every job ends in the write we time
        env.update(PORT=str(free_port()), GITHUB_APP_ID=str(APP_ID), GITHUB_PRIVATE_KEY=fake.private_key_pem,
                   GITHUB_API_URL=fake.url, ISSUE_SORTER_THRESHOLD="0", PYTHONUNBUFFERED="1", **extra_env)
        started = time.time()
        with running_service(folder, env) as base:
            sender = Sender(base, (folder / "var" / "webhook-secret").read_text().strip(), fake, texts, repos)
            ready = wait_for_ready(folder / "run.log")
            first_issue, first_label = sender.first_issue()
            results = {"ready_s": round(ready - started, 2), "first_issue_ms": round(first_issue * 1000),
                       "first_label_after_ready_ms": round((first_label - ready) * 1000)}
            # every other installation's first job fetches its token and lists its labels: not "warm"
            sender.wait([sender.deliver(*repo) for repo in repos[1:]], DRAIN_SECONDS)
            for rate in rates:
                results[f"{rate:g}/s"] = sender.steady(rate, seconds, redis_url(folder / "run.log"))
    return results


def redis_url(log: Path) -> str:
    """The embedded Redis's URL: its port from the log, its password from its file beside the log (the
    log names only the port: a URL with the password never reaches a log)."""
    from issue_sorter.run import REDIS_PASSWORD_FILE, REDIS_USER

    port = re.search(r"listening on 127\.0\.0\.1:(\d+),", log.read_text()).group(1)
    password = (log.parent / REDIS_PASSWORD_FILE).read_text().strip()
    return f"redis://{REDIS_USER}:{password}@127.0.0.1:{port}/0"


def wait_for_ready(log: Path, seconds: float = 300) -> float:
    """When `run` said it is ready (issue_sorter.run.READY_LINE, after the labelling worker warmed up), as
    seen by polling its log every 10 ms."""
    from issue_sorter.run import READY_LINE

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if READY_LINE in log.read_text():
            return time.time()
        time.sleep(0.01)
    raise SystemExit("`issue-sorter run` did not say it is ready:\n" + log.read_text()[-3000:])


class Sender:
    """Signed issues.opened deliveries as GitHub sends them, and when their labels reach the fake."""

    def __init__(self, base: str, secret: str, fake, texts: list, repos: list[tuple[str, int]]):
        self.base, self.secret, self.fake, self.texts, self.repos = base, secret, fake, texts, repos
        self.template = json.loads((WEBHOOKS / "issues" / "opened.payload.json").read_text())
        self.number = 0

    def deliver(self, repo: str, installation: int) -> tuple[str, int, float]:
        from tests.issue_sorter.running import deliver

        self.number += 1
        title, body = self.texts[self.number % len(self.texts)]
        self.fake.add_issue(repo, self.number, title, body)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        payload = json.loads(json.dumps(self.template))
        payload["installation"] = {"id": installation}
        payload["repository"]["full_name"] = repo
        payload["issue"].update(number=self.number, title=title, body=body, labels=[], created_at=now,
                                updated_at=now)
        sent = time.time()
        answer = deliver(self.base, "issues", payload, f"bench-{self.number}", self.secret)
        assert answer.status_code == 202, answer.text
        return repo, self.number, sent

    def labels_written(self) -> dict[str, float]:
        """Path of each issue's label request → when the first one reached the fake (one pass over its log:
        the fake answers in this process, so a slow poll here would slow GitHub down)."""
        written: dict[str, float] = {}
        for request in self.fake.requests:
            if request.method == "POST" and request.path.endswith("/labels") and "/issues/" in request.path:
                written.setdefault(request.path, request.received_at)
        return written

    def wait(self, sent: list[tuple[str, int, float]], seconds: float) -> list[float | None]:
        """Each delivery's latency in seconds, in order, once every label arrived or `seconds` passed
        (None: no label in time)."""
        deadline = time.monotonic() + seconds
        while True:
            written = self.labels_written()
            latencies = [written[f"/repos/{r}/issues/{n}/labels"] - t if f"/repos/{r}/issues/{n}/labels" in written
                         else None for r, n, t in sent]
            if None not in latencies or time.monotonic() > deadline:
                return latencies
            time.sleep(0.2)

    def first_issue(self) -> tuple[float, float]:
        """(seconds from the delivery to its label, when the label reached the fake GitHub)."""
        repo, number, sent = self.deliver(*self.repos[0])
        (latency,) = self.wait([(repo, number, sent)], DRAIN_SECONDS)
        return (float("nan"), float("nan")) if latency is None else (latency, sent + latency)

    def steady(self, rate: float, seconds: float, redis: str) -> dict:
        from redis import Redis

        queue_lengths: list[int] = []
        done = threading.Event()
        connection = Redis.from_url(redis)

        def sample() -> None:
            while not done.wait(0.25):
                queue_lengths.append(connection.llen("rq:queue:labeling"))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        sent, start, count = [], time.monotonic(), int(rate * seconds)
        for i in range(count):
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
            sent.append(self.deliver(*self.repos[i % len(self.repos)]))
        in_order = [latency for latency in self.wait(sent, DRAIN_SECONDS) if latency is not None]
        done.set()
        sampler.join()
        latencies, third = sorted(in_order), max(1, len(in_order) // 3)
        return {"deliveries": count, "labelled": len(latencies),
                "p50_ms": round(statistics.median(latencies) * 1000),
                "p90_ms": round(latencies[min(len(latencies) - 1, int(0.9 * len(latencies)))] * 1000),
                "p99_ms": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000),
                "max_ms": round(latencies[-1] * 1000),
                "first_third_p50_ms": round(statistics.median(in_order[:third]) * 1000),
                "last_third_p50_ms": round(statistics.median(in_order[-third:]) * 1000),
                "max_queue_length": max(queue_lengths, default=0),
                "each_ms": [round(latency * 1000) for latency in in_order]}  # in the order sent


if __name__ == "__main__":
    raise SystemExit(main())
