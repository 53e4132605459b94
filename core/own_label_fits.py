"""A repository's own labels' rules (core.own_labels.fit_rules), fitted off the labelling path and stored.

Fitting costs a cross-fit per served label over the whole memory (seconds at 2,000 rows); recomputing the
thresholds alone on every labelling job cost it 0.21 s. So, as with the kinds' thresholds
(core.repository_thresholds): the feedback queue refits after decisions and memory fills
(`refresh_stored`, where the memory or the examples moved enough: `refit_due`), and the labelling job reads
what is stored (`stale_ok`); it fits only when nothing is stored for its model version, target and
min_examples.

Stored as data: each label's examples, threshold and bias as JSON, the heads' weights as one
array (float64, so a stored head scores exactly as the fitted one; OwnLabelFit), and where the heads read
words (core.own_labels.SCORING with tfidf) their TF-IDF vocabulary, terms and idf as JSON
(core.own_label_words); nothing executable. The scoring and the thresholds' rule are part of the key:
another one is fitted anew.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core import own_labels
from core.own_label_words import WordFeatures
from core.own_labels import LabelHead, OwnLabelMemory, OwnLabelRules
from core.store import as_utc
from core.tables import IssueRecord, MemoryEntry, OwnLabelExample, OwnLabelFit, utcnow


def stored_rules(session: Session, repository_id: int, version: str, *, target: float, min_examples: int,
                 memory: Callable[[], OwnLabelMemory], stale_ok: bool = True) -> OwnLabelRules:
    """The repository's rules for `version` at `target` and `min_examples`: as stored when they were
    fitted for these inputs (`stale_ok`: however the memory moved since; else only while it has not),
    otherwise fitted now on `memory()` and stored."""
    inputs = _inputs(version, target, min_examples)
    row = session.scalar(select(OwnLabelFit).where(OwnLabelFit.repository_id == repository_id))
    if row is not None and row.key[:len(inputs)] == inputs and (
            stale_ok or row.key[len(inputs):] == _moved(session, repository_id, version)):
        return decode(row)
    return _fit_and_store(session, repository_id, inputs, memory(), row)


# Refitting costs a cross-fit per served label over the whole memory: about 30 s at 3,000 rows and 6 served
# labels (bench.own_labels, 2026-12-03, 2 shared cores), so after every decision of a busy repository the
# feedback queue would do little else. A small memory (a fit in about a second) is refitted on every move; a
# larger one once it moved by REFIT_SHARE of its rows or examples, or once the fit is REFIT_AFTER old and it
# moved at all (the next decision or fill after that refits). A new model version, scoring or thresholds'
# rule always refits.
SMALL_MEMORY = 500
REFIT_SHARE = 0.05
REFIT_AFTER = dt.timedelta(minutes=10)


def refresh_stored(session: Session, repository_id: int, version: str | None = None, *,
                   now: dt.datetime | None = None) -> OwnLabelRules | None:
    """Refit the stored rules, for the target and min_examples they were stored with, where the memory or
    the examples moved since as far as `refit_due` asks (the feedback queue's part); `version`: the model
    serving now, when a promotion moved it (None: the stored one). None when none are stored (the labelling
    job fits them the first time it serves own labels)."""
    row = session.scalar(select(OwnLabelFit).where(OwnLabelFit.repository_id == repository_id))
    if row is None:
        return None
    stored_version, target, min_examples = row.key[:3]
    version = version or stored_version
    inputs = _inputs(version, target, min_examples)
    moved = _moved(session, repository_id, version)
    if row.key[:len(inputs)] == inputs and not refit_due(row.key[len(inputs):], moved, row.fitted_at,
                                                         now or utcnow()):
        return decode(row)
    memory = own_labels.recall(session, repository_id, version)
    return _fit_and_store(session, repository_id, inputs, memory, row)


def refit_due(stored: list, moved: list, fitted_at: dt.datetime, now: dt.datetime) -> bool:
    """Whether the memory moved enough since the fit (`stored`, `moved`: _moved's rows, last row id,
    examples, last example id) to pay for a refit now."""
    if list(stored) == list(moved):
        return False
    rows_then, _, examples_then, _ = stored
    rows_now, _, examples_now, _ = moved
    if max(rows_then, rows_now) < SMALL_MEMORY:
        return True
    share = max(abs(rows_now - rows_then) / max(rows_then, 1),
                abs(examples_now - examples_then) / max(examples_then, 1))
    return share >= REFIT_SHARE or now - as_utc(fitted_at) >= REFIT_AFTER


def _fit_and_store(session: Session, repository_id: int, inputs: list, memory: OwnLabelMemory,
                   row: OwnLabelFit | None) -> OwnLabelRules:
    version, target, min_examples, scoring = inputs[:4]
    key = inputs + _moved(session, repository_id, version)  # counted before the fit: a newer move refits
    if own_labels.reads_text(scoring) and memory.texts is None:
        memory = own_labels.with_texts(session, memory)
    rules = own_labels.fit_rules(memory, min_examples=min_examples, target=target)
    labels, weights = encode(rules)
    if row is None:
        row = OwnLabelFit(repository_id=repository_id)
        session.add(row)
    row.model_version, row.key, row.labels, row.weights, row.fitted_at = version, key, labels, weights, utcnow()
    row.words = rules.words.to_json() if rules.words is not None else None
    session.flush()
    return rules


def encode(rules: OwnLabelRules) -> tuple[dict, bytes | None]:
    """(JSON per label, the heads' weights as float64 rows): what OwnLabelFit stores."""
    heads = sorted(rules.heads)
    labels = {name: {"examples": int(count), "threshold": _finite(rules.thresholds.get(name)),
                     "served": name in rules.thresholds,
                     "bias": rules.heads[name].bias if name in rules.heads else None,
                     "row": heads.index(name) if name in rules.heads else None}
              for name, count in rules.examples.items()}
    weights = (np.stack([rules.heads[name].weights for name in heads]).astype("<f8").tobytes()
               if heads else None)
    return labels, weights


def decode(row: OwnLabelFit) -> OwnLabelRules:
    rows = sum(entry["row"] is not None for entry in row.labels.values())
    weights = (np.frombuffer(row.weights, dtype="<f8").reshape(rows, -1)
               if row.weights and rows else np.zeros((0, 0)))
    return OwnLabelRules(
        examples={name: entry["examples"] for name, entry in row.labels.items()},
        thresholds={name: math.inf if entry["threshold"] is None else entry["threshold"]
                    for name, entry in row.labels.items() if entry["served"]},
        heads={name: LabelHead(weights[entry["row"]], entry["bias"]) for name, entry in row.labels.items()
               if entry["row"] is not None},
        words=WordFeatures.from_json(row.words) if row.words else None, scoring=row.key[3])


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _inputs(version: str, target: float, min_examples: int) -> list:
    """The first part of the key, as stored JSON reads back: what the fit depends on besides the memory."""
    return [version, float(target), int(min_examples), own_labels.SCORING, own_labels.threshold_rule()]


def _moved(session: Session, repository_id: int, version: str) -> list:
    """The rest of the key: what moves with the memory and the examples (one query)."""
    remembered = (MemoryEntry.repository_id == repository_id, MemoryEntry.model_version == version)
    examples = select(OwnLabelExample.id).join(IssueRecord, IssueRecord.id == OwnLabelExample.issue_id).where(
        IssueRecord.repository_id == repository_id).subquery()
    moved = session.execute(select(
        select(func.count()).select_from(MemoryEntry).where(*remembered).scalar_subquery(),
        select(func.max(MemoryEntry.id)).where(*remembered).scalar_subquery(),
        select(func.count()).select_from(examples).scalar_subquery(),
        select(func.max(examples.c.id)).scalar_subquery())).one()
    return [int(value or 0) for value in moved]
