"""The bootstrap's hub path through real `huggingface_hub` calls against the hub stand-in: progress, pinned
revisions, the cache when the hub is down, and one line naming the file and the fix for every failure."""

import io
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainer.bootstrap import HUB, NoBootstrapData, choose_source, load_source
from trainer.dataset import HUB_DATASET, HUB_PATH, TEST_REPOS, TRAIN_REPOS
from trainer.hub_data import HubDataError

KINDS = {"bug": ["bug"], "feature": ["enhancement"], "question": ["question"], "docs": ["documentation"]}
ALL_REPOS = [*TRAIN_REPOS, *TEST_REPOS]


def issues_file(repo: str, *, per_kind: int = 3, typed: bool = True, tag: str = "") -> bytes:
    """One project's parquet as the data set lays it out; `typed`: labels a list and is_pull_request a bool,
    else both as strings (the data set has files of each encoding)."""
    rows = [{"is_pull_request": False if typed else "False", "title": f"{repo} {kind} {n}{tag}", "body": "text",
             "labels": labels if typed else str(labels), "created_at": "2024-01-01T00:00:00Z"}
            for kind, labels in KINDS.items() for n in range(per_kind)]
    rows.append({"is_pull_request": True if typed else "True", "title": "a PR", "body": "",
                 "labels": ["bug"] if typed else "['bug']", "created_at": None})
    rows.append({"is_pull_request": False if typed else "False", "title": "no kind", "body": "",
                 "labels": ["wontfix"] if typed else "['wontfix']", "created_at": None})
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


def publish_dataset(hub, repos=ALL_REPOS, **kwargs) -> str:
    files = {HUB_PATH.format(repo=repo): issues_file(repo, typed=i % 2 == 0, **kwargs)
             for i, repo in enumerate(repos)}
    return hub.add_files(HUB_DATASET, files | {"README.md": b"# open-github-issues\n"})


def scrambled(data: bytes) -> bytes:
    """The file with its pages overwritten: same length, magic bytes kept, unreadable."""
    middle = bytes(reversed(data[4:-8]))
    return data[:4] + middle + data[-8:]


def test_the_hub_source_reads_the_lessons_13_files_with_progress_and_records_the_commit(hub):
    commit = publish_dataset(hub)
    lines = []
    train, held_out, described = load_source(HUB, say=lines.append)
    assert {e.repo for e in train} == set(TRAIN_REPOS) and {e.repo for e in held_out} == set(TEST_REPOS)
    assert {e.label for e in train} == set(KINDS) and "a PR" not in {e.title for e in train + held_out}
    assert lines == [f"hub: {repo} ({n} of 13)" for n, repo in enumerate(ALL_REPOS, start=1)]
    assert f"{HUB_DATASET}@{commit}" in described and "unseen" in described
    heads = [path for method, path in hub.requests if method == "HEAD"]
    assert len(heads) == 13 and sum(path.startswith("/cdn/") for _, path in hub.requests) == 13


def test_a_revision_is_read_as_pinned_not_main(hub):
    first = publish_dataset(hub)
    publish_dataset(hub, tag=" (edited)")  # main moves on
    train, _, described = load_source(HUB, revision=first, say=lambda line: None)
    assert f"@{first}" in described and not any("edited" in e.title for e in train)


def test_a_file_missing_on_the_hub_is_one_line_naming_it_and_the_fixes(hub):
    publish_dataset(hub, repos=[repo for repo in ALL_REPOS if repo != "redis/redis"])
    with pytest.raises(HubDataError) as raised:
        load_source(HUB, say=lambda line: None)
    message = str(raised.value)
    assert "\n" not in message and HUB_PATH.format(repo="redis/redis") in message
    assert "--revision" in message and "--data FILE" in message


def test_an_unknown_revision_is_one_line_naming_the_flag(hub):
    publish_dataset(hub)
    with pytest.raises(HubDataError, match="no revision v9.*--revision") as raised:
        load_source(HUB, revision="v9", say=lambda line: None)
    assert "\n" not in str(raised.value)


def test_a_scrambled_parquet_is_fetched_again_once_then_names_the_cached_file(hub):
    publish_dataset(hub)
    broken = HUB_PATH.format(repo="golang/go")
    hub.add_files(HUB_DATASET, {broken: scrambled(issues_file("golang/go"))})
    with pytest.raises(HubDataError) as raised:
        load_source(HUB, say=lambda line: None)
    message = str(raised.value)
    assert "\n" not in message and broken in message and "delete " in message and "--data FILE" in message
    cached = message.split("delete ", 1)[1].split(" and retry")[0]
    assert cached.startswith(hub_cache_root()) and cached.endswith("0.parquet")
    heads = [path for method, path in hub.requests if method == "HEAD" and path.endswith(broken)]
    assert len(heads) == 2  # fetched again once, not forever


def test_a_corrupt_file_in_the_cache_is_fetched_again_and_the_run_goes_on(hub):
    """Its ETag matches the hub's, so huggingface_hub alone would hand back the same bad bytes every run."""
    commit = publish_dataset(hub)
    load_source(HUB, say=lambda line: None)
    blob = (cached_dataset() / "snapshots" / commit / HUB_PATH.format(repo="moby/moby")).resolve()
    good = blob.read_bytes()
    blob.write_bytes(scrambled(good))
    _, held_out, _ = load_source(HUB, say=lambda line: None)
    assert "moby/moby" in {e.repo for e in held_out}
    assert blob.read_bytes() == good


def test_a_hub_that_never_answers_stops_within_the_bound_naming_the_file(hub):
    publish_dataset(hub)
    stalled = HUB_PATH.format(repo="rust-lang/rust")
    hub.stall.add(stalled)
    lines = []
    started = time.monotonic()
    with pytest.raises(HubDataError) as raised:
        load_source(HUB, say=lines.append, seconds=1.0)
    assert time.monotonic() - started < 10
    message = str(raised.value)
    assert "\n" not in message and stalled in message and "in 1 s" in message and "--data FILE" in message
    assert lines[-1] == "hub: rust-lang/rust (2 of 13)"  # the user saw which file it waited on


def test_the_cache_counts_when_the_hub_is_unreachable(hub, tmp_path):
    publish_dataset(hub)
    first, _, _ = load_source(HUB, say=lambda line: None)
    hub.stop()
    clone = tmp_path / "clone"  # no ../shared beside it
    assert choose_source(None, {}, checkout=clone) == HUB
    again, _, _ = load_source(HUB, say=lambda line: None)
    assert again == first


def test_the_hub_unreachable_and_nothing_cached_is_the_three_ways_in_one_line(hub, tmp_path):
    hub.stop()
    with pytest.raises(NoBootstrapData) as raised:
        choose_source(None, {}, checkout=tmp_path / "clone")
    assert "\n" not in str(raised.value) and "--data FILE" in str(raised.value)
    with pytest.raises(HubDataError, match="cannot be reached.*not in the cache.*--data FILE"):
        load_source(HUB, say=lambda line: None)


def hub_cache_root() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def cached_dataset():
    from pathlib import Path

    return Path(hub_cache_root()) / "datasets--open-index--open-github-issues"
