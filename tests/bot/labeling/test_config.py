"""`.github/issue-sorter.yml`: pure parsing; then each setting as the labelling job applies it, on the fakes
(tests/bot/rules.py); and two plumbing tests through the real pipeline (signed delivery → Redis → RQ worker
with the real model → the fake GitHub over HTTP, which serves the file)."""

import hashlib
import os

import pytest
import yaml
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

from bot.github_api.client import RepoFile
from bot.labeling.comments import decision_marker, problem_report
from bot.labeling.config import CONFIG_PATH, RepoConfig, parse_config, parse_file
from core.queues import LABELING_QUEUE, SERIALIZER
from tests.bot.conftest import REPO as HTTP_REPO
from tests.bot.conftest import deliver, issue_payload, run_worker
from tests.bot.labeling.commonmark import code_contents, text_outside_code
from tests.bot.rules import CLASSIFIER, REPO, label, predictions, use_config
from tests.fakes import FakeClassifier

HTTP_ISSUES = {
    1: ("App crashes with TypeError when saving", "Steps to reproduce: click save. Traceback: TypeError ..."),
    2: ("Add dark mode to the settings page", "It would be great to have a dark theme option."),
}
VALID = """\
mode: comment
labels: {bug: defect, feature: idea, question: ask, docs: manual}
apply: both
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
                                apply="both", allow=("defect", "idea"), threshold=0.7,
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
    ("threshold: 1.5", "threshold must be a number between 0 and 1, not `1.5`"),
    ("threshold: high", "threshold must be a number between 0 and 1, not `'high'`"),
    ("threshold: true", "threshold must be a number between 0 and 1, not `True`"),
    ("target_precision: -0.1", "target_precision must be a number between 0 and 1"),
    ("target_precision: .nan", "target_precision must be a number between 0 and 1"),
    ("comment_template: 42", "comment_template must be text, not int"),
    ("comment_template: 'Sorted as {kind}'", "unknown field `'kind'`"),
    ("comment_template: 'Sorted as {'", "not a format string"),
    ("colour: blue", "unknown setting `'colour'` (known: abstain_label, allow, apply, areas, comment"),
    ("thresold: 0.7", "unknown setting `'thresold'` (did you mean `threshold`?)"),
])
def test_a_malformed_setting_that_restrains_nothing_is_named_and_its_default_applies(text, problem):
    config, problems = parse_config(text)
    assert len(problems) == 1 and problem in problems[0]
    assert config == RepoConfig(source=CONFIG_PATH)


@pytest.mark.parametrize("text,problem", [
    ("mode: loud", "mode must be one of label, comment, suggest, shadow, off, not `'loud'`"),
    ("mode: [label]", "mode must be one of"),
    ("apply: types", "apply must be one of label, type, both, not `'types'`"),  # the defaults would label
    ("labels: [bug, enhancement]", "labels must map kinds"),
    ("labels: {bug: 3}", "labels must map kinds"),
    ("labels: {bug: defect, regression: defect}", "labels: unknown kind `'regression'`"),
    ("allow: defect", "allow must be a list of names, not `'defect'`"),
    ("skip_authors: [1, 2]", "skip_authors must be a list of names"),
    ("alow: [defect]", "unknown setting `'alow'` (did you mean `allow`?)"),
    ("Labels: {bug: defect}", "(did you mean `labels`?)"),
    ("mode: [label", "is not valid YAML at line 1, column 13"),
    ("mode: label\n  threshold: 0.5\n bad indent: x", "is not valid YAML"),
    ("- label\n- comment", "must be a mapping of settings, not list"),
    ("just some text", "must be a mapping of settings, not str"),
    ("threshold: 2024-13-45", "has a value YAML cannot build: `month must be in 1..12`"),
    ("threshold: " + "1" * 5000, "has a value YAML cannot build"),
    ("threshold: " + "1:" * 20000 + "1.5", "has a value YAML cannot build"),
    ("labels: !!python/object:os.system {}", "could not determine a constructor"),
    ("labels: " + "[" * 30000, "nesting deeper than 8 levels"),  # no RecursionError
])
def test_a_broken_file_or_a_broken_restraint_holds_the_repository(text, problem):
    """Fail closed: with `allow` or `labels` unreadable the defaults could apply a label the maintainer
    forbade, so the config is held and the bot applies nothing until the file is fixed."""
    config, problems = parse_config(text)
    assert len(problems) == 1 and problem in problems[0]
    assert config.held == f"{CONFIG_PATH} is broken, so nothing is applied until it is fixed: {problems[0]}"
    assert config == RepoConfig(source=CONFIG_PATH, held=config.held)


def test_a_broken_setting_no_longer_throws_away_the_valid_ones():
    config, problems = parse_config("mode: suggest\nallow: [bug]\nthreshold: 7\nfavourite: x\n")
    assert config == RepoConfig(mode="suggest", allow=("bug",), source=CONFIG_PATH)
    assert len(problems) == 2 and "threshold" in problems[0] and "favourite" in problems[1]


def test_a_held_config_keeps_its_valid_settings_so_comment_mode_can_still_report():
    config, problems = parse_config("mode: comment\nallow: defect\nthreshold: 0.8\nskip_authors: 3\n")
    assert (config.mode, config.threshold, config.allow, config.skip_authors) == ("comment", 0.8, (), ())
    assert config.held.endswith(f"{problems[0]} (and 1 more)") and len(problems) == 2


def test_a_misspelt_restraint_beside_the_real_one_does_not_hold():
    config, problems = parse_config("allow: [defect]\nAllow: [idea]\n")
    assert config.allow == ("defect",) and config.held is None and "did you mean `allow`" in problems[0]


# ---- bounded: a file costs linear time, and problem messages stay short --------------------------------

BILLION_LAUGHS = "".join(  # ten levels of ten: 10**10 "lol"s, in the repr a problem message once made
    [f'a: &a [{", ".join(["lol"] * 10)}]\n']
    + [f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]\n" for prev, name in zip("abcdefghi", "bcdefghij")]
    + ["mode: *j\n"])


def test_yaml_aliases_are_refused_so_a_billion_laughs_file_stays_small():
    assert len(BILLION_LAUGHS) < 1000
    config, problems = parse_config(BILLION_LAUGHS)
    assert problems == [(f"{CONFIG_PATH} is not valid YAML at line 1, column 4: "
                         "`anchors and aliases (&name, *name) are not allowed`")]
    assert config.held and len(config.held) < 200


def test_an_anchor_alone_is_refused_too():
    assert "anchors and aliases" in parse_config("allow: &mine [defect]\n")[1][0]


def test_a_file_over_64_kib_is_a_problem_and_is_not_parsed():
    config, problems = parse_config("allow: [defect]\n" + "#" * (64 * 1024))
    assert problems == [f"{CONFIG_PATH} is larger than 64 KiB"] and config.held and config.allow == ()


@pytest.mark.parametrize("text", [
    "mode: " + "x" * 50_000, "allow: [" + "x, " * 10_000 + "{a: " + "b" * 9000 + "}]",
    "threshold: " + "1:" * 20_000 + "1",  # a base-60 int of 100,000 bits, whose repr Python refuses
    "? " + "k" * 30_000 + "\n: 1\n",
])
def test_a_value_in_a_problem_message_is_described_briefly(text):
    (problem,) = parse_config(text)[1]
    assert len(problem) < 200, problem


def test_problems_are_reported_in_code_spans_so_the_file_can_ping_nobody():
    config, problems = parse_config("mode: '@org/team'\nallow: '@org/devs'\n'@org/all': 1\n")
    report = problem_report(config.source, problems, held=bool(config.held))
    assert "@" not in text_outside_code(report)
    assert code_contents(report)[:2] == [CONFIG_PATH, "'@org/team'"]


def test_a_report_of_thousands_of_problems_lists_ten():
    config, problems = parse_config("".join(f"k{i}: 1\n" for i in range(3000)))
    report = problem_report(config.source, problems, held=bool(config.held))
    assert len(problems) == 3000 and report.count("\n- ") == 11 and report.endswith("- and 2990 more")


# ---- the comment template: parsed, fields whitelisted ---------------------------------------------------

@pytest.mark.parametrize("template", [
    "{:" + "1" * 3998,  # 4 KB: 94 s per parse under the old regex check, which was cubic
    "{score:" + "9" * 3990 + "}",
    "{score:>999999999}", "{score:>1000}", "{score:.1000}", "x" * 5000, "{label} " * 21,
    "{label[2]}", "{label.upper}", "{label.upper.nope}", "{score[0]}", "{0}", "{}", "{label!r}", "{score!s}",
    "{score:{label}}", "{score:d}", "{label:.2f}", "{label:=>10}x{suggestions:,}", "{score:>>>>>>>>>>>>5}",
])
def test_templates_that_could_fail_after_labelling_or_build_huge_comments_are_refused(template):
    config, problems = parse_config(yaml.safe_dump({"comment_template": template}))
    assert len(problems) == 1 and problems[0].startswith("comment_template: ")
    assert config.comment_template is None
    assert config.held is None  # a refused template only means the default comment


@pytest.mark.parametrize("template", [
    "Sorted as {label} ({score:.0%})", "{label:>12}|{score:6.1%}\n{suggestions}",
    "{{label}} is literal; {label} is not", "no fields at all", "{score:>999.3f}",
])
def test_templates_with_the_three_fields_and_short_formats_are_kept(template):
    assert parse_config(yaml.safe_dump({"comment_template": template})) == (
        RepoConfig(comment_template=template, source=CONFIG_PATH), [])


# ---- cached by blob SHA ------------------------------------------------------------------------------

def test_a_file_with_a_sha_already_parsed_is_not_parsed_again():
    sha = hashlib.sha1(os.urandom(20)).hexdigest()  # never seen by this process's cache
    first = parse_file(RepoFile(sha, 10, b"mode: off\n"), "o/r/x.yml")
    before = parse_file.cache_info()
    again = parse_file(RepoFile(sha, 14, b"mode: suggest\n"), "o/r/x.yml")  # same SHA: same bytes, on GitHub
    assert again is first and again[0].mode == "off"
    assert (parse_file.cache_info().hits, parse_file.cache_info().misses) == (before.hits + 1, before.misses)
    changed = parse_file(RepoFile(sha[::-1], 14, b"mode: suggest\n"), "o/r/x.yml")
    assert changed[0].mode == "suggest" and parse_file.cache_info().misses == before.misses + 1


@pytest.mark.parametrize("file,problem", [
    (RepoFile("1" * 40, 2 * 1024 * 1024, None), "is larger than 64 KiB"),  # GitHub sends no content over 1 MB
    (RepoFile("2" * 40, 70 * 1024, b"#" * 70 * 1024), "is larger than 64 KiB"),
    (RepoFile("3" * 40, 12, "mode: 'off'\n".encode("utf-16")), "is not UTF-8 text (byte 0)"),
])
def test_a_file_that_cannot_be_read_as_text_holds_the_repository(file, problem):
    config, problems = parse_file(file, "o/r/.github/issue-sorter.yml")
    assert len(problems) == 1 and problem in problems[0] and config.held


# ---- each setting on the fakes: what is labelled, commented, held or skipped ------------------------------

def test_the_allowlist_keeps_every_other_label_off(sessions, github):
    outcome, _, reason = label(sessions, github, 1, config="allow: [documentation]")  # never predicted
    assert outcome == "abstained" and "allowlist" in reason and github.writes() == []
    assert [p.outcome for p in predictions(sessions)] == ["abstained"]


def test_a_typo_in_threshold_keeps_the_allowlist_and_label_mode_comments_nothing(sessions, github):
    use_config(github, "allow: [wontfix]\nthreshold: 7\n")  # once, the typo threw the allowlist away
    outcome, _, reason = label(sessions, github, 1)
    assert outcome == "abstained" and "allowlist" in reason
    assert github.writes() == [] and github.comments(REPO, 1) == []


def test_a_malformed_config_in_comment_mode_is_reported_once_and_labelling_goes_on(sessions, github):
    use_config(github, "mode: comment\nthreshold: seven\nfavourite_colour: blue\n")
    claimed: set[str] = set()  # one Redis for both jobs: the report is claimed once
    assert [label(sessions, github, n, claimed=claimed)[:2] for n in (1, 2)] == [("applied", "bug"),
                                                                                 ("applied", "enhancement")]
    warning, labelled = github.comments(REPO, 1)
    assert f"ignores these settings of `{REPO}/{CONFIG_PATH}` and uses its defaults for them" in warning
    assert "- unknown setting `'favourite_colour'`" in warning and "- threshold must be a number" in warning
    assert "Issue Sorter labelled this issue" in labelled
    assert [c for c in github.comments(REPO, 2) if "ignores these settings" in c] == []
    assert github.issue_labels == {(REPO, 1): ["bug"], (REPO, 2): ["enhancement"]}


def test_a_broken_allowlist_holds_the_repository_says_why_once_and_the_file_is_parsed_once(sessions, github):
    github.labels[REPO].append("defect")
    use_config(github, "mode: comment\nallow: defect\n# on the fakes\n")  # a blob no other test parses
    before = parse_file.cache_info()
    claimed: set[str] = set()
    assert [label(sessions, github, n, claimed=claimed)[0] for n in (1, 2)] == ["held", "held"]
    assert github.issue_labels == {}
    (warning,) = github.comments(REPO, 1)
    assert f"applies nothing on this repository until `{REPO}/{CONFIG_PATH}` is fixed" in warning
    assert "- allow must be a list of names, not `'defect'`" in warning
    assert github.comments(REPO, 2) == []
    held = predictions(sessions)
    assert [p.outcome for p in held] == ["held", "held"] and not any(p.applied for p in held)
    assert all("is broken, so nothing is applied until it is fixed: allow must be" in p.reason for p in held)
    assert parse_file.cache_info().misses == before.misses + 1  # the second job found it parsed


def test_a_yaml_bomb_in_label_mode_holds_the_repository_quietly(sessions, github):
    use_config(github, BILLION_LAUGHS)
    assert label(sessions, github, 1)[0] == "held"
    assert github.writes() == [] and [p.outcome for p in predictions(sessions)] == ["held"]


def test_comment_mode_labels_and_explains_with_the_repositorys_template(sessions, github):
    template = 'comment_template: "Sorted as {label} ({score:.0%} sure)"'
    label(sessions, github, 1, config=f"mode: comment\n{template}")
    assert [call[0] for call in github.writes()] == ["add_labels", "create_comment"]
    # label names in code spans ping nobody; the hidden marker names the decision (posted once)
    assert github.comments(REPO, 1) == ["Sorted as `bug` (90% sure)\n" + decision_marker(1)]


def test_suggest_mode_comments_the_ranked_kinds_and_labels_nothing(sessions, github):
    assert label(sessions, github, 1, config="mode: suggest")[0] == "suggested"
    (suggestion,) = github.comments(REPO, 1)
    assert "suggestions" in suggestion and github.issue_labels == {}
    assert [line for line in suggestion.splitlines() if line.startswith("- ")] == [
        "- `bug`: 90%", "- `feature`: 5%", "- `question`: 5%"]
    assert [p.outcome for p in predictions(sessions)] == ["suggested"]


def test_shadow_mode_classifies_and_records_every_issue_and_writes_nothing(sessions, github):
    assert label(sessions, github, 1, config="mode: shadow")[:2] == ("shadow", "bug")
    assert label(sessions, github, 3, config="mode: shadow")[0] == "shadow"  # below the threshold too
    assert github.writes() == []
    assert [p.applied for p in predictions(sessions)] == [False, False]


@pytest.mark.parametrize("text", ["mode: off\n", "mode: 'off'\n"])
def test_off_mode_does_nothing_at_all(sessions, github, text):
    classifier = FakeClassifier(CLASSIFIER.rules)
    assert "mode: off" in label(sessions, github, 1, config=text, classifier=classifier)
    assert github.writes() == [] and predictions(sessions) == [] and classifier.seen == []


def test_the_labels_mapping_names_the_label_each_kind_gets_over_name_matching(sessions, github):
    mapping = {"bug": "defect", "feature": "idea", "question": "ask"}
    github.labels[REPO] += list(mapping.values())  # beside bug, enhancement and question
    config = "labels: {bug: defect, feature: idea, question: ask}\n"
    for number, kind in ((1, "bug"), (2, "feature")):
        assert label(sessions, github, number, config=config)[:2] == ("applied", mapping[kind])
    assert label(sessions, github, 4, config=config, title="How do I set a proxy?")[:2] == ("applied", "ask")
    assert github.issue_labels == {(REPO, 1): ["defect"], (REPO, 2): ["idea"], (REPO, 4): ["ask"]}


def test_a_repository_without_a_file_uses_its_organisations_dot_github_config(sessions, github):
    use_config(github, "mode: suggest\n", repo="octo/.github")
    assert label(sessions, github, 1)[0] == "suggested"
    assert [call[1] for call in github.calls if call[0] == "get_file"] == [REPO, "octo/.github"]
    assert github.issue_labels == {} and len(github.comments(REPO, 1)) == 1


def test_a_target_precision_uses_the_models_per_label_thresholds(sessions, github):
    strict = FakeClassifier(CLASSIFIER.rules, thresholds={"bug": 0.95})
    assert label(sessions, github, 1, classifier=strict, config="target_precision: 0.9")[0] == "abstained"
    assert label(sessions, github, 2, classifier=strict, config="target_precision: 0.9")[0] == "applied"


# ---- through the real worker: the file over HTTP (ETag, 304), the comments of comment mode -------------

def serve_config(fake_github, text: str, *, labels=()) -> None:
    """Put the config file into the HTTP fake's repository (recreated with its labels and no issues)."""
    fake_github.add_repo(HTTP_REPO, labels=fake_github.repo_labels(HTTP_REPO) + list(labels),
                         files={CONFIG_PATH: text})


