"""Retraining: human-confirmed issues → challenger → compared with the champion → promoted if better.

The only module that wires the confirmed issues, training and registering (trainer.pipeline) and the gate
together. Used by the periodic cron job,
`issue-sorter retrain`, the `/issue-sorter retrain` comment and `issue-sorter replay`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from redis import Redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.kinds import KINDS, kind_of_label
from core.quotas import Quotas
from core.settings import Settings
from core.store import serving_model_for
from core.tables import GLOBAL_SCOPE, IssueRecord, Repository, TrainingRun
from core.visibility import PublicCheck
from trainer.config import TrainConfig
from trainer.dataset import Audience, Example, load_database, load_file
from trainer.fast_path import FastPathOptions
from trainer.gate import compare_and_promote, verdict
from trainer.pipeline import train_and_register
from trainer.quotas import fair_order, quota_refusal
from trainer.registry import Model, Registry

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RetrainPolicy:
    """When and on what a scope is retrained."""

    min_new_decisions: int = 20  # confirmed issues since the scope's last run before the cron retrains it
    min_per_label: int = 20  # a repository gets its own label set once each label has this many issues
    holdout_share: float = 0.2  # the most recent share of confirmed issues, kept to judge both models
    # The gate judges on at least this many recent confirmed issues, and as many older ones must teach: a
    # repository's first retraining waits for 2 × 50. Why 50: on n issues an accuracy is known to about
    # ±2·sqrt(0.25/n), ±14 points at 50, ±22 at 20; the first replay's gate (30 issues, 0.466 against 0.527)
    # judged on noise. Until then the memory adapts (core.memory), which needs no gate.
    min_holdout: int = 50
    epochs: int = 2  # the lesson's recipe; the base is the global model, so little is needed
    max_length: int | None = None  # tokens read per issue; None: the champion's recipe (its model card)
    max_borrowed: int = 20_000  # the most recent other repos' issues it borrows: bounds memory and fit time
    share_public: bool = False  # other installations' public repositories teach a repository's model too
    global_installations: frozenset[int] = frozenset()  # installations whose private data the global model reads
    # The most of the global model's training issues, and of its gate's, that one repository or one
    # installation may supply: else one account labelling a few thousand fresh issues writes both what it
    # learns and what judges it. 1.0: no cap
    global_max_share: float = 0.25
    global_gate_file: Path | None = None  # the operator's fixed labelled issues the global model is judged on
    quotas: Quotas = Quotas()  # an installation's repository models and trainings a day (trainer.quotas)
    # asks GitHub which repositories read only for being public still are (core.visibility); None: the
    # database's word
    confirm_public: Callable[[list[Repository]], set[int]] | None = None

    @classmethod
    def from_settings(cls, settings: Settings, redis: Redis | None = None) -> RetrainPolicy:
        """The operator's choices (ISSUE_SORTER_RETRAIN_*, data sharing), the rest as defined here; GitHub
        at GITHUB_API_URL confirms what is public, its answers kept in `redis`."""
        return cls(min_new_decisions=settings.retrain_min_new, min_per_label=settings.repo_min_per_label,
                   epochs=settings.retrain_epochs, max_length=settings.retrain_max_length,
                   min_holdout=settings.retrain_min_holdout,
                   share_public=settings.share_public_data, global_installations=settings.global_installations,
                   global_max_share=settings.global_max_share, global_gate_file=settings.global_gate_file,
                   quotas=Quotas.from_settings(settings), confirm_public=PublicCheck(settings.api_url, redis))

    def audience(self, session: Session, scope: str) -> Audience:
        """Whose data the model of `scope` may learn from (trainer.dataset.Audience)."""
        if scope == GLOBAL_SCOPE:
            return Audience(global_model=True, opted_in=self.global_installations, confirm_public=self.confirm_public)
        installation_id = session.scalar(select(Repository.installation_id).where(Repository.full_name == scope))
        return Audience(installation_id=installation_id, share_public=self.share_public,
                        confirm_public=self.confirm_public)


@dataclasses.dataclass
class RetrainResult:
    scope: str
    run: TrainingRun | None
    message: str

    def summary(self) -> str:
        """One paragraph for people: both scores and the decision, or why nothing was trained."""
        run = self.run
        if run is None:
            return f"No retraining: {self.message}."
        old, new = ("none" if score is None else f"{score:.3f}" for score in (run.champion_score,
                                                                             run.challenger_score))
        return (f"Retrained {self.scope} on {run.n_examples} held-out recent issues: macro-F1 of the serving "
                f"model {old}, of the new model {new}. Verdict: {verdict(run)}.")

    def to_dict(self) -> dict:
        """Plain values: what the training job returns, and the bot's reply posts."""
        run = self.run
        return {"scope": self.scope, "message": self.message, "summary": self.summary(),
                "promoted": bool(run and run.promoted), "champion_score": run.champion_score if run else None,
                "challenger_score": run.challenger_score if run else None}


