"""Where the first model's issues come from: a file you name, `../shared` beside our checkouts (every
labelled source there, four kinds: `trainer.sources`), or the lesson's data set on the Hugging Face hub
(its label rules, its split of projects, four kinds)."""

from __future__ import annotations

import logging
import os
import random
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from trainer.dataset import HUB_DATASET, TEST_REPOS, TRAIN_REPOS, Example, load_file
from trainer.hub_data import FILE_SECONDS, hub_endpoint, is_cached, load_hub_data
from trainer.sources import CHECKOUT, NLBSE_TEST_FILE, describe, load_sources, shared_dir, training_mix

log = logging.getLogger(__name__)

BOOTSTRAP_ENV = "ISSUE_SORTER_BOOTSTRAP_DATA"  # a training file to use instead of looking
NLBSE_TRAIN = Path("data/nlbse24-issue-report-classification/issues_train.csv")
HUB = "hub"
HUB_PER_KIND = 400  # training issues per kind from the hub; the lesson takes 1,500, which is ~4x the CPU budget
HUB_EVAL_PER_KIND = 400  # the lesson's test set: issues per kind of the projects it never trains on
NO_DATA = (f"no bootstrap data: pass --data FILE, set {BOOTSTRAP_ENV}=FILE, or reach the Hugging Face hub "
           f"({{endpoint}} is unreachable) so it can download {HUB_DATASET}")


class NoBootstrapData(FileNotFoundError):
    """Nothing to train the first model on; the message names the three ways to give it some."""


def choose_source(data: str | None, environ: Mapping[str, str], *, checkout: Path = CHECKOUT,
                  hub_reachable: Callable[[], bool] | None = None, hub_cached: Callable[[], bool] | None = None,
                  revision: str | None = None) -> Path | str:
    """`data` (a file or "hub"), else $ISSUE_SORTER_BOOTSTRAP_DATA, else ../shared's data directory (the
    full mix) where its NLBSE training file exists, else the hub when it can be reached or its data set
    (at `revision`) is all in the hub cache; otherwise a NoBootstrapData at once."""
    named = data or environ.get(BOOTSTRAP_ENV)
    if named == HUB:
        return HUB
    if named:
        if not Path(named).is_file():
            raise NoBootstrapData(f"no bootstrap data at {named}: pass --data FILE or set {BOOTSTRAP_ENV}")
        return Path(named)
    shared = shared_dir(environ, checkout=checkout)
    if (shared / NLBSE_TRAIN).is_file():
        return shared / "data"
    if (hub_reachable or is_hub_reachable)():
        return HUB
    if (hub_cached or (lambda: is_cached([*TRAIN_REPOS, *TEST_REPOS], revision=revision)))():
        log.info("%s cannot be reached; its data set %s is in the cache: training on that", hub_endpoint(),
                 HUB_DATASET)
        return HUB
    raise NoBootstrapData(NO_DATA.format(endpoint=hub_endpoint()))


def is_hub_reachable(timeout: float = 3.0) -> bool:
    """A TCP connection to the hub within `timeout` (huggingface_hub itself retries for half a minute)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    url = urlsplit(hub_endpoint())
    try:
        with socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)),
                                      timeout=timeout):
            return True
    except OSError:
        return False


def load_source(source: Path | str, *, seed: int = 42, revision: str | None = None,
                say: Callable[[str], None] = log.info, seconds: float = FILE_SECONDS
                ) -> tuple[list[Example], list[Example], str]:
    """(training issues, held-out issues, what they are) for `choose_source`'s answer; from the hub, the
    data set at `revision` (else main), each file announced by `say` and bounded by `seconds`."""
    if source == HUB:
        revisions: set[str] = set()
        common = {"revision": revision, "revisions": revisions, "say": say, "seconds": seconds,
                  "total": len(TRAIN_REPOS) + len(TEST_REPOS), "offline": not is_hub_reachable()}
        train = balanced(load_hub_data(TRAIN_REPOS, **common), HUB_PER_KIND, seed)
        held_out = balanced(load_hub_data(TEST_REPOS, first=len(TRAIN_REPOS) + 1, **common), HUB_EVAL_PER_KIND,
                            seed)
        pinned = f"@{','.join(sorted(revisions))}" if revisions else ""  # the card records the commit
        return train, held_out, (f"{HUB_DATASET}{pinned} (train: {', '.join(TRAIN_REPOS)}; "
                                 f"held out, unseen: {', '.join(TEST_REPOS)})")
    path = Path(source)
    if path.is_dir():  # ../shared/data: every source, NLBSE'24's test split held out
        train = training_mix(load_sources(path))
        return train, load_file(path / NLBSE_TEST_FILE), f"{path}: {describe(train)}"
    test = path.with_name("issues_test.csv")
    return load_file(path), load_file(test) if test.is_file() and test != path else [], str(path)


def balanced(examples: Sequence[Example], per_kind: int, seed: int) -> list[Example]:
    """At most `per_kind` issues of each label, drawn at random (seeded), in a shuffled order."""
    rng = random.Random(seed)
    chosen: list[Example] = []
    for label in sorted({example.label for example in examples}):
        of_label = [example for example in examples if example.label == label]
        chosen += rng.sample(of_label, min(per_kind, len(of_label)))
    rng.shuffle(chosen)
    return chosen
