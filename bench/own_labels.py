"""A repository's own labels from its memory (issue 29): huggingface/datasets replayed by its dates.

Before building own labels into the service, this measures the rule it would serve: each own label
(core.own_labels.is_candidate) is scored by the repository's memory alone, as the similarity-weighted
share of the issue's `k` nearest earlier issues that carry it, and applied from a threshold per label
chosen on the memory itself (every earlier issue scored leave-one-out by the others, the lowest threshold
whose precision there reaches `--target`; none reached: the label is not applied). A label is served once
the memory holds `--min-examples` issues carrying it (before that it is at most a suggestion, not counted
here). The first `--history` issues are the history at install; every later issue is scored, then joins
the memory with all its labels (the simulated maintainer confirms what GitHub shows).

The vote and the thresholds are the service's own (core.own_labels.vote, thresholds_on_memory), so this
replays what a labelling job decides. The embeddings are the frozen all-MiniLM-L6-v2's (the served encoder
before fine-tuning): a stand-in for the served model's, which a fine-tune moves. The kind is not touched:
own labels are decided beside it.

    nice .venv/bin/python -m bench.own_labels [--history 500] [--target 0.85] [--neighbours 10,20]

Writes docs/quality/own-labels.json and .md (micro and per-label precision, recall, labels applied, by
window of new issues).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from core.own_labels import is_candidate, thresholds_on_memory, vote
from tests.paths import SHARED
from trainer.dataset import github_objects, parse_time

REPO_ROOT = Path(__file__).resolve().parents[1]
HF_FILE = SHARED / "data" / "huggingface-datasets-issues" / "datasets-issues.zip"
REFIT_EVERY = 100  # new issues between two threshold choices (they are chosen on the memory, leave-one-out)


def load_issues(path: Path) -> list[dict]:
    """Issues (no pull requests) oldest first: text, created_at and the candidate own labels it carries."""
    issues = []
    for issue in github_objects(path):
        if issue.get("pull_request"):
            continue
        labels = [label["name"] for label in issue.get("labels") or []]
        issues.append({"number": issue["number"], "created_at": parse_time(issue["created_at"]),
                       "text": f"{issue.get('title') or ''}\n\n{issue.get('body') or ''}",
                       "own": sorted({label for label in labels if is_candidate(label)})})
    return sorted(issues, key=lambda issue: (issue["created_at"], issue["number"]))


def embed(texts: list[str], max_length: int) -> np.ndarray:
    import torch
    import transformers

    from bench.unseen import FrozenEncoder
    from trainer.config import TrainConfig

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(2)
    encoder = FrozenEncoder(TrainConfig(device="cpu", max_length=max_length))
    return np.asarray(encoder.vectors(texts), dtype=np.float32)


def replay(issues: list[dict], vectors: np.ndarray, *, history: int, k: int, target: float,
           min_examples: int, window: int) -> dict:
    names = sorted({label for issue in issues for label in issue["own"]})
    carries = np.array([[name in issue["own"] for name in names] for issue in issues], dtype=np.float32)
    applied_total, correct_total, truth_total = 0, 0, 0
    per_label = {name: Counter() for name in names}
    windows, current = [], Counter()
    thresholds = np.full(len(names), np.inf)
    for i in range(history, len(issues)):
        if (i - history) % REFIT_EVERY == 0:
            served = carries[:i].sum(axis=0) >= min_examples
            thresholds = thresholds_on_memory(vectors[:i], carries[:i], served, k, target)
        served = carries[:i].sum(axis=0) >= min_examples
        scores = vote((vectors[i] @ vectors[:i].T)[None, :], carries[:i], k)[0]
        applied = served & (scores >= thresholds)
        truth = served & (carries[i] > 0)
        for label in np.flatnonzero(applied | truth):
            row = per_label[names[label]]
            row["applied"] += int(applied[label])
            row["correct"] += int(applied[label] and truth[label])
            row["truth"] += int(truth[label])
        hits = int((applied & truth).sum())
        applied_total, correct_total, truth_total = (applied_total + int(applied.sum()), correct_total + hits,
                                                     truth_total + int(truth.sum()))
        current.update(applied=int(applied.sum()), correct=hits, truth=int(truth.sum()), issues=1)
        if current["issues"] == window or i == len(issues) - 1:
            windows.append({"from_issue": i + 1 - current["issues"] - history, **_rates(current),
                            "issues": current["issues"]})
            current = Counter()
    labels = {name: {**_rates(row), "examples_at_end": int(carries[:, names.index(name)].sum())}
              for name, row in per_label.items() if row["truth"] or row["applied"]}
    return {"neighbours": k, "micro": _rates(Counter(applied=applied_total, correct=correct_total,
                                                     truth=truth_total)),
            "windows": windows, "labels": labels}


def _rates(row: Counter) -> dict:
    return {"precision": round(row["correct"] / row["applied"], 3) if row["applied"] else None,
            "recall": round(row["correct"] / row["truth"], 3) if row["truth"] else None,
            "applied": row["applied"], "correct": row["correct"], "carried": row["truth"]}


def report_markdown(record: dict) -> str:
    lines = [f"# Own labels from the memory: {record['repo']} by its dates", "",
             f"Measured {record['date']}; history {record['history']} issues, {record['new_issues']} new ones; "
             f"target precision {record['target']}, a label served from {record['min_examples']} examples; "
             "frozen all-MiniLM-L6-v2 embeddings.", "",
             f"Command: `{record['command']}`", "",
             "| k | micro precision | micro recall | labels applied | carried (served labels) |",
             "|---|---|---|---|---|"]
    for run in record["runs"]:
        micro = run["micro"]
        lines.append(f"| {run['neighbours']} | {micro['precision']} | {micro['recall']} | {micro['applied']} | "
                     f"{micro['carried']} |")
    best = max(record["runs"], key=lambda run: (run["micro"]["recall"] or 0))
    lines += ["", f"Per label (k = {best['neighbours']}):", "",
              "| label | precision | recall | applied | carried | examples at the end |", "|---|---|---|---|---|---|"]
    for name, row in sorted(best["labels"].items(), key=lambda item: -item[1]["carried"]):
        lines.append(f"| {name} | {row['precision']} | {row['recall']} | {row['applied']} | {row['carried']} | "
                     f"{row['examples_at_end']} |")
    lines += ["", f"By window of new issues (k = {best['neighbours']}):", "",
              "| new issues from | precision | recall | applied | carried |", "|---|---|---|---|---|"]
    for row in best["windows"]:
        lines.append(f"| {row['from_issue']} | {row['precision']} | {row['recall']} | {row['applied']} | "
                     f"{row['carried']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=HF_FILE)
    parser.add_argument("--history", type=int, default=500)
    parser.add_argument("--target", type=float, default=0.85)
    parser.add_argument("--min-examples", type=int, default=20)
    parser.add_argument("--neighbours", default="5,10,20")
    parser.add_argument("--window", type=int, default=500)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")
    args = parser.parse_args(argv)
    if not args.file.exists():
        parser.error(f"no {args.file}: this bench reads huggingface/datasets' issues from ../shared")
    issues = load_issues(args.file)
    if len(issues) <= args.history:
        parser.error(f"{args.file} has {len(issues)} issues: --history {args.history} leaves none to replay")
    print(f"{len(issues)} issues, {sum(bool(i['own']) for i in issues)} with an own label; embedding", flush=True)
    vectors = embed([issue["text"] for issue in issues], args.max_length)
    runs = []
    for k in (int(value) for value in args.neighbours.split(",")):
        runs.append(replay(issues, vectors, history=args.history, k=k, target=args.target,
                           min_examples=args.min_examples, window=args.window))
        print(f"k={k}: {runs[-1]['micro']}", flush=True)
    record = {"repo": "huggingface/datasets", "date": dt.date.today().isoformat(), "history": args.history,
              "new_issues": len(issues) - args.history, "target": args.target,
              "min_examples": args.min_examples, "runs": runs,
              "command": "python -m bench.own_labels " + " ".join(argv if argv is not None else sys.argv[1:])}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "own-labels.json").write_text(json.dumps(record, indent=1) + "\n")
    (args.out / "own-labels.md").write_text(report_markdown(record))
    print(report_markdown(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
