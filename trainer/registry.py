"""The model registry: versioned directories under MODEL_DIR, ModelVersion rows, promotions and rollbacks."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from core.card import ModelCard, encoder_directory, read_card, update_card
from core.classifier import Classifier, classifier_from, load_classifier
from core.db import session_scope
from core.engines import AUTO, Hardware
from core.store import serving_model_for, serving_model_version
from core.tables import GLOBAL_SCOPE, ModelPromotion, ModelVersion

KEEP_PROMOTED = 3  # per scope: the serving version and the two that `rollback` goes back to
KEEP_UNPROMOTED = 1  # per scope: the newest challenger, for an operator to look at or promote by hand
ROLLBACK = "rollback"  # reason prefix of promotions made by `rollback`; the history replay recognises it


class RegistryError(LookupError):
    """A version or promotion is missing; the message says which command fixes it."""


class ScopeRefused(RegistryError):
    """The version belongs to another scope than the one it was asked to serve."""


def nothing_promoted(scope: str) -> RegistryError:
    """The error for a scope nothing serves yet."""
    return RegistryError(f"no model is promoted for scope {scope!r}: run `issue-sorter bootstrap-model`")


class Saveable(Protocol):
    """A trained model in memory (trainer.train.TrainedModel, trainer.baseline.TrainedBaseline)."""

    def save(self, directory: Path, *, version: str, metrics: dict | None, thresholds: dict | None,
             data_fingerprint: str) -> Path: ...


@dataclasses.dataclass(frozen=True)
class Model:
    """A registered model as it travels from its registration through its fast path to the gate: its row
    and its card, read once where it was registered or found and handed on from there."""

    row: ModelVersion
    card: ModelCard

    @property
    def version(self) -> str:
        return self.row.version

    @property
    def directory(self) -> Path:
        return Path(self.row.path)

    @property
    def encoder_directory(self) -> Path:
        """Where its fine-tuned encoder lives: its directory, or a blend's encoder member."""
        return encoder_directory(self.row.path, self.card)

    def classifier(self) -> Classifier:
        """The model as it serves: loaded by the engine its gate allowed on this CPU, from the card in hand."""
        return classifier_from(self.directory, self.card)


