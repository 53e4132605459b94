"""A third blend member: logistic regression on a frozen sentence encoder's embeddings (all-mpnet-base-v2).

Fine-tuning MPNet costs 55 min on this CPU (docs/BENCHMARKS.md); only embedding the 1,500 training
issues with it, frozen, costs about 2.5 min, which fits beside the recipe's 8–9 min in the 15 allowed.
A logistic regression on those embeddings (per repository, the other repositories' issues weighted as
for TF-IDF) joins the recipe's per-repository blend, and the global one, with a share chosen by nested
CV on the out-of-fold scores bench/recipe_cv.py wrote; then, fitted on all training issues, it is scored
once on the test split beside the recipe, from the probabilities bench/quality.py wrote.

    .venv/bin/python bench/get_mpnet.py && .venv/bin/python bench/recipe_cv.py && .venv/bin/python bench/quality.py
    .venv/bin/python bench/frozen_member.py          # 5 min: embeds both splits, then seconds of fitting

Writes docs/quality/frozen-member.json and .md (or --out).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.quality import (LABELS, REPOS, TEST_SCORES, bootstrap_interval, load_split,  # noqa: E402
                           run_record, write_report)
from bench.reblend_cv import Scores, folds_of  # noqa: E402
from bench.recipe_cv import OOF_SCORES  # noqa: E402
from bench.setfit_style import embed  # noqa: E402
from bench.validate_recipe import HOLD_OUT_EVERY  # noqa: E402
from trainer.config import OTHER_REPOS_TFIDF_WEIGHT  # noqa: E402

MAX_LENGTH = 128  # the recipe's token budget
C = 4.0  # the TF-IDF model's regularisation, not tuned here
SHARES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)  # the frozen member's share of the blend
SCOPES = {"per-repo": (2, 3), "global": (0, 1)}  # (encoder, TF-IDF) rows of reblend_cv.MEMBERS


def load_encoder(model_dir: Path):
    """(model, tokenizer) of the frozen encoder, on the 2 threads the budget assumes."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(2)
    return AutoModel.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)


def fit_predict(train_x, train_y, train_repos, x, repos, scope: str):
    """The member's probabilities for `x`: one global regression, or one per repository."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    def regression(weights=None):
        model = LogisticRegression(C=C, max_iter=3000, class_weight="balanced")
        model.fit(train_x, train_y, sample_weight=weights)
        assert list(model.classes_) == LABELS
        return model

    if scope == "global":
        return regression().predict_proba(x)
    scores = np.zeros((len(x), len(LABELS)))
    for repo in REPOS:
        rows = repos == repo
        weights = np.where(train_repos == repo, 1.0, OTHER_REPOS_TFIDF_WEIGHT)
        scores[rows] = regression(weights).predict_proba(x[rows])
    return scores


def recipe_blend(scores: Scores, scope: str):
    encoder, tfidf = SCOPES[scope]
    return 0.3 * scores.members[encoder] + 0.7 * scores.members[tfidf]


def main() -> int:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", type=Path, default=REPO_ROOT / "var" / "encoders" / "all-mpnet-base-v2")
    parser.add_argument("--oof", type=Path, default=REPO_ROOT / "var" / "bench-recipe-cv" / OOF_SCORES)
    parser.add_argument("--test", type=Path, default=REPO_ROOT / "var" / "bench-quality" / TEST_SCORES)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "quality")
    args = parser.parse_args()
    for needed, by in ((args.encoder, "bench/get_mpnet.py"), (args.oof, "bench/recipe_cv.py"),
                       (args.test, "bench/quality.py")):
        if not needed.exists():
            parser.error(f"{needed} is missing: run {by} first")
    train, test = load_split("train"), load_split("test")
    oof, test_scores = Scores(args.oof), Scores(args.test)
    if oof.truth != [e.label for e in train] or test_scores.truth != [e.label for e in test]:
        parser.error("the saved scores are not of the NLBSE'24 splits in their order: rerun their benches")
    model, tokenizer = load_encoder(args.encoder)
    started = time.perf_counter()
    train_x = embed(model, tokenizer, [e.text for e in train], MAX_LENGTH)
    embed_minutes = (time.perf_counter() - started) / 60
    test_x = embed(model, tokenizer, [e.text for e in test], MAX_LENGTH)
    train_y, train_repos = np.array(oof.truth), np.array(oof.repos)
    assigned = np.array(folds_of(oof))
    result = run_record("frozen_member.py", {"encoder": args.encoder.name, "max_length": MAX_LENGTH, "C": C,
                                             "embed_train_minutes": round(embed_minutes, 2), "scopes": {}})
    for scope in SCOPES:
        member = np.zeros_like(oof.members[0])
        for fold in range(HOLD_OUT_EVERY):
            fit, held = assigned != fold, assigned == fold
            member[held] = fit_predict(train_x[fit], train_y[fit], train_repos[fit], train_x[held],
                                       train_repos[held], scope)
        recipe = recipe_blend(oof, scope)
        blends = {share: (1 - share) * recipe + share * member for share in SHARES}
        nested, chosen = np.empty_like(recipe), []
        for fold in range(HOLD_OUT_EVERY):
            fit = list(np.flatnonzero(assigned != fold))
            share = max(SHARES, key=lambda s: oof.score(blends[s], fit))
            chosen.append(share)
            nested[assigned == fold] = blends[share][assigned == fold]
        share = max(set(chosen), key=chosen.count)  # the share the folds chose most often
        tested = fit_predict(train_x, train_y, train_repos, test_x, np.array(test_scores.repos), scope)
        with_member = (1 - share) * recipe_blend(test_scores, scope) + share * tested
        predicted = [LABELS[i] for i in with_member.argmax(1)]
        result["scopes"][scope] = {
            "member alone, out of fold": round(oof.score(member), 4),
            "recipe, out of fold": round(oof.score(recipe), 4),
            "by share, out of fold": {str(s): round(oof.score(b), 4) for s, b in blends.items()},
            "nested": round(oof.score(nested), 4), "shares chosen by the folds": chosen, "share": share,
            "member alone, test": round(test_scores.score(tested), 4),
            "recipe, test": round(test_scores.score(recipe_blend(test_scores, scope)), 4),
            "with the member, test": round(test_scores.score(with_member), 4),
            "with the member, test 95": bootstrap_interval(test_scores.truth, predicted, test_scores.repos)}
        print(scope, result["scopes"][scope], flush=True)
    return write_report(args.out, "frozen-member", result, markdown(result))


def markdown(result: dict) -> str:
    lines = [f"Frozen {result['encoder']} ({result['max_length']} tokens) + logistic regression as a third "
             f"blend member, {result['date']}, {result['machine']}; embedding the training issues took "
             f"{result['embed_train_minutes']:.1f} min.", "",
             "| blend | member alone, OOF | recipe, OOF | with member, OOF nested | share | member alone, test "
             "| recipe, test | with member, test (95 %) |", "|---" * 8 + "|"]
    for scope, row in result["scopes"].items():
        low, high = row["with the member, test 95"]
        lines.append(f"| {scope} | {row['member alone, out of fold']:.3f} | {row['recipe, out of fold']:.3f} "
                     f"| {row['nested']:.3f} | {row['share']} | {row['member alone, test']:.3f} "
                     f"| {row['recipe, test']:.3f} | **{row['with the member, test']:.3f}** ({low:.3f}–{high:.3f}) |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
