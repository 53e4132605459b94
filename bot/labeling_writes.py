"""Act: carry out a labelling plan (bot.labeling.decide): store the decision, then write to GitHub.

The Prediction is stored as PENDING and `checkpoint` (the job's commit) called before GitHub is written,
so a job that dies after GitHub took the label finishes the same decision when retried, instead of
finding the label and recording nothing. GitHub answering an error before it took anything forgets the
decision, and the job decides what next (retry later, or drop); a transient error once a write may have
landed (an earlier one, or this one unanswered) keeps it pending, so the retry finishes it.

A comment is posted once per decision: it carries the decision's hidden marker (bot.comments.decision_marker),
and a resumed decision looks for it on the issue before posting, since the job may have died after GitHub
took the comment and before the outcome was committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy.orm import Session

from bot import comments
from bot.github_client import GitHubError, TransientGitHubError
from bot.labeling import PENDING, Plan, Write
from bot.labeling_inputs import Gathered
from core import store
from core.tables import Prediction

log = logging.getLogger(__name__)


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
    if plan.resumed:
        prediction = store.latest_prediction(session, gathered.issue_row)
        _write_all(github, _unposted(github, repo, number, _marked(plan.writes, prediction.id)), claim)
        _record_outcome(prediction, plan.outcome)
        log.info("%s#%s: resumed after a crash: %s %r", repo, number, plan.outcome, plan.label)
        return prediction
    prediction = Prediction(issue_id=gathered.issue_row.id, model_version_id=gathered.model_version_id,
                            delivery_id=delivery_id, scores=plan.scores, predicted=plan.predicted, label=plan.label,
                            applied=False, outcome=PENDING, reason=plan.reason,
                            model_scores=plan.model_scores, threshold=plan.threshold,
                            neighbours=list(plan.neighbours) if plan.neighbours is not None else None)
    session.add(prediction)
    session.flush()
    checkpoint()
    attempted: list[Write] = []
    try:
        _write_all(github, _marked(plan.writes, prediction.id), claim, attempted)
    except GitHubError as error:
        if getattr(error, "deferral", False):  # the installation's write spacing (bot.write_spacing)
            raise  # decided, not yet written: the rescheduled job resumes it, without the model
        taken = attempted if error.status is None else attempted[:-1]  # an answered error took nothing
        if isinstance(error, TransientGitHubError) and any(_is_decision(write) for write in taken):
            raise  # GitHub may hold part of it: the retry resumes the pending decision and writes the rest
        session.delete(prediction)  # GitHub took nothing (or the job is dropped): forget the decision
        session.flush()
        checkpoint()
        raise
    _record_outcome(prediction, plan.outcome)
    session.flush()
    log.info("%s#%s: %s %r (%s)", repo, number, plan.outcome, plan.label, plan.reason)
    return prediction


def _write_all(github, writes: tuple[Write, ...], claim: Callable[[str], bool],
               attempted: list[Write] | None = None) -> None:
    for write in writes:
        if github is None or (write.once_key is not None and not claim(write.once_key)):
            continue
        if attempted is not None:
            attempted.append(write)
        getattr(github, write.call)(*write.args)


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


def _record_outcome(prediction: Prediction, outcome: str) -> None:
    prediction.outcome, prediction.applied = outcome, outcome == "applied"