def examples_for_scope(session: Session, scope: str, policy: RetrainPolicy,
                       kinds: Sequence[str] = ()) -> tuple[list[Example], list[str]]:
    """(confirmed issues as examples, oldest first; the classes to train).

    Labels that stand for a kind are learnt as that kind, and every kind the serving model knows stays
    a class even before the repository has an example of it, so a retrained model never loses a kind.
    A repository whose own labels (ones that are no kind) dominate, with at least `min_per_label` issues
    each for two or more labels, gets a model of those labels instead.
    """
    examples = load_database(session, scope, audience=policy.audience(session, scope))
    as_kinds = [dataclasses.replace(e, label=kind_of_label(e.label)) for e in examples]
    as_kinds = [e for e in as_kinds if e.label]
    if scope != GLOBAL_SCOPE:
        counts = Counter(e.label for e in examples if kind_of_label(e.label) is None)
        own = {label for label, n in counts.items() if n >= policy.min_per_label}
        own_examples = [e for e in examples if e.label in own]
        if len(own) >= 2 and len(own_examples) > len(as_kinds):
            return _oldest_first(own_examples), sorted(own)
    return _oldest_first(as_kinds), sorted({e.label for e in as_kinds} | set(kinds))


def other_repositories_examples(session: Session, scope: str, labels: Sequence[str], *,
                                policy: RetrainPolicy = RetrainPolicy()) -> list[Example]:
    """Confirmed issues of other repositories, of a kind in `labels`: a repository's TF-IDF also learns.

    Only repositories the policy's audience may read (its own installation's; see Audience), and only their
    most recent `policy.max_borrowed` confirmed issues (of any label, before the filter).
    """
    if scope == GLOBAL_SCOPE:
        return []
    audience = policy.audience(session, scope)
    as_kinds = [dataclasses.replace(e, label=kind_of_label(e.label))
                for e in load_database(session, exclude=scope, newest=policy.max_borrowed, audience=audience)]
    return [e for e in as_kinds if e.label in labels]


def _oldest_first(examples: list[Example]) -> list[Example]:
    return sorted(examples, key=lambda e: (e.created_at is None, e.created_at or 0))


def split_recent(examples: Sequence[Example], policy: RetrainPolicy) -> tuple[list[Example], list[Example]]:
    """(train, held out): the most recent issues judge; the older ones teach."""
    n_holdout = max(policy.min_holdout, int(len(examples) * policy.holdout_share))
    return list(examples[:-n_holdout]), list(examples[-n_holdout:])


