"""How far a repository's own labels can be learnt from its issues' words at all (issue 29): each label with
enough examples scored by the served head (core.own_labels.heads: embeddings and TF-IDF, one logistic regression
per label) in 5-fold cross-validation over every issue, as if every other issue were known, not in time
order. For each label: its AUC, the best recall at the target precision, and the top-scored issues that do
not carry it, so that a maintainer can see whether the "wrong" ones are the model's mistakes or issues the
label was never put on. A replay in time order (bench.own_labels) cannot beat this ceiling.

    .venv/bin/python -m bench.own_label_ceiling [--file ISSUES.json | --ccims OWNER/NAME] [--first 2000]

Writes docs/quality/own-label-ceiling-OWNER-NAME.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from bench.own_labels import HF_FILE, REPO_ROOT, cpu_name, embed, load_ccims_issues, load_issues
from core.own_labels.heads import fit_head
from core.own_labels.words import WordFeatures

FOLDS = 5


def cross_validated(vectors: np.ndarray, texts: list[str], carried: np.ndarray, seed: int = 0) -> np.ndarray:
    """Each issue's score by the served head fitted on the other folds (its vocabulary too)."""
    from sklearn.model_selection import StratifiedKFold

    scores = np.zeros(len(texts))
    for train, held in StratifiedKFold(FOLDS, shuffle=True, random_state=seed).split(vectors, carried):
        words = WordFeatures.fit([texts[i] for i in train])  # None: the fold's texts share no word

        def features(rows, words=words):
            embedded = vectors[rows].astype(np.float64)
            return embedded if words is None else words.features(embedded, [texts[i] for i in rows])

        scores[held] = fit_head(features(train), carried[train]).score(features(held))
    return scores


def best_recall_at(scores: np.ndarray, carried: np.ndarray, target: float) -> float:
    """The largest share of the label's issues above a threshold whose precision reaches `target`."""
    order = np.argsort(-scores, kind="stable")
    hits = np.cumsum(carried[order])
    precision = hits / np.arange(1, len(scores) + 1)
    reaching = precision >= target
    return float(hits[reaching].max() / carried.sum()) if reaching.any() else 0.0


def ceiling(issues: list[dict], vectors: np.ndarray, *, min_examples: int, target: float, shown: int) -> list[dict]:
    from sklearn.metrics import roc_auc_score

    texts = [issue["text"] for issue in issues]
    counts = Counter(label for issue in issues for label in issue["own"])
    rows = []
    for label, examples in counts.most_common():
        if examples < min_examples or examples > len(issues) - FOLDS:
            continue
        carried = np.array([label in issue["own"] for issue in issues])
        scores = cross_validated(vectors, texts, carried)
        order = np.argsort(-scores, kind="stable")
        rows.append({"label": label, "examples": examples, "auc": round(float(roc_auc_score(carried, scores)), 3),
                     f"best_recall_at_{target}": round(best_recall_at(scores, carried, target), 3),
                     "precision_of_top_20": round(float(carried[order[:20]].mean()), 3),
                     "top_scored_without_it": [
                         {"number": issues[i]["number"], "score": round(float(scores[i]), 3), "own": issues[i]["own"],
                          "first_line": texts[i].strip().splitlines()[0][:100] if texts[i].strip() else ""}
                         for i in order[:4 * shown] if not carried[i]][:shown]})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", type=Path, default=HF_FILE, help="a repository's issues as GitHub's API returned them")
    parser.add_argument("--ccims", help="OWNER/NAME of a ccims repository in ../shared (body only)")
    parser.add_argument("--first", type=int, help="only the oldest N issues (while the labels were in use)")
    parser.add_argument("--min-examples", type=int, default=20)
    parser.add_argument("--target", type=float, default=0.85)
    parser.add_argument("--shown", type=int, default=5, help="top-scored issues without the label, per label")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")
    args = parser.parse_args(argv)
    try:
        if args.ccims:
            issues, _, repository = load_ccims_issues(args.ccims, seed=0)
        elif not args.file.exists():
            parser.error(f"no {args.file}: give a repository's issues as GitHub's API returned them")
        else:
            issues, _, repository = load_issues(args.file)
    except ValueError as error:  # a broken file, or no ccims crawl of that repository here
        parser.error(str(error))
    vectors = embed([issue["text"] for issue in issues], args.max_length)  # all issues: the cache's key
    if args.first:
        issues, vectors = issues[:args.first], vectors[:args.first]
    rows = ceiling(issues, vectors, min_examples=args.min_examples, target=args.target, shown=args.shown)
    record = {"date": dt.date.today().isoformat(), "cpu": cpu_name(), "repository": repository,
              "issues": len(issues), "target": args.target, "folds": FOLDS, "labels": rows,
              "command": "python -m bench.own_label_ceiling " + " ".join(argv if argv is not None else sys.argv[1:])}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"own-label-ceiling-{repository.replace('/', '-')}.json").write_text(json.dumps(record, indent=1))
    print(f"| label | examples | AUC | best recall at precision {args.target} | precision of the 20 top-scored |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['label']} | {row['examples']} | {row['auc']} | {row[f'best_recall_at_{args.target}']} | "
              f"{row['precision_of_top_20']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
