"""deploy/'s files as a centre installs them: the systemd units pass systemd's own check (with
the checkout standing for /opt/hpcgrade), and each comes back whatever it died of, however often;
the worker is a notify service with a watchdog its heartbeat feeds (worker/grading/heartbeat.py).
The Prometheus scrape configuration and alert rules pass promtool's check, the rules its unit
tests (tests/prometheus/alerts_test.yml), and what /metrics writes its lint."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))
PROMETHEUS = ROOT / "deploy" / "prometheus"
PROMTOOL = os.environ.get("HPCGRADE_TEST_PROMTOOL") or shutil.which("promtool")
needs_promtool = pytest.mark.skipif(not PROMTOOL, reason="no promtool: scripts/prometheus")


def directives(unit: Path) -> dict[str, str]:
    lines = [line.strip() for line in unit.read_text().splitlines()]
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="no systemd-analyze here")
def test_the_units_pass_systemds_check(tmp_path):
    for unit in UNITS:
        (tmp_path / unit.name).write_text(unit.read_text().replace("/opt/hpcgrade", str(ROOT)))
    checked = subprocess.run(
        ["systemd-analyze", "verify", *sorted(map(str, tmp_path.iterdir()))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, "")


@pytest.mark.parametrize("unit", UNITS, ids=[unit.stem for unit in UNITS])
def test_each_unit_comes_back_whatever_it_died_of(unit):
    found = directives(unit)
    assert (found["Restart"], found["StartLimitIntervalSec"]) == ("always", "0")
    assert int(found["RestartSec"]) >= 1


def test_the_worker_is_restarted_when_its_heartbeat_stops():
    found = directives(ROOT / "deploy" / "systemd" / "hpcgrade-worker.service")
    assert (found["Type"], found["NotifyAccess"]) == ("notify", "main")
    # three heartbeats of the default 10 s must fit in the watchdog's time
    assert int(found["WatchdogSec"]) > 30


def test_the_workers_name_is_one_celery_reads():
    """systemd makes %% one %, and fills its own specifiers (%H: the host): the unit once gave
    Celery `dispatcher@%H`, which it refuses at every start (Unknown format %H)."""
    from celery.utils.nodenames import host_format

    command = directives(ROOT / "deploy" / "systemd" / "hpcgrade-worker.service")["ExecStart"]
    written = re.search(r"--hostname (\S+)", command).group(1)
    passed = re.sub(r"%(.)", lambda m: "%" if m[1] == "%" else "grader", written)
    assert "%" not in host_format(passed)


def promtool(*args: str, cwd: Path = ROOT, stdin: str | None = None) -> str:
    done = subprocess.run(
        [PROMTOOL, *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.prometheus
@needs_promtool
def test_the_scrape_configuration_and_its_rules_pass_promtools_check(tmp_path):
    for name in ("prometheus.yml", "hpcgrade-alerts.yml"):
        shutil.copy(PROMETHEUS / name, tmp_path / name)
    token = tmp_path / "token"
    token.write_text("a-token\n")
    scrape = tmp_path / "prometheus.yml"  # where the token lives is the centre's choice
    scrape.write_text(
        scrape.read_text().replace("/etc/prometheus/hpcgrade-metrics-token", str(token))
    )
    said = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert "SUCCESS: 9 rules found" in said


@pytest.mark.prometheus
@needs_promtool
def test_each_alert_fires_when_it_should_and_not_before():
    tests = ROOT / "tests" / "prometheus" / "alerts_test.yml"
    assert "SUCCESS" in promtool("test", "rules", tests.name, cwd=tests.parent)
    tested = set(re.findall(r"alertname: (\w+)", tests.read_text()))
    rules = set(re.findall(r"- alert: (\w+)", (PROMETHEUS / "hpcgrade-alerts.yml").read_text()))
    assert tested == rules  # every alert has a test


@pytest.mark.prometheus
@needs_promtool
def test_what_metrics_writes_passes_promtools_lint(course):
    text = course.test_client().get("/metrics").text
    assert "hpcgrade_queue_depth" in text
    promtool("check", "metrics", stdin=text)


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="no systemd-analyze here")
@pytest.mark.parametrize("unit", UNITS, ids=[unit.stem for unit in UNITS])
def test_each_unit_is_sandboxed_by_systemd(unit, tmp_path):
    """systemd's own rating of the unit's sandbox (0 is the most confined, 10 none)."""
    (tmp_path / unit.name).write_text(unit.read_text().replace("/opt/hpcgrade", str(ROOT)))
    rated = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(tmp_path / unit.name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    exposure = re.search(r"Overall exposure level for \S+: ([\d.]+)", rated.stdout)
    assert exposure and float(exposure.group(1)) <= 3.0, rated.stdout[-2000:]
    found = directives(unit)
    assert found["CapabilityBoundingSet"] == "" and found["ProtectSystem"] == "strict"
    assert "MemoryMax" in found


def test_the_portal_the_service_and_the_jobs_are_three_accounts():
    portal, beat, worker = (
        directives(ROOT / "deploy" / "systemd" / f"hpcgrade-{name}.service")["User"]
        for name in ("portal", "beat", "worker")
    )
    settings = (ROOT / "deploy" / "hpcgrade.toml").read_text()
    grader = re.search(r'submit_host = "([^@"]+)@', settings).group(1)
    assert beat == worker and len({portal, worker, grader}) == 3
    assert grader in (ROOT / "docs" / "operations.md").read_text()
