"""Loaders: files as they are, the database's human-confirmed labels, the hub dataset's schema."""

import csv
import datetime as dt
import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.issue_text import format_issue_text
from core.tables import IssueRecord, Repository
from trainer.dataset import (
    HUB_DATASET,
    TEST_REPOS,
    TRAIN_REPOS,
    Example,
    Skipped,
    data_fingerprint,
    load_database,
    load_file,
    load_hub,
)

UTC = dt.timezone.utc


def test_nlbse_files_load_as_they_are(nlbse_train, nlbse_test):
    for examples in (nlbse_train, nlbse_test):
        assert len(examples) == 1500
        assert Counter(e.label for e in examples) == {"bug": 500, "feature": 500, "question": 500}
        assert Counter(e.repo for e in examples)["facebook/react"] == 300
    first = nlbse_train[0]
    assert first.repo == "facebook/react" and first.label == "bug"
    assert first.created_at == dt.datetime(2023, 8, 26, 6, 33, 37, tzinfo=UTC)
    assert first.title.startswith("[DevTools Bug] Cannot add node")
    assert max(len(e.body) for e in nlbse_train + nlbse_test) > 131072  # past csv's default field limit


def test_text_is_the_serving_text():
    example = Example(title=" Crash on start ", body="Steps:\n1. run", label="bug")
    assert example.text == format_issue_text(" Crash on start ", "Steps:\n1. run")
    assert example.text == "Crash on start\n\nSteps:\n1. run"


def _rows(examples):
    return [{"title": e.title, "body": e.body, "label": e.label, "repo": e.repo,
             "created_at": e.created_at.isoformat()} for e in examples]


def test_csv_jsonl_and_parquet_give_the_same_examples(tmp_path, small_train):
    rows = _rows(small_train)
    with (tmp_path / "x.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (tmp_path / "x.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "x.parquet")
    for name in ("x.csv", "x.jsonl", "x.parquet"):
        assert load_file(tmp_path / name) == small_train, name


def test_optional_columns_may_be_missing(tmp_path):
    row = {"title": "Add dark mode", "body": None, "label": "feature"}
    (tmp_path / "x.jsonl").write_text(json.dumps(row) + "\n")
    assert load_file(tmp_path / "x.jsonl") == [Example("Add dark mode", "", "feature", None, None)]


