"""Other ways to combine the recipe's four members, judged by nested CV on their out-of-fold scores.

The recipe blends two members per repository at a fixed TF-IDF share (0.7). Stacking the literature's
way may do better: weights for all four members (global and per-repository, encoder and TF-IDF), a
log-linear blend, a logistic regression on their log-probabilities, or per-label offsets that trade
one label's recall for another's. Each rule is fitted on the out-of-fold probabilities that
bench/recipe_cv.py wrote, so no model is trained here. Fitting and scoring on the same 1,500 issues
flatters every rule, so each is also scored nested: fitted on four folds' issues, scored on the fifth.
A rule beats the recipe only if it does so nested. Where bench/quality.py's test-split probabilities
exist, each rule fitted on all out-of-fold scores is scored on the test split too, for the record.

    .venv/bin/python bench/recipe_cv.py && .venv/bin/python bench/quality.py   # the inputs, once
    .venv/bin/python bench/reblend_cv.py                                         # under a minute

Writes docs/quality/reblend-cv.json and docs/quality/reblend-cv.md (or --out).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.quality import LABELS, TEST_SCORES, run_record, write_report  # noqa: E402
from bench.recipe_cv import OOF_SCORES  # noqa: E402
from bench.validate_recipe import HOLD_OUT_EVERY, folds  # noqa: E402

MEMBERS = ["global encoder", "global tfidf", "per-repo adapted encoder", "per-repo tfidf"]
RECIPE_WEIGHTS = (0.0, 0.0, 0.3, 0.7)  # the per-repository blend: TF-IDF's share 0.7
STEP = 0.1  # grid step of the members' weights
LABEL_OFFSETS = [round(-0.1 + 0.025 * n, 3) for n in range(9)]  # added to a label's blended probability
COLUMN_TITLES = {"fitted on all": "OOF, fitted on all", "nested": "OOF, nested", "test": "test split"}
FLOOR = 1e-6  # keeps log() finite where a member gives a label 0


class Scores:
    """One split's issues and the members' probabilities, as (members, issues, labels) arrays."""

    def __init__(self, path: Path):
        import numpy as np

        data = json.loads(path.read_text())
        self.repos = [repo for repo, _ in data["issues"]]
        self.truth = [label for _, label in data["issues"]]
        self.members = np.stack([np.array([[row[label] for label in LABELS] for row in data["scores"][member]])
                                 for member in MEMBERS])

    def score(self, blended, rows=None) -> float:
        """Mean-repo macro-F1 of the blended scores' top labels, over `rows` (all issues by default)."""
        from trainer.evaluate import mean_repo_macro_f1

        rows = range(len(self.truth)) if rows is None else rows
        return mean_repo_macro_f1([self.truth[i] for i in rows], [LABELS[blended[i].argmax()] for i in rows],
                                  [self.repos[i] for i in rows])


def weight_grid() -> list[tuple[float, ...]]:
    """Every four weights on the STEP grid that sum to 1."""
    steps = round(1 / STEP)
    return [tuple(n / steps for n in combo) for combo in itertools.product(range(steps + 1), repeat=4)
            if sum(combo) == steps]


def linear(weights, members):
    import numpy as np

    return np.tensordot(np.asarray(weights), members, 1)


def log_linear(weights, members):
    import numpy as np

    return np.tensordot(np.asarray(weights), np.log(members + FLOOR), 1)


# A rule: (the OOF scores, the rows it may learn from) → a function from any split's members to blended scores.
Rule = Callable[["Scores", list[int]], Callable]


def fixed(weights) -> Rule:
    return lambda oof, rows: lambda members: linear(weights, members)


def best_weights(combine, grid) -> Rule:
    def fit(oof: Scores, rows):
        chosen = max(grid, key=lambda w: oof.score(combine(w, oof.members), rows))
        return lambda members: combine(chosen, members)
    return fit


