"""As a maintainer installs it (and as the Docker image does): `pip install .`, not `-e`, into a fresh virtual
environment; then, from a directory that is no checkout, `issue-sorter migrate` builds a new SQLite database
and `issue-sorter web` answers 200 on /healthz. Whatever the code reads at run time must ship in the wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
import requests
from sqlalchemy import create_engine, inspect

from core.db import Base
from tests.conftest import WEBHOOK_SECRET
from tests.paths import REPO_ROOT
from tests.ports import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.redis]
# what a clone has but a build must not see: this checkout's own installs and builds
NOT_IN_A_CLONE = shutil.ignore_patterns(".git", ".venv", "var", "build", "dist", "*.egg-info", "__pycache__",
                                        ".pytest_cache", "scratch")


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    """Run it to the end; the caller reads the exit code (check=False)."""
    return subprocess.run([str(part) for part in command], check=False, capture_output=True, text=True,
                          timeout=300, **kwargs)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A new virtual environment with issue-sorter built from a copy of this checkout, without -e.

    Its dependencies are this interpreter's, through a .pth file: no network, no second torch. A .pth
    line adds a directory to sys.path but runs none of the .pth files in it, so the editable finder of
    this checkout's dev install stays inert there and cannot lend the new venv the source tree."""
    root = tmp_path_factory.mktemp("install")
    source = root / "clone"
    shutil.copytree(REPO_ROOT, source, ignore=NOT_IN_A_CLONE)
    # what `pip install .` does, in its two steps: build the wheel (setuptools from this environment, not
    # from an index), then install it into the new venv
    built = run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                 "--wheel-dir", root / "dist", source])
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (root / "dist").glob("issue_sorter-*.whl")
    venv = root / "venv"
    created = run([sys.executable, "-m", "venv", "--without-pip", venv])
    assert created.returncode == 0, created.stderr
    python = venv / "bin" / "python"
    installed = run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
                     wheel])
    assert installed.returncode == 0, installed.stdout + installed.stderr
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip()
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (Path(site) / "issue_sorter_test_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    return venv


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    directory = tmp_path / "elsewhere"  # no checkout, no alembic.ini, no migrations/ here
    directory.mkdir()
    return directory


def environment(elsewhere: Path, **extra: str) -> dict[str, str]:
    """Only what a user sets: nothing of this checkout (no PYTHONPATH) leaks into the installed commands."""
    return {"PATH": os.environ["PATH"], "HOME": str(elsewhere), "LANG": "C.UTF-8",
            "DATABASE_URL": f"sqlite:///{elsewhere / 'var' / 'issue-sorter.db'}",
            "MODEL_DIR": str(elsewhere / "models"), **extra}


def test_the_installed_package_is_the_one_that_runs(venv, elsewhere):
    # the test's own premise: the code under test comes from the wheel in the new venv, not this checkout
    shown = run([venv / "bin" / "python", "-c", "import core, issue_sorter; print(core.__file__)"],
                cwd=elsewhere, env=environment(elsewhere))
    assert shown.returncode == 0, shown.stderr
    assert Path(shown.stdout.strip()).is_relative_to(venv)


def test_migrate_then_web_answers_healthz_from_any_directory(venv, elsewhere, redis, redis_url):
    env = environment(elsewhere, REDIS_URL=redis_url, GITHUB_WEBHOOK_SECRET=WEBHOOK_SECRET,
                      PORT=str(free_port()))
    migrated = run([venv / "bin" / "issue-sorter", "migrate"], cwd=elsewhere, env=env)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    engine = create_engine(env["DATABASE_URL"])
    assert set(inspect(engine).get_table_names()) >= set(Base.metadata.tables)
    engine.dispose()

    log = (elsewhere / "web.log").open("w")
    web = subprocess.Popen([venv / "bin" / "issue-sorter", "web", "--host", "127.0.0.1"],
                           cwd=elsewhere, env=env, stdout=log, stderr=subprocess.STDOUT)
    healthz = f"http://127.0.0.1:{env['PORT']}/healthz"
    try:
        response = wait_for(lambda: _get(healthz), 60)
        assert response is not None, (elsewhere / "web.log").read_text()
        assert response.status_code == 200
        assert response.json()["database"] == response.json()["redis"] == "ok"
        # the image's HEALTHCHECK says the same
        healthcheck = [venv / "bin" / "python", "-m", "issue_sorter.healthcheck", "web"]
        assert run(healthcheck, cwd=elsewhere, env=env).returncode == 0
    finally:
        web.terminate()
        web.wait(timeout=30)
        log.close()
    assert run(healthcheck, cwd=elsewhere, env=env).returncode == 1  # and tells when it is gone


def test_bootstrap_without_a_checkout_says_where_to_get_data(venv, elsewhere):
    env = environment(elsewhere)
    assert run([venv / "bin" / "issue-sorter", "migrate"], cwd=elsewhere, env=env).returncode == 0
    bootstrap = run([venv / "bin" / "issue-sorter", "bootstrap-model"], cwd=elsewhere, env=env)
    assert bootstrap.returncode == 1
    assert "ISSUE_SORTER_BOOTSTRAP_DATA" in bootstrap.stderr and "--data" in bootstrap.stderr
    assert "Traceback" not in bootstrap.stderr


def _get(url: str) -> requests.Response | None:
    try:
        return requests.get(url, timeout=2)
    except requests.RequestException:
        return None


def wait_for(attempt, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = attempt()
        if result is not None:
            return result
        time.sleep(0.2)
    return None
