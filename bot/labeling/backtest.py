"""Backtest: before the App writes on a repository, what it would have done on the repository's own history.

The repository's labelled issues (read as the backfill reads them) are replayed in time order through the App's
own code, in a scratch database of their own (a temporary SQLite file): the first `history` of them are stored
as the backfill stores them and embedded as the memory's fill does; each later one is decided by the labelling
job's gather and decide (bot.labeling: its writes only counted, never made) under the repository's config, then
judged by a simulated maintainer, recorded by bot.decisions as a maintainer's event is. So the memory, the
per-kind thresholds and the own labels' fits grow as they would have, and the issue after sees them. Nothing
reaches GitHub or the service's database. The same engine (`Replay`) runs `issue-sorter replay`
(simulation.replay), which retrains between issues. `issue-sorter backtest owner/name` prints the report; after
an installation's backfill a feedback job stores it for the review page (`REPORTS`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from sklearn.metrics import f1_score
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from bot.decisions import act as decisions_act
from bot.decisions import decide as decisions_decide
from bot.decisions import gather as decisions_gather
from bot.decisions import memory_fill
from bot.github_api.issues import IssueSnapshot
from bot.intake.events import IssueEvent
from bot.labeling import act as labeling_act
from bot.labeling import decide as labeling_decide
from bot.labeling import gather as labeling_gather
from bot.labeling.config import load_config
from bot.lifecycle import backfill
from bot.lifecycle.redis_copies import LastReport
from core import store
from core.db import make_sessionmaker, session_scope
from core.issue_text import format_issue_text
from core.memory import class_of
from core.repository_thresholds import repository_thresholds
from core.settings import Settings
from core.tables import Base, IssueRecord, ModelPromotion, ModelVersion, OwnLabelExample, Repository

log = logging.getLogger(__name__)
MAINTAINER = "maintainer"  # the login of the simulated maintainer, who may triage the repository
MAX_ISSUES = 1000  # the backfill's bound: the newest issues a backtest replays at most
REPORTS = LastReport("issue-sorter:backtest:{}", ttl=30 * 24 * 3600)  # each repository's last report
MAX_LISTED = 20  # abstentions (and wrong labels) the report lists one by one
QUIET = ("bot.labeling", "bot.decisions", "core.memory", "core.own_labels")  # one line per issue each, otherwise


@dataclasses.dataclass(frozen=True)
class Step:
    """One issue of the replay: what the App decided and what the maintainers had decided."""

    number: int
    title: str
    truth: str | None  # the kind a maintainer gave it (a model class), None when its label is none
    outcome: str  # applied | abstained | suggested | shadow | held | skipped
    predicted: str  # the model's top kind, after the memory
    label: str | None  # the repository label the App chose (None: it abstained)
    score: float
    threshold: float | None
    own_truth: tuple[str, ...]  # the repository's own labels the issue carries
    own_applied: tuple[str, ...]  # those the App would have put on (written, or recorded in shadow mode)
    model: str  # the version that decided it

    @property
    def labelled(self) -> bool:
        """The App chose a label: written in label and comment mode, recorded in suggest and shadow mode."""
        return self.label is not None and self.outcome not in ("held", "skipped")

    @property
    def served(self) -> str | None:
        """The kind it would have labelled, None when it abstained."""
        return self.predicted if self.labelled else None


# ---- the history, as the backfill reads it --------------------------------------------------------------

def labelled_history(github, repo: str, max_issues: int = MAX_ISSUES) -> list[IssueSnapshot]:
    """The repository's labelled issues as the backfill pages through them (oldest first), at most
    `max_issues`: those the backfill would store."""
    found: list[IssueSnapshot] = []
    for page in range(1, max_issues // backfill.PER_PAGE + 2):
        issues = github.list_issues_page(repo, page, backfill.PER_PAGE)
        found.extend(issue for issue in issues if backfill.is_history(issue))
        if len(issues) < backfill.PER_PAGE or len(found) >= max_issues:
            break
    return found[:max_issues]


def stored_history(session: Session, repo: str, max_issues: int = MAX_ISSUES) -> list[IssueSnapshot]:
    """The issues the backfill stored for `repo` (its history at install), as it read them, oldest first."""
    rows = session.scalars(select(IssueRecord).join(Repository).where(
        Repository.full_name == repo, backfill.stored_by_backfill())
        .order_by(IssueRecord.opened_at.asc().nulls_first(), IssueRecord.number).limit(max_issues)).all()
    own: dict[int, list[str]] = {}
    for issue_id, label in session.execute(select(OwnLabelExample.issue_id, OwnLabelExample.label).where(
            OwnLabelExample.issue_id.in_([row.id for row in rows])).order_by(OwnLabelExample.id)):
        own.setdefault(issue_id, []).append(label)
    return [IssueSnapshot(row.number, row.title, row.body, "closed",
                          tuple(label for label in (row.confirmed_label, *own.get(row.id, ())) if label),
                          False, row.author_login, row.opened_at) for row in rows]


class Remembering:
    """An installation's GitHub whose reads a backtest makes (the config file, the labels) are asked once:
    the App reads them again for every issue, and a backtest decides hundreds at once."""

    def __init__(self, github):
        self._github, self._answers = github, {}

    def _once(self, call: str, *args):
        if (call, args) not in self._answers:
            try:
                self._answers[(call, args)] = (getattr(self._github, call)(*args), None)
            except Exception as error:  # noqa: BLE001 - an answer too: the App would get it every time
                self._answers[(call, args)] = (None, error)
        answer, error = self._answers[(call, args)]
        if error is not None:
            raise error
        return answer

    def get_file(self, repo: str, path: str, *, etag: str | None = None):
        return self._once("get_file", repo, path)

    def list_labels(self, repo: str) -> list[str]:
        return list(self._once("list_labels", repo))

    def list_issue_types(self, repo: str) -> list[str]:
        return list(self._once("list_issue_types", repo))


class _Opened:
    """The repository's GitHub as the labelling job reads it for one issue: the issue as it was opened."""

    def __init__(self, github, issue: IssueSnapshot):
        self._github, self._issue = github, issue

    def get_issue(self, repo: str, number: int) -> IssueSnapshot:
        return self._issue  # a body longer than a job carries is read again by the job: here it is whole

    def __getattr__(self, name: str):
        return getattr(self._github, name)