def split_global(session: Session, examples: Sequence[Example],
                 policy: RetrainPolicy) -> tuple[list[Example], list[Example]]:
    """The global model's (train, held out), where no repository or installation supplies more than
    `policy.global_max_share` of either; held out: the operator's fixed set when one is named, else each
    repository's most recent (capped) issues, so fresh issues of one account cannot be all of the gate."""
    installation_of = dict(session.execute(select(Repository.full_name, Repository.installation_id)).all())
    capped = cap_shares(examples, installation_of, policy.global_max_share)
    if policy.global_gate_file is not None:
        fixed = [dataclasses.replace(e, label=kind_of_label(e.label)) for e in load_file(policy.global_gate_file)]
        return capped, [e for e in fixed if e.label]
    share = min(0.5, max(policy.holdout_share, policy.min_holdout / max(len(capped), 1)))
    by_repo: dict[str | None, list[Example]] = {}
    for example in capped:
        by_repo.setdefault(example.repo, []).append(example)
    newest = {id(e) for issues in by_repo.values() for e in issues[len(issues) - int(len(issues) * share):]}
    train = [e for e in capped if id(e) not in newest]
    held_out = [e for e in capped if id(e) in newest]
    return (cap_shares(train, installation_of, policy.global_max_share),
            cap_shares(held_out, installation_of, policy.global_max_share))


def cap_shares(examples: Sequence[Example], installation_of: Mapping[str, int | None],
               max_share: float) -> list[Example]:
    """`examples` (order kept) where each repository, then each installation, supplies at most `max_share`
    of the whole, keeping each one's oldest issues. The operator's own repositories (no installation) are
    capped per repository only. With fewer sources than 1 / max_share no cap can hold: the largest are
    cut to the size of the next largest, so none outweighs the others."""
    if max_share >= 1:
        return list(examples)
    kept = _cap(list(examples), lambda e: e.repo, max_share)
    return _cap(kept, lambda e: installation_of.get(e.repo or ""), max_share, exempt=(None,))


def _cap(examples: list[Example], source_of, max_share: float, exempt: tuple = ()) -> list[Example]:
    sizes = Counter(source_of(e) for e in examples)
    capped = sorted((n for source, n in sizes.items() if source not in exempt), reverse=True)
    if len(capped) < 2 and not (set(sizes) & set(exempt)):
        return examples  # one source: nothing to weigh it against
    free = sum(n for source, n in sizes.items() if source in exempt)
    limit = max(_share_limit(capped, free, max_share), capped[1] if len(capped) > 1 else 0)
    taken: Counter = Counter()
    result = []
    for example in examples:
        source = source_of(example)
        if source in exempt or taken[source] < limit:
            taken[source] += 1
            result.append(example)
    return result


def _share_limit(sizes: list[int], free: int, max_share: float) -> int:
    """The largest c with c <= max_share * (free + sum(min(n, c))): each source's most, capped at c."""
    low, high = 0, max(sizes, default=0)
    while low < high:
        middle = (low + high + 1) // 2
        if middle <= max_share * (free + sum(min(n, middle) for n in sizes)):
            low = middle
        else:
            high = middle - 1
    return low


