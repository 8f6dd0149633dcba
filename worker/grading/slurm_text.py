"""What hpcgrade writes for Slurm (job scripts) and reads from it (sbatch, squeue, sacct,
scontrol and sinfo output): small functions, each raising ClusterError with the raw output when
the text is not what it should be."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from server.core.config import Resources
from server.core.setting_values import slurm_minutes
from worker.grading.executor import ClusterError, JobState


def sbatch_options(
    resources: Resources, *, job_name: str, comment: str, wckey: str, log: str, requeue: bool = True
) -> list[str]:
    """sbatch's options for a job of this shape; a shape without GPUs asks for none. A batch job
    is requeued when its node fails (it skips the runs it already reported)."""
    return [
        f"--job-name={job_name}",
        f"--comment={comment}",
        f"--wckey={wckey}",
        "--nodes=1",
        "--ntasks=1",
        f"--output={log}",
        "--open-mode=append",
        "--requeue" if requeue else "--no-requeue",
        *resources.sbatch(),  # last, so that SLURM_EXTRA's options override the ones above
    ]


def job_script(
    options: list[str],
    *,
    python: str,
    checkout: str,
    harness: list[str],
    modules: tuple[str, ...] = (),
    what: str = "grades runs from the spool with one warm harness",
    minutes: int | None = None,
    stop_seconds: int | None = None,
) -> str:
    """A batch job that runs `python -m worker.harness HARNESS…` under the course venv's
    python. Nothing of the service's environment goes with it (--export=NONE).
    `minutes`: the job's time limit, passed on as `--until` (the time, from the job's start,
    after which the harness starts no run that could not finish); `stop_seconds`: Slurm also
    sends the harness SIGUSR1 that long before the limit (after which it starts no run)."""
    lines = ["#!/bin/bash", f"# hpcgrade: {what}"]
    signal = (
        [f"--signal=B:USR1@{stop_seconds}"]
        if minutes and stop_seconds and minutes * 60 > stop_seconds + 60
        else []
    )
    lines += [_directive(option) for option in [*options, *signal, "--export=NONE"]]
    lines += ["set -e"]
    if minutes:  # first: module loads count against the time limit too
        lines += [f"until=$(( $(date +%s) + {minutes * 60} ))"]
    if modules:  # `module` is a shell function that the profile defines, not always -u clean
        lines += [". /etc/profile", *(f"module load {shlex.quote(m)}" for m in modules)]
    lines += [
        "set -u",
        f"cd {shlex.quote(checkout)}",
        "exec env PYTHONPATH="
        + shlex.quote(checkout)
        + " "
        + shlex.join([python, "-m", "worker.harness", *harness])
        + (' --until "$until"' if minutes else ""),
    ]
    return "\n".join(lines) + "\n"


def _directive(option: str) -> str:
    # sbatch reads a directive's value up to a space, unless it is in double quotes
    name, equals, value = option.partition("=")
    return f'#SBATCH {name}{equals}"{value}"' if " " in value else f"#SBATCH {option}"


def parse_sbatch(output: str) -> str:
    """`sbatch --parsable` prints `id` or `id;cluster`."""
    job_id = output.strip().split(";")[0]
    if not job_id.isdigit():
        raise ClusterError("sbatch printed no job id", output)
    return job_id


def late_job_id(output: str) -> str | None:
    """The job id in what an sbatch that did not answer in time had printed, if it got so far."""
    try:
        return parse_sbatch(output)
    except ClusterError:
        return None


def parse_comments(output: str) -> dict[str, str]:
    """`squeue -h -o '%i|%k'` lines: each job's id and comment (which may hold `|`)."""
    comments = {}
    for line in output.splitlines():
        if not line.strip():
            continue
        job_id, bar, comment = line.strip().partition("|")
        if not bar or not job_id.isdigit():
            raise ClusterError("squeue printed a line that is not id|comment", output)
        comments[job_id] = comment
    return comments


