"""The image and compose as a maintainer runs them (read from the files: no Docker daemon here), and the
platforms the lock installs on: nothing secret in the build context, the dependencies in a layer of their own
without the test tools, a health check for whatever role a container runs, setup's output turned into compose's
secrets in one command, tuning through an env file, `make clean` that keeps var/, and `make install` that
refuses a platform the lock does not reach before it creates anything."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys

import pytest
import yaml

from issue_sorter.compose_secrets import ComposeSecretsError, chown_command, write_compose_secrets
from issue_sorter.healthcheck import container_role, main, role_of_command
from tests.paths import REPO_ROOT

COMPOSE = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
FINAL_STAGE = DOCKERFILE.rsplit("\nFROM ", 1)[1]
DEV_ONLY = {"pytest", "pytest-xdist", "selenium", "trio", "execnet", "pluggy", "iniconfig"}
PEM = "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n"


def ignored(path: str) -> bool:
    """Whether .dockerignore keeps `path` out of the build context (its patterns in order, the last match wins)."""
    from fnmatch import fnmatch

    verdict = False
    for line in (REPO_ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated, pattern = line.startswith("!"), line.lstrip("!").rstrip("/")
        pattern = pattern.removeprefix("**/")
        if any(fnmatch(part, pattern) for part in _prefixes(path)) or fnmatch(os.path.basename(path), pattern):
            verdict = not negated
    return verdict


def _prefixes(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]


@pytest.mark.parametrize("path", ["var/github-app.private-key.pem", "var/issue-sorter.db", "secrets/session-secret",
                                  ".env", "my-app.2026-01-01.private-key.pem", ".venv/bin/python", ".git/config",
                                  "issue-sorter.env", "tests/conftest.py", "core/__pycache__/store.cpython-311.pyc"])
def test_nothing_private_or_unneeded_goes_to_the_build_daemon(path):
    assert ignored(path), path


def test_every_source_the_dockerfile_copies_is_in_the_build_context():
    copied = [source for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE, re.MULTILINE)
              for source in sources.split()]
    assert copied and all(not ignored(f"{source}/x.py" if "." not in source else source) for source in copied), copied


def test_the_image_installs_the_lock_before_the_project_and_no_test_tool():
    lock_layer, project_layer = FINAL_STAGE.index("-r /tmp/requirements.lock"), FINAL_STAGE.index("/wheels/*.whl")
    assert lock_layer < project_layer
    runtime = set(re.findall(r"^([A-Za-z0-9._-]+)==", (REPO_ROOT / "requirements.lock").read_text(), re.MULTILINE))
    dev = set(re.findall(r"^([A-Za-z0-9._-]+)==", (REPO_ROOT / "requirements-dev.lock").read_text(), re.MULTILINE))
    assert DEV_ONLY <= dev and not (DEV_ONLY & runtime) and not (runtime & dev)


@pytest.mark.parametrize("argv,role", [
    (["/usr/local/bin/python", "/usr/local/bin/issue-sorter", "web"], "web"),
    (["python", "/usr/local/bin/issue-sorter", "worker", "--queues", "feedback"], "worker"),
    (["/usr/local/bin/issue-sorter", "training-worker"], "worker"),
    (["python", "-m", "issue_sorter.cli", "cron"], "cron"),
    (["/usr/local/bin/python", "/usr/local/bin/issue-sorter", "migrate"], None),
    (["/usr/local/bin/issue-sorter", "bootstrap-model", "--data", "/data/x.csv"], None),
    (["sleep", "60"], None),
])
def test_the_images_health_check_checks_the_role_of_the_containers_command(argv, role):
    assert role_of_command(argv) == role


def test_a_one_shot_container_is_healthy_and_an_unknown_role_is_refused(tmp_path, monkeypatch):
    command = tmp_path / "cmdline"
    command.write_bytes(b"/usr/local/bin/python\0/usr/local/bin/issue-sorter\0migrate\0")
    assert container_role(command) is None and container_role(tmp_path / "absent") is None
    monkeypatch.setattr("issue_sorter.healthcheck.CONTAINER_COMMAND", command)
    assert main([]) == 0 and main(["scheduler"]) == 2


@pytest.mark.parametrize("name", sorted(name for name, service in COMPOSE["services"].items()
                                        if service.get("image") == "issue-sorter"))
def test_every_app_service_reads_the_tuning_file_when_it_is_there(name):
    assert COMPOSE["services"][name]["env_file"] == [{"path": "./issue-sorter.env", "required": False}]
    assert COMPOSE["services"][name]["platform"] == "linux/amd64"


def setup_output(tmp_path, **more) -> tuple:
    key = tmp_path / "var" / "github-app.private-key.pem"
    key.parent.mkdir()
    key.write_text(PEM)
    env = tmp_path / ".env"
    values = {"GITHUB_APP_ID": "4242", "GITHUB_WEBHOOK_SECRET": "hook-secret", "GITHUB_PRIVATE_KEY_PATH": str(key),
              "GITHUB_APP_SLUG": "sorter", **more}
    env.write_text("".join(f"{name}='{value}'\n" for name, value in values.items()))
    return env, tmp_path / "secrets"


def test_compose_secrets_writes_every_file_compose_mounts_from_setups_output(tmp_path):
    env, directory = setup_output(tmp_path, GITHUB_CLIENT_SECRET="client-secret",
                                  ISSUE_SORTER_SESSION_SECRET="s" * 48)
    written = write_compose_secrets(env, directory)
    mounted = {spec["file"] for spec in COMPOSE["secrets"].values()}
    defaults = {re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", file).removeprefix("./secrets/") for file in mounted}
    assert defaults == {path.name for path in written}  # every secret compose mounts, and nothing else
    assert (directory / "github-app-key.pem").read_text() == PEM
    assert (directory / "github-webhook-secret").read_text() == "hook-secret"
    assert (directory / "github-client-secret").read_text() == "client-secret"
    assert (directory / "session-secret").read_text() == "s" * 48
    assert (directory / "metrics-token").read_text() == ""  # /metrics off until a token is put there
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in written)
    assert env.read_text().startswith("GITHUB_APP_ID='4242'")  # setup's .env is compose's, untouched


def test_without_the_review_page_its_files_are_empty_or_generated_and_reruns_keep_redis_passwords(tmp_path):
    env, directory = setup_output(tmp_path)
    write_compose_secrets(env, directory)
    first = (directory / "redis-web-password").read_text()
    assert (directory / "github-client-secret").read_text() == "" and len((directory / "session-secret")
                                                                          .read_text()) == 64
    write_compose_secrets(env, directory)
    assert (directory / "redis-web-password").read_text() == first
    assert chown_command(directory) == (f"sudo chown 10001 {directory}/* && sudo chown 999 "
                                        f"{directory}/redis-users.acl && chmod 400 {directory}/*")


def test_compose_secrets_needs_setups_output(tmp_path):
    with pytest.raises(ComposeSecretsError, match="run `issue-sorter setup` first"):
        write_compose_secrets(tmp_path / ".env", tmp_path / "secrets")


def make(*args: str, cwd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-f", str(REPO_ROOT / "Makefile"), *args], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120)


@pytest.mark.e2e  # make and its shell in processes of their own
@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_clean_keeps_var(tmp_path):
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "github-app.private-key.pem").write_text(PEM)
    (tmp_path / "venv").mkdir()
    assert make("clean", f"VENV={tmp_path / 'venv'}", cwd=tmp_path).returncode == 0
    assert (tmp_path / "var" / "github-app.private-key.pem").read_text() == PEM and not (tmp_path / "venv").exists()


@pytest.mark.e2e  # make and a Python in processes of their own
@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_install_refuses_a_platform_the_lock_does_not_reach_before_creating_anything(tmp_path):
    pretend = tmp_path / "arm64"
    pretend.mkdir()
    (pretend / "sitecustomize.py").write_text("import platform\nplatform.machine = lambda: 'arm64'\n")
    venv = tmp_path / "venv"
    result = make("install", f"VENV={venv}", f"PYTHON={sys.executable}", cwd=REPO_ROOT,
                  env={"PYTHONPATH": str(pretend)})
    assert result.returncode != 0 and not venv.exists()
    assert "the locked wheels are for CPython 3.11 on Linux x86_64 with glibc 2.34+" in result.stderr
    assert "Linux arm64" in result.stderr and "use Docker" in result.stderr
