"""Tables: what the App stores about installations, issues, its predictions and the models it serves.

Every text column is a core.storable_text type: text PostgreSQL or UTF-8 refuses is cleaned on the way in.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from core.db import Base
from core.storable_text import StorableString, StorableText

GLOBAL_SCOPE = "global"  # model scope shared by every repository without a model of its own


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class Installation(Base):
    __tablename__ = "installations"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)  # GitHub's id
    account_login: Mapped[str | None] = mapped_column(StorableString(255))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    removed_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    # installation.suspend: frozen, its data kept but nothing labelled nor trained on until unsuspend
    suspended_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))


class Repository(Base):
    """A repository, known by GitHub's id: its name is an attribute that renames and transfers change."""

    __tablename__ = "repositories"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # GitHub's repository id; None only for rows written before ids were recorded (matched by name, then set)
    github_id: Mapped[int | None] = mapped_column(BigInteger, unique=True)
    full_name: Mapped[str] = mapped_column(StorableString(255), unique=True)  # owner/name, as last delivered
    installation_id: Mapped[int | None] = mapped_column(ForeignKey("installations.id"), index=True)
    # unknown counts as private: its text never reaches another installation's models
    private: Mapped[bool] = mapped_column(Boolean, default=True)
    backfill_next_page: Mapped[int | None] = mapped_column(Integer)  # resume point of an interrupted backfill
    # the memory's fill (core.memory.fill): the version that embeds, how many of how many issues it has
    memory_version: Mapped[str | None] = mapped_column(StorableString(64))
    memory_embedded: Mapped[int | None] = mapped_column(Integer)
    memory_of: Mapped[int | None] = mapped_column(Integer)
    # core.repository_thresholds' last result and what it was computed from: recomputed when that changes
    threshold_cache: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class IssueRecord(Base):
    """An issue's text (the training data) and the label a human confirmed for it, if any."""

    __tablename__ = "issues"
    __table_args__ = (UniqueConstraint("repository_id", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(StorableText, default="")
    body: Mapped[str] = mapped_column(StorableText, default="")
    author_login: Mapped[str | None] = mapped_column(StorableString(255))
    state: Mapped[str] = mapped_column(StorableString(16), default="open")
    opened_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    # set by a human, never by the bot alone
    confirmed_label: Mapped[str | None] = mapped_column(StorableString(255))
    confirmed_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    confirmed_by: Mapped[str | None] = mapped_column(StorableString(255))
    # time of the newest event applied to this row (issue.updated_at, else the delivery's arrival):
    # GitHub does not keep delivery order, so an older event never overwrites newer state
    last_event_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))

    repository: Mapped[Repository] = relationship()


class Prediction(Base):
    """One classification of one issue: every score, the label chosen, and what happened to it."""

    __tablename__ = "predictions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    issue_id: Mapped[int] = mapped_column(ForeignKey("issues.id"), index=True)
    model_version_id: Mapped[int | None] = mapped_column(ForeignKey("model_versions.id"))
    delivery_id: Mapped[str | None] = mapped_column(StorableString(64), index=True)
    scores: Mapped[dict[str, float]] = mapped_column(JSON, default=dict)  # as served: after the memory
    # why this label (the review page): the model's own scores before the memory, and the confirmed issues
    # that voted, [{"number", "similarity", "label"}], most similar first; None when not recorded
    model_scores: Mapped[dict[str, float] | None] = mapped_column(JSON(none_as_null=True))
    neighbours: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON(none_as_null=True))
    threshold: Mapped[float | None] = mapped_column(Float)  # the top score needed for a label, as decided
    predicted: Mapped[str | None] = mapped_column(StorableString(255))  # the model's top class
    label: Mapped[str | None] = mapped_column(StorableString(255))  # the repository label it maps to
    applied: Mapped[bool] = mapped_column(Boolean, default=False)
    # applied | abstained | suggested | shadow (mode: shadow, nothing written) | held (the repository's
    # config is broken) | dry_run | dropped
    outcome: Mapped[str] = mapped_column(StorableString(32))
    reason: Mapped[str] = mapped_column(StorableText, default="")
    # accepted | rejected | corrected (by a human)
    decision: Mapped[str | None] = mapped_column(StorableString(16))
    decided_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # the abstention label this prediction put on, taken off when a maintainer decides the issue's kind;
    # None: none was put on, or it was taken off, or the repository's config keeps it
    abstain_mark: Mapped[str | None] = mapped_column(StorableString(255))

    issue: Mapped[IssueRecord] = relationship()
    # the repository's own labels decided beside the kind (issue 29), one row each
    own_labels: Mapped[list[OwnLabelDecision]] = relationship(cascade="all, delete-orphan",
                                                              order_by="OwnLabelDecision.id")


class OwnLabelDecision(Base):
    """One of the repository's own labels (core.own_labels) the bot applied or suggested with a prediction,
    its vote and threshold, and what a human made of it."""

    __tablename__ = "own_label_decisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    prediction_id: Mapped[int] = mapped_column(ForeignKey("predictions.id"), index=True)
    label: Mapped[str] = mapped_column(StorableString(255))
    score: Mapped[float] = mapped_column(Float)  # the confirmed issues' vote
    threshold: Mapped[float | None] = mapped_column(Float)  # None: not served yet (a suggestion only)
    outcome: Mapped[str] = mapped_column(StorableString(32))  # applied | suggested (nothing written)
    decision: Mapped[str | None] = mapped_column(StorableString(16))  # accepted | rejected (by a human)
    decided_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))


