"""`issue-sorter predict "title" ["body"]`: the App's answer on one issue without a webhook or GitHub: the kind
and its label, the repository's own labels, the scores, the threshold in force and the similar confirmed issues
that voted, as the labelling worker would decide (bot.labeling.what_if: its gather and decide, nothing stored,
nothing written). `-` reads the issue from stdin (title on the first line, the body after it)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sqlalchemy import select

from core.db import make_sessionmaker
from core.settings import Settings
from issue_sorter.command import add

USUAL_LABELS = ("bug", "enhancement", "question", "documentation")  # what a new repository has on GitHub
NO_REPOSITORY = "-/-"  # a repository nothing is stored for: the global model, no memory


def add_commands(commands) -> None:
    predict = add(commands, "predict", cmd_predict,
                  "the App's answer on one issue (kind, own labels, scores, threshold, similar issues), "
                  "as the worker would decide; nothing is stored or written")
    predict.add_argument("title", help="the issue's title; - reads the issue from stdin (title, then the body)")
    predict.add_argument("body", nargs="?", default="", help="its body; - reads it from stdin")
    predict.add_argument("--repo", help="owner/name: its model, memory, thresholds and own labels (default: "
                                        "the global model, no memory)")
    predict.add_argument("--config", type=Path, help="the repository's .github/issue-sorter.yml (default: none)")
    predict.add_argument("--labels", help="the repository's labels, comma-separated (default: the usual four and "
                                          "those its stored issues carry)")
    predict.add_argument("--json", action="store_true")


def cmd_predict(args: argparse.Namespace, settings: Settings) -> int:
    from bot.labeling.what_if import OfflineRepository, what_if
    from core import store
    from core.classifier import load_classifier

    title, body = read_issue(args.title, args.body, sys.stdin)
    repo = args.repo or NO_REPOSITORY
    config = args.config.read_bytes() if args.config else None
    with make_sessionmaker(settings.database_url)() as session:  # closed, never committed: what_if rolls back
        serving = store.serving_model_for(session, repo)
        if serving is None:
            raise SystemExit("predict: no model is promoted: run `issue-sorter bootstrap-model`")
        classifier = load_classifier(serving.path, threads=settings.worker_threads, engine=settings.engine)
        labels = args.labels.split(",") if args.labels else known_labels(session, repo)
        answer = what_if(session, repo, title, body, classifier, settings, OfflineRepository(repo, config, labels))
    report = to_report(answer, repo=args.repo, config=str(args.config) if args.config else None)
    print(json.dumps(report, indent=2) if args.json else describe(report))
    return 0


def read_issue(title: str, body: str, stdin) -> tuple[str, str]:
    """The title and body the arguments name: `-` for the title reads both from stdin, for the body the body."""
    if title == "-":
        first, _, rest = stdin.read().partition("\n")
        return first.strip(), rest.strip()
    return title, stdin.read().strip() if body == "-" else body


def known_labels(session, repo: str) -> list[str]:
    """The usual labels of a new repository and those the repository's stored issues carry."""
    from core.tables import IssueRecord, OwnLabelExample, Repository

    confirmed = session.scalars(select(IssueRecord.confirmed_label).join(Repository).where(
        Repository.full_name == repo, IssueRecord.confirmed_label.is_not(None)).distinct())
    own = session.scalars(select(OwnLabelExample.label).join(IssueRecord).join(Repository).where(
        Repository.full_name == repo).distinct())
    return list(dict.fromkeys([*USUAL_LABELS, *confirmed, *own]))


def to_report(answer, *, repo: str | None, config: str | None) -> dict:
    """The answer as plain data: what `--json` prints, and what `describe` words."""
    plan, policy = answer.plan, answer.inputs.policy
    per_kind = plan.predicted in policy.per_label_thresholds
    return {
        "repo": repo, "model": answer.model, "config": config, "outcome": plan.outcome or "skipped",
        "kind": plan.predicted or None, "label": plan.label, "reason": plan.reason or plan.skip,
        "threshold": plan.threshold,
        "threshold_from": (f"the repository's target precision {policy.own_target:g}" if per_kind
                           else "the config's threshold, else ISSUE_SORTER_THRESHOLD: no per-kind threshold for "
                                "this kind yet"),
        "scores": plan.scores, "model_scores": plan.model_scores,
        "own_labels": [{"label": own.label, "score": own.score, "threshold": own.threshold, "outcome": own.outcome}
                       for own in plan.own],
        "similar": [{"number": voter["number"], "label": voter["label"], "similarity": voter["similarity"]}
                    for voter in plan.neighbours or ()],
        "writes": [f"{write.call} {list(write.args[2]) if write.call == 'add_labels' else write.args[1:]}"
                   for write in plan.writes if write.call != "create_comment"]
                  + [f"a comment ({len(write.args[2])} characters)" for write in plan.writes
                     if write.call == "create_comment"],
    }


def describe(report: dict) -> str:
    """The report in a few lines."""
    def ranked(scores: dict | None) -> str:
        return "  ".join(f"{kind} {score:.2f}" for kind, score in sorted((scores or {}).items(),
                                                                          key=lambda item: -item[1]))

    lines = [f"model {report['model']} ({'serving ' + report['repo'] if report['repo'] else 'the global model'}), "
             f"config: {report['config'] or 'none, the defaults'}",
             f"{report['outcome']}: kind {report['kind']}"
             + (f", label {report['label']!r}" if report["label"] else ""),
             f"  why: {report['reason']}"]
    if report["threshold"] is not None:
        lines.append(f"  threshold in force: {report['threshold']:.2f} ({report['threshold_from']})")
    lines.append(f"scores as served: {ranked(report['scores'])}")
    if report["model_scores"] and report["model_scores"] != report["scores"]:
        lines.append(f"the model's own:  {ranked(report['model_scores'])}")
    lines.append("own labels: " + (", ".join(
        f"{own['label']} {own['score']:.2f} ({own['outcome']}"
        + (f", threshold {own['threshold']:.2f})" if own["threshold"] is not None else ")")
        for own in report["own_labels"]) or "none"))
    lines.append("similar confirmed issues: " + (", ".join(
        f"#{voter['number']} {voter['label']} ({voter['similarity']:.2f})" for voter in report["similar"])
        or "none (the repository's memory is empty)"))
    lines.append("it would write: " + ("; ".join(report["writes"]) or "nothing"))
    return "\n".join(lines)
