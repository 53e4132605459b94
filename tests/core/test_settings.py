from pathlib import Path

import pytest

from core.settings import ConfigError, Settings

PEM = "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n"


def test_defaults_are_the_embedded_ones():
    settings = Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s"})
    assert settings.database_url.startswith("sqlite:///") and settings.redis_url is None
    assert settings.port == 8000 and settings.api_url == "https://api.github.com"
    assert settings.dry_run


def test_app_credentials_turn_dry_run_off_and_key_can_come_from_a_file(tmp_path):
    key = tmp_path / "key.pem"
    key.write_text(PEM)
    settings = Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s", "GITHUB_APP_ID": "12",
                                  "GITHUB_PRIVATE_KEY_PATH": str(key),
                                  "GITHUB_API_URL": "https://ghe.example.com/api/v3/"})
    assert not settings.dry_run and settings.app_id == 12 and settings.private_key == PEM
    assert settings.api_url == "https://ghe.example.com/api/v3"


def test_every_problem_is_named_in_one_error():
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"GITHUB_APP_ID": "my-app", "GITHUB_PRIVATE_KEY": "not a key", "PORT": "http",
                           "REDIS_URL": "localhost:6379", "DATABASE_URL": "nowhere"})
    text = str(raised.value)
    for name in ["GITHUB_WEBHOOK_SECRET", "GITHUB_APP_ID", "GITHUB_PRIVATE_KEY", "PORT", "REDIS_URL", "DATABASE_URL"]:
        assert name in text
    assert len(raised.value.problems) == 6


def test_app_id_without_a_key_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="must be set together"):
        Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s", "GITHUB_APP_ID": "3"})
    with pytest.raises(ConfigError, match="cannot be read"):
        Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s", "GITHUB_APP_ID": "3",
                           "GITHUB_PRIVATE_KEY_PATH": str(tmp_path / "missing.pem")})


def test_secrets_never_appear_in_repr():
    settings = Settings.from_env({"GITHUB_WEBHOOK_SECRET": "hush", "GITHUB_APP_ID": "1", "GITHUB_PRIVATE_KEY": PEM})
    assert "hush" not in repr(settings) and "BEGIN" not in repr(settings)


def test_operator_commands_need_no_webhook_secret():
    assert Settings.from_env({}, require_webhook_secret=False).model_dir == Path("var/models")


def test_the_webhook_secret_can_come_from_a_mounted_file(tmp_path):
    secret = tmp_path / "github-webhook-secret"
    secret.write_text("hush\n")  # as `echo hush > file` writes it
    assert Settings.from_env({"GITHUB_WEBHOOK_SECRET_PATH": str(secret)}).webhook_secret == "hush"
    assert Settings.from_env({"GITHUB_WEBHOOK_SECRET": "env", "GITHUB_WEBHOOK_SECRET_PATH": str(secret)}
                             ).webhook_secret == "env"
    secret.write_text("\n")
    with pytest.raises(ConfigError, match="names an empty file"):
        Settings.from_env({"GITHUB_WEBHOOK_SECRET_PATH": str(secret)})
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"GITHUB_WEBHOOK_SECRET_PATH": str(tmp_path / "missing")})
    missing = tmp_path / "missing"
    assert raised.value.problems == [
        f"GITHUB_WEBHOOK_SECRET_PATH cannot be read: No such file or directory ({missing})"]


def test_the_review_page_needs_the_oauth_client_and_a_session_key():
    assert not Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s"}).review_enabled
    environ = {"GITHUB_WEBHOOK_SECRET": "s", "GITHUB_CLIENT_ID": "Iv1.abc", "GITHUB_CLIENT_SECRET": "shh",
               "ISSUE_SORTER_SESSION_SECRET": "k" * 32, "GITHUB_WEB_URL": "https://ghe.example.com/"}
    settings = Settings.from_env(environ)
    assert settings.review_enabled and settings.web_url == "https://ghe.example.com"
    assert "shh" not in repr(settings) and "k" * 32 not in repr(settings)
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({**environ, "GITHUB_CLIENT_SECRET": "", "ISSUE_SORTER_SESSION_SECRET": "short",
                           "GITHUB_WEB_URL": "github.com"})
    assert len(raised.value.problems) == 3  # the pair, the key's length, the URL
    with pytest.raises(ConfigError, match="ISSUE_SORTER_SESSION_SECRET is not set"):
        Settings.from_env({**environ, "ISSUE_SORTER_SESSION_SECRET": ""})