# sbatch's answers that pass (checked first): the controller busy or away, a limit on how many
# jobs wait (it frees up as jobs end; "violates accounting/QOS policy" may also mean a size or
# time limit, which it does not say: tried again, less and less often), or an authentication
# failure of the cluster as a whole, which no submission could fix
TRANSIENT_SBATCH_ERRORS = (
    "socket timed out",
    "unable to contact slurm controller",
    "resource temporarily unavailable",
    "slurm_persist_conn",
    "connection refused",
    "communication connection failure",
    "zero bytes were transmitted",
    "temporarily unable to accept job",
    "slurmctld is busy",
    "maxsubmitjob",
    "job violates accounting/qos policy",
    "authentication",
    "credential",
    "munge",
)
# answers that the same request will always get: what it asks for does not exist here or is
# not allowed to this account (invalid account, QoS, wckey, partition, feature/constraint,
# gres, option values; "Requested node configuration is not available"; access denied)
PERMANENT_SBATCH_ERRORS = (
    "invalid",
    "not available",
    "unrecognized option",
    "not permitted",
    "denied",
)


def permanent_sbatch_error(output: str) -> bool:
    """Whether sbatch's failure would come again for the same request. One neither list names
    is taken to pass: the runs wait, and sbatch is tried again less and less often."""
    text = output.lower()
    if any(marker in text for marker in TRANSIENT_SBATCH_ERRORS):
        return False
    return any(marker in text for marker in PERMANENT_SBATCH_ERRORS)


def parse_squeue(output: str) -> dict[str, JobState]:
    """`squeue -h -o '%i|%T|%N|%r'` lines: id, state, nodes, reason."""
    states = {}
    for line in output.splitlines():
        if not line.strip():
            continue
        parts = line.strip().split("|")
        if len(parts) != 4 or not parts[1].isupper():
            raise ClusterError("squeue printed a line that is not id|state|nodes|reason", output)
        job_id, state, nodes, reason = parts
        states[job_id] = JobState(state, nodes or None, None if reason == "None" else reason)
    return states


def parse_squeue_json(output: str) -> dict[str, JobState]:
    """`squeue --json`: each job's id, state (a word up to Slurm 23.02, then a list with the
    base state first), nodes and reason."""
    try:
        jobs = json.loads(output)["jobs"]
        states = {}
        for job in jobs:
            state = job["job_state"]
            state = state[0] if isinstance(state, list) else state
            reason = job.get("state_reason") or "None"
            states[str(job["job_id"])] = JobState(
                state, job.get("nodes") or None, None if reason == "None" else reason
            )
    except (ValueError, KeyError, TypeError, IndexError):
        raise ClusterError("squeue --json printed no list of jobs", output) from None
    return states


def parse_sacct(output: str) -> dict[str, JobState]:
    """`sacct -n -P -o JobID,State,ExitCode,NodeList` lines. Steps (123.batch) are skipped; a
    requeued job has a line per start, and the last one is its state now."""
    states = {}
    for line in output.splitlines():
        if not line.strip():
            continue
        parts = line.strip().split("|")
        if len(parts) < 3 or not parts[1]:
            raise ClusterError("sacct printed a line that is not id|state|exit code|nodes", output)
        job_id, state, exit_code, nodes = (parts + [""])[:4]
        if "." in job_id:
            continue
        # "CANCELLED by 0" names who cancelled it
        node = None if nodes in ("", "None assigned", "(null)") else nodes
        states[job_id] = JobState(state.split()[0], node, f"exit code {exit_code}")
    return states