def open_issue(fake_github, client, payload, number: int) -> None:
    title, body = HTTP_ISSUES[number]
    fake_github.add_issue(HTTP_REPO, number, title, body)
    deliver(client, "issues", issue_payload(payload, "opened", number, title=title, body=body), f"d-{number}")


def nothing_failed_or_retried(redis) -> bool:
    return (FailedJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).count,
            ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER).count) == (0, 0)


@pytest.mark.redis
@pytest.mark.slow
def test_through_the_worker_a_held_repositorys_file_is_revalidated_by_etag_and_parsed_once(
        worker_context, fake_github, client, payload, redis):
    serve_config(fake_github, "mode: comment\nallow: defect\n", labels=["defect"])
    before = parse_file.cache_info()
    open_issue(fake_github, client, payload, 1)
    open_issue(fake_github, client, payload, 2)
    run_worker(redis)
    reads = fake_github.calls("GET", rf"/repos/{HTTP_REPO}/contents/{CONFIG_PATH}")
    assert [read.status for read in reads] == [200, 304]  # the second job's conditional GET
    assert parse_file.cache_info().misses == before.misses + 1
    assert [fake_github.issue_labels(HTTP_REPO, n) for n in (1, 2)] == [[], []]
    (warning,) = fake_github.comments(HTTP_REPO, 1)
    assert "- allow must be a list of names, not `'defect'`" in warning
    assert fake_github.comments(HTTP_REPO, 2) == []
    assert nothing_failed_or_retried(redis)


