"""Helpers for tests that drive the single-node Slurm cluster scripts/slurm starts (run as root)."""

import glob
import os
import re
import signal
import subprocess
import time

UP = ("idle", "mixed", "allocated", "completing")
CONTROLLER_PID_FILE = "/var/lib/hpcgrade-slurm/run/slurmctld.pid"  # as scripts/slurm writes it


def _run(*args: str, check: bool = True) -> str:
    result = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
        )
    return result.stdout


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"Slurm: {what} not within {timeout} s")
        time.sleep(0.1)


def available() -> bool:
    """Whether scripts/slurm started its own cluster here and it answers."""
    if os.environ.get("HPCGRADE_TEST_SLURM") != "own":
        return False
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def node() -> str:
    """The name of the cluster's only node."""
    return (
        os.environ.get("HPCGRADE_TEST_SLURM_NODE")
        or _run("sinfo", "-h", "-N", "-o", "%N").split()[0]
    )


def node_state() -> str:
    """The node's state in sinfo's long form, e.g. idle, mixed, down, down*, drained."""
    return _run("sinfo", "-h", "-N", "-n", node(), "-o", "%T").strip()


def set_node_down(reason: str = "test") -> None:
    """Sets the node DOWN by hand (its running jobs are requeued); it stays down until resumed."""
    _run("scontrol", "update", f"nodename={node()}", "state=down", f"reason={reason}")


def lose_node(reason: str = "test: node lost") -> None:
    """The node is lost with all that ran on it, as when it crashes: set DOWN (Slurm requeues its
    jobs), then every process of every job on it killed. Setting it DOWN alone leaves them
    running, and a requeued job restarting beside its old self drains the node."""
    set_node_down(reason)
    for procs in glob.glob(
        "/sys/fs/cgroup/freezer/slurm*/uid_*/job_*/**/cgroup.procs", recursive=True
    ):
        with open(procs) as f:
            for pid in f.read().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass


def drain_node(reason: str = "test: maintenance") -> None:
    """Drains the node, as an administrator before maintenance: new jobs wait until resumed."""
    _run("scontrol", "update", f"nodename={node()}", "state=drain", f"reason={reason}")


def resume_node(timeout: float = 30) -> None:
    """Resumes the node and waits until it takes jobs again."""
    _run("scontrol", "update", f"nodename={node()}", "state=resume")
    _wait(lambda: node_state() in UP, timeout, "node back up")


def partition() -> str:
    """The partition the tests' jobs go to."""
    return os.environ.get("HPCGRADE_TEST_SLURM_PARTITION", "grading")


def partition_field(key: str) -> str:
    """A field of the partition as scontrol shows it, e.g. MaxTime (01:00:00), State (UP)."""
    shown = _run("scontrol", "show", "partition", partition(), "-o")
    return re.search(rf"\b{key}=(\S+)", shown).group(1)


def update_partition(**fields: str) -> None:
    """Sets fields of the partition, as an administrator: MaxTime="10", State="DOWN"…"""
    _run(
        "scontrol",
        "update",
        f"PartitionName={partition()}",
        *(f"{key}={value}" for key, value in fields.items()),
    )


def _controller_answers() -> bool:
    result = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    return result.returncode == 0 and "is UP" in result.stdout


def stop_controller(timeout: float = 30) -> None:
    """Shuts slurmctld down (slurmd and running jobs stay) and waits until its process is gone."""
    with open(CONTROLLER_PID_FILE) as f:
        pid = f.read().strip()
    _run("scontrol", "shutdown", "slurmctld")
    _wait(lambda: not os.path.exists(f"/proc/{pid}"), timeout, "slurmctld stopped")


def start_controller(timeout: float = 30) -> None:
    """Starts slurmctld again and waits until it answers."""
    subprocess.run(
        ["slurmctld"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=30,
    )
    _wait(_controller_answers, timeout, "slurmctld answering")


def job_state(job_id: str) -> str:
    """The job's state, e.g. PENDING, RUNNING, COMPLETED, OUT_OF_MEMORY; "" when Slurm has none."""
    shown = subprocess.run(
        ["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True, timeout=30
    ).stdout
    match = re.search(r"\bJobState=(\S+)", shown)
    if match:
        return match.group(1)
    state = _run("squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T", check=False).strip()
    if state:
        return state.splitlines()[-1]
    lines = _run("sacct", "-c", "-j", str(job_id), "-n", "-P", "-o", "JobID,State", check=False)
    states = [
        line.split("|")[1].split()[0]
        for line in lines.splitlines()
        if line.split("|")[0] == str(job_id)
    ]
    return states[-1] if states else ""


def start_now(job_id: str) -> None:
    """Lets a requeued job (held back by BeginTime) start at once, though not within the second
    of its requeue: slurmd refuses a job credential made in the second that the job's earlier
    one was revoked in ("Killing non-startable batch JobId=…: Job credential revoked"), and the
    job ends FAILED without running. Slurm's own BeginTime, two minutes on, never meets it."""
    time.sleep(1.0)
    _run("scontrol", "update", f"jobid={job_id}", "StartTime=now")


def time_out(job_id: str) -> None:
    """Takes the running job's time limit to nothing: at slurmctld's next check of limits (every
    half minute or so) it ends TIMEOUT, as a job past its limit does. Slurm's limits are whole
    minutes: a job given one minute runs 60 to 90 s before that check ends it."""
    _run("scontrol", "update", f"jobid={job_id}", "TimeLimit=0")


def jobs() -> list[str]:
    """Ids of the jobs squeue lists (pending, running or completing)."""
    return _run("squeue", "-h", "-o", "%i").split()


def wait_idle(timeout: float = 60) -> None:
    """Waits until squeue lists no jobs."""
    _wait(lambda: not jobs(), timeout, "no jobs left")


def cancel_all(timeout: float = 30) -> None:
    """Cancels every job (test cleanup) and waits until none is left."""
    ids = jobs()
    if ids:
        _run("scancel", *ids, check=False)
    wait_idle(timeout)