class _Maintainer:
    """The decisions' view of GitHub: the simulated maintainer may triage; the issue is as the events say."""

    def get_permission(self, repo: str, login: str) -> str:
        return "maintain" if login == MAINTAINER else "none"

    def get_issue(self, repo: str, number: int) -> IssueSnapshot:  # every event carries the text: never asked
        raise AssertionError("a backtest's events carry the issue's text")


class Precomputed:
    """The serving classifier with every issue's scores computed up front, in batches: the labelling job and
    the memory ask for the same texts again, and the model does not change meanwhile."""

    def __init__(self, classifier, texts: Sequence[str], batch: int = 32,
                 progress: Callable[[int], None] = lambda done: None):
        self._classifier = classifier
        self.version, self.labels = classifier.version, list(classifier.labels)
        self.card = getattr(classifier, "card", None)
        self._answers: dict[str, tuple[dict, object]] = {}
        unique = list(dict.fromkeys(texts))
        for start in range(0, len(unique), batch):
            self._compute(unique[start:start + batch])
            progress(min(start + batch, len(unique)))

    @classmethod
    def of(cls, classifier, texts: Sequence[str], **options) -> Precomputed:
        """An encoder's answers with their embeddings (the memory's), a TF-IDF model's without."""
        return (PrecomputedEncoder if hasattr(classifier, "predict_and_embed") else cls)(classifier, texts, **options)

    def _compute(self, texts: Sequence[str]) -> None:
        scores = self._classifier.predict(list(texts))
        self._answers.update(zip(texts, ((row, None) for row in scores), strict=False))

    def _of(self, texts: Sequence[str]) -> list[tuple[dict, object]]:
        missing = [text for text in dict.fromkeys(texts) if text not in self._answers]
        if missing:
            self._compute(missing)
        return [self._answers[text] for text in texts]

    def predict(self, texts: Sequence[str]) -> list[dict[str, float]]:
        return [dict(scores) for scores, _ in self._of(texts)]


class PrecomputedEncoder(Precomputed):
    """Precomputed with each text's embedding too, in the same forward pass."""

    def _compute(self, texts: Sequence[str]) -> None:
        scores, vectors = self._classifier.predict_and_embed(list(texts))
        self._answers.update(zip(texts, zip(scores, vectors, strict=True), strict=True))

    def predict_and_embed(self, texts: Sequence[str]) -> tuple[list[dict[str, float]], list]:
        answers = self._of(texts)
        return [dict(scores) for scores, _ in answers], [vector for _, vector in answers]


