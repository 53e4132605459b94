"""The unseen-repository protocol: whole repositories held out, never trained on by the model that scores them."""

from collections import Counter

from core.kinds import KINDS
from trainer.dataset import Example
from trainer.sources import MixConfig
from trainer.unseen import Folds, OutOfFold, deal_folds, fold_data, make_folds, nested_blend, run_folds, score


def _sources():
    repos = {"a/one": 40, "a/two": 30, "b/three": 20, "c/four": 12, "d/five": 8}
    issues = [Example(f"{repo} issue {n}", "body", KINDS[n % 4], repo) for repo, count in repos.items()
              for n in range(count)]
    return {"x": issues[:70], "y": issues[70:]}


def test_every_repository_lands_in_exactly_one_fold_and_folds_are_balanced():
    examples = [e for part in _sources().values() for e in part]
    folds = deal_folds(examples, 3)
    assert sorted(repo for fold in folds for repo in fold) == sorted({e.repo for e in examples})
    sizes = Counter(e.repo for e in examples)
    totals = sorted(sum(sizes[repo] for repo in fold) for fold in folds)
    assert totals[-1] - totals[0] <= max(sizes.values())


def test_no_repository_is_both_trained_on_and_scored_in_a_fold():
    sources = _sources()
    folds = make_folds(sources, 3, per_group_kind=5)
    scored = []
    for index in range(3):
        train, test = fold_data(sources, folds, index, MixConfig(per_group_kind=100))
        assert {e.repo for e in train}.isdisjoint({e.repo for e in test})
        assert {e.repo for e in test} == set(folds.groups[index])
        scored += test
    assert sorted(scored, key=repr) == sorted(folds.pool, key=repr)  # every pool issue scored once


def test_run_folds_scores_each_issue_with_the_model_of_its_own_fold():
    sources = _sources()
    folds = make_folds(sources, 2, per_group_kind=5)

    class Remembers:
        def __init__(self, train):
            self.repos = {e.repo for e in train}

        def predict(self, texts):
            assert not any(text.split(" issue")[0] in self.repos for text in texts)  # never seen
            return [{"bug": 1.0} for _ in texts]

    oof = run_folds(sources, folds, {"m": Remembers}, MixConfig(), log=lambda line: None)
    assert len(oof.scores["m"]) == len(folds.pool) and len(oof.trained_on) == 2


def test_run_folds_keeps_each_issues_embedding_by_its_own_folds_encoder_when_asked():
    sources = _sources()
    folds = make_folds(sources, 2, per_group_kind=5)

    class Embeds:
        def __init__(self, train):
            self.fold = len(train)  # each fold's model trains on a different number of issues

        def predict(self, texts):
            return [{"bug": 1.0} for _ in texts]

        def embed(self, texts):
            return [[float(self.fold), float(len(text))] for text in texts]

    oof = run_folds(sources, folds, {"m": Embeds, "n": Embeds}, MixConfig(), log=lambda line: None, embed={"m"})
    assert list(oof.embeddings) == ["m"]  # only the member asked for
    for example, vector in zip(folds.pool, oof.embeddings["m"], strict=True):
        assert vector == [float(oof.trained_on[folds.fold_of(example.repo)]), float(len(example.text))]


def test_the_score_is_the_mean_over_repositories_of_macro_f1_over_the_kinds_each_has():
    pool = [Example("", "x", "docs", "r/docs-only"), Example("", "x", "bug", "r/two"),
            Example("", "x", "feature", "r/two")]
    result = score(pool, [{"docs": 1.0}, {"bug": 1.0}, {"bug": 1.0}])
    assert result["per_repo"] == {"r/docs-only": 1.0, "r/two": (2 / 3 + 0) / 2}
    assert result["mean"] == (1.0 + 1 / 3) / 2


def test_the_nested_share_of_a_fold_is_chosen_without_that_fold():
    pool = [Example("", "x", "bug", "r/a"), Example("", "x", "bug", "r/b")]
    oof = OutOfFold(Folds([["r/a"], ["r/b"]], pool))
    # on r/a only TF-IDF is right, on r/b only the encoder: each fold must take the other fold's best
    oof.scores = {"encoder": [{"bug": 0.0, "docs": 1.0}, {"bug": 1.0, "docs": 0.0}],
                  "tfidf": [{"bug": 1.0, "docs": 0.0}, {"bug": 0.0, "docs": 1.0}]}
    nested, chosen = nested_blend(oof, "encoder", "tfidf", shares=(0.0, 1.0))
    assert chosen == [0.0, 1.0]  # fold r/a takes r/b's best (the encoder), and the other way round
    assert score(pool, nested)["mean"] == 0.0  # so nested, neither fold gets its own best
