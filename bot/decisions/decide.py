"""Decide: what a maintainer's event says of the bot's prediction and of the issue's training data. Pure: the
inputs gathered beforehand (bot.decisions.gather) in, a `Decision` out; bot.decisions.act records it.

- a label the bot applied that a maintainer kept (the issue closed, or other labels changed, with ours still
  on) is *accepted*;
- one a maintainer removed is *rejected*, or *corrected* when they put another label the bot knows on;
- a known label a maintainer put on an issue where the bot abstained (or never ran) is new training data;
- a suggestion (suggest mode, or shadow mode where the bot would have labelled: nothing written) is accepted
  or corrected by the first known label a maintainer adds;
- the repository's own labels (core.own_labels) are decided one by one beside the kind: one a maintainer adds
  is a confirmed example (and accepts the bot's suggestion of it), one they remove is no example any more
  (and rejects the bot's, which is never put back), one left on at closing is accepted;
- a maintainer's kind label on an issue the bot marked with its abstain label takes the mark off.
Events of the App itself, of any bot and of anyone who may not triage the repository decide nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.decisions.gather import ADDED, DECIDING, REMOVED, DecisionInputs, PredictionState
from core import own_labels
from core.kinds import is_known_label

NOT_HUMAN = "bot event: recorded, not a decision"


@dataclass(frozen=True)
class Decision:
    """What one event decided; every field but `outcome` is empty when it decided nothing."""

    outcome: str
    verdict: str | None = None  # accepted | rejected | corrected: the latest prediction's kind, judged
    unconfirm: bool = False  # the kind label a maintainer had confirmed is taken back (applied first)
    confirm: str | None = None  # the kind label confirmed: the training label
    examples: tuple[tuple[str, bool], ...] = ()  # (own label, confirmed) examples added (True) or taken back
    own_verdicts: tuple[tuple[str, str], ...] = ()  # (own label, accepted | rejected) on the prediction's rows
    take_off: str | None = None  # the abstain label to take off GitHub


def decide_event(inputs: DecisionInputs) -> Decision:
    if inputs.stale:
        return Decision("stale: older than the issue's newest event; recorded, nothing changed")
    sender = inputs.sender
    if not sender.is_human:
        return Decision(NOT_HUMAN)
    if inputs.action not in DECIDING:  # an edit, a reopening, a deletion: the row follows, nothing else
        return Decision("recorded")
    if sender.may_triage is None:
        return Decision(f"not a decision: {sender.login}'s permission could not be asked (dry-run: no App "
                        "credentials); recorded as history")
    if not sender.may_triage:
        return Decision(f"not a decision: {sender.login} may not triage this repository; recorded as history")
    own = _own_labels(inputs)
    kind = _kind(inputs)
    outcome = f"{kind.outcome}; {own.outcome}" if own.outcome else kind.outcome
    return Decision(outcome, kind.verdict, kind.unconfirm, kind.confirm, own.examples, own.own_verdicts,
                    _abstain_mark_off(inputs))


def is_own_label(label: str, classes: tuple[str, ...]) -> bool:
    """One of the repository's own labels (an area, a component): no process label, none of the model's
    classes, and no label that names a kind (core.own_labels)."""
    return own_labels.is_candidate(label) and label not in classes


def is_unwritten_suggestion(prediction: PredictionState | None) -> bool:
    """A label the bot chose and did not write: suggest mode's always, shadow mode's when it would have
    labelled (a shadow abstention stays an abstention). The first known label a human adds judges it."""
    return prediction is not None and (prediction.outcome == "suggested" or (
        prediction.outcome == "shadow" and prediction.label is not None))


# ---- the repository's own labels ------------------------------------------------------------------------

def _own_labels(inputs: DecisionInputs) -> Decision:
    """What the event says of the own labels: examples confirmed or taken back, the bot's decisions judged."""
    action, label = inputs.action, inputs.label
    rows = inputs.prediction.own if inputs.prediction is not None else ()
    if action == "closed":  # a maintainer who closes the issue with the bot's own label on keeps it
        kept = [row.label for row in rows if row.outcome == "applied" and row.decision is None
                and row.label in inputs.current_labels]
        return Decision(f"own labels kept: {', '.join(map(repr, kept))}" if kept else "",
                        examples=tuple((name, True) for name in kept),
                        own_verdicts=tuple((name, "accepted") for name in kept))
    if not label or not is_own_label(label, inputs.classes):
        return Decision("")
    ours = next((row for row in rows if row.label == label and row.decision is None), None)
    if action in ADDED:
        if ours is not None and ours.outcome == "suggested":
            return Decision(f"own label {label!r}: suggestion accepted", examples=((label, True),),
                            own_verdicts=((label, "accepted"),))
        return Decision(f"own label {label!r}: a confirmed example", examples=((label, True),))
    if action in REMOVED:
        if ours is not None and ours.outcome == "applied":
            return Decision(f"own label {label!r}: rejected, never put back on this issue",
                            examples=((label, False),), own_verdicts=((label, "rejected"),))
        return Decision(f"own label {label!r}: no longer an example", examples=((label, False),))
    return Decision("")


