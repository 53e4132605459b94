"""The `issue-sorter` command: clear errors before anything starts."""

import pytest
from sqlalchemy import create_engine, inspect

from issue_sorter.cli import main


@pytest.fixture
def env(monkeypatch, tmp_path):
    for name in ("GITHUB_WEBHOOK_SECRET", "GITHUB_APP_ID", "GITHUB_PRIVATE_KEY", "GITHUB_PRIVATE_KEY_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("MODEL_DIR", str(tmp_path / "models"))
    return monkeypatch


def test_migrate_creates_the_schema(env, tmp_path):
    assert main(["migrate"]) == 0
    assert "predictions" in inspect(create_engine(f"sqlite:///{tmp_path / 'cli.db'}")).get_table_names()


def test_web_without_a_webhook_secret_names_every_problem(env):
    env.setenv("PORT", "eighty")
    with pytest.raises(SystemExit) as raised:
        main(["web"])
    assert "GITHUB_WEBHOOK_SECRET" in str(raised.value) and "PORT" in str(raised.value)


@pytest.mark.redis
def test_worker_without_a_promoted_model_says_which_command_to_run(env, redis_url):
    env.setenv("REDIS_URL", redis_url)
    main(["migrate"])
    with pytest.raises(SystemExit, match="issue-sorter bootstrap-model"):
        main(["worker", "--burst"])


@pytest.mark.redis
def test_worker_refuses_a_queue_that_is_not_the_bots(env, redis_url):
    env.setenv("REDIS_URL", redis_url)
    with pytest.raises(SystemExit, match="no such queue: labelling .*labeling, feedback"):
        main(["worker", "--queues", "labelling", "--burst"])


@pytest.mark.redis
def test_a_worker_of_two_queues_warns_that_it_can_lose_a_job(env, redis_url, capsys):
    env.setenv("REDIS_URL", redis_url)
    main(["migrate"])
    with pytest.raises(SystemExit):  # no model: it stops after the warning
        main(["worker", "--queues", "labeling,feedback", "--burst"])
    assert "a job can be lost" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["retrain"], ["stats"], ["backfill", "octo/widgets"], ["models"]])
def test_commands_on_an_unmigrated_database_name_the_fix(env, tmp_path, capsys, command):
    assert main(command) == 1
    assert "run `issue-sorter migrate` first" in capsys.readouterr().err
    assert not (tmp_path / "cli.db").exists()  # and no empty database file appears


def test_models_on_an_empty_registry_lists_nothing(env, capsys):
    main(["migrate"])
    capsys.readouterr()
    assert main(["models"]) == 0
    assert capsys.readouterr().out == "no models registered: run `issue-sorter bootstrap-model`\n"
