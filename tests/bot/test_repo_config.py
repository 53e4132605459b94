"""`.github/issue-sorter.yml`: pure parsing, then each setting through the real pipeline (signed delivery →
Redis → RQ worker with the real model → the fake GitHub, which serves the file)."""

import pytest
from rq.registry import FailedJobRegistry, ScheduledJobRegistry
from sqlalchemy import select

from bot.repo_config import CONFIG_PATH, RepoConfig, parse_config
from core.db import session_scope
from core.queues import LABELING_QUEUE
from core.tables import Prediction, WebhookDelivery
from tests.bot.conftest import REPO, deliver, issue_payload, run_worker

ISSUES = {
    1: ("App crashes with TypeError when saving", "Steps to reproduce: click save. Traceback: TypeError ..."),
    2: ("Add dark mode to the settings page", "It would be great to have a dark theme option."),
}
VALID = """\
mode: comment
labels: {bug: defect, feature: idea, question: ask, docs: manual}
learn_labels: [area/ui, area/api]
allow: [defect, idea]
threshold: 0.7
target_precision: 0.9
comment_template: "Sorted as {label} ({score:.0%})"
skip_authors: ["dependabot[bot]"]
"""


# ---- parsing -----------------------------------------------------------------------------------------

def test_a_valid_file_sets_every_setting():
    config, problems = parse_config(VALID, "o/r/.github/issue-sorter.yml")
    assert problems == []
    assert config == RepoConfig(mode="comment", labels={"bug": "defect", "feature": "idea", "question": "ask",
                                                        "docs": "manual"},
                                learn_labels=("area/ui", "area/api"), allow=("defect", "idea"), threshold=0.7,
                                target_precision=0.9, comment_template="Sorted as {label} ({score:.0%})",
                                skip_authors=("dependabot[bot]",), source="o/r/.github/issue-sorter.yml")


@pytest.mark.parametrize("text,mode", [("mode: label", "label"), ("mode: comment", "comment"),
                                       ("mode: suggest", "suggest"), ("mode: off", "off"), ("mode: 'off'", "off")])
def test_every_mode_is_read_even_yamls_bare_off(text, mode):
    assert parse_config(text) == (RepoConfig(mode=mode, source=CONFIG_PATH), [])


@pytest.mark.parametrize("text", [None, "", "# nothing configured yet\n", "---\n"])
def test_no_file_or_an_empty_one_means_defaults_without_problems(text):
    config, problems = parse_config(text)
    assert problems == [] and (config.mode, config.threshold, config.allow) == ("label", None, ())


@pytest.mark.parametrize("text,problem", [
    ("mode: loud", "mode must be one of label, comment, suggest, off, not 'loud'"),
    ("mode: [label]", "mode must be one of"),
    ("labels: [bug, enhancement]", "labels must map kinds"),
    ("labels: {bug: 3}", "labels must map kinds"),
    ("labels: {regression: defect}", "labels: unknown kind 'regression'"),
    ("allow: defect", "allow must be a list of names"),
    ("learn_labels: {area: ui}", "learn_labels must be a list of names"),
    ("skip_authors: [1, 2]", "skip_authors must be a list of names"),
    ("threshold: 1.5", "threshold must be a number between 0 and 1, not 1.5"),
    ("threshold: high", "threshold must be a number between 0 and 1, not 'high'"),
    ("threshold: true", "threshold must be a number between 0 and 1, not True"),
    ("target_precision: -0.1", "target_precision must be a number between 0 and 1"),
    ("target_precision: .nan", "target_precision must be a number between 0 and 1"),
    ("comment_template: 42", "comment_template must be text using only"),
    ("comment_template: 'Sorted as {kind}'", "comment_template must be text using only"),
    ("comment_template: 'Sorted as {'", "comment_template must be text using only"),
    ("comment_template: '{label.upper.nope}'", "comment_template must be text using only"),
    ("comment_template: '{score[0]}'", "comment_template must be text using only"),
    ("colour: blue", "unknown setting 'colour' (known: allow, comment_template,"),
    ("mode: [label", "is not valid YAML"),
    ("mode: label\n  threshold: 0.5\n bad indent: x", "is not valid YAML"),
    ("- label\n- comment", "must be a mapping of settings, not list"),
    ("just some text", "must be a mapping of settings, not str"),
])
def test_each_malformed_value_is_named_and_the_defaults_apply(text, problem):
    config, problems = parse_config(text)
    assert len(problems) == 1 and problem in problems[0]
    assert config == RepoConfig(source=CONFIG_PATH)


