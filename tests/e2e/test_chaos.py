"""bench.chaos at CI size: `issue-sorter run` on PostgreSQL and its embedded Redis labels 150 real issues
sent at 5 a second while its labelling worker is SIGKILLed mid-job, its Redis SIGKILLed (and restarted by
the supervisor from the append-only file) and every PostgreSQL backend of its database terminated, each
once. Nothing may be lost or done twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.postgres]
ROOT = Path(__file__).resolve().parents[2]


def test_nothing_is_lost_or_done_twice_under_each_fault(postgres_url, tiny_model_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MODEL_DIR")}
    env["DATABASE_URL"] = postgres_url
    report_path = tmp_path / "report.json"
    command = [sys.executable, "-m", "bench.chaos", "--n", "150", "--rate", "5", "--kills", "1",
               "--redis-restarts", "1", "--db-restarts", "1", "--model", str(tiny_model_dir), "--settle", "120",
               "--workdir", str(tmp_path / "service"), "--json", str(report_path)]
    finished = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert report_path.exists(), finished.stdout[-3000:] + finished.stderr[-3000:]
    report = json.loads(report_path.read_text())
    log = (tmp_path / "service" / "run.log").read_text()

    assert (report["lost"], report["duplicated"], report["repeated_label_calls"]) == (0, 0, 0), report
    assert (report["predictions_missing"], report["predictions_duplicated"], report["failed_jobs"]) == (0, 0, {})
    assert sorted(f["fault"] for f in report["faults"]) == ["kill_worker", "restart_postgres", "restart_redis"]
    assert all("not running" not in f["what"] for f in report["faults"]), report["faults"]
    assert all(f["recovered_after_s"] < 300 for f in report["faults"]), report["faults"]
    assert "worker (pid" in log and "redis (pid" in log and "restarted (pid" in log  # said in the log
    assert report["shutdown_exit_code"] == 0 and report["tracebacks_at_shutdown"] == 0, log[-3000:]
    assert finished.returncode == 0
