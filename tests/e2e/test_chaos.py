"""bench.chaos at CI size: `issue-sorter run` on PostgreSQL and its embedded Redis, with
the web server, 3 labelling workers and the feedback worker, labels 150 real issues of 5
installations (one repository each in comment mode) sent at 4 a second, GitHub's write spacing at 1 s, while
a labelling worker is SIGKILLed mid-job, Redis SIGKILLed (and restarted by the supervisor from the
append-only file), every PostgreSQL backend of its database terminated, and every process restarted one at a
time with a new model version promoted halfway. Nothing may be lost or done twice, and no installation may
see two writes less than a second apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.paths import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.postgres]


def test_a_fleet_loses_nothing_and_does_nothing_twice_under_each_fault(postgres_url, tiny_model_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MODEL_DIR")}
    env["DATABASE_URL"] = postgres_url
    report_path = tmp_path / "report.json"
    command = [sys.executable, "-m", "bench.chaos", "--n", "150", "--rate", "4", "--installations", "5",
               "--labelling-workers", "3", "--rolling-restart", "--kills", "1", "--redis-restarts", "1",
               "--db-restarts", "1", "--model", str(tiny_model_dir), "--settle", "120",
               "--workdir", str(tmp_path / "service"), "--json", str(report_path)]
    finished = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert report_path.exists(), finished.stdout[-3000:] + finished.stderr[-3000:]
    report = json.loads(report_path.read_text())
    log = (tmp_path / "service" / "run.log").read_text()

    assert (report["lost"], report["duplicated"], report["repeated_label_calls"]) == (0, 0, 0), report
    assert (report["predictions_missing"], report["predictions_duplicated"], report["failed_jobs"]) == (0, 0, {})
    assert report["comments_posted"] > 0 and (report["comments_posted_twice"], report["comments_missing"]) == (0, 0)
    assert report["installations_written"] == 5 and report["write_gaps_under_interval"] == 0, report
    assert report["smallest_write_gap_s"] >= 1.0
    faults = {f["fault"]: f for f in report["faults"]}
    assert sorted(faults) == ["kill_worker", "restart_postgres", "restart_redis", "rolling_restart"]
    assert all("not running" not in f["what"] for f in report["faults"]), report["faults"]
    assert all(f["recovered_after_s"] < 300 for f in report["faults"] if "recovered_after_s" in f)
    restarted = faults["rolling_restart"]["what"]
    assert restarted.count("web server") == 1 and restarted.count("labelling worker") == 3, restarted
    assert "feedback worker" in restarted and "promoted" in restarted
    assert len(report["predictions_by_model_version"]) == 2  # the old version labelled, then the new one
    assert "worker-3 (pid" in log and "redis (pid" in log and "restarted (pid" in log  # said in the log
    assert report["shutdown_exit_code"] == 0 and report["tracebacks_at_shutdown"] == 0, log[-3000:]
    assert finished.returncode == 0