@pytest.mark.redis
@pytest.mark.slow
def test_through_the_worker_comment_mode_labels_and_reports_a_malformed_config_once(
        worker_context, fake_github, client, payload, redis):
    """The report's once-a-day key is claimed in Redis by the job, and both comments reach GitHub."""
    serve_config(fake_github, "mode: comment\nthreshold: seven\nfavourite_colour: blue\n")
    open_issue(fake_github, client, payload, 1)
    open_issue(fake_github, client, payload, 2)
    run_worker(redis)
    warning, labelled = fake_github.comments(HTTP_REPO, 1)
    assert "ignores these settings" in warning and "- unknown setting `'favourite_colour'`" in warning
    assert "Issue Sorter labelled this issue" in labelled
    assert [c for c in fake_github.comments(HTTP_REPO, 2) if "ignores these settings" in c] == []
    assert all(len(fake_github.issue_labels(HTTP_REPO, n)) == 1 for n in (1, 2))
    assert nothing_failed_or_retried(redis)


@pytest.mark.parametrize("text,expected", [
    ("abstain_label: needs-triage\n", "needs-triage"),
    ("abstain_label: false\n", ""),  # turns the App's ISSUE_SORTER_ABSTAIN_LABEL off here
    ("mode: label\n", None),  # not set: the App's setting applies
])
def test_abstain_label_names_the_label_of_issues_the_bot_is_not_sure_of(text, expected):
    config, problems = parse_config(text)
    assert (config.abstain_label, problems, config.held) == (expected, [], None)


