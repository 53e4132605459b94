"""Act: carry out a labelling plan (bot.labeling.decide): store the decision, then write to GitHub.

The Prediction is stored as PENDING and `checkpoint` (the job's commit) called before GitHub is written,
so a job that dies after GitHub took the label finishes the same decision when retried, instead of
finding the label and recording nothing. GitHub answering an error before it took anything forgets the
decision, and the job decides what next (retry later, or drop); a transient error once a write may have
landed (an earlier one, or this one unanswered) keeps it pending, so the retry finishes it.

A comment is posted once per decision: it carries the decision's hidden marker (bot.labeling.comments.decision_marker),
and a resumed decision looks for it on the issue before posting, since the job may have died after GitHub
took the comment and before the outcome was committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy.orm import Session

from bot.github_api.client import GitHubError, PermanentGitHubError, TransientGitHubError
from bot.labeling import comments
from bot.labeling.decide import PENDING, Plan, Write
from bot.labeling.gather import Gathered
from core import store
from core.kinds import kind_of_label
from core.tables import OwnLabelDecision, Prediction

log = logging.getLogger(__name__)
WITHDRAWN = "withdrawn"  # the outcome of a label the bot put on and took off again (see _answer_check)


def carry_out(session: Session, gathered: Gathered, plan: Plan, github, *, delivery_id: str | None = None,
              claim: Callable[[str], bool] = lambda key: True,
              checkpoint: Callable[[], None] = lambda: None) -> Prediction | str:
    """The stored Prediction, or why the issue was left alone. `claim(key)` is true the first time a
    once-only write's key is claimed (Redis SET NX in a worker)."""
    repo, number = gathered.inputs.repo, gathered.inputs.number
    if plan.skip:
        _write_all(github, plan.writes, claim)
        log.info("skipping %s#%s: %s", repo, number, plan.skip)
        return plan.skip
    check = _answer_check(session, gathered, plan)
    if plan.resumed:
        prediction = store.latest_prediction(session, gathered.issue_row)
        writes = _unposted(github, repo, number, _marked(plan.writes, prediction.id))
        why = _check_label_on(check, plan, gathered, writes) or _write_all(github, writes, claim, check=check)
        _record_outcome(prediction, plan.outcome, withdrawn=_withdraw(github, repo, number, plan.label, why))
        log.info("%s#%s: resumed after a crash: %s %r", repo, number, prediction.outcome, plan.label)
        return prediction
    prediction = Prediction(issue_id=gathered.issue_row.id, model_version_id=gathered.model_version_id,
                            delivery_id=delivery_id, scores=plan.scores, predicted=plan.predicted, label=plan.label,
                            applied=False, outcome=PENDING, reason=plan.reason,
                            model_scores=plan.model_scores, threshold=plan.threshold,
                            neighbours=list(plan.neighbours) if plan.neighbours is not None else None,
                            abstain_mark=plan.abstain_mark,
                            own_labels=[OwnLabelDecision(label=own.label, score=own.score,
                                                         threshold=own.threshold, outcome=own.outcome)
                                        for own in plan.own])
    session.add(prediction)
    session.flush()
    checkpoint()
    attempted: list[Write] = []
    try:
        why = _write_all(github, _marked(plan.writes, prediction.id), claim, attempted, check=check)
        withdrawn = _withdraw(github, repo, number, plan.label, why, attempted)
    except GitHubError as error:
        if getattr(error, "deferral", False):  # the installation's write spacing (bot.github_api.write_spacing)
            raise  # decided, not yet written: the rescheduled job resumes it, without the model
        taken = attempted if error.status is None else attempted[:-1]  # an answered error took nothing
        if isinstance(error, TransientGitHubError) and any(_is_decision(write) for write in taken):
            raise  # GitHub may hold part of it: the retry resumes the pending decision and writes the rest
        session.delete(prediction)  # GitHub took nothing (or the job is dropped): forget the decision
        session.flush()
        checkpoint()
        raise
    _record_outcome(prediction, plan.outcome, withdrawn=withdrawn)
    session.flush()
    log.info("%s#%s: %s %r%s (%s)", repo, number, prediction.outcome, plan.label,
             f" and {list(plan.own_applied)}" if plan.own_applied else "", prediction.reason)
    return prediction


