"""deploy/'s files as a centre installs them: the systemd units pass systemd's own check (with
the checkout standing for /opt/hpcgrade), and each comes back whatever it died of, however often;
the worker is a notify service with a watchdog its heartbeat feeds (worker/grading/heartbeat.py)."""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))


def directives(unit: Path) -> dict[str, str]:
    lines = [line.strip() for line in unit.read_text().splitlines()]
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="no systemd-analyze here")
def test_the_units_pass_systemds_check(tmp_path):
    for unit in UNITS:
        (tmp_path / unit.name).write_text(unit.read_text().replace("/opt/hpcgrade", str(ROOT)))
    checked = subprocess.run(["systemd-analyze", "verify", *sorted(map(str, tmp_path.iterdir()))],
                             capture_output=True, text=True, timeout=60)
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