# ---- the kind ---------------------------------------------------------------------------------------------

def _kind(inputs: DecisionInputs) -> Decision:
    action, label = inputs.action, inputs.label
    if action in ADDED and label:
        return _added(inputs, label)
    if action in REMOVED and label:
        return _removed(inputs, label)
    return _kept_if_reviewed(inputs) if action == "closed" else Decision("recorded")


def _added(inputs: DecisionInputs, label: str) -> Decision:
    prediction = inputs.prediction
    if not is_known_label(label, inputs.classes):
        return _kept_if_reviewed(inputs)
    if is_unwritten_suggestion(prediction) and prediction.decision is None:
        return _judged("accepted" if label == prediction.label else "corrected", label)
    if prediction is None or not prediction.applied:
        return Decision("new training data: a human labelled an issue the bot did not label", confirm=label)
    if label == prediction.label:
        return _judged("accepted", label)
    if prediction.label not in inputs.current_labels:  # ours was removed before: this is the correction
        return _judged("corrected", label)
    return Decision("recorded: another known label beside ours; waiting for the maintainer to remove one")


def _removed(inputs: DecisionInputs, label: str) -> Decision:
    prediction = inputs.prediction
    unconfirm = inputs.confirmed_label == label  # a confirmed label taken back is no longer training data
    if prediction is None or not prediction.applied or label != prediction.label:
        kept = _kept_if_reviewed(inputs)
        return Decision(kept.outcome, kept.verdict, unconfirm, kept.confirm)
    replacement = next((added for added in inputs.maintainer_labels_since
                        if added in inputs.current_labels and added != prediction.label
                        and is_known_label(added, inputs.classes)), None)
    if replacement:
        return Decision(f"corrected: {replacement!r}", "corrected", unconfirm, replacement)
    return Decision("rejected: a maintainer removed our label", "rejected", unconfirm)


def _kept_if_reviewed(inputs: DecisionInputs) -> Decision:
    """A maintainer who edits labels and leaves ours on has reviewed it."""
    prediction = inputs.prediction
    if prediction is not None and prediction.applied and prediction.decision is None \
            and prediction.label in inputs.current_labels:
        return _judged("accepted", prediction.label)
    return Decision("recorded")


def _judged(verdict: str, label: str) -> Decision:
    return Decision(f"{verdict}: {label!r}", verdict, confirm=label)


def _abstain_mark_off(inputs: DecisionInputs) -> str | None:
    """The abstain label, once a maintainer put a kind label (or issue type) on the issue it marks."""
    prediction, label = inputs.prediction, inputs.label
    if prediction is None or not prediction.abstain_mark or inputs.action not in ADDED or not label \
            or label == prediction.abstain_mark or not is_known_label(label, inputs.classes):
        return None
    return prediction.abstain_mark if prediction.abstain_mark in inputs.current_labels else None


def review_verdict(prediction: PredictionState, *, kept: bool, login: str) -> Decision:
    """A review that changed no label: the bot's label kept as it is, or its suggestion dismissed."""
    if kept:
        return _judged("accepted", prediction.label)
    return Decision(f"rejected: {login} dismissed the suggestion", "rejected")