@pytest.mark.parametrize("value", ["42", "' padded '", "[a, b]", "x" * 51])
def test_a_broken_abstain_label_is_dropped_and_named_but_holds_nothing(value):
    config, problems = parse_config(f"abstain_label: {value}\nallow: [bug]\n")
    assert config.abstain_label is None and config.allow == ("bug",) and config.held is None
    assert len(problems) == 1 and problems[0].startswith("abstain_label must be a label name")


# ---- target_precision: on by default, off on request, and a threshold alone means a flat threshold -------

@pytest.mark.parametrize("text,target", [(None, 0.9), ("mode: label", 0.9), ("target_precision: 0.95", 0.95),
                                         ("target_precision: 1", 1.0), ("target_precision: off", None),
                                         ("target_precision: false", None), ("target_precision: 'off'", None),
                                         ("threshold: 0.7", None),
                                         ("threshold: 0.7\ntarget_precision: 0.8", 0.8)])
def test_target_precision_defaults_to_0_90_unless_turned_off_or_a_threshold_is_set_alone(text, target):
    config, problems = parse_config(text)
    assert problems == [] and config.target_precision == target


@pytest.mark.parametrize("value", ["0", "1.5", "high", "true", "[0.9]", "''"])
def test_a_bad_target_precision_is_named_in_one_line_and_the_default_applies(value):
    config, problems = parse_config(f"target_precision: {value}")
    assert len(problems) == 1 and "\n" not in problems[0]
    assert problems[0].startswith("target_precision must be a number between 0 and 1") and "or off" in problems[0]
    assert config.target_precision == 0.9 and config.held is None
