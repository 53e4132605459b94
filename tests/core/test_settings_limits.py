"""Nothing silently off in the environment: a value out of its range stops start-up with its variable named,
and an ISSUE_SORTER_* variable nothing reads (a typo that would leave the default on) is named at start."""

from __future__ import annotations

import pytest

from core.settings import ConfigError, Settings, known_variables, unknown_variables
from issue_sorter.cli import main


@pytest.mark.parametrize("variable,value,problem", [
    ("PORT", "0", "must be a port from 1 to 65535"),
    ("PORT", "70000", "must be a port from 1 to 65535"),
    ("ISSUE_SORTER_RETRAIN_INTERVAL", "-60", "must be a positive number of seconds"),
    ("ISSUE_SORTER_RETRAIN_INTERVAL", "0", "must be a positive number of seconds"),
    ("ISSUE_SORTER_REDELIVERY_INTERVAL", "-1", "must be a positive number of seconds"),
    ("ISSUE_SORTER_RETRAIN_MIN_NEW", "0", "must be at least 1"),
    ("ISSUE_SORTER_REPO_MIN_PER_LABEL", "-5", "must be at least 1"),
    ("ISSUE_SORTER_RETRAIN_EPOCHS", "0", "must be at least 1"),
    ("ISSUE_SORTER_RETRAIN_MAX_LENGTH", "0", "must be at least 1"),
    ("ISSUE_SORTER_LABELS_CACHE_SECONDS", "-1", "must not be negative"),
    ("GITHUB_WRITE_INTERVAL", "-0.5", "must not be negative"),
    ("ISSUE_SORTER_ABSTAIN_LABEL", "x" * 51, "must be a label name of 1 to 50 characters without surrounding spaces"),
])
def test_a_value_out_of_range_is_refused_with_its_variable(variable, value, problem):
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s", variable: value})
    assert raised.value.problems == [f"{variable} {problem}, got {value!r}"]


def test_every_number_the_environment_sets_has_a_range():
    import dataclasses

    unchecked = [field.metadata["env"] for field in dataclasses.fields(Settings)
                 if "env" in field.metadata and field.type.removesuffix(" | None") in ("int", "float")
                 and field.metadata["check"] is None]
    assert unchecked == []


def test_a_misspelt_variable_is_named_with_the_one_it_most_likely_means():
    found = unknown_variables({"ISSUE_SORTER_TRESHOLD": "0.7", "ISSUE_SORTER_THRESHOLD": "0.6",
                               "ISSUE_SORTER_WHATEVER_ELSE": "1", "PATH": "/bin"})
    assert found == {
        "ISSUE_SORTER_TRESHOLD": "ISSUE_SORTER_TRESHOLD is not read by Issue Sorter (did you mean "
                                 "ISSUE_SORTER_THRESHOLD?)",
        "ISSUE_SORTER_WHATEVER_ELSE": "ISSUE_SORTER_WHATEVER_ELSE is not read by Issue Sorter"}


def test_the_variables_read_outside_the_settings_are_known():
    assert {"ISSUE_SORTER_SHARED", "ISSUE_SORTER_BOOTSTRAP_DATA", "ISSUE_SORTER_SESSION_SECRET_PATH",
            "ISSUE_SORTER_METRICS_TOKEN_PATH", "ISSUE_SORTER_ADMINS", "ISSUE_SORTER_ENGINE"} <= known_variables()


def test_a_command_names_unknown_variables_on_stderr_and_still_runs(settings, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ISSUE_SORTER_MEMROY", "false")
    (tmp_path / "config.yml").write_text("mode: label\n")
    assert main(["check-config", str(tmp_path / "config.yml")], load=lambda **_: settings) == 0
    assert ("issue-sorter: warning: ISSUE_SORTER_MEMROY is not read by Issue Sorter (did you mean "
            "ISSUE_SORTER_MEMORY?)") in capsys.readouterr().err
