"""Decide: what the bot does with one issue, from inputs gathered beforehand (bot.labeling.gather).

Pure: plain data in, a `Plan` out (the prediction to store and the ordered GitHub writes, comments
included); bot.labeling.act carries it out. So every rule here is tested in milliseconds, without a
database, Redis or GitHub (tests/bot/labeling/test_rules.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.github_api.issues import IssueSnapshot
from bot.labeling import comments
from bot.labeling.config import RepoConfig
from core.issue_text import format_issue_text
from core.kinds import kind_of_label, labels_for_kinds
from core.memory import Memory
from core.own_labels import DEFAULT_MIN_EXAMPLES, SUGGEST_SCORE, OwnLabelMemory, OwnLabelRules, candidates
from core.own_labels.candidates import MAX_OWN_LABELS, compile_areas
from core.settings import Settings
from core.thresholds import DEFAULT_TARGET_PRECISION

KIND_COLORS = {"bug": "d73a4a", "feature": "a2eeef", "question": "d876e3", "docs": "0075ca"}
ABSTAIN_COLOR = "ededed"
ABSTAIN_DESCRIPTION = "Issue Sorter was not sure: a maintainer should sort it"
PENDING = "applying"  # the decision is stored, GitHub not yet written: a crash here is resumed, not redone
# The least precision an own label is applied at, whatever a repository's target_precision says: replayed on
# repositories nobody tuned for, own labels went on at a lower precision than their memory promised
OWN_MIN_PRECISION = 0.85


@dataclass(frozen=True)
class LabelingPolicy:
    """Everything that decides what the bot does with scores, from Settings and the repo's config."""

    threshold: float = 0.5  # below this top probability the bot abstains
    create_labels: bool = False  # create the kind's label when the repository has none
    dry_run: bool = False  # classify and store, write nothing to GitHub
    mode: str = "label"  # label | comment | suggest | shadow | off (see bot.labeling.config)
    apply: str = "label"  # label | type (the organisation's issue type) | both
    label_names: dict[str, str] = field(default_factory=dict)  # kind → label, from the repo's config
    allow: tuple[str, ...] = ()  # when set, only these labels are applied
    per_label_thresholds: dict[str, float] = field(default_factory=dict)  # from a target precision
    comment_template: str | None = None
    skip_authors: tuple[str, ...] = ()
    never_again: frozenset[str] = frozenset()  # labels a human removed from this issue
    held: str | None = None  # the repository's config is broken: apply nothing, say why (RepoConfig.held)
    memory: bool = True  # adjust the model's scores by the repository's confirmed issues (core.memory)
    abstain_label: str | None = None  # put on an issue the bot abstains on, e.g. needs-triage; None: nothing
    remove_abstain_label: bool = True  # ... and taken off when a maintainer decides its kind
    areas: tuple[str, ...] | None = ()  # own labels (RepoConfig.areas): None every candidate, () off
    write_own_labels: bool = False  # the config sets `areas`: else own labels are only suggested
    min_examples: int = DEFAULT_MIN_EXAMPLES  # confirmed examples before an own label is applied
    own_target: float = DEFAULT_TARGET_PRECISION  # the precision each own label's threshold keeps

    def threshold_for(self, predicted: str) -> float:
        return self.per_label_thresholds.get(predicted, self.threshold)


def policy_for(settings: Settings, config: RepoConfig, *, dry_run: bool,
               thresholds: Mapping[str, float] | None = None, never_again: frozenset[str] = frozenset()
               ) -> LabelingPolicy:
    """The policy for one repository: its config over the App's settings; `thresholds` are the per-kind
    ones that keep its target precision (core.repository_thresholds), when it has a target."""
    return LabelingPolicy(threshold=config.threshold if config.threshold is not None else settings.threshold,
                          # an organisation's issue types are its own: the bot creates labels, never types
                          create_labels=settings.create_labels and config.apply != "type",
                          dry_run=dry_run, mode=config.mode, apply=config.apply, label_names=config.labels,
                          allow=config.allow, per_label_thresholds=dict(thresholds or {}),
                          comment_template=config.comment_template, skip_authors=config.skip_authors,
                          held=config.held, memory=settings.memory, never_again=never_again,
                          abstain_label=settings.abstain_label if config.abstain_label is None
                          else config.abstain_label or None,
                          remove_abstain_label=config.remove_abstain_label,
                          # with `apply: type` the labels read are issue types: no own labels among them
                          areas=() if config.apply == "type" else config.areas,
                          write_own_labels=config.write_own_labels, min_examples=config.min_examples,
                          own_target=max(config.target_precision or DEFAULT_TARGET_PRECISION, OWN_MIN_PRECISION))