# ---- the replay ------------------------------------------------------------------------------------------

def backtest(issues: Sequence[IssueSnapshot], *, repo: str, classifier, settings: Settings, github,
             history: int = 0, window: int | None = None, workdir: Path | None = None,
             progress: Callable[[str, int, int], None] = lambda stage, done, total: None) -> dict:
    """Replay `issues` (the repository's labelled issues, in the backfill's order) through the served decision;
    the first `history` are the repository's history when the App is installed. `github` answers the config
    file and the labels (wrap an installation's in `Remembering`); the report is plain data."""
    ordered = sorted(issues, key=lambda issue: (issue.created_at is None, issue.created_at or 0, issue.number))
    if not 0 <= history < len(ordered):
        raise ValueError(f"history must leave an issue to decide: {len(ordered)} labelled issues, history {history}")
    served = Precomputed.of(classifier, [format_issue_text(issue.title, issue.body) for issue in ordered],
                            progress=lambda done: progress("scoring", done, len(ordered)))
    with contextlib.ExitStack() as stack:
        directory = Path(workdir) if workdir else Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="issue-sorter-backtest-")))
        sessions = make_sessionmaker(f"sqlite:///{directory / 'backtest.db'}")
        Base.metadata.create_all(sessions.kw["bind"])
        with session_scope(sessions) as session:  # only the model serving now, serving every repository
            version = ModelVersion(version=served.version, path="", labels=list(served.labels))
            session.add(version)
            session.flush()
            session.add(ModelPromotion(model_version_id=version.id, reason="backtest: the model serving now"))
        return Replay(sessions, repo, served, settings, github).run(ordered, history, window=window,
                                                                   progress=progress)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The per-issue log lines of the labelling job and the decisions, held back while they replay."""
    loggers = [logging.getLogger(name) for name in QUIET]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


class Replay:
    """Issues replayed in order through the App's decision and the simulated maintainer, in a database of their
    own (`sessions`, where `served` is promoted): the backtest's, and `issue-sorter replay`'s (simulation.replay,
    which retrains between issues and serves what the gate promotes)."""

    def __init__(self, sessions: sessionmaker[Session], repo: str, served: Precomputed, settings: Settings, github):
        self.sessions, self.repo, self.served, self.settings, self.github = sessions, repo, served, settings, github
        self.decisions = decisions_gather.Sources(settings.bot_login, settings.app_id, _Maintainer())
        self.events = 0

    def run(self, issues: Sequence[IssueSnapshot], history: int, *, window: int | None = None,
            progress: Callable[[str, int, int], None] = lambda stage, done, total: None,
            after: Callable[[int], None] = lambda done: None) -> dict:
        """The first `history` of `issues` installed, each later one decided in turn (then `after(how many)`),
        and the report."""
        config, problems = load_config(self.github.get_file, self.repo)
        with _quiet():
            self.install(issues[:history])
            steps = []
            for done, issue in enumerate(issues[history:], 1):
                steps.append(self.one_issue(issue))
                progress("replaying", done, len(issues) - history)
                after(done)
            thresholds = self.thresholds(config.target_precision)
        return report(steps, repo=self.repo, model=self.served.version, history=history, config=config,
                      problems=problems, thresholds=thresholds, window=window)

    def install(self, history: Sequence[IssueSnapshot]) -> None:
        """The history stored as the backfill stores it, then embedded as the memory's fill embeds it."""
        if history:
            with session_scope(self.sessions) as session:
                backfill.store_page(session, self.repo, history, len(history))
            self.serve(self.served)

    def serve(self, served: Precomputed) -> None:
        """`served` decides from the next issue on, the memory filled by it (as its first serving queues)."""
        self.served = served
        if self.settings.memory:
            memory_fill.fill_repository(self.sessions, self.repo, served)
        decisions_act.refresh_after_decision(self.sessions, self.repo)

    def one_issue(self, issue: IssueSnapshot) -> Step:
        """The labelling job on the issue as it was opened, then the maintainer's decision on it."""
        now = dt.datetime.now(dt.UTC)
        opened = dataclasses.replace(issue, state="open", labels=(), updated_at=now)
        event = {"repo": self.repo, "number": issue.number, "installation_id": None, "snapshot": opened.to_job(),
                 "received_at": now.isoformat()}
        with session_scope(self.sessions) as session:
            gathered = labeling_gather.gather(session, event, labeling_gather.Sources(
                self.settings, _Opened(self.github, opened), lambda _: self.served), now=now)
            plan = labeling_decide.decide(gathered.inputs) if not isinstance(gathered, str) else None
            if plan is not None and not plan.skip:
                labeling_act.carry_out(session, gathered, plan, None)  # stored; no GitHub: nothing written
        kind_label = backfill.training_label(issue.labels)
        truth = class_of(kind_label, self.served.labels) if kind_label else None
        own_truth = tuple(backfill.history_own_labels(issue.labels))
        if plan is None or plan.skip:
            step = Step(issue.number, issue.title, truth, "skipped", "", None, 0.0, None, own_truth, (),
                        self.served.version)
        else:
            written = plan.outcome == "applied"
            own = plan.own_applied if plan.outcome in ("applied", "shadow") else ()
            step = Step(issue.number, issue.title, truth, plan.outcome, plan.predicted, plan.label,
                        plan.scores.get(plan.predicted, 0.0), plan.threshold, own_truth, own, self.served.version)
            self._maintain(opened, step, kind_label, written=written, own_written=plan.own_applied if written else ())
        return step

    def _maintain(self, issue: IssueSnapshot, step: Step, kind_label: str | None, *, written: bool,
                  own_written: tuple[str, ...]) -> None:
        """The simulated maintainer: keep a right label and close the issue, else take the wrong one off and put
        the right one on; then the own labels the issue carries, and off those it lacks."""
        on = ([step.label] if written and step.label else []) + list(own_written)
        if kind_label is not None:
            if written and step.label == kind_label:
                self._event(issue, "closed", on)
            else:
                if written and step.label:
                    on.remove(step.label)
                    self._event(issue, "unlabeled", on, step.label)
                on.append(kind_label)
                self._event(issue, "labeled", on, kind_label)
        for name in step.own_truth:
            if name not in on:
                on.append(name)
                self._event(issue, "labeled", on, name)
        for name in own_written:
            if name not in step.own_truth:
                on.remove(name)
                self._event(issue, "unlabeled", on, name)

    def _event(self, issue: IssueSnapshot, action: str, labels: list[str], label: str | None = None) -> None:
        """One `issues` event of the maintainer, recorded as bot.jobs.record_issue_event records it."""
        self.events += 1
        now = dt.datetime.now(dt.UTC)
        snapshot = dataclasses.replace(issue, state="closed" if action == "closed" else "open", labels=tuple(labels),
                                       updated_at=now)
        job = IssueEvent(delivery_id=f"backtest-{self.events}", action=action, installation_id=None, repo=self.repo,
                         number=issue.number, sender_login=MAINTAINER, sender_is_bot=False, snapshot=snapshot,
                         label=label, received_at=now.isoformat()).job_kwargs()
        with session_scope(self.sessions) as session:
            gathered = decisions_gather.gather_event(session, job, self.decisions)
            if isinstance(gathered, str):
                return
            recorded = decisions_act.record(session, gathered, decisions_decide.decide_event(gathered.inputs),
                                            embedder=self.served if self.settings.memory else None)
        if recorded.changed:
            decisions_act.refresh_after_decision(self.sessions, self.repo)

    def thresholds(self, target: float | None) -> dict:
        """The per-kind thresholds the repository would have now, at its target: {kind: {threshold, source,
        support}}; empty without a target."""
        if target is None:
            return {}
        with session_scope(self.sessions) as session:
            repository = store.find_repository(session, full_name=self.repo)
            if repository is None:
                return {}
            card = self.served.card
            _, stats = repository_thresholds(session, repository.id, self.served.version, self.served.labels, target,
                                             card.thresholds if card else None,
                                             default_threshold=self.settings.threshold, store=False)
        return {kind: dataclasses.asdict(row) for kind, row in stats.kinds.items()}