def retrain_scope(session: Session, registry: Registry, scope: str, *, policy: RetrainPolicy = RetrainPolicy(),
                  force: bool = False, trigger: str = "manual", progress: bool = False,
                  fast_path: FastPathOptions = FastPathOptions()) -> RetrainResult:
    """Train a challenger for `scope` from the global model and promote it only if it beats the one serving
    `scope` on the most recent confirmed issues (never trained on: only older issues teach it). Its
    installation's quotas refuse it first (trainer.quotas), except for the operator's own `retrain`."""
    refusal = None if trigger == "manual" else quota_refusal(session, scope, policy.quotas)
    if refusal:
        return RetrainResult(scope, None, refusal)
    serving = serving_model_for(session, scope)  # the champion's row: its directory is read only for a contest
    known_kinds = [label for label in (serving.labels if serving else []) if label in KINDS]
    examples, labels = examples_for_scope(session, scope, policy, known_kinds)
    train, held_out = (split_global(session, examples, policy) if scope == GLOBAL_SCOPE
                       else split_recent(examples, policy))
    if len(train) < policy.min_holdout or len({e.label for e in train}) < 2:
        needed = 2 * policy.min_holdout
        return RetrainResult(scope, None, f"{scope}: not enough confirmed issues to retrain yet, waiting "
                                          f"({len(examples)} usable; the gate judges on the {policy.min_holdout} "
                                          f"most recent and as many older ones teach: {needed} needed, of two "
                                          "kinds at least)")
    champion = registry.champion(scope)
    # A repository's challenger starts from the global model, not from its own last one: re-fine-tuning a
    # fine-tuned model on mostly the same issues did not help (docs/BENCHMARKS.md, the replay's gate)
    own = champion is not None and champion.row.scope != GLOBAL_SCOPE
    base = (registry.champion(GLOBAL_SCOPE) or champion) if own else champion
    config = challenger_config(base, policy, scope=scope)
    labels = _warm_start_order(labels, base.card.labels if base else [])
    # a repository's blend: its TF-IDF also learns from other repositories, as bench/quality.py measures
    others = other_repositories_examples(session, scope, labels, policy=policy) if config.tfidf_share else []
    challenger = train_and_register(registry, config, train, labels=labels, scope=scope, held_out=held_out,
                                    tfidf_also=others, fast_path=fast_path, progress=progress).model
    run = compare_and_promote(registry, challenger, held_out, scope=scope, force=force, trigger=trigger)
    return RetrainResult(scope, run, run.message)


def challenger_config(base: Model | None, policy: RetrainPolicy, *, scope: str = GLOBAL_SCOPE) -> TrainConfig:
    """The challenger's recipe: `base`'s own (the global model's, for a repository), read back from its
    model card, continued from its encoder for the retraining's epochs, with the same blend with TF-IDF.

    A repository's challenger learns with the plain loss even where the global recipe balances the kinds:
    it should learn its repository's own label frequencies, which its gate's recent issues have too (the
    balanced loss is for a model facing repositories it never saw; the replays measured the plain one)."""
    card = base.card if base else None
    if card is None or card.kind == "tfidf":  # nothing to continue from: the offline encoder, TrainConfig's recipe
        return TrainConfig(epochs=policy.epochs, max_length=policy.max_length or TrainConfig.max_length)
    recipe = card.train_config | {"base_model": str(base.encoder_directory), "epochs": policy.epochs,
                                  "max_steps": None, "device": "auto", "tfidf_share": card.tfidf_share}
    if scope != GLOBAL_SCOPE:
        recipe["class_weight"] = "none"
    if policy.max_length:
        recipe["max_length"] = policy.max_length
    return TrainConfig.from_dict(recipe)


def _warm_start_order(labels: list[str], base_labels: Sequence[str]) -> list[str]:
    """Order the new classes like the base model's head (kind by kind), so its head is a warm start."""
    if len(labels) != len(base_labels):
        return labels
    by_kind = {label: kind_of_label(label) or label for label in labels}
    ordered = [next((label for label in labels if by_kind[label] == base), None) for base in base_labels]
    return ordered if None not in ordered and len(set(ordered)) == len(labels) else labels


def scopes_due(session: Session, policy: RetrainPolicy) -> list[str]:
    """The global scope and every repository with enough confirmations since its last training run, in
    the order they train: installations take turns (trainer.quotas.fair_order)."""
    due = []
    for scope in [GLOBAL_SCOPE] + list(session.scalars(select(Repository.full_name).order_by(Repository.id))):
        last = session.scalar(select(func.max(TrainingRun.started_at)).where(TrainingRun.scope == scope))
        query = select(func.count(IssueRecord.id)).where(IssueRecord.confirmed_label.is_not(None))
        if scope != GLOBAL_SCOPE:
            query = query.join(Repository).where(Repository.full_name == scope)
        if last is not None:
            query = query.where(IssueRecord.confirmed_at > last)
        if session.scalar(query) >= policy.min_new_decisions:
            due.append(scope)
    return fair_order(session, due)