@dataclass(frozen=True)
class Choice:
    predicted: str  # the model's top class
    score: float
    label: str | None  # the repository label to apply, None to abstain
    reason: str
    create: bool = False  # the label must be created first


def skip_reason(issue: IssueSnapshot, classes: list[str], policy: LabelingPolicy | None = None) -> str | None:
    """Why this issue must not be labelled, or None."""
    if policy is not None and policy.mode == "off":
        return "the repository's config sets mode: off"
    if policy is not None and issue.author_login in policy.skip_authors:
        return f"its author {issue.author_login} is in skip_authors"
    if issue.is_pull_request:
        return "it is a pull request"
    if issue.state != "open":
        return f"it is {issue.state}"
    for label in issue.labels:
        if label in classes or kind_of_label(label) in classes:
            return f"it already carries {label!r}"
    sets_type = policy is not None and policy.apply in ("type", "both")
    if sets_type and issue.issue_type and (issue.issue_type in classes or kind_of_label(issue.issue_type) in classes):
        return f"it already has the type {issue.issue_type!r}"
    return None


def choose_label(scores: dict[str, float], repo_labels: list[str], policy: LabelingPolicy) -> Choice:
    predicted, score = max(scores.items(), key=lambda item: item[1])
    if policy.held:  # fail closed: a broken allow or labels could let through what the maintainer forbade
        return Choice(predicted, score, None, policy.held)
    choice = _map_to_repository(predicted, score, repo_labels, policy)
    threshold = policy.threshold_for(predicted)
    if score < threshold:
        return Choice(predicted, score, None, f"top score {score:.2f} ({predicted}) is below {threshold:.2f}")
    if choice.label and policy.allow and choice.label not in policy.allow:
        return Choice(predicted, score, None, f"{choice.label!r} is not in the repository's allowlist")
    if choice.label and choice.label in policy.never_again:
        return Choice(predicted, score, None, f"a maintainer removed {choice.label!r} from this issue")
    return choice


def _map_to_repository(predicted: str, score: float, repo_labels: list[str], policy: LabelingPolicy) -> Choice:
    configured = policy.label_names.get(predicted)
    if configured and (configured in repo_labels or policy.create_labels):
        return Choice(predicted, score, configured, f"{predicted!r} is {configured!r} by the repository's config",
                      configured not in repo_labels)
    if predicted in repo_labels:  # a repository-specific model predicts the repo's own labels
        return Choice(predicted, score, predicted, "the repository has this label")
    mapped = labels_for_kinds(repo_labels).get(predicted)
    if mapped:
        return Choice(predicted, score, mapped, f"{predicted!r} is {mapped!r} in this repository")
    if policy.create_labels:
        return Choice(predicted, score, predicted, "label created: the repository had none for this kind", True)
    return Choice(predicted, score, None, f"the repository has no label for {predicted!r}")


# ---- the plan ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PendingDecision:
    """A decision a crashed job stored before it wrote to GitHub (its Prediction, as plain data)."""

    predicted: str
    label: str | None
    reason: str
    scores: dict[str, float]
    own: tuple[str, ...] = ()  # the own labels it applies beside the kind


@dataclass(frozen=True)
class OwnDecision:
    """One of the repository's own labels decided beside the kind: its score, threshold and outcome."""

    label: str
    score: float  # a served label's head probability (core.own_labels.heads); else the memory's vote
    threshold: float | None  # None: fewer examples than min_examples, or no threshold keeps the target
    outcome: str  # applied | suggested (shown on the review page, in suggest mode's comment; never written)