def test_a_malformed_file_keeps_the_comment_mode_it_asked_for_and_lists_every_problem():
    config, problems = parse_config("mode: suggest\nallow: [bug]\nthreshold: 7\nfavourite: x\n")
    assert config == RepoConfig(mode="suggest", source=CONFIG_PATH)  # allow dropped with the rest
    assert len(problems) == 2 and "favourite" in problems[0] and "threshold" in problems[1]


# ---- through the pipeline ----------------------------------------------------------------------------

def use_config(fake_github, text: str, *, repo: str = REPO, labels=()) -> None:
    """Put the config file into `repo` (created, or recreated with its labels and no issues)."""
    existing = fake_github.repo_labels(repo) if repo == REPO else []
    fake_github.add_repo(repo, labels=existing + list(labels), files={CONFIG_PATH: text})


def open_issue(fake_github, client, payload, number: int = 1, *, author: str = "octocat") -> None:
    title, body = ISSUES[number]
    fake_github.add_issue(REPO, number, title, body, author=author)
    deliver(client, "issues", issue_payload(payload, "opened", number, title=title, body=body), f"d-{number}")


def predictions(ctx) -> list[Prediction]:
    with session_scope(ctx.sessionmaker) as session:
        return session.scalars(select(Prediction).order_by(Prediction.id)).all()


def nothing_failed_or_retried(redis) -> bool:
    return (FailedJobRegistry(LABELING_QUEUE, connection=redis).count,
            ScheduledJobRegistry(LABELING_QUEUE, connection=redis).count) == (0, 0)


@pytest.mark.redis
@pytest.mark.slow
def test_a_malformed_config_in_label_mode_labels_with_the_defaults_and_comments_nothing(
        worker_context, fake_github, client, payload, redis):
    use_config(fake_github, "allow: [wontfix]\nthreshold: 7\n")  # if allow applied, nothing would be labelled
    open_issue(fake_github, client, payload)
    run_worker(redis)
    assert len(fake_github.issue_labels(REPO, 1)) == 1
    assert fake_github.comments(REPO, 1) == [] and nothing_failed_or_retried(redis)


@pytest.mark.redis
@pytest.mark.slow
def test_a_malformed_config_in_comment_mode_is_reported_once_and_labelling_goes_on(
        worker_context, fake_github, client, payload, redis):
    use_config(fake_github, "mode: comment\nthreshold: seven\nfavourite_colour: blue\n")
    open_issue(fake_github, client, payload, 1)
    open_issue(fake_github, client, payload, 2)
    run_worker(redis)
    warning, labelled = fake_github.comments(REPO, 1)
    assert f"could not use {REPO}/{CONFIG_PATH}, so it runs with safe defaults" in warning
    assert "- unknown setting 'favourite_colour'" in warning and "- threshold must be a number" in warning
    assert "Issue Sorter labelled this issue" in labelled
    assert [c for c in fake_github.comments(REPO, 2) if "could not use" in c] == []
    assert all(len(fake_github.issue_labels(REPO, n)) == 1 for n in (1, 2))
    assert nothing_failed_or_retried(redis)


@pytest.mark.redis
@pytest.mark.slow
def test_comment_mode_labels_and_explains_with_the_repositorys_template(worker_context, fake_github, client,
                                                                        payload, redis):
    use_config(fake_github, "mode: comment\ncomment_template: 'Sorted as {label} ({score:.0%} sure)'\n")
    open_issue(fake_github, client, payload)
    run_worker(redis)
    (label,) = fake_github.issue_labels(REPO, 1)
    (prediction,) = predictions(worker_context)
    score = prediction.scores[prediction.predicted]
    assert fake_github.comments(REPO, 1) == [f"Sorted as {label} ({score:.0%} sure)"]