@dataclass(frozen=True)
class PartitionLimits:
    """The most one job can have in a partition: the largest node, capped by the partition."""

    partition: str
    cpus: int
    memory: int  # MB
    gpus: int
    time: int | None  # minutes; None when unlimited

    def refuse(self, resources: Resources) -> list[str]:
        problems = self.too_large(resources)
        if self.time is not None and resources.time > self.time:
            problems.append(
                f"asks {resources.time} minutes, partition {self.partition} allows {self.time}"
            )
        return problems

    def too_large(self, resources: Resources) -> list[str]:
        """What the shape asks more of than the largest node has (its time aside)."""
        asked = [
            ("CPUs", resources.cpus, self.cpus),
            ("MB of memory", resources.memory, self.memory),
            ("GPUs", resources.gpus, self.gpus),
        ]
        return [
            f"asks {wanted} {what}, the largest node of partition {self.partition} has {most}"
            for what, wanted, most in asked
            if wanted > most
        ]


def parse_partitions(output: str) -> dict[str, dict[str, str]]:
    """`scontrol show partition -o`: a line of key=value words per partition."""
    partitions = {}
    for line in output.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if not fields:
            continue
        if "PartitionName" not in fields:
            raise ClusterError("scontrol printed a partition without PartitionName", output)
        partitions[fields["PartitionName"]] = fields
    return partitions


def parse_nodes(output: str) -> list[tuple[int, int, int]]:
    """`sinfo -h -N -o '%c|%m|%G'` lines: (CPUs, memory in MB, GPUs) of each node."""
    nodes = []
    for line in output.splitlines():
        if not line.strip():
            continue
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].rstrip("+").isdigit():
            raise ClusterError("sinfo printed a line that is not cpus|memory|gres", output)
        nodes.append((int(parts[0]), int(parts[1].rstrip("+")), gres_gpus(parts[2])))
    return nodes


# sinfo's short node states in which a node takes no new job: down, drained, draining (its
# jobs run on), failed or failing, whatever flag follows (`~` powered off, `$` maintenance…);
# nor does a node whose state ends with `*`, not responding
NO_NEW_JOBS = frozenset({"down", "drain", "drng", "fail", "failg"})
NODE_STATE_FLAGS = "*~#!%$@^-"


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # sinfo's short form: idle, mix, alloc, drain, drng, down*…
    reason: str | None  # why an administrator or Slurm set it so

    @property
    def takes_jobs(self) -> bool:
        return self.state.rstrip(NODE_STATE_FLAGS) not in NO_NEW_JOBS and not self.state.endswith(
            "*"
        )


def parse_partition_nodes(output: str) -> tuple[str, list[NodeState]]:
    """`sinfo -h -N -p P -o '%a|%N|%t|%E'` lines: the partition's availability (up, down, drain,
    inact; the same on every line) and each node's state and reason (which may hold `|`). ""
    for a partition without nodes."""
    availability, nodes = "", []
    for line in output.splitlines():
        if not line.strip():
            continue
        parts = line.strip().split("|", 3)
        if len(parts) != 4 or not all(parts[:3]) or availability not in ("", parts[0]):
            raise ClusterError(
                "sinfo printed a line that is not availability|node|state|reason", output
            )
        availability, name, state, reason = parts
        nodes.append(NodeState(name, state, None if reason in ("", "none") else reason))
    return availability, nodes


def gres_gpus(gres: str) -> int:
    """GPUs in a GRES list: gpu:2, gpu:a100:4(S:0-1), gpu:2,mps:100, (null)."""
    total = 0
    for item in re.sub(r"\([^)]*\)", "", gres).split(","):
        parts = item.split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def limits(
    partition: str, fields: dict[str, str], nodes: list[tuple[int, int, int]]
) -> PartitionLimits:
    if not nodes:
        raise ClusterError(f"partition {partition} has no nodes", "")

    def cap(value: int, key: str) -> int:
        limit = fields.get(key, "UNLIMITED")
        return min(value, int(limit)) if limit.isdigit() else value

    time = fields.get("MaxTime", "UNLIMITED")
    return PartitionLimits(
        partition,
        cap(max(n[0] for n in nodes), "MaxCPUsPerNode"),
        cap(max(n[1] for n in nodes), "MaxMemPerNode"),
        max(n[2] for n in nodes),
        None if time == "UNLIMITED" else slurm_minutes(time),
    )
