"""What the quality page says of a finished job: promoted, refused (with the worker's reason) or done."""

import pytest

from bot.review.model_jobs import outcome

REFUSED_RETRAIN = {"scope": "o/r", "promoted": False, "champion_score": None, "challenger_score": None,
                   "message": "o/r: not enough confirmed issues to retrain yet, waiting (34 usable; ...)",
                   "summary": "No retraining: ..."}
KEPT_OUT = {**REFUSED_RETRAIN, "champion_score": 0.61, "challenger_score": 0.58,
            "summary": "Retrained o/r on 50 held-out recent issues: ... not promoted"}


@pytest.mark.parametrize("action,result,expected", [
    ("retrain", REFUSED_RETRAIN, ("refused", REFUSED_RETRAIN["message"])),
    ("retrain", KEPT_OUT, ("refused", KEPT_OUT["summary"])),
    ("retrain", {**KEPT_OUT, "promoted": True, "summary": "promoted"}, ("promoted", "promoted")),
    ("promote", "promoted v2: macro-F1 0.7 > 0.6", ("promoted", "promoted v2: macro-F1 0.7 > 0.6")),
    ("promote", "not promoted: v2 is not of o/r", ("refused", "not promoted: v2 is not of o/r")),
    ("rollback", "o/r now served by v1", ("done", "o/r now served by v1")),
    ("rollback", "not rolled back: none before", ("refused", "not rolled back: none before")),
    ("preview", "preview of o/r: 3 issues", ("done", "preview of o/r: 3 issues")),
    ("preview", "skipped: no model", ("refused", "skipped: no model")),
])
def test_a_finished_job_reads_as_promoted_refused_or_done(action, result, expected):
    assert outcome(action, result) == expected
