"""Shared fixtures. Integration tests use the real local Redis and PostgreSQL; under CI a missing
service fails the test instead of skipping it.

The pyramid: rules run on tests/fakes.py (no marker); a test that trains or loads a real encoder is
`slow` (marked here by the fixtures it uses, or by hand); real processes are `e2e`, Chromium `browser`.
`make check` runs everything but those three, `make test` all of it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import uuid
from pathlib import Path

# pytest-xdist runs one process per core: a torch (or OpenBLAS) in each that started a thread per core would
# fight the others for the cores. Set before anything imports torch.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
from redis import Redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry
from sqlalchemy import create_engine, text

from core.db import Base, make_engine, make_sessionmaker
from core.engines import Hardware
from core.settings import Settings
from tests.paths import WEBHOOKS

IN_CI = os.environ.get("CI", "").lower() == "true"
# pytest-xdist's workers (gw0, gw1, ...) each flush a database of their own: 15, 14, ...
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_REDIS_BASE, _REDIS_DB = os.environ.get("REDIS_TEST_URL", "redis://127.0.0.1:6379/15").rsplit("/", 1)
REDIS_TEST_URL = f"{_REDIS_BASE}/{int(_REDIS_DB) - _WORKER}"
# fixtures that fine-tune a real encoder: a test using any of them (directly or through another
# fixture) is `slow`
SLOW_FIXTURES = {"tiny_model_dir", "trained_minilm", "decisive_minilm", "trained_blend"}


def pytest_collection_modifyitems(items):
    for item in items:
        if SLOW_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)


POSTGRES_ADMIN_URL = os.environ.get("POSTGRES_TEST_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
WEBHOOK_SECRET = "It's a Secret to Everybody"


def service_missing(what: str, error: Exception):
    message = f"{what} is not reachable ({type(error).__name__}: {error})"
    if IN_CI:
        pytest.fail(message + "; CI must provide it")
    pytest.skip(message)


# A CPU with AVX-512 VNNI and no bf16 instructions (an AVX-512 Xeon before Cooper Lake): core.engines puts
# the ONNX engines first there and never tries bf16. Tests about the ONNX fast path, or that compare answers
# with fp32 PyTorch's, register and load on it (ONNX_FIRST, without a GPU), so that an AMX or Zen 4 machine
# (bf16 earlier) tests the same thing; the orders of every CPU are tested in tests/core/test_engines.py.
ONNX_FIRST_CPU = frozenset({"avx2", "fma", "avx512f", "avx512_vnni"})
ONNX_FIRST = Hardware(ONNX_FIRST_CPU)


@pytest.fixture(scope="session")
def redis_url() -> str:
    try:
        Redis.from_url(REDIS_TEST_URL, socket_connect_timeout=2).ping()
    except RedisError as error:
        service_missing(f"Redis at {REDIS_TEST_URL}", error)
    return REDIS_TEST_URL


def dead_redis() -> Redis:
    """A client of a Redis that is not there (nothing listens on port 1). It fails at once: with redis-py's
    default retries each command would back off for seconds before the same error."""
    return Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))


@pytest.fixture
def redis(redis_url):
    """An empty Redis database, flushed before and after (rq's RQTestCase habit)."""
    connection = Redis.from_url(redis_url)
    connection.flushdb()
    yield connection
    connection.flushdb()
    connection.close()


@pytest.fixture
def postgres_url():
    """A fresh PostgreSQL database for one test, dropped afterwards."""
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"issue_sorter_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as error:  # noqa: BLE001 - any driver error means "no server"
        service_missing(f"PostgreSQL at {POSTGRES_ADMIN_URL}", error)
    yield POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'issue-sorter.db'}"


@pytest.fixture(scope="session")
def empty_schema(tmp_path_factory) -> Path:
    """A SQLite file with every table and no row, made once: creating the tables takes a tenth of a second,
    and hundreds of tests start from an empty database (`with_tables`)."""
    import core.tables  # noqa: F401 - every table on Base.metadata, whichever test asks first

    path = tmp_path_factory.mktemp("schema") / "empty.db"
    engine = make_engine(f"sqlite:///{path}")
    Base.metadata.create_all(engine)
    engine.dispose()  # its last connection writes the WAL back into the file
    assert not path.with_name(path.name + "-wal").exists()
    return path


def with_tables(sqlite_url: str, empty_schema: Path) -> str:
    """`sqlite_url` with every table created (the tests' stand-in for `alembic upgrade head`): a copy of
    `empty_schema` where there is no database yet, else the tables it lacks added to it."""
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    if path.exists():
        engine = make_engine(sqlite_url)
        Base.metadata.create_all(engine)
        engine.dispose()
    else:
        shutil.copyfile(empty_schema, path)
    return sqlite_url


@pytest.fixture
def sessions(sqlite_url, empty_schema):
    """Sessions on the test's SQLite database, every table created."""
    return make_sessionmaker(with_tables(sqlite_url, empty_schema))


def marked_settings(request, base: Settings) -> Settings:
    """`base` with the fields that the test's (or its module's) `@pytest.mark.settings(...)` changes."""
    marker = request.node.get_closest_marker("settings")
    return dataclasses.replace(base, **marker.kwargs) if marker else base


@pytest.fixture
def settings(request, sqlite_url, tmp_path) -> Settings:
    """The App's settings for a test; naming the test Redis reaches nothing (the `redis` fixture does).
    max_event_age=0: the payloads are GitHub's published examples, dated 2019 (tests/bot/intake/test_replays.py
    tests the age limit). A test changes a field with `@pytest.mark.settings(field=value)`."""
    return marked_settings(request, Settings(
        webhook_secret=WEBHOOK_SECRET, database_url=sqlite_url, redis_url=REDIS_TEST_URL,
        model_dir=tmp_path / "models", github_write_interval=0.0, max_event_age=0))


@pytest.fixture
def payload():
    """A real webhook example from ../shared/github/webhooks, as a fresh dict each call."""
    cache: dict[str, dict] = {}

    def load(name: str) -> dict:
        if name not in cache:
            cache[name] = json.loads((WEBHOOKS / f"{name}.payload.json").read_text())
        return copy.deepcopy(cache[name])

    return load


# ---- a real fine-tuned encoder, trained in seconds -------------------------------------------------

@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """all-MiniLM-L6-v2 fine-tuned for a few steps on 48 real NLBSE issues (bug/feature/question).

    Real weights, real tokenizer, real model card: what `bootstrap-model` makes, only smaller."""
    from tests.tiny_model import train_tiny_model

    return train_tiny_model(tmp_path_factory.mktemp("tiny-model") / "model")