@dataclass(frozen=True)
class LabelingInputs:
    """Everything the decision reads, gathered once by bot.labeling.gather."""

    repo: str
    number: int
    issue: IssueSnapshot
    policy: LabelingPolicy
    classes: list[str]  # the serving model's classes
    skip: str | None = None  # why the issue is left alone (closed, handled, deleted, ...)
    pending: PendingDecision | None = None  # a crashed job's decision, to finish
    config_report: str | None = None  # what is wrong with the repository's config file, if anything
    scores: dict[str, float] | None = None  # the model's scores; None when skipped or resumed
    memory: Memory | None = None  # the repository's confirmed issues, embedded by the serving model
    vector: Sequence[float] | None = None  # the issue's embedding, for the memory's neighbours
    repo_labels: list[str] = field(default_factory=list)  # labels (issue types with `apply: type`) to map to
    issue_types: list[str] = field(default_factory=list)  # the organisation's types, with `apply: both`
    own_memory: OwnLabelMemory | None = None  # the memory's issues with the own labels each carries
    own_rules: OwnLabelRules | None = None  # own labels' heads and thresholds, as the feedback queue fitted them


@dataclass(frozen=True)
class Write:
    """One call of the IssueWriter (bot.github_api.client), in the order the plan lists them."""

    call: str  # add_labels | create_label | create_comment | set_issue_type
    args: tuple
    once_key: str | None = None  # made at most once while this key lives (claimed in Redis first)


@dataclass(frozen=True)
class Plan:
    """What to store and what to write for one issue."""

    skip: str | None = None  # nothing stored: why
    outcome: str = ""  # applied | abstained | suggested | shadow | held | dry_run
    predicted: str = ""
    label: str | None = None
    reason: str = ""
    scores: dict[str, float] = field(default_factory=dict)  # as served: the model's, after the memory
    model_scores: dict[str, float] | None = None  # the model's own, before the memory (None: resumed)
    neighbours: tuple[dict, ...] | None = None  # the confirmed issues that voted (None: no memory asked)
    threshold: float | None = None  # the top score the chosen kind needed (the review page's borderline)
    writes: tuple[Write, ...] = ()
    resumed: bool = False  # finishes a stored decision instead of storing a new one
    own: tuple[OwnDecision, ...] = ()  # the repository's own labels applied or suggested beside the kind
    abstain_mark: str | None = None  # the abstain label put on, to take off when a maintainer decides

    @property
    def own_applied(self) -> tuple[str, ...]:
        return tuple(decision.label for decision in self.own if decision.outcome == "applied")


def decide(inputs: LabelingInputs) -> Plan:
    """The plan for one issue: leave it alone, finish a crashed job's decision, or decide anew."""
    warning = _config_warning(inputs)
    if inputs.skip:
        return Plan(skip=inputs.skip, writes=warning)
    if inputs.pending is not None:
        return _resume(inputs, warning)
    policy = inputs.policy
    scores = model_scores = dict(inputs.scores or {})
    voters = None
    if inputs.memory is not None and inputs.vector is not None and policy.memory:
        scores, nearest = inputs.memory.adjust_with_neighbours(scores, inputs.vector)
        voters = tuple({"number": n.number, "similarity": round(n.similarity, 4), "label": n.label}
                       for n in nearest)
    choice = choose_label(scores, inputs.repo_labels, policy)
    issue_type = _type_beside(choice, inputs.issue_types, policy) if policy.apply == "both" else None
    reason = f"{choice.reason}; its issue type is {issue_type!r}" if issue_type else choice.reason
    own = own_label_decisions(inputs, choice.label)
    outcome, writes = _writes(inputs, choice, scores, issue_type, similar=_similar(voters), own=own)
    abstain_mark = None
    if outcome == "abstained" and policy.apply != "type":  # the abstention mark is a label
        mark, marked = _abstention_mark(inputs)
        writes, reason = writes + mark, reason + marked
        if mark and policy.remove_abstain_label:
            abstain_mark = policy.abstain_label
    applied = tuple(decision.label for decision in own if decision.outcome == "applied")
    if applied:
        reason += f"; own labels {', '.join(map(repr, applied))}"
    return Plan(outcome=outcome, predicted=choice.predicted, label=choice.label, reason=reason, scores=scores,
                model_scores=model_scores, neighbours=voters, threshold=policy.threshold_for(choice.predicted),
                writes=warning + _one_label_write(writes, inputs, applied), own=own, abstain_mark=abstain_mark)


