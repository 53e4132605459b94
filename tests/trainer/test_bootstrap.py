"""Where `bootstrap-model` finds its first issues: named, ../shared, the hub, or one clear line at once."""

import os
import subprocess
import sys

import pytest

from trainer.bootstrap import (
    BOOTSTRAP_ENV,
    HUB,
    NLBSE_TRAIN,
    NoBootstrapData,
    balanced,
    choose_source,
    load_source,
)
from trainer.dataset import Example

NEVER = lambda: pytest.fail("the hub was asked although local data was there")  # noqa: E731


@pytest.fixture
def shared(tmp_path):
    path = tmp_path / "shared" / NLBSE_TRAIN
    path.parent.mkdir(parents=True)
    path.write_text("title,body,label\nCrash,boom,bug\n")
    return tmp_path / "shared"


def test_a_named_file_wins_then_the_environment_then_shared(tmp_path, shared):
    named = tmp_path / "mine.csv"
    named.write_text("title,body,label\n")
    env = {BOOTSTRAP_ENV: str(named), "ISSUE_SORTER_SHARED": str(shared)}
    assert choose_source(str(named), {}, hub_reachable=NEVER) == named
    assert choose_source(None, env, hub_reachable=NEVER) == named
    assert choose_source(None, {"ISSUE_SORTER_SHARED": str(shared)}, hub_reachable=NEVER) == shared / "data"
    assert choose_source("hub", env, hub_reachable=NEVER) == HUB


def test_a_checkout_without_shared_uses_the_hub_when_it_is_reachable(tmp_path):
    assert choose_source(None, {}, checkout=tmp_path / "clone", hub_reachable=lambda: True) == HUB


def test_nothing_local_and_no_hub_names_the_three_ways_in_one_line(tmp_path):
    with pytest.raises(NoBootstrapData) as raised:
        choose_source(None, {}, checkout=tmp_path / "clone", hub_reachable=lambda: False, hub_cached=lambda: False)
    message = str(raised.value)
    assert "\n" not in message and "--data FILE" in message and BOOTSTRAP_ENV in message and "hub" in message


def test_a_named_file_that_is_missing_is_an_error_not_a_fallback(tmp_path):
    with pytest.raises(NoBootstrapData, match="missing.csv"):
        choose_source(str(tmp_path / "missing.csv"), {}, hub_reachable=lambda: True)


@pytest.mark.e2e  # `issue-sorter` in a process of its own
def test_bootstrap_in_a_clone_without_shared_and_without_network_stops_at_once(tmp_path):
    """What a new user on another machine meets: one line naming the fix, nothing trained."""
    database = f"sqlite:///{tmp_path / 'fresh.db'}"
    env = {k: v for k, v in os.environ.items() if k not in (BOOTSTRAP_ENV, "HF_HUB_OFFLINE")}
    env.update(DATABASE_URL=database, MODEL_DIR=str(tmp_path / "models"), ISSUE_SORTER_SHARED=str(tmp_path / "none"),
               HF_ENDPOINT="http://127.0.0.1:9",  # nothing listens there: the hub is unreachable
               HF_HOME=str(tmp_path / "hf-home"))  # and nothing is cached
    cli = [sys.executable, "-m", "issue_sorter.cli"]
    subprocess.run(cli + ["migrate"], env=env, check=True, capture_output=True)
    result = subprocess.run(cli + ["bootstrap-model"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "--data FILE" in line and BOOTSTRAP_ENV in line and "127.0.0.1:9" in line
    assert not (tmp_path / "models").exists()


def test_balanced_takes_at_most_n_of_each_label_reproducibly():
    examples = [Example(f"t{i}", "", label) for i, label in enumerate(["bug"] * 10 + ["docs"] * 3)]
    picked = balanced(examples, 4, seed=1)
    assert sorted(e.label for e in picked) == ["bug"] * 4 + ["docs"] * 3
    assert picked == balanced(examples, 4, seed=1) and picked != balanced(examples, 4, seed=2)


def test_shared_beside_the_checkout_means_the_full_mix_of_four_kinds_nlbse_test_held_out():
    from tests.paths import DATA, SHARED

    source = choose_source(None, {"ISSUE_SORTER_SHARED": str(SHARED)}, hub_reachable=NEVER)
    assert source == DATA
    train, held_out, described = load_source(source)
    assert {e.label for e in train} == {"bug", "feature", "question", "docs"}
    assert len({e.repo for e in train}) == 16 and "16 groups" in described
    assert len(held_out) == 1500 and {e.label for e in held_out} == {"bug", "feature", "question"}
    held_out_texts = {(e.title, e.body) for e in held_out}
    assert sum((e.title, e.body) in held_out_texts for e in train) <= 3  # NLBSE's 3 exact train/test twins
