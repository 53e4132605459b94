"""Act: carry out a labelling plan (bot.labeling.decide): store the decision, then write to GitHub.

The Prediction is stored as PENDING and `checkpoint` (the job's commit) called before GitHub is written,
so a job that dies after GitHub took the label finishes the same decision when retried, instead of
finding the label and recording nothing. GitHub answering an error before it took anything forgets the
decision, and the job decides what next (retry later, or drop).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy.orm import Session

from bot.github_client import GitHubError
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
        _write_all(github, plan.writes, claim)
        _record_outcome(prediction, plan.outcome)
        log.info("%s#%s: resumed after a crash: %s %r", repo, number, plan.outcome, plan.label)
        return prediction
    prediction = Prediction(issue_id=gathered.issue_row.id, model_version_id=gathered.model_version_id,
                            delivery_id=delivery_id, scores=plan.scores, predicted=plan.predicted, label=plan.label,
                            applied=False, outcome=PENDING, reason=plan.reason)
    session.add(prediction)
    session.flush()
    checkpoint()
    try:
        _write_all(github, plan.writes, claim)
    except GitHubError:  # GitHub answered and took nothing: forget the decision
        session.delete(prediction)
        session.flush()
        checkpoint()
        raise
    _record_outcome(prediction, plan.outcome)
    session.flush()
    log.info("%s#%s: %s %r (%s)", repo, number, plan.outcome, plan.label, plan.reason)
    return prediction


def _write_all(github, writes: tuple[Write, ...], claim: Callable[[str], bool]) -> None:
    for write in writes:
        if github is None or (write.once_key is not None and not claim(write.once_key)):
            continue
        getattr(github, write.call)(*write.args)


def _record_outcome(prediction: Prediction, outcome: str) -> None:
    prediction.outcome, prediction.applied = outcome, outcome == "applied"