def own_label_decisions(inputs: LabelingInputs, kind_label: str | None = None) -> tuple[OwnDecision, ...]:
    """The repository's own labels for the issue, one decision each (core.own_labels' rules): applied where
    the label has min_examples confirmed examples and its score reaches the threshold that keeps the target
    precision on the repository's memory, else suggested from SUGGEST_SCORE on; only suggested where the
    config does not set `areas`. Never a label the config's areas leave out, one a maintainer removed from
    this issue, or one the allowlist lacks; at most MAX_OWN_LABELS labels, in the repository's order."""
    policy = inputs.policy
    if inputs.own_memory is None or inputs.vector is None or policy.areas == ():
        return ()
    taken = {kind_label, policy.abstain_label, *policy.label_names.values(), *inputs.issue.labels}
    areas = None if policy.areas is None else compile_areas(tuple(policy.areas))
    names = [name for name in candidates(inputs.repo_labels) if (areas is None or areas.takes(name))
             and name not in taken and name not in policy.never_again][:MAX_OWN_LABELS]
    writes = (policy.write_own_labels and policy.mode in ("label", "comment") and not policy.held
              and not policy.dry_run)
    rules = inputs.own_rules or OwnLabelRules(dict(inputs.own_memory.examples), {})  # none fitted: suggestions
    decisions = []
    text = format_issue_text(inputs.issue.title, inputs.issue.body)  # what the model read, for heads of words
    for scored in rules.score(inputs.vector, names, inputs.own_memory, text=text,
                              examples=inputs.own_memory.examples):
        allowed = not policy.allow or scored.label in policy.allow
        if scored.threshold is not None and scored.score >= scored.threshold and allowed:
            decisions.append(OwnDecision(scored.label, scored.score, scored.threshold,
                                         "applied" if writes else "suggested"))
        elif scored.score >= SUGGEST_SCORE:
            decisions.append(OwnDecision(scored.label, scored.score, scored.threshold, "suggested"))
    return tuple(sorted(decisions, key=lambda decision: -decision.score))


def _one_label_write(writes: tuple[Write, ...], inputs: LabelingInputs, own: tuple[str, ...]
                     ) -> tuple[Write, ...]:
    """Every label of the plan in one add_labels call (the kind's, or the abstention mark's, and the own
    labels): GitHub takes a list, so a job costs one write however many labels it applies."""
    if not own:
        return writes
    adds = [i for i, write in enumerate(writes) if write.call == "add_labels"]
    merged = Write("add_labels", (inputs.repo, inputs.number, [label for i in adds for label in writes[i].args[2]]
                                  + list(own)))
    if not adds:
        return writes + (merged,)
    return tuple(merged if i == adds[-1] else write for i, write in enumerate(writes) if i not in adds[:-1])


def _resume(inputs: LabelingInputs, warning: tuple[Write, ...]) -> Plan:
    """Finish a stored decision: write to GitHub only what GitHub does not have yet."""
    pending = inputs.pending
    choice = Choice(pending.predicted, pending.scores.get(pending.predicted, 0.0), pending.label, pending.reason)
    own = tuple(OwnDecision(label, 0.0, None, "applied") for label in pending.own)
    outcome, writes = _writes(inputs, choice, pending.scores, own=own)
    if outcome == "abstained" and inputs.policy.apply != "type" \
            and inputs.policy.abstain_label not in inputs.issue.labels:  # the mark it promised, if not on yet
        writes += _abstention_mark(inputs)[0]
    if pending.label is not None and pending.label in inputs.issue.labels:
        # GitHub took the label before the crash; its comment may be missing (bot.labeling.act looks)
        outcome, writes = "applied", tuple(write for write in writes if write.call == "create_comment")
    left = tuple(label for label in pending.own if label not in inputs.issue.labels)
    return Plan(outcome=outcome, predicted=pending.predicted, label=pending.label, reason=pending.reason,
                scores=pending.scores, writes=warning + _one_label_write(writes, inputs, left), resumed=True)