class OwnLabelExample(Base):
    """One of a repository's own labels that a human (or its history, through the backfill) confirmed on an
    issue: what the label's vote learns from. An issue may carry several."""

    __tablename__ = "own_label_examples"
    __table_args__ = (UniqueConstraint("issue_id", "label"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    issue_id: Mapped[int] = mapped_column(ForeignKey("issues.id"), index=True)
    label: Mapped[str] = mapped_column(StorableString(255))
    confirmed_by: Mapped[str | None] = mapped_column(StorableString(255))
    confirmed_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class OwnLabelFit(Base):
    """A repository's own labels as fitted on its memory by one model version (core.own_labels.storage): each
    label's threshold at the target precision and its head, computed by the feedback queue and read as
    stored by the labelling job. Data only: the heads' weights are float64 rows, the rest JSON."""

    __tablename__ = "own_label_fits"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"), unique=True)
    model_version: Mapped[str] = mapped_column(StorableString(64))  # whose embeddings it was fitted on
    key: Mapped[list[Any]] = mapped_column(JSON)  # what it was computed from (inputs, then the counts that move)
    labels: Mapped[dict[str, Any]] = mapped_column(JSON)  # label → examples, threshold, bias, weights' row
    weights: Mapped[bytes | None] = mapped_column(LargeBinary)  # (heads, dimensions) float64, little-endian
    words: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the heads' TF-IDF terms and idf, if they read words
    fitted_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LabelEvent(Base):
    """A label added to or removed from an issue, by whom, and whether that was a human."""

    __tablename__ = "label_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    issue_id: Mapped[int] = mapped_column(ForeignKey("issues.id"), index=True)
    delivery_id: Mapped[str | None] = mapped_column(StorableString(64), unique=True)
    action: Mapped[str] = mapped_column(StorableString(32))  # labeled | unlabeled | closed | transferred...
    label: Mapped[str | None] = mapped_column(StorableString(255))
    actor_login: Mapped[str | None] = mapped_column(StorableString(255))
    actor_is_human: Mapped[bool] = mapped_column(Boolean, default=True)
    by_this_app: Mapped[bool] = mapped_column(Boolean, default=False)
    # the sender could triage the repository (GitHub's triage, write, maintain or admin, or a signed-in
    # reviewer): only such an event teaches the App; None: recorded before senders were checked
    by_maintainer: Mapped[bool | None] = mapped_column(Boolean)
    occurred_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WebhookDelivery(Base):
    """A delivery the worker has processed; a redelivery with the same id is not processed twice."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[str] = mapped_column(StorableString(64), primary_key=True)  # X-GitHub-Delivery
    event: Mapped[str] = mapped_column(StorableString(64))
    action: Mapped[str | None] = mapped_column(StorableString(64))
    outcome: Mapped[str] = mapped_column(StorableString(64), default="")
    processed_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ModelVersion(Base):
    """A trained model directory under MODEL_DIR, with what it was trained on and how it scored."""

    __tablename__ = "model_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(StorableString(64), unique=True)
    scope: Mapped[str] = mapped_column(StorableString(255), default=GLOBAL_SCOPE, index=True)
    path: Mapped[str] = mapped_column(StorableText)
    base_model: Mapped[str] = mapped_column(StorableText, default="")
    labels: Mapped[list[str]] = mapped_column(JSON, default=list)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    data_fingerprint: Mapped[str] = mapped_column(StorableString(64), default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ModelPromotion(Base):
    """Which version serves a scope from when on; the newest row of a scope is the one serving."""

    __tablename__ = "model_promotions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    scope: Mapped[str] = mapped_column(StorableString(255), default=GLOBAL_SCOPE, index=True)
    model_version_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id"))
    reason: Mapped[str] = mapped_column(StorableText, default="")
    promoted_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    model_version: Mapped[ModelVersion] = relationship()


class TrainingRun(Base):
    """One train-compare-promote attempt, with both scores and the decision taken."""

    __tablename__ = "training_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    scope: Mapped[str] = mapped_column(StorableString(255), default=GLOBAL_SCOPE)
    # manual | cron | comment | bootstrap
    trigger: Mapped[str] = mapped_column(StorableString(32), default="manual")
    status: Mapped[str] = mapped_column(StorableString(16), default="running")  # running | finished | failed
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    n_examples: Mapped[int] = mapped_column(Integer, default=0)
    challenger_version_id: Mapped[int | None] = mapped_column(ForeignKey("model_versions.id"))
    champion_version_id: Mapped[int | None] = mapped_column(ForeignKey("model_versions.id"))
    challenger_score: Mapped[float | None] = mapped_column(Float)
    champion_score: Mapped[float | None] = mapped_column(Float)
    promoted: Mapped[bool] = mapped_column(Boolean, default=False)
    message: Mapped[str] = mapped_column(StorableText, default="")


class MemoryEntry(Base):
    """One human-confirmed issue in its repository's memory: its embedding by one model version, its label.

    The serving model's scores for the repository's next issues are adjusted by its nearest entries
    (core.memory); rows embedded by another version than the one serving are not used.
    """

    __tablename__ = "memory_entries"
    __table_args__ = (UniqueConstraint("issue_id", "model_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repositories.id"), index=True)
    issue_id: Mapped[int] = mapped_column(ForeignKey("issues.id"), index=True)
    model_version: Mapped[str] = mapped_column(StorableString(64))  # the version that embedded it
    label: Mapped[str] = mapped_column(StorableString(255))  # the label a human confirmed
    embedding: Mapped[bytes] = mapped_column(LargeBinary)  # float32, little-endian, L2-normalised
    # the model's own scores of the issue (before the memory), when the writer had them: the history a
    # repository's thresholds are measured on (core.repository_thresholds)
    scores: Mapped[dict[str, float] | None] = mapped_column(JSON(none_as_null=True))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
