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

import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.service import arguments, delivery_body, post, prepared, print_report
from tests.issue_sorter.running import Service
from tests.paths import NLBSE  # the shared data's location, one definition

REPOS = {f"bench-org-{i}/service-{i}": 100 + i for i in range(5)}  # repository → its installation
DRAIN_SECONDS = 60  # after the last delivery, how long to wait for its label at most


def main(argv: list[str] | None = None) -> int:
    from trainer.dataset import load_file

    parser = arguments(__doc__)
    parser.add_argument("--rates", type=float, nargs="+", default=[1.0, 5.0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--worker-threads", type=int, help="ISSUE_SORTER_WORKER_THREADS (default: the service's)")
    parser.add_argument("--repositories", type=int, default=len(REPOS), choices=range(1, len(REPOS) + 1),
                        help="deliveries round-robin over this many repositories, each in its own installation")
    args = parser.parse_args(argv)
    texts = [(e.title, e.body) for e in load_file(NLBSE / "issues_test.csv")]
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as folder:
        extra = {"ISSUE_SORTER_WORKER_THREADS": str(args.worker_threads)} if args.worker_threads else {}
        repos = dict(list(REPOS.items())[:args.repositories])
        results = measure(Path(folder), args.model, texts, args.rates, args.seconds, extra, repos)
    print_report(results, args.json)
    return 0


def measure(folder: Path, model: Path | None, texts: list, rates: list[float], seconds: float,
            extra_env: dict[str, str], repos: dict[str, int]) -> dict:
    # the service's defaults (no setting of this shell's), but every issue gets a label: threshold 0
    with (prepared(folder, repos, model, inherit=False, PYTHONUNBUFFERED="1", **extra_env) as (fake, env),
          Service(folder, env) as service):
        ready = service.wait_healthy()
        sender = Sender(service.base, fake, texts, list(repos.items()))
        first_issue, first_label = sender.first_issue()
        results = {"ready_s": round(ready - service.started_at, 2), "first_issue_ms": round(first_issue * 1000),
                   "first_label_after_ready_ms": round((first_label - ready) * 1000)}
        # every other installation's first job fetches its token and lists its labels: not "warm"
        sender.wait([sender.deliver(*repo) for repo in list(repos.items())[1:]], DRAIN_SECONDS)
        for rate in rates:
            results[f"{rate:g}/s"] = sender.steady(rate, seconds, service.redis_url())
        results["engines"] = serving_engines(service.redis_url())
        return results


def serving_engines(redis_url: str) -> list[str]:
    """The engine each live worker serves its models with ("worker scope: version engine"), as GET /metrics
    names it: the latency depends on it."""
    from redis import Redis

    from bot.metrics import serving_engines as live_engines

    with Redis.from_url(redis_url) as redis:
        return [f"{worker} {scope}: {version} {engine}" for worker, scope, version, engine in live_engines(redis)]


class Sender:
    """Signed issues.opened deliveries as GitHub sends them, and when their labels reach the fake."""

    def __init__(self, base: str, fake, texts: list, repos: list[tuple[str, int]]):
        self.base, self.fake, self.texts, self.repos = base, fake, texts, repos
        self.number = 0

    def deliver(self, repo: str, installation: int) -> tuple[str, int, float]:
        self.number += 1
        title, body = self.texts[self.number % len(self.texts)]
        self.fake.add_issue(repo, self.number, title, body)
        issue = {"repo": repo, "number": self.number, "title": title, "body": body, "installation": installation}
        payload = delivery_body(issue, self.fake.repo_id(repo), fresh=True)
        sent = time.time()
        status = post(self.base, "issues", payload, f"bench-{self.number}", timeout=10)
        assert status == 202, status
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