def _similar(voters: tuple[dict, ...] | None) -> tuple[int, ...]:
    """The confirmed issues a comment may link: the voters that resemble the issue, most similar first."""
    return tuple(voter["number"] for voter in voters or ()
                 if voter["number"] is not None and voter["similarity"] > 0)


def _writes(inputs: LabelingInputs, choice: Choice, scores: dict[str, float], issue_type: str | None = None,
            similar: tuple[int, ...] = (), own: tuple[OwnDecision, ...] = ()
            ) -> tuple[str, tuple[Write, ...]]:
    """(outcome, the writes that carry the choice out) under the repository's mode; the own labels applied
    join the kind's add_labels afterwards (_one_label_write), the comments mention them here."""
    policy, repo, number = inputs.policy, inputs.repo, inputs.number
    if policy.held:
        return "held", ()
    if policy.mode == "shadow":  # the maintainers judge it first, on the review page, before it writes
        return "shadow", ()
    if policy.mode == "suggest":
        comment = comments.suggestion_comment(scores, policy.comment_template, similar,
                                              own=[(decision.label, decision.score) for decision in own])
        return "suggested", () if policy.dry_run else (Write("create_comment", (repo, number, comment)),)
    if choice.label is None:
        return "abstained", ()
    if policy.dry_run:
        return "dry_run", ()
    writes: list[Write] = []
    if policy.apply == "type":  # an organisation's types cannot be created here: choose_label never asks
        writes.append(Write("set_issue_type", (repo, number, choice.label)))
    else:
        if choice.create:
            writes.append(Write("create_label", (repo, choice.label, KIND_COLORS.get(choice.predicted, "ededed"),
                                                 f"Issues of kind {choice.predicted}, as sorted by Issue Sorter")))
        writes.append(Write("add_labels", (repo, number, [choice.label])))
    if issue_type:
        writes.append(Write("set_issue_type", (repo, number, issue_type)))
    if policy.mode == "comment":
        comment = comments.label_comment(choice.label, choice.score, scores, policy.comment_template, similar,
                                         own=[item.label for item in own if item.outcome == "applied"])
        writes.append(Write("create_comment", (repo, number, comment)))
    return "applied", tuple(writes)


def _type_beside(choice: Choice, issue_types: list[str], policy: LabelingPolicy) -> str | None:
    """With `apply: both`, the issue type that matches the chosen label's kind (by name, as labels are)."""
    if choice.label is None or policy.held or policy.dry_run:
        return None
    return _map_to_repository(choice.predicted, choice.score, issue_types, LabelingPolicy()).label


def _abstention_mark(inputs: LabelingInputs) -> tuple[tuple[Write, ...], str]:
    """The configured abstention label (so nothing is skipped silently): its writes, and what it did."""
    policy, name = inputs.policy, inputs.policy.abstain_label
    if not name or policy.dry_run:
        return (), ""
    if policy.allow and name not in policy.allow:  # the allowlist names every label the bot may apply
        return (), f"; {name!r} not applied: it is not in the repository's allowlist"
    create = () if name in inputs.repo_labels else (
        Write("create_label", (inputs.repo, name, ABSTAIN_COLOR, ABSTAIN_DESCRIPTION)),)
    return create + (Write("add_labels", (inputs.repo, inputs.number, [name])),), f"; marked {name!r}"


def _config_warning(inputs: LabelingInputs) -> tuple[Write, ...]:
    """The config file's problems, commented on the issue once a day in comment and suggest mode."""
    if not inputs.config_report or inputs.policy.dry_run or inputs.policy.mode not in ("comment", "suggest"):
        return ()
    text = f"{comments.CONFIG_MARKER}\n{inputs.config_report}"
    return (Write("create_comment", (inputs.repo, inputs.number, text),
                  once_key=comments.config_warning_key(inputs.repo, inputs.config_report)),)