def stacked(oof: Scores, rows):
    """Logistic regression on the members' log-probabilities (12 features)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    def features(members):
        return np.log(members + FLOOR).transpose(1, 0, 2).reshape(members.shape[1], -1)

    model = LogisticRegression(max_iter=2000).fit(features(oof.members)[rows], [oof.truth[i] for i in rows])
    order = [list(model.classes_).index(label) for label in LABELS]
    return lambda members: model.predict_proba(features(members))[:, order]


def label_offsets(oof: Scores, rows):
    """The recipe's blend with an offset per label (the first label's fixed at 0), chosen on the grid."""
    import numpy as np

    blended = linear(RECIPE_WEIGHTS, oof.members)
    candidates = [np.array([0.0, *pair]) for pair in itertools.product(LABEL_OFFSETS, repeat=len(LABELS) - 1)]
    chosen = max(candidates, key=lambda offset: (oof.score(blended + offset, rows), -abs(offset).sum()))
    return lambda members: linear(RECIPE_WEIGHTS, members) + chosen


def rules() -> dict[str, Rule]:
    grid = weight_grid()
    shares = [(0.0, 0.0, round(1 - s, 1), s) for s in (n / 10 for n in range(11))]
    return {"the recipe: per-repo blend, TF-IDF share 0.7": fixed(RECIPE_WEIGHTS),
            "per-repo blend, its share fitted": best_weights(linear, shares),
            "4 members, weights fitted": best_weights(linear, grid),
            "4 members, log-linear weights fitted": best_weights(log_linear, grid),
            "stacked logistic regression on log-probabilities": stacked,
            "the recipe + per-label offsets fitted": label_offsets}


def folds_of(oof: Scores) -> list[int]:
    """Each scored issue's fold, as bench/recipe_cv.py assigned it (`folds` of the same issues in order)."""
    return folds([SimpleNamespace(repo=repo, label=label) for repo, label in zip(oof.repos, oof.truth,
                                                                                 strict=True)])


def evaluate(oof: Scores, test: Scores | None) -> dict[str, dict[str, float]]:
    """Each rule's OOF score fitted on all issues, its nested OOF score, and its test score when given."""
    import numpy as np

    assigned, everything = folds_of(oof), list(range(len(oof.truth)))
    table = {}
    for name, rule in rules().items():
        nested = np.empty_like(oof.members[0])
        for fold in range(HOLD_OUT_EVERY):
            fit = [i for i in everything if assigned[i] != fold]
            held = [i for i in everything if assigned[i] == fold]
            nested[held] = rule(oof, fit)(oof.members)[held]
        blend = rule(oof, everything)
        row = {"fitted on all": round(oof.score(blend(oof.members)), 4), "nested": round(oof.score(nested), 4)}
        if test is not None:
            row["test"] = round(test.score(blend(test.members)), 4)
        table[name] = row
        print(name, row, flush=True)
    return table


def markdown(result: dict) -> str:
    columns = ["fitted on all", "nested"] + (["test"] if any("test" in row for row in result["rules"].values())
                                             else [])
    lines = [f"Re-blending the recipe's four members, {result['date']}, {result['machine']}: mean-repo "
             f"macro-F1 of each rule on {result['n_issues']} training issues' out-of-fold scores, fitted on "
             "all of them and nested (fitted on 4 folds, scored on the 5th)"
             + (", and fitted on all of them, on the test split." if "test" in columns else "."), "",
             "| rule | " + " | ".join(COLUMN_TITLES[c] for c in columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, row in result["rules"].items():
        cells = [f"**{row[c]:.3f}**" if c == "nested" else f"{row[c]:.3f}" for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oof", type=Path, default=REPO_ROOT / "var" / "bench-recipe-cv" / OOF_SCORES)
    parser.add_argument("--test", type=Path, default=REPO_ROOT / "var" / "bench-quality" / TEST_SCORES)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")
    args = parser.parse_args()
    if not args.oof.exists():
        parser.error(f"{args.oof} is missing: run bench/recipe_cv.py first (about 40 min)")
    oof = Scores(args.oof)
    test = Scores(args.test) if args.test.exists() else None
    result = run_record("reblend_cv.py", {"n_issues": len(oof.truth), "members": MEMBERS,
                                          "rules": evaluate(oof, test)})
    return write_report(args.out, "reblend-cv", result, markdown(result))


if __name__ == "__main__":
    sys.exit(main())