# ---- the report ------------------------------------------------------------------------------------------

def report(steps: Sequence[Step], *, repo: str, model: str, history: int, config, problems: Sequence[str],
           thresholds: dict, window: int | None = None) -> dict:
    """What the replay shows, as plain data (JSON for the review page and `--json`)."""
    window = window or max(10, -(-len(steps) // 20))
    labelled = [step for step in steps if step.labelled]
    judged = [step for step in labelled if step.truth is not None]
    kinds = sorted({step.predicted for step in labelled} | {step.truth for step in steps if step.truth})
    per_kind = {}
    for kind in kinds:
        mine = [step for step in judged if step.predicted == kind]
        issues = [step for step in steps if step.truth == kind]
        per_kind[kind] = {"issues": len(issues), "labelled": len(mine), "right": sum(s.truth == kind for s in mine),
                          "precision": _share(sum(s.truth == kind for s in mine), len(mine)),
                          "recall": _share(sum(s.served == kind for s in issues), len(issues))}
    own = {}
    for name in sorted({name for step in steps for name in (*step.own_truth, *step.own_applied)}):
        applied = [step for step in steps if name in step.own_applied]
        carrying = [step for step in steps if name in step.own_truth]
        right = sum(name in step.own_truth for step in applied)
        own[name] = {"issues": len(carrying), "applied": len(applied), "right": right,
                     "precision": _share(right, len(applied)), "recall": _share(right, len(carrying))}
    abstained = [step for step in steps if not step.labelled and step.outcome != "skipped"]
    right = sum(step.served == step.truth for step in judged)
    with_kind = [step for step in steps if step.truth is not None]
    return {
        "repo": repo, "model": model, "history": history, "issues": len(steps), "window": window,
        "config": {"source": config.source, "held": config.held, "problems": list(problems),
                   "mode": config.mode, "target_precision": config.target_precision},
        "outcomes": dict(sorted(Counter(step.outcome for step in steps).items())),
        "labelled": len(labelled), "right": right, "coverage": _share(len(labelled), len(steps)),
        "precision": _share(right, len(judged)),
        "accuracy": _share(sum(step.served == step.truth for step in with_kind), len(with_kind)),
        "macro_f1": macro_f1(steps), "per_kind": per_kind, "own_labels": own, "thresholds": thresholds,
        "abstained": {"issues": len(abstained),
                      "by_kind": dict(sorted(Counter(step.truth or "(no kind)" for step in abstained).items())),
                      "examples": [_listed(step) for step in abstained[-MAX_LISTED:]]},
        "wrong": [_listed(step) for step in judged if step.served != step.truth][-MAX_LISTED:],
        "curve": curve(steps, window),
    }


def curve(steps: Sequence[Step], window: int) -> list[dict]:
    """Per window of issues, in time order: the share labelled, the precision of those labels, the accuracy
    and macro-F1 (an abstention counted wrong) and the version that decided the window's first issue."""
    points = []
    for start in range(0, len(steps), window):
        chunk = steps[start:start + window]
        labelled = [step for step in chunk if step.labelled and step.truth is not None]
        truths = [step for step in chunk if step.truth is not None]
        points.append({"seen": start, "issues": len(chunk),
                       "coverage": _share(sum(s.labelled for s in chunk), len(chunk)),
                       "precision": _share(sum(s.served == s.truth for s in labelled), len(labelled)),
                       "accuracy": _share(sum(s.served == s.truth for s in truths), len(truths)),
                       "macro_f1": macro_f1(chunk), "model": chunk[0].model})
    return points


def macro_f1(steps: Sequence[Step]) -> float | None:
    """scikit-learn's macro-F1 of the kinds served over the kinds maintainers gave (an abstention is wrong)."""
    truths = [step for step in steps if step.truth is not None]
    if not truths:
        return None
    present = sorted({step.truth for step in truths})
    return float(f1_score([s.truth for s in truths], [s.served or "" for s in truths], labels=present,
                          average="macro", zero_division=0))


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _listed(step: Step) -> dict:
    return {"number": step.number, "title": step.title[:120], "truth": step.truth, "predicted": step.predicted,
            "score": round(step.score, 3), "threshold": step.threshold, "outcome": step.outcome}


def summary(result: dict) -> str:
    """The report in one line (the job's result, the command's last line)."""
    precision = f"{result['precision']:.0%}" if result["precision"] is not None else "none judged"
    return (f"backtest of {result['repo']}: {result['labelled']} of {result['issues']} issues labelled, precision "
            f"{precision}, {result['abstained']['issues']} abstained")