class Registry:
    """Model directories under `model_dir` and their rows; the caller's session commits.

    It stores and finds models; training one and building its fast serving path is trainer.pipeline's.
    """

    def __init__(self, model_dir: Path | str, session: Session):
        self.model_dir, self.session = Path(model_dir), session

    @classmethod
    @contextlib.contextmanager
    def open(cls, model_dir: Path | str, sessions: sessionmaker[Session]) -> Iterator[Registry]:
        """The registry in a transaction of its own, committed when the work done in it succeeds."""
        with session_scope(sessions) as session:
            yield cls(model_dir, session)

    def new_version(self, scope: str = GLOBAL_SCOPE) -> str:
        """A unique, readable id: scope slug + UTC time, with -2, -3 ... when taken."""
        slug = re.sub(r"[^a-z0-9]+", "-", scope.lower()).strip("-")[:40] or "model"
        base = f"{slug}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}"
        version, n = base, 1
        while self._find(version) is not None or (self.model_dir / version).exists():
            n += 1
            version = f"{base}-{n}"
        return version

    def register(self, source: Saveable | Path | str, *, scope: str = GLOBAL_SCOPE,
                 metrics: dict | None = None, thresholds: dict[str, float] | None = None,
                 data_fingerprint: str | None = None) -> Model:
        """Save (or adopt) a model into a new version directory and record its ModelVersion row; nothing more.
        The registered model comes back with the card it was saved with."""
        if isinstance(source, (str, Path)):
            directory = self._adopt(Path(source), scope)
            card = update_card(directory, version=directory.name, metrics=metrics, thresholds=thresholds,
                               data_fingerprint=data_fingerprint)
        else:
            directory = self.model_dir / self.new_version(scope)
            source.save(directory, version=directory.name, metrics=metrics, thresholds=thresholds,
                        data_fingerprint=data_fingerprint or "")
            card = ModelCard.read(directory)
        row = ModelVersion(version=directory.name, scope=scope, path=str(directory.resolve()),
                           base_model=card.base_model, labels=list(card.labels), metrics=card.metrics,
                           data_fingerprint=card.data_fingerprint)
        self.session.add(row)
        self.session.flush()
        return Model(row, card)

    def annotate(self, model: Model, **fields: Any) -> Model:
        """`model` with `fields` added to its card (where it was trained on, where it was pulled from); new
        `metrics` reach its row too, which the listing and the review pages read."""
        card = update_card(model.directory, **fields)
        if fields.get("metrics") is not None:
            model.row.metrics = card.metrics
        return Model(model.row, card)

    def _adopt(self, source: Path, scope: str) -> Path:
        """A saved model's directory under model_dir: in place if it is an unregistered child, else a copy."""
        read_card(source)  # fail early, naming the fix, when it is not a saved model
        if source.resolve().parent == self.model_dir.resolve() and self._find(source.name) is None:
            return source
        directory = self.model_dir / self.new_version(scope)
        shutil.copytree(source, directory)  # the registry owns its copy; the source may go away
        return directory

    def get(self, version: str) -> ModelVersion:
        """The row of `version`, or an error that says how to list the versions."""
        row = self._find(version)
        if row is None:
            raise RegistryError(f"unknown model version {version!r}: "
                                "`issue-sorter models` lists the registered ones")
        return row

    def _find(self, version: str) -> ModelVersion | None:
        return self.session.scalars(select(ModelVersion).where(ModelVersion.version == version)).first()

    def get_for_scope(self, version: str, scope: str) -> ModelVersion:
        """The row of `version` when it may serve `scope`: trained for that scope, or global.

        Version names are guessable (scope + time): without this, a maintainer of one repository could
        have another installation's private model serve theirs, and read its classes and answers."""
        row = self.get(version)
        if row.scope not in (scope, GLOBAL_SCOPE):
            raise ScopeRefused(f"{version} was not trained for {scope}: only its own versions and the global "
                               "ones may serve it")
        return row

    def model(self, version: str, *, scope: str | None = None) -> Model:
        """The registered `version` with its card; with `scope`, only when it may serve that scope."""
        row = self.get_for_scope(version, scope) if scope else self.get(version)
        if not Path(row.path).is_dir():
            raise _missing(row)
        return Model(row, ModelCard.read(row.path))

    def champion(self, scope: str = GLOBAL_SCOPE) -> Model | None:
        """What a challenger for `scope` must beat: the model serving it now (its own, else the global one).
        A serving version's directory is never collected (`collect_garbage`): its card is there to read."""
        row = serving_model_for(self.session, scope)
        return Model(row, ModelCard.read(row.path)) if row else None

    def promote(self, version: str, reason: str = "", *, scope: str | None = None) -> ModelPromotion:
        """Make `version` serve its scope (or `scope`, when it is its own or global) from now on."""
        row = self.get_for_scope(version, scope) if scope else self.get(version)
        if not Path(row.path).is_dir():
            raise _missing(row)
        promotion = ModelPromotion(scope=scope or row.scope, model_version_id=row.id, reason=reason)
        self.session.add(promotion)
        self.session.flush()
        return promotion

    def serving(self, scope: str = GLOBAL_SCOPE) -> ModelVersion | None:
        """The version serving `scope` now, if any."""
        return serving_model_version(self.session, scope)

    def rollback(self, scope: str = GLOBAL_SCOPE) -> ModelPromotion:
        """Serve again the version that served before the current one; repeated calls go further back."""
        stack = self._history(scope)
        if not stack:
            raise nothing_promoted(scope)
        if len(stack) < 2:
            current = self.session.get(ModelVersion, stack[-1]).version
            raise RegistryError(f"{current} is the only model {scope!r} has served: nothing to roll back to; "
                                "promote another version with `issue-sorter promote VERSION`")
        current, previous = (self.session.get(ModelVersion, i) for i in stack[-2:][::-1])
        return self.promote(previous.version, f"{ROLLBACK} from {current.version}", scope=scope)

    def _history(self, scope: str) -> list[int]:
        """Version ids in serving order, replaying promotions; a rollback pops the version it replaced."""
        promotions = self.session.scalars(select(ModelPromotion).where(ModelPromotion.scope == scope)
                                          .order_by(ModelPromotion.promoted_at, ModelPromotion.id))
        stack: list[int] = []
        for promotion in promotions:
            if promotion.reason.startswith(ROLLBACK) and len(stack) >= 2:
                stack.pop()
            elif not stack or stack[-1] != promotion.model_version_id:
                stack.append(promotion.model_version_id)
        return stack

    def collect_garbage(self, *, keep_promoted: int = KEEP_PROMOTED, dry_run: bool = False) -> list[ModelVersion]:
        """Delete the directories of versions nothing needs; returns their rows, which stay as history.

        Kept: what serves any scope, the last `keep_promoted` versions of each scope's rollback history, and
        the newest KEEP_UNPROMOTED never-promoted versions of each scope. Only directories under
        `model_dir` are deleted: a model registered in place elsewhere is its owner's.
        """
        if keep_promoted < 1:
            raise ValueError("keep_promoted must be at least 1: the serving version stays")
        promoted = set(self.session.scalars(select(ModelPromotion.model_version_id)))
        needed = {version_id for scope in set(self.session.scalars(select(ModelPromotion.scope)))
                  for version_id in self._history(scope)[-keep_promoted:]}
        unpromoted: dict[str, list[ModelVersion]] = {}
        for row in self.list():
            if row.id not in promoted:
                unpromoted.setdefault(row.scope, []).append(row)
        needed |= {row.id for rows in unpromoted.values() for row in rows[len(rows) - KEEP_UNPROMOTED:]}
        root = self.model_dir.resolve()
        deleted = [row for row in self.list() if row.id not in needed and Path(row.path).is_dir()
                   and Path(row.path).resolve().is_relative_to(root) and Path(row.path).resolve() != root]
        for row in deleted if not dry_run else ():
            shutil.rmtree(row.path)
        return deleted

    def list(self, scope: str | None = None) -> list[ModelVersion]:
        """Registered versions, oldest first; all scopes unless `scope` is given."""
        query = select(ModelVersion).order_by(ModelVersion.created_at, ModelVersion.id)
        if scope is not None:
            query = query.where(ModelVersion.scope == scope)
        return list(self.session.scalars(query))

    def load(self, version: str | None = None, *, scope: str = GLOBAL_SCOPE,
             hardware: Hardware | None = None, engine: str = AUTO) -> Classifier:
        """The classifier of `version`, or of the version serving `scope` when none is named, as it serves
        on `hardware` (None: this machine), `engine` forced as ISSUE_SORTER_ENGINE forces it on a worker."""
        row = self.get(version) if version else self.serving(scope)
        if row is None:
            raise nothing_promoted(scope)
        if not Path(row.path).is_dir():
            raise _missing(row)
        return load_classifier(row.path, hardware=hardware, engine=engine)


def _missing(row: ModelVersion) -> RegistryError:
    return RegistryError(f"model directory {row.path} of {row.version} is missing: "
                         "restore it, or promote another version with `issue-sorter promote VERSION`")
