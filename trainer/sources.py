"""The data mix: every labelled source under ../shared/data as four kinds, one group per repository.

NLBSE'24 train (5 repositories, titled), Ticket Tagger (many unnamed repositories: one group of its own,
title and body run together), ccims (9 repositories, body only, the one source of documentation issues)
and huggingface/datasets (one repository's history as GitHub's API returned it). NLBSE'24's test split
is never part of the mix. How much of each is used (`MixConfig`) was chosen by bench/unseen.py.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from core.kinds import kind_of
from trainer.dataset import (
    Example,
    ccims_file_parts,
    load_ccims,
    load_fasttext,
    load_file,
    load_github_issues,
)

log = logging.getLogger(__name__)

SHARED_ENV = "ISSUE_SORTER_SHARED"  # where ../shared is, when not beside the checkout
CHECKOUT = Path(__file__).resolve().parents[1]


def shared_dir(environ: Mapping[str, str] = os.environ, *, checkout: Path = CHECKOUT) -> Path:
    """The shared folder (data and references we may read, never ship): $ISSUE_SORTER_SHARED, else
    ../shared beside the checkout. The one place that says where it is."""
    return Path(environ.get(SHARED_ENV) or checkout.parent / "shared")


NLBSE_DIR = "nlbse24-issue-report-classification"
NLBSE_TRAIN_FILE = f"{NLBSE_DIR}/issues_train.csv"
NLBSE_TEST_FILE = f"{NLBSE_DIR}/issues_test.csv"  # the NLBSE'24 protocol's test split: never in the mix
TICKET_TAGGER_FILE = "ticket-tagger-rebalanced/rafaels-rebalanced-dataset-only-english.txt"
CCIMS_DIR = "ccims-issue-classification"
HF_DATASETS_FILE = "huggingface-datasets-issues/datasets-issues.zip"
TICKET_TAGGER_GROUP = "ticket-tagger"  # its issues carry no repository: they count as one group


@dataclasses.dataclass(frozen=True)
class MixConfig:
    """How the sources are drawn into one training set."""

    per_group_kind: int = 300  # at most this many issues of each (repository, kind): no repository dominates
    title_drop: float = 0.3  # share of titled issues trained body-only, so "no title" does not mean a kind
    seed: int = 42


DEFAULT_MIX = MixConfig()


def load_sources(data_dir: Path | str) -> dict[str, list[Example]]:
    """Each source present under `data_dir` (../shared/data) by name; a missing one is logged and left out."""
    data_dir = Path(data_dir)
    loaders = {"nlbse24": (NLBSE_TRAIN_FILE, load_file),
               "ticket-tagger": (TICKET_TAGGER_FILE,
                                 lambda path: _unique(load_fasttext(path, repo=TICKET_TAGGER_GROUP))),
               "ccims": (CCIMS_DIR, load_ccims_dir), "huggingface-datasets": (HF_DATASETS_FILE, load_github_issues)}
    sources = {}
    for name, (path, load) in loaders.items():
        if not (data_dir / path).exists():
            log.warning("%s: no %s, left out of the mix", data_dir, path)
            continue
        sources[name] = load(data_dir / path)
    return sources


def load_ccims_dir(directory: Path | str) -> list[Example]:
    """Every ccims file whose label is a kind (not `api`); a body filed under two kinds of one repository
    is dropped, as its PROVENANCE.md says: it has no single kind."""
    examples = []
    for path in sorted(Path(directory).glob("*.json")):
        if kind_of([ccims_file_parts(path)[1]]) is not None:
            examples += load_ccims(path)
    kinds: dict[tuple, set[str]] = defaultdict(set)
    for example in examples:
        kinds[example.repo, example.body].add(example.label)
    kept = [example for example in examples if len(kinds[example.repo, example.body]) == 1]
    log.info("%s: dropped %d issues filed under two kinds", directory, len(examples) - len(kept))
    return kept


def _unique(examples: Iterable[Example]) -> list[Example]:
    """The first issue of each text."""
    first: dict[str, Example] = {}
    for example in examples:
        first.setdefault(example.text, example)
    return list(first.values())


def all_issues(sources: Mapping[str, Sequence[Example]]) -> list[Example]:
    """Every issue of every source, in source order."""
    return [example for examples in sources.values() for example in examples]


def capped(examples: Iterable[Example], per_group_kind: int, seed: int) -> list[Example]:
    """At most `per_group_kind` of each (repository, kind), drawn at random (seeded), in input order."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    examples = list(examples)
    for i, example in enumerate(examples):
        groups[example.repo, example.label].append(i)
    rng = random.Random(seed)
    chosen = set()
    for key in sorted(groups, key=str):
        rows = groups[key]
        chosen.update(rows if len(rows) <= per_group_kind else rng.sample(rows, per_group_kind))
    return [examples[i] for i in sorted(chosen)]


def drop_titles(examples: Sequence[Example], share: float, seed: int) -> list[Example]:
    """The same issues, `share` of the titled ones (seeded) without their title."""
    rng = random.Random(seed)
    return [dataclasses.replace(example, title="") if example.title and rng.random() < share else example
            for example in examples]


def training_mix(sources: Mapping[str, Sequence[Example]], mix: MixConfig = DEFAULT_MIX, *,
                 exclude: Iterable[str] = ()) -> list[Example]:
    """The bootstrap model's training issues: every source, capped, some titles dropped, shuffled;
    repositories in `exclude` (owner/name or TICKET_TAGGER_GROUP) left out entirely."""
    excluded = set(exclude)
    pool = [example for example in all_issues(sources) if example.repo not in excluded]
    mixed = drop_titles(capped(pool, mix.per_group_kind, mix.seed), mix.title_drop, mix.seed)
    random.Random(mix.seed).shuffle(mixed)
    return mixed


def describe(examples: Sequence[Example]) -> str:
    """'N issues: bug n, docs n, ... from G groups' for a log line or a model card."""
    counts = Counter(example.label for example in examples)
    kinds = ", ".join(f"{label} {count}" for label, count in sorted(counts.items()))
    return f"{len(examples)} issues ({kinds}) from {len({e.repo for e in examples})} groups"