def test_rows_with_an_empty_label_are_reported_not_silently_dropped(tmp_path, caplog):
    rows = [{"title": "a", "body": "", "label": "bug"}, {"title": "b", "body": "", "label": " "},
            {"title": "c", "body": "", "label": "question"}]
    (tmp_path / "x.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    skipped: list[Skipped] = []
    examples = load_file(tmp_path / "x.jsonl", skipped=skipped)
    assert [e.title for e in examples] == ["a", "c"]
    assert skipped == [Skipped(str(tmp_path / "x.jsonl"), 2, "empty label")]
    assert "skipped 1 rows" in caplog.text


def test_a_file_without_a_label_column_names_the_columns(tmp_path):
    (tmp_path / "x.jsonl").write_text(json.dumps({"title": "a", "body": "b"}) + "\n")
    with pytest.raises(ValueError, match="no label column"):
        load_file(tmp_path / "x.jsonl")


def test_unknown_file_types_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown file type '.xlsx'"):
        load_file(tmp_path / "issues.xlsx")


def test_hub_loader_keeps_the_lessons_rules(tmp_path):
    """The hub schema: labels as a list, the string of a list, or "null"; pull requests dropped."""
    table = pa.table({
        "is_pull_request": ["False", "False", "True", "False", "False", "False"],
        "title": ["Segfault", "Add flag", "Fix segfault", "How to?", "Typo", "Dupe"],
        "body": ["trace", None, "patch", "?", "docs", "same"],
        "labels": ["['bug']", "['enhancement', 'P2']", "['bug']", "null", "['docs', 'bug']",
                   "['bug', 'duplicate']"],
        "created_at": ["2024-01-02T03:04:05Z"] * 6,
    })
    calls = []

    def download(repo_id, filename, *, repo_type):
        calls.append((repo_id, filename, repo_type))
        path = tmp_path / filename.replace("/", "_")
        pq.write_table(table, path)
        return str(path)

    skipped: list[Skipped] = []
    examples = load_hub(["moby/moby"], download=download, skipped=skipped)
    assert calls == [(HUB_DATASET, "data/issues/moby/moby/0.parquet", "dataset")]
    assert [(e.title, e.label, e.repo) for e in examples] == [("Segfault", "bug", "moby/moby"),
                                                             ("Add flag", "feature", "moby/moby")]
    assert examples[1].body == "" and examples[0].created_at == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert [s.reason for s in skipped] == ["labels give no single kind"] * 3


def test_hub_loader_reads_list_typed_labels(tmp_path):
    path = tmp_path / "issues.parquet"
    pq.write_table(pa.table({"is_pull_request": [False, False], "title": ["a", "b"], "body": ["", ""],
                             "labels": [["Type: Question"], None]}), path)
    examples = load_hub(["vuejs/core"], download=lambda *args, **kwargs: str(path))
    assert [(e.title, e.label) for e in examples] == [("a", "question")]


def test_the_lessons_split_names_disjoint_train_and_test_repositories():
    assert len(TRAIN_REPOS) == 8 and len(TEST_REPOS) == 5
    assert not set(TRAIN_REPOS) & set(TEST_REPOS)


def test_fingerprint_ignores_order_but_not_content(small_train):
    fingerprint = data_fingerprint(small_train)
    assert fingerprint == data_fingerprint(list(reversed(small_train)))
    assert len(fingerprint) == 64
    first = small_train[0]
    changed = [Example(first.title, first.body, "question", first.repo)] + small_train[1:]
    assert data_fingerprint(changed) != fingerprint


def test_database_examples_are_the_human_confirmed_ones(session):
    react, vue = Repository(full_name="facebook/react"), Repository(full_name="vuejs/core")
    session.add_all([react, vue])
    session.flush()
    session.add_all([
        IssueRecord(repository_id=react.id, number=1, title="Crash", body="trace", confirmed_label="bug",
                    opened_at=dt.datetime(2024, 5, 1, tzinfo=UTC)),
        IssueRecord(repository_id=react.id, number=2, title="Labelled by the bot only", body=""),
        IssueRecord(repository_id=vue.id, number=1, title="Docs typo", body="",
                    confirmed_label="documentation"),
        IssueRecord(repository_id=vue.id, number=2, title="Cleared", body="", confirmed_label=""),
    ])
    session.flush()
    skipped: list[Skipped] = []
    everything = load_database(session, skipped=skipped)
    assert [(e.title, e.label, e.repo) for e in everything] == [("Crash", "bug", "facebook/react"),
                                                               ("Docs typo", "documentation", "vuejs/core")]
    assert everything[0].created_at == dt.datetime(2024, 5, 1, tzinfo=UTC)
    assert [s.reason for s in skipped] == ["empty confirmed label"]
    assert [e.title for e in load_database(session, "vuejs/core")] == ["Docs typo"]
    assert load_database(session, "global") == everything
    assert [e.title for e in load_database(session, exclude="vuejs/core")] == ["Crash"]
    assert [e.title for e in load_database(session, newest=2)] == ["Docs typo"]  # of the 2 newest, 1 cleared


def test_hub_loader_pins_a_revision_and_reports_the_commit_it_read(tmp_path):
    from trainer.dataset import snapshot_revision

    commit = "0123456789abcdef0123456789abcdef01234567"
    path = tmp_path / "datasets--open-index--open-github-issues" / "snapshots" / commit / "data" / "0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"is_pull_request": [False], "title": ["a"], "body": [""],
                             "labels": [["bug"]]}), path)
    asked, revisions = [], set()
    examples = load_hub(["vuejs/core"], revision=commit, revisions=revisions,
                        download=lambda *args, **kwargs: asked.append(kwargs.get("revision")) or str(path))
    assert asked == [commit] and revisions == {commit} and len(examples) == 1
    assert snapshot_revision(tmp_path / "elsewhere" / "0.parquet") is None
