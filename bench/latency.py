"""Webhook → label latency of `issue-sorter run` on embedded defaults, against the fake GitHub on loopback.

Measured from the start of the signed POST /webhook to the moment the label request (POST
/repos/{repo}/issues/{n}/labels) reaches the fake GitHub, for: the first issue after the bot's worker is
up, then steady deliveries at each --rates (deliveries per second, round-robin over five repositories in
five installations, on a fixed schedule) for --seconds each. The service runs with its defaults, the
client-side throttle included (writes 1 s apart per installation). Loopback only; every loop is bounded.

    .venv/bin/python bench/latency.py [--rates 1 5] [--seconds 20] [--model DIR]

Without --model, a MiniLM encoder is fine-tuned for a few steps on 48 NLBSE issues (128 tokens, the served
model's length): latency depends on the architecture, not on how well it was trained.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.paths import NLBSE, WEBHOOKS  # noqa: E402  (the shared data's location, one definition)

REPOS = [(f"bench-org-{i}/service-{i}", 100 + i) for i in range(5)]  # (repository, installation id)
APP_ID = 4711
DRAIN_SECONDS = 60  # after the last delivery, how long to wait for its label at most


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[1.0, 5.0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--model", type=Path, help="a saved model directory (default: fine-tune a small one)")
    args = parser.parse_args()
    texts = issue_texts()
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as folder:
        results = measure(Path(folder), args.model or tiny_model(Path(folder)), texts, args.rates, args.seconds)
    print(json.dumps(results, indent=2))
    return 0


def issue_texts() -> list[tuple[str, str]]:
    from trainer.dataset import load_file

    return [(e.title, e.body) for e in load_file(NLBSE / "issues_test.csv")]


def tiny_model(folder: Path) -> Path:
    from trainer.config import TrainConfig
    from trainer.dataset import load_file
    from trainer.train import fine_tune

    examples = load_file(NLBSE / "issues_train.csv")
    picked = []
    for label in ("bug", "feature", "question"):
        picked += [e for e in examples if e.label == label][:16]
    trained = fine_tune(TrainConfig(max_length=128, epochs=1, batch_size=16, lr=1e-4), picked, progress=False)
    trained.save(folder / "model", version="bench", metrics={}, thresholds={}, data_fingerprint="")
    return folder / "model"


def measure(folder: Path, model: Path, texts: list, rates: list[float], seconds: float) -> dict:
    from core.migrate import upgrade
    from simulation.fake_github import FakeGitHub
    from tests.conftest import promote_model
    from tests.issue_sorter.running import free_port, running_service

    database = f"sqlite:///{folder / 'var' / 'issue-sorter.db'}"
    (folder / "var").mkdir(exist_ok=True)
    upgrade(database)
    promote_model(database, folder / "var" / "models", model)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "ISSUE_SORTER_"))
           and k not in ("REDIS_URL", "DATABASE_URL", "MODEL_DIR")}
    with FakeGitHub(app_id=APP_ID) as fake:
        for repo, installation in REPOS:
            fake.add_repo(repo, labels=["bug", "enhancement", "question", "documentation"],
                          installation_id=installation)
        # threshold 0: every issue gets a label, so every job ends in the write we time
        env.update(PORT=str(free_port()), GITHUB_APP_ID=str(APP_ID), GITHUB_PRIVATE_KEY=fake.private_key_pem,
                   GITHUB_API_URL=fake.url, ISSUE_SORTER_THRESHOLD="0", PYTHONUNBUFFERED="1")
        started = time.time()
        with running_service(folder, env) as base:
            sender = Sender(base, (folder / "var" / "webhook-secret").read_text().strip(), fake, texts)
            worker_up = wait_for_worker(folder / "run.log")
            results = {"service_up_s": round(worker_up - started, 2),
                       "first_issue_ms": round(sender.first_issue() * 1000)}
            for rate in rates:
                results[f"{rate:g}/s"] = sender.steady(rate, seconds, redis_url(folder / "run.log"))
    return results


def redis_url(log: Path) -> str:
    return re.search(r"listening on (redis://\S+),", log.read_text()).group(1)


def wait_for_worker(log: Path, seconds: float = 120) -> float:
    """When the bot's worker registered with RQ: its model is loaded by then (bot.worker.run_worker)."""
    from redis import Redis
    from rq import Worker

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if "listening on redis://" in log.read_text():
            redis = Redis.from_url(redis_url(log))
            if any("labeling" in w.queue_names() for w in Worker.all(connection=redis)):
                return time.time()
        time.sleep(0.05)
    raise SystemExit("the bot's worker did not start:\n" + log.read_text()[-3000:])


class Sender:
    """Signed issues.opened deliveries as GitHub sends them, and when their labels reach the fake."""

    def __init__(self, base: str, secret: str, fake, texts: list):
        self.base, self.secret, self.fake, self.texts = base, secret, fake, texts
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

    def labelled_at(self, repo: str, number: int) -> float | None:
        calls = self.fake.calls("POST", rf"/repos/{re.escape(repo)}/issues/{number}/labels")
        return calls[0].received_at if calls else None

    def wait(self, sent: list[tuple[str, int, float]], seconds: float) -> list[float]:
        """Latencies in seconds, once every label arrived or `seconds` passed (missing ones are dropped)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and any(self.labelled_at(r, n) is None for r, n, _ in sent):
            time.sleep(0.05)
        return [at - t for r, n, t in sent if (at := self.labelled_at(r, n)) is not None]

    def first_issue(self) -> float:
        (latency,) = self.wait([self.deliver(*REPOS[0])], DRAIN_SECONDS) or [float("nan")]
        return latency

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
            sent.append(self.deliver(*REPOS[i % len(REPOS)]))
        latencies = sorted(self.wait(sent, DRAIN_SECONDS))
        done.set()
        sampler.join()
        third = max(1, len(latencies) // 3)
        in_order = [at - t for r, n, t in sent if (at := self.labelled_at(r, n)) is not None]
        return {"deliveries": count, "labelled": len(latencies),
                "p50_ms": round(statistics.median(latencies) * 1000),
                "p99_ms": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000),
                "max_ms": round(latencies[-1] * 1000),
                "first_third_p50_ms": round(statistics.median(in_order[:third]) * 1000),
                "last_third_p50_ms": round(statistics.median(in_order[-third:]) * 1000),
                "max_queue_length": max(queue_lengths, default=0)}


if __name__ == "__main__":
    raise SystemExit(main())
