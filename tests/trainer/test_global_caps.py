"""The global model cannot be steered by one account: it trained on every installation's public
repositories and was judged on the newest confirmed issues, so one account that labelled a few thousand
fresh issues supplied both what it learnt and what judged it. Each repository's and
installation's share of its training and gate issues is capped, and the operator may fix its gate."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import zlib
from collections import Counter

from core import store
from core.tables import GLOBAL_SCOPE
from trainer.dataset import Example
from trainer.retrain import RetrainPolicy, cap_shares, examples_for_scope, split_global

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
POLICY = RetrainPolicy(min_holdout=20, holdout_share=0.2)


def confirmed(session, repo: str, installation: int | None, n: int, *, first_day: int = 0) -> None:
    repository = store.ensure_repository(session, repo, installation, github_id=zlib.crc32(repo.encode()),
                                         private=False)
    for number in range(1, n + 1):
        issue, _ = store.upsert_issue(session, repository, number, title=f"{repo} issue {number}", body="b",
                                      author_login="a", state="open",
                                      opened_at=START + dt.timedelta(days=first_day, minutes=number))
        issue.confirmed_label = "bug" if number % 2 else "feature"


def _installation_shares(examples, installation_of) -> dict:
    counts = Counter(installation_of[e.repo] for e in examples)
    return {source: n / len(examples) for source, n in counts.items()}


def test_one_account_labelling_thousands_of_fresh_issues_neither_teaches_nor_judges_the_global_model(session):
    for k in range(4):  # four installations with a history
        confirmed(session, f"org{k}/app", 10 + k, 60)
    confirmed(session, "operator/own", None, 40)
    for k in range(3):  # one account, three fresh repositories, 3,000 issues labelled yesterday
        confirmed(session, f"mallory/r{k}", 666, 1000, first_day=300)
    session.flush()
    installation_of = {f"org{k}/app": 10 + k for k in range(4)} | {"operator/own": None} | {
        f"mallory/r{k}": 666 for k in range(3)}
    examples, _ = examples_for_scope(session, GLOBAL_SCOPE, POLICY)
    assert Counter(installation_of[e.repo] for e in examples)[666] == 3000  # what it used to learn from
    train, held_out = split_global(session, examples, POLICY)
    for part in (train, held_out):
        assert _installation_shares(part, installation_of)[666] <= POLICY.global_max_share + 0.01
        assert max(Counter(e.repo for e in part).values()) / len(part) <= POLICY.global_max_share + 0.01
    assert {installation_of[e.repo] for e in held_out} > {666}  # the others judge too


def test_the_operators_fixed_gate_judges_the_global_model(session, tmp_path):
    confirmed(session, "org/app", 1, 30)
    confirmed(session, "mallory/r", 666, 300, first_day=300)
    session.flush()
    gate = tmp_path / "gate.csv"
    with gate.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["title", "body", "label"])
        writer.writerows([("Crash on save", "TypeError", "bug"), ("Dark mode?", "please", "enhancement"),
                          ("How do I log in", "?", "question"), ("Typo", "", "not-a-kind")])
    policy = dataclasses.replace(POLICY, global_gate_file=gate)
    examples, _ = examples_for_scope(session, GLOBAL_SCOPE, policy)
    train, held_out = split_global(session, examples, policy)
    assert [(e.title, e.label) for e in held_out] == [("Crash on save", "bug"), ("Dark mode?", "feature"),
                                                      ("How do I log in", "question")]
    assert Counter(e.repo for e in train) == {"org/app": 30, "mallory/r": 30}  # two sources: brought to par


def test_caps_keep_each_sources_oldest_issues_and_leave_a_single_source_alone():
    def issues(repo, n):
        return [Example(f"{repo} {i}", "", "bug", repo=repo) for i in range(n)]

    assert cap_shares(issues("solo/repo", 50), {"solo/repo": 1}, 0.25) == issues("solo/repo", 50)
    mixed = issues("a/a", 100) + issues("b/b", 10) + issues("c/c", 10) + issues("d/d", 10) + issues("e/e", 10)
    kept = cap_shares(mixed, {"a/a": 1, "b/b": 2, "c/c": 3, "d/d": 4, "e/e": 5}, 0.25)
    assert [e.title for e in kept if e.repo == "a/a"] == [f"a/a {i}" for i in range(13)]  # 13 of 53
    assert cap_shares(mixed, {}, 1.0) == mixed
