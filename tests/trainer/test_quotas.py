"""Trainings per installation (trainer.quotas): an installation with many repositories gets at most its
quota of repository models and of trainings a day, takes its turn in the due-retraining run, and a training
a quota refuses stays due instead of being dropped."""

import datetime as dt

from core import store
from core.quotas import Quotas
from core.tables import GLOBAL_SCOPE, IssueRecord, ModelPromotion, ModelVersion, TrainingRun
from trainer.quotas import fair_order, quota_refusal
from trainer.retrain import RetrainPolicy, retrain_scope, scopes_due

NOW = dt.datetime(2026, 12, 6, 12, tzinfo=dt.timezone.utc)
QUOTAS = Quotas(repository_models=2, trainings_per_day=2)


def repositories(session, installation_id: int, owner: str, n: int) -> list[str]:
    names = [f"{owner}/repo-{i}" for i in range(n)]
    for name in names:
        store.ensure_repository(session, name, installation_id)
    session.flush()
    return names


def trained(session, scope: str, hours_ago: float) -> None:
    session.add(TrainingRun(scope=scope, trigger="cron", status="finished",
                            started_at=NOW - dt.timedelta(hours=hours_ago)))
    session.flush()


def own_model(session, scope: str) -> None:
    version = ModelVersion(version=f"v-{scope}", scope=scope, path="unused")
    session.add(ModelPromotion(scope=scope, model_version=version))
    session.flush()


def test_an_installation_trains_at_most_its_quota_in_24_hours(session):
    big = repositories(session, 1, "big", 4)
    quiet = repositories(session, 2, "quiet", 1)
    trained(session, big[0], hours_ago=1)
    assert quota_refusal(session, big[1], QUOTAS, NOW) is None
    trained(session, big[1], hours_ago=23)
    refusal = quota_refusal(session, big[2], QUOTAS, NOW)
    assert "installation 1 has had 2 trainings in the last 24 hours" in refusal
    assert "ISSUE_SORTER_MAX_TRAININGS_PER_DAY=2" in refusal and "stays due" in refusal
    assert quota_refusal(session, quiet[0], QUOTAS, NOW) is None  # another installation is not held
    assert quota_refusal(session, big[2], QUOTAS, NOW + dt.timedelta(hours=2)) is None  # a day later, again


def test_an_installation_has_at_most_its_quota_of_repository_models(session):
    big = repositories(session, 1, "big", 3)
    own_model(session, big[0])
    assert quota_refusal(session, big[1], QUOTAS, NOW) is None
    own_model(session, big[1])
    refusal = quota_refusal(session, big[2], QUOTAS, NOW)
    assert "ISSUE_SORTER_MAX_REPOSITORY_MODELS=2" in refusal and "the global model serves it" in refusal
    assert quota_refusal(session, big[0], QUOTAS, NOW) is None  # one that has its model may retrain it


def test_the_global_model_and_the_operators_own_repositories_are_not_counted(session):
    store.ensure_repository(session, "operator/own")
    for hours in range(5):
        trained(session, "operator/own", hours_ago=hours)
        trained(session, GLOBAL_SCOPE, hours_ago=hours)
    assert quota_refusal(session, "operator/own", QUOTAS, NOW) is None
    assert quota_refusal(session, GLOBAL_SCOPE, QUOTAS, NOW) is None


def test_a_training_over_quota_is_refused_without_a_run_and_stays_due(session):
    big = repositories(session, 1, "big", 3)
    for number in range(1, 6):  # 5 new confirmed issues: due under min_new_decisions=5
        record, _ = store.upsert_issue(session, store.find_repository(session, full_name=big[2]), number, title="t",
                                       body="b", author_login="someone", state="open")
        record.confirmed_label, record.confirmed_at = "bug", dt.datetime.now(dt.timezone.utc)
    now = dt.datetime.now(dt.timezone.utc)
    for scope in big[:2]:
        session.add(TrainingRun(scope=scope, started_at=now - dt.timedelta(hours=1)))
    session.flush()
    policy = RetrainPolicy(min_new_decisions=5, quotas=QUOTAS)
    result = retrain_scope(session, None, big[2], policy=policy, trigger="cron")
    assert result.run is None and "ISSUE_SORTER_MAX_TRAININGS_PER_DAY" in result.message
    # what the review page's retrain button and a `/issue-sorter retrain` reply show
    assert result.to_dict()["message"] == result.message and result.summary() == f"No retraining: {result.message}."
    assert session.query(TrainingRun).filter_by(scope=big[2]).count() == 0
    assert big[2] in scopes_due(session, policy)  # done later, not dropped
    assert session.query(IssueRecord).count() == 5


def test_the_due_run_lets_installations_take_turns(session):
    big = repositories(session, 1, "big", 4)
    small = repositories(session, 2, "small", 2)
    store.ensure_repository(session, "operator/own")
    due = [GLOBAL_SCOPE, *big, *small, "operator/own"]
    assert fair_order(session, due) == [GLOBAL_SCOPE, big[0], small[0], "operator/own", big[1], small[1],
                                        big[2], big[3]]