@pytest.mark.redis
@pytest.mark.slow
def test_suggest_mode_comments_the_ranked_kinds_and_labels_nothing(worker_context, fake_github, client, payload,
                                                                   redis):
    use_config(fake_github, "mode: suggest\n")
    open_issue(fake_github, client, payload)
    run_worker(redis)
    assert fake_github.issue_labels(REPO, 1) == []
    (suggestion,) = fake_github.comments(REPO, 1)
    assert "suggestions" in suggestion
    assert all(f"**{kind}**" in suggestion for kind in ("bug", "feature", "question"))
    assert [p.outcome for p in predictions(worker_context)] == ["suggested"]


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.parametrize("text", ["mode: off\n", "mode: 'off'\n"])
def test_off_mode_does_nothing_at_all(worker_context, fake_github, client, payload, redis, text):
    use_config(fake_github, text)
    open_issue(fake_github, client, payload)
    run_worker(redis)
    assert fake_github.calls("POST", r"/repos/.*") == []  # no label, no comment
    assert predictions(worker_context) == []
    with session_scope(worker_context.sessionmaker) as session:
        assert "mode: off" in session.get(WebhookDelivery, "d-1").outcome


@pytest.mark.redis
@pytest.mark.slow
def test_issues_by_skipped_authors_are_left_alone(worker_context, fake_github, client, payload, redis):
    use_config(fake_github, "skip_authors: ['dependabot[bot]']\n")
    open_issue(fake_github, client, payload, author="dependabot[bot]")
    run_worker(redis)
    assert fake_github.issue_labels(REPO, 1) == [] and predictions(worker_context) == []


@pytest.mark.redis
@pytest.mark.slow
def test_the_labels_mapping_names_the_label_each_kind_gets(worker_context, fake_github, client, payload, redis):
    mapping = {"bug": "defect", "feature": "idea", "question": "ask"}
    use_config(fake_github, "labels: {bug: defect, feature: idea, question: ask}\n", labels=mapping.values())
    open_issue(fake_github, client, payload)
    run_worker(redis)
    (prediction,) = predictions(worker_context)
    assert fake_github.issue_labels(REPO, 1) == [mapping[prediction.predicted]] == [prediction.label]


@pytest.mark.redis
@pytest.mark.slow
def test_the_allowlist_keeps_every_other_label_off(worker_context, fake_github, client, payload, redis):
    use_config(fake_github, "allow: [documentation]\n")  # the model never predicts docs
    open_issue(fake_github, client, payload)
    run_worker(redis)
    assert fake_github.issue_labels(REPO, 1) == []
    (prediction,) = predictions(worker_context)
    assert prediction.outcome == "abstained" and "allowlist" in prediction.reason


@pytest.mark.redis
@pytest.mark.slow
def test_a_repository_without_a_file_uses_its_organisations_dot_github_config(worker_context, fake_github, client,
                                                                             payload, redis):
    use_config(fake_github, "mode: suggest\n", repo="Codertocat/.github")
    open_issue(fake_github, client, payload)
    run_worker(redis)
    assert fake_github.calls("GET", rf"/repos/{REPO}/contents/{CONFIG_PATH}")[0].status == 404
    assert fake_github.calls("GET", rf"/repos/Codertocat/\.github/contents/{CONFIG_PATH}")[0].status == 200
    assert fake_github.issue_labels(REPO, 1) == [] and len(fake_github.comments(REPO, 1)) == 1


@pytest.mark.parametrize("template", ["{score:>999999999}", "x" * 5000])
def test_templates_that_would_build_huge_comments_are_refused(template):
    config, problems = parse_config(f"comment_template: '{template}'")
    assert problems and config.comment_template is None
