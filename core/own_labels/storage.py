"""What is stored of a repository's own labels: the examples a human confirmed, the memory read with them,
and the rules (core.own_labels.heads.fit_rules) fitted off the labelling path.

Fitting costs a cross-fit per served label over the whole memory, too much for every labelling job. So, as
with the kinds' thresholds (core.repository_thresholds): the feedback queue refits after decisions and
memory fills (`refresh_stored`, where the memory or the examples moved enough: `Refits`), and the labelling
job reads what is stored (`stale_ok`); it fits only when nothing is stored for its model version, target,
min_examples and the rule's knobs (OwnLabelParams, part of the key: an upgrade that changes them refits).

Stored as data: each label's examples, threshold and bias as JSON, the heads' weights as one array (float64,
so a stored head scores exactly as the fitted one; OwnLabelFit), and the heads' TF-IDF vocabulary, terms and
idf as JSON (core.own_labels.words); nothing executable.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from core.issue_text import format_issue_text
from core.memory import MemoryRows, read_rows
from core.own_labels.heads import LabelHead, OwnLabelParams, OwnLabelRules, fit_rules
from core.own_labels.vote import OwnLabelMemory
from core.own_labels.words import WordFeatures
from core.store import as_utc
from core.tables import IssueRecord, MemoryEntry, OwnLabelExample, OwnLabelFit, utcnow

# ---- the examples, and the memory with the own labels each row carries --------------------------------


def confirm(session: Session, issue: IssueRecord, label: str, actor: str | None) -> None:
    """A human (or the backfill, from the repository's history) confirmed `label` on the issue."""
    if session.scalar(select(OwnLabelExample.id).where(OwnLabelExample.issue_id == issue.id,
                                                       OwnLabelExample.label == label)) is None:
        session.add(OwnLabelExample(issue_id=issue.id, label=label, confirmed_by=actor))
        session.flush()


def unconfirm(session: Session, issue: IssueRecord, label: str) -> None:
    """A human took `label` off the issue: it is no example of it any more."""
    session.execute(delete(OwnLabelExample).where(OwnLabelExample.issue_id == issue.id,
                                                  OwnLabelExample.label == label))


def memory_of(session: Session, rows: MemoryRows, repository_id: int, *, exclude_issue: int | None = None
              ) -> OwnLabelMemory:
    """The memory's rows (core.memory.read_rows, read once for the kind too) with the own labels each
    carries: only the examples table is read here."""
    carried: dict[int, set[str]] = {}
    for issue_id, label in session.execute(
            select(OwnLabelExample.issue_id, OwnLabelExample.label).join(
                IssueRecord, IssueRecord.id == OwnLabelExample.issue_id)
            .where(IssueRecord.repository_id == repository_id)):
        carried.setdefault(issue_id, set()).add(label)
    examples = Counter(label for issue_id, labels in carried.items() if issue_id != exclude_issue
                       for label in labels)
    return OwnLabelMemory(rows.vectors, [frozenset(carried.get(issue_id, ())) for issue_id in rows.issue_ids],
                          dict(examples), list(rows.issue_ids))


def with_texts(session: Session, memory: OwnLabelMemory) -> OwnLabelMemory:
    """`memory` with each row's issue text (what the model read: core.issue_text), for a fit: the heads read
    the words; the labelling job's scoring never needs them."""
    stored = {issue_id: (title, body) for issue_id, title, body in session.execute(
        select(IssueRecord.id, IssueRecord.title, IssueRecord.body).where(IssueRecord.id.in_(memory.issue_ids)))}
    return replace(memory, texts=[format_issue_text(*stored.get(issue_id, ("", ""))) for issue_id in memory.issue_ids])


def recall(session: Session, repository_id: int, version: str, *, exclude_issue: int | None = None
           ) -> OwnLabelMemory:
    """The repository's memory rows (core.memory, as `version` embedded them) with their own labels."""
    rows = read_rows(session, repository_id, version, exclude_issue=exclude_issue)
    return memory_of(session, rows, repository_id, exclude_issue=exclude_issue)


# ---- the fitted rules ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refits:
    """When the feedback queue refits stored rules whose memory moved. A refit is a cross-fit per served
    label over the whole memory, so after every decision of a busy repository the queue would do little
    else: a small memory (a fit in about a second) is refitted on every move; a larger one once it moved by
    `share` of its rows or examples, or once the fit is `after` old and it moved at all (the next decision
    or fill after that refits). A new model version or new knobs always refit."""

    small_memory: int = 500
    share: float = 0.05
    after: dt.timedelta = dt.timedelta(minutes=10)


def stored_rules(session: Session, repository_id: int, version: str, *, target: float, min_examples: int,
                 memory: Callable[[], OwnLabelMemory], stale_ok: bool = True,
                 params: OwnLabelParams = OwnLabelParams()) -> OwnLabelRules:
    """The repository's rules for `version` at `target`, `min_examples` and `params`: as stored when they were
    fitted for these inputs (`stale_ok`: however the memory moved since; else only while it has not),
    otherwise fitted now on `memory()` and stored."""
    inputs = _inputs(version, target, min_examples, params)
    row = session.scalar(select(OwnLabelFit).where(OwnLabelFit.repository_id == repository_id))
    if row is not None and row.key[:len(inputs)] == inputs and (
            stale_ok or row.key[len(inputs):] == _moved(session, repository_id, version)):
        return decode(row, params)
    return _fit_and_store(session, repository_id, inputs, memory(), row, params)


def refresh_stored(session: Session, repository_id: int, version: str | None = None, *,
                   now: dt.datetime | None = None, params: OwnLabelParams = OwnLabelParams(),
                   refits: Refits = Refits()) -> OwnLabelRules | None:
    """Refit the stored rules, for the target and min_examples they were stored with, where the memory or
    the examples moved since as far as `refits` asks (the feedback queue's part); `version`: the model
    serving now, when a promotion moved it (None: the stored one). None when none are stored (the labelling
    job fits them the first time it serves own labels)."""
    row = session.scalar(select(OwnLabelFit).where(OwnLabelFit.repository_id == repository_id))
    if row is None:
        return None
    stored_version, target, min_examples = row.key[:3]
    version = version or stored_version
    inputs = _inputs(version, target, min_examples, params)
    moved = _moved(session, repository_id, version)
    if row.key[:len(inputs)] == inputs and not refit_due(row.key[len(inputs):], moved, row.fitted_at,
                                                         now or utcnow(), refits):
        return decode(row, params)
    return _fit_and_store(session, repository_id, inputs, recall(session, repository_id, version), row, params)


def refit_due(stored: list, moved: list, fitted_at: dt.datetime, now: dt.datetime, refits: Refits = Refits()
              ) -> bool:
    """Whether the memory moved enough since the fit (`stored`, `moved`: _moved's rows, last row id,
    examples, last example id) to pay for a refit now."""
    if list(stored) == list(moved):
        return False
    rows_then, _, examples_then, _ = stored
    rows_now, _, examples_now, _ = moved
    if max(rows_then, rows_now) < refits.small_memory:
        return True
    share = max(abs(rows_now - rows_then) / max(rows_then, 1),
                abs(examples_now - examples_then) / max(examples_then, 1))
    return share >= refits.share or now - as_utc(fitted_at) >= refits.after


def _fit_and_store(session: Session, repository_id: int, inputs: list, memory: OwnLabelMemory,
                   row: OwnLabelFit | None, params: OwnLabelParams) -> OwnLabelRules:
    version, target, min_examples = inputs[:3]
    key = inputs + _moved(session, repository_id, version)  # counted before the fit: a newer move refits
    if memory.texts is None:
        memory = with_texts(session, memory)
    rules = fit_rules(memory, min_examples=min_examples, target=target, params=params)
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


def decode(row: OwnLabelFit, params: OwnLabelParams = OwnLabelParams()) -> OwnLabelRules:
    """The rules `row` stores, fitted with `params` (its key says so)."""
    rows = sum(entry["row"] is not None for entry in row.labels.values())
    weights = (np.frombuffer(row.weights, dtype="<f8").reshape(rows, -1)
               if row.weights and rows else np.zeros((0, 0)))
    return OwnLabelRules(
        examples={name: entry["examples"] for name, entry in row.labels.items()},
        thresholds={name: math.inf if entry["threshold"] is None else entry["threshold"]
                    for name, entry in row.labels.items() if entry["served"]},
        heads={name: LabelHead(weights[entry["row"]], entry["bias"]) for name, entry in row.labels.items()
               if entry["row"] is not None},
        words=WordFeatures.from_json(row.words) if row.words else None, params=params)


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _inputs(version: str, target: float, min_examples: int, params: OwnLabelParams) -> list:
    """The first part of the key, as stored JSON reads back: what the fit depends on besides the memory."""
    return [version, float(target), int(min_examples), params.key()]


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