def _write_all(github, writes: tuple[Write, ...], claim: Callable[[str], bool], attempted: list[Write] | None = None,
               check: Callable[[Write, object], str | None] = lambda write, answer: None) -> str | None:
    """Make the writes in order; stop at the first answer `check` objects to, and return its reason."""
    for write in writes:
        if github is None or (write.once_key is not None and not claim(write.once_key)):
            continue
        if attempted is not None:
            attempted.append(write)
        why = check(write, getattr(github, write.call)(*write.args))
        if why:
            return why
    return None


def _answer_check(session: Session, gathered: Gathered, plan: Plan) -> Callable[[Write, object], str | None]:
    """What the label's write answered (the issue's labels as GitHub has them now) against the decision.

    The decision may have read the delivery's copy of the issue (bot.labeling.gather' fresh window): a
    maintainer who labelled the issue, or took the bot's label off, in those seconds is not in it. Either
    way the maintainer's word stands: the bot's label comes off again, and never_again keeps it off."""
    classes = set(gathered.inputs.classes)

    def check(write: Write, answer: object) -> str | None:
        if write.call != "add_labels" or answer is None or plan.label not in write.args[2]:
            return None  # not the decision's label, or no answer to read
        others = [name for name in answer
                  if name != plan.label and (name in classes or kind_of_label(name) in classes)]
        if others:
            return f"a maintainer labelled it {others[0]!r} meanwhile"
        if plan.label in store.removed_by_human(session, gathered.issue_row):
            return f"a maintainer removed {plan.label!r} meanwhile"
        return None

    return check


def _check_label_on(check: Callable[[Write, object], str | None], plan: Plan, gathered: Gathered,
                    writes: tuple[Write, ...]) -> str | None:
    """A resumed decision whose label went out before the crash: the issue as read now is its answer."""
    issue = gathered.inputs.issue
    if plan.label is None or plan.label not in issue.labels or any(w.call == "add_labels" for w in writes):
        return None
    return check(Write("add_labels", (gathered.inputs.repo, gathered.inputs.number, [plan.label])),
                 list(issue.labels))


def _withdraw(github, repo: str, number: int, label: str | None, why: str | None,
              attempted: list[Write] | None = None) -> str | None:
    """Take the bot's label off again when its answer showed a maintainer's word; why, or None."""
    if why is None or github is None or label is None:
        return None
    if attempted is not None:
        attempted.append(Write("remove_label", (repo, number, label)))
    try:
        github.remove_label(repo, number, label)
    except PermanentGitHubError as error:
        if error.status != 404:  # 404: it is off already
            raise
    log.warning("%s#%s: %r taken off again: %s", repo, number, label, why)
    return why


def _is_decision(write: Write) -> bool:
    """A write that carries the decision (the config report's comment is claimed once on its own)."""
    return write.once_key is None


def _is_decision_comment(write: Write) -> bool:
    return write.call == "create_comment" and _is_decision(write)


def _marked(writes: tuple[Write, ...], prediction_id: int) -> tuple[Write, ...]:
    """The decision's comment with its hidden marker at the end."""
    marker = comments.decision_marker(prediction_id)
    return tuple(replace(write, args=(*write.args[:2], f"{write.args[2]}\n{marker}"))
                 if _is_decision_comment(write) else write for write in writes)


def _unposted(github, repo: str, number: int, writes: tuple[Write, ...]) -> tuple[Write, ...]:
    """A resumed decision's writes without its comment when GitHub already shows it (one read, only then)."""
    comment = next((write for write in writes if _is_decision_comment(write)), None)
    if github is None or comment is None:
        return writes
    marker = comment.args[2].rsplit("\n", 1)[-1]
    if not any(marker in body for body in github.list_comments(repo, number)):
        return writes
    log.info("%s#%s: the decision's comment is already on the issue; not posted again", repo, number)
    return tuple(write for write in writes if write is not comment)


def _record_outcome(prediction: Prediction, outcome: str, *, withdrawn: str | None = None) -> None:
    if withdrawn:  # the label went on and came off again: not applied, and said why
        outcome, prediction.reason = WITHDRAWN, f"{prediction.reason}; taken off again: {withdrawn}"
    prediction.outcome, prediction.applied = outcome, outcome == "applied"