def test_data_sharing_is_off_by_default_and_read_from_the_environment():
    default = Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s"})
    assert (default.share_public_data, default.global_installations, default.unconfirmed_retention_days) == \
        (False, frozenset(), None)
    chosen = Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s", "ISSUE_SORTER_SHARE_PUBLIC_DATA": "true",
                                "ISSUE_SORTER_GLOBAL_INSTALLATIONS": "12, 34",
                                "ISSUE_SORTER_UNCONFIRMED_RETENTION_DAYS": "90"})
    assert (chosen.share_public_data, chosen.global_installations, chosen.unconfirmed_retention_days) == \
        (True, frozenset({12, 34}), 90)
    with pytest.raises(ConfigError, match="GLOBAL_INSTALLATIONS.*'acme'") as raised:
        Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s", "ISSUE_SORTER_GLOBAL_INSTALLATIONS": "12,acme",
                           "ISSUE_SORTER_UNCONFIRMED_RETENTION_DAYS": "0"})
    assert "RETENTION_DAYS must be a positive" in str(raised.value)


def test_every_setting_read_from_the_environment_is_in_the_configuration_table():
    """The dataclass declares each variable once; docs/CONFIG.md's table must name them all, those read by hand
    too, and every secret with its _PATH form."""
    import dataclasses
    import re

    from core.settings import known_variables
    from tests.paths import REPO_ROOT

    rows = re.findall(r"^\| (`[A-Z0-9_]+`(?: / `[A-Z0-9_]+`)*) \|", (REPO_ROOT / "docs" / "CONFIG.md").read_text(),
                      re.MULTILINE)
    table = {name for row in rows for name in re.findall(r"`([A-Z0-9_]+)`", row)}
    declared = {field.metadata["env"] for field in dataclasses.fields(Settings) if "env" in field.metadata}
    by_hand = {"GITHUB_APP_ID", "GITHUB_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET", "GITHUB_API_URL", "GITHUB_WEB_URL",
               "GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET", "DATABASE_URL", "REDIS_URL", "REDIS_PASSWORD_PATH"}
    secrets = {"GITHUB_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET", "GITHUB_CLIENT_SECRET", "ISSUE_SORTER_SESSION_SECRET",
               "ISSUE_SORTER_METRICS_TOKEN"}
    internal = {"ISSUE_SORTER_SECRET_SOURCE"}  # `run` tells its children where it put the generated secret
    assert (declared | by_hand | (known_variables() - internal) | {f"{name}_PATH" for name in secrets}) - table == set()


@pytest.mark.parametrize("variable,value,problem", [
    ("ISSUE_SORTER_MEMORY", "maybe", "ISSUE_SORTER_MEMORY must be true or false, got 'maybe'"),
    ("PORT", "eighty", "PORT must be an integer, got 'eighty'"),
    ("ISSUE_SORTER_THRESHOLD", "1.5", "ISSUE_SORTER_THRESHOLD must be between 0 and 1, got '1.5'"),
])
def test_a_bad_value_is_named_with_its_variable(variable, value, problem):
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s", variable: value})
    assert raised.value.problems == [problem]


def test_flags_read_true_and_false_words_and_keep_their_default_when_unset():
    assert Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s"}).memory is True
    chosen = Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s", "ISSUE_SORTER_MEMORY": "off",
                                "ISSUE_SORTER_CREATE_LABELS": "yes"})
    assert (chosen.memory, chosen.create_labels) == (False, True)
