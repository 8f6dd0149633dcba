"""The Slurm executor: a batch of runs is one sbatch job that grades them from the spool.

Slurm's commands run here, or on a submit host over ssh (server/core/submit_host.py); always as
argument lists. One squeue call per poll asks for the jobs followed, by id (in JSON where squeue
can), and one sacct call for those squeue has forgotten (`sacct -c`, from the job-completion
log, where accounting is off). A shape that no node of the
partition could ever hold is refused before sbatch, which would accept it and leave it pending
for good; the cluster's limits come from scontrol and sinfo, and are read again every few
minutes. `hpcgrade slurm check` also names the partitions in use that run nothing now, and
their nodes that take no jobs.

A job's shape (worker/grading/shapes.py) names its course: the job runs that course's python,
with its account, partition, QoS, job name, `--comment` and `--wckey`.
"""

from __future__ import annotations

import logging
import subprocess
import time
import uuid
from pathlib import Path

from server.core.config import Resources, Settings
from server.core.submit_host import command_prefix, remote_command
from worker.grading.executor import ClusterError, ImpossibleRequest, JobState, NotTakingJobs
from worker.grading.shapes import Shape, service_shape
from worker.grading.slurm_text import (
    PartitionLimits,
    job_script,
    late_job_id,
    limits,
    parse_comments,
    parse_nodes,
    parse_partition_nodes,
    parse_partitions,
    parse_sacct,
    parse_sbatch,
    parse_squeue,
    parse_squeue_json,
    permanent_sbatch_error,
    sbatch_options,
)
from worker.harness import spool
from worker.harness.jobs import Job, Limits
from worker.harness.report import Report
from worker.harness.runner import PACKAGE_ROOT

log = logging.getLogger(__name__)
COMMAND_SECONDS = 60
LOOK_AGAIN_SECONDS = (2.0, 5.0, 10.0, 20.0)  # a late sbatch's job looked for once more, after each
LIMITS_SECONDS = 300
LOG_TAIL_BYTES = 2000
STOP_MARGIN = 30  # seconds between the last run's worst end and the job's time limit


class Unanswered(ClusterError):
    """The command did not answer in time (it was killed); `output` is what it had printed."""


class SlurmCommands:
    """Runs a Slurm command here, or on the submit host over ssh, and returns its stdout."""

    def __init__(self, prefix: list[str]):
        self.prefix = prefix  # server/core/submit_host.py

    def run(self, args: list[str], stdin: str | None = None) -> str:
        # ssh hands the remote shell one string: quote each argument for it
        command = remote_command(self.prefix, args)
        try:
            done = subprocess.run(
                command, input=stdin, capture_output=True, text=True, timeout=COMMAND_SECONDS
            )
        except subprocess.TimeoutExpired as exc:
            # what it printed comes as bytes, text mode or not
            printed = exc.stdout.decode("utf-8", "replace") if exc.stdout else ""
            raise Unanswered(f"{args[0]} did not answer in {COMMAND_SECONDS} s", printed) from None
        except OSError as exc:
            raise ClusterError(f"cannot run {command[0]}: {exc.strerror}") from None
        if done.returncode != 0:
            raise ClusterError(
                f"{args[0]} failed (exit {done.returncode})", done.stdout + done.stderr
            )
        return done.stdout


class SlurmExecutor:
    name = "slurm"
    synchronous = False

    def __init__(self, settings: Settings):
        self.spool = Path(settings.spool_dir)
        self.spool_min_free_mb = settings.spool_min_free_mb
        self.logs = self.spool / "jobs"
        self.python = settings.course_python or "python3"  # where a course names none
        self.python_unset = settings.course_python is None
        self.modules = settings.slurm_modules
        self.default = service_shape(settings)  # of jobs of no course
        self.commands = SlurmCommands(command_prefix(settings))
        self._limits: dict[str | None, tuple[float, PartitionLimits]] = {}
        self._sacct = ["sacct"]
        self._squeue_json: bool | None = None  # whether this Slurm's squeue --json serves; unknown

    # --- the executor interface -------------------------------------------------------------

    def submit(self, jobs: list[Job], shape: Shape) -> list[str]:
        self.refuse_impossible(shape)
        run_ids = [job.id for job in jobs]
        # the batch's tag finds its job when sbatch made it but did not say so in time
        batch = uuid.uuid4().hex[:16]
        options = self.options(shape, f"batch {batch} runs {','.join(run_ids)}")
        # the harness starts no run that could not end before the job's time limit, and none
        # once Slurm warns it (SIGUSR1) that the longest of them could not: those go back to
        # the queue without using an attempt
        script = job_script(
            options,
            python=self.python_of(shape),
            checkout=PACKAGE_ROOT,
            harness=["spool", str(self.spool), *run_ids],
            modules=self.modules,
            minutes=shape.time,
            stop_seconds=int(max(spool.run_seconds(Limits.from_dict(job.limits)) for job in jobs))
            + STOP_MARGIN,
        )
        return [self._sbatch(script, batch, shape.job_name)] * len(jobs)

    def python_of(self, shape: Shape) -> str:
        """The python a job of this shape runs: its course's, else COURSE_PYTHON's."""
        return shape.python or self.python

    def _sbatch(self, script: str, batch: str, job_name: str) -> str:
        """The new job's id. sbatch that answers late may have made the job: its id is read from
        what it printed, or found by the batch's tag, lest the runs go out twice. A refusal that
        would come again is ImpossibleRequest; one that passes is NotTakingJobs."""
        try:
            job_id = parse_sbatch(self.commands.run(["sbatch", "--parsable"], stdin=script))
        except Unanswered as exc:
            job_id = late_job_id(exc.output) or self._tagged_patiently(batch, job_name)
            if job_id is None:
                raise NotTakingJobs(exc.message, exc.output) from None
            log.warning("%s; its job %s is kept", exc.message, job_id)
        except ClusterError as exc:
            if permanent_sbatch_error(exc.output):
                raise ImpossibleRequest("sbatch refuses it", exc.output) from None
            raise NotTakingJobs(exc.message, exc.output) from None
        return job_id

    def _tagged_patiently(self, batch: str, job_name: str) -> str | None:
        """The job of this batch, looked up at once and again LOOK_AGAIN_SECONDS apart: a
        controller that had the request when sbatch was stopped may make the job later (its
        runs, sent again meanwhile, would be graded in two jobs). One made later still grades
        nothing: the runs it names are gone from the spool, and never named again (run ids
        are never given twice)."""
        for wait in (0.0, *LOOK_AGAIN_SECONDS):
            time.sleep(wait)
            job_id = self._tagged(batch, job_name)
            if job_id is not None:
                return job_id
        return None

    def _tagged(self, batch: str, job_name: str) -> str | None:
        """The job of this batch, by the tag in its comment; None if Slurm lists none (or cannot
        say)."""
        try:
            comments = parse_comments(
                self.commands.run(
                    [
                        "squeue",
                        "--me",
                        "--noheader",
                        "--states=all",
                        f"--name={job_name}",
                        "--format=%i|%k",
                    ]
                )
            )
        except ClusterError as exc:
            log.warning("cannot look up batch %s's job: %s", batch, exc)
            return None
        return next(
            (job_id for job_id, comment in comments.items() if f" batch {batch} " in comment), None
        )

    def options(
        self, shape: Shape, what: str, requeue: bool = True, job_name: str | None = None
    ) -> list[str]:
        """sbatch's options for a job of this shape: its course's job name (or `job_name`),
        its comment followed by `what`, its wckey."""
        spool.make_folder(self.spool, "jobs")  # the jobs' logs: sbatch would not make it
        return sbatch_options(
            shape,
            job_name=job_name or shape.job_name,
            comment=f"{shape.comment} {what}",
            wckey=shape.wckey,
            log=str(self.logs / "%j.out"),
            requeue=requeue,
        )

    def pilot_jobs(self, shapes: list[Shape]) -> dict[str, JobState]:
        """The pilot jobs of these shapes' courses that Slurm still lists, started or not, in
        one squeue call."""
        names = sorted({shape.pilot_name for shape in shapes})
        return parse_squeue(
            self.commands.run(
                [
                    "squeue",
                    "--me",
                    "--noheader",
                    "--states=all",
                    f"--name={','.join(names)}",
                    "--format=%i|%T|%N|%r",
                ]
            )
        )

    def poll(self, ids: list[str]) -> dict[str, JobState]:
        listed = self._listed(ids)
        states = {i: listed[i] for i in ids if i in listed}
        forgotten = [i for i in ids if i not in states]
        if forgotten:
            states |= self._accounted(forgotten)
        return {i: states.get(i, JobState("VANISHED")) for i in ids}

    def _listed(self, ids: list[str]) -> dict[str, JobState]:
        """squeue's word on these jobs alone, in one call: in JSON where this Slurm's squeue
        --json works and keeps to --jobs (22.05's lists the whole job table, a cost on a big
        cluster), in text otherwise. Found out at the first poll, then kept."""
        asked = ["squeue", "--states=all", f"--jobs={','.join(ids)}"]
        if self._squeue_json is not False:
            try:
                listed = parse_squeue_json(self.commands.run([*asked, "--json"]))
            except ClusterError as exc:
                log.info("squeue --json does not serve, text instead: %s", exc)
            else:
                self._squeue_json = set(listed) <= set(ids)
                return listed
        listed = self._listed_as_text(asked)
        self._squeue_json = False  # text answered where JSON did not: no JSON here
        return listed

    def _listed_as_text(self, asked: list[str]) -> dict[str, JobState]:
        try:
            return parse_squeue(self.commands.run([*asked, "--noheader", "--format=%i|%T|%N|%r"]))
        except ClusterError as exc:
            if "Invalid job id specified" in exc.output:  # every id asked for is forgotten
                return {}
            raise

    def _accounted(self, ids: list[str]) -> dict[str, JobState]:
        """What sacct knows of jobs squeue has forgotten; nothing when it cannot say (they are
        over either way: only their state's name is lost)."""
        args = ["-n", "-P", "-o", "JobID,State,ExitCode,NodeList", "-j", ",".join(ids)]
        try:
            return parse_sacct(self.commands.run([*self._sacct, *args]))
        except ClusterError as exc:
            if self._sacct == ["sacct"] and "accounting storage is disabled" in exc.output:
                self._sacct = ["sacct", "-c"]
                return self._accounted(ids)
            return {}

    def read_report(self, run_id: str) -> Report | None:
        return spool.read_report(spool.run_dir(self.spool, run_id))

    def cancel(self, ids: list[str]) -> None:
        if ids:
            self.commands.run(["scancel", *sorted(set(ids))])

    def log_tail(self, external_id: str) -> str:
        try:
            with open(self.logs / f"{external_id}.out", "rb") as log:
                log.seek(0, 2)
                log.seek(max(log.tell() - LOG_TAIL_BYTES, 0))
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self) -> None:
        """Nothing to close: jobs live on in Slurm."""

    # --- what the cluster can hold ----------------------------------------------------------

    def limits(self, partition: str | None) -> PartitionLimits:
        cached = self._limits.get(partition)
        if cached and time.monotonic() - cached[0] < LIMITS_SECONDS:
            return cached[1]
        partitions = parse_partitions(self.commands.run(["scontrol", "show", "partition", "-o"]))
        name = partition or next(
            (n for n, f in partitions.items() if f.get("Default") == "YES"), None
        )
        if name not in partitions:
            raise ImpossibleRequest(
                f"partition {partition or '(default)'} does not exist; the "
                f"cluster has {', '.join(partitions) or 'none'}"
            )
        nodes = parse_nodes(
            self.commands.run(
                ["sinfo", "--noheader", "--Node", f"--partition={name}", "--format=%c|%m|%G"]
            )
        )
        found = limits(name, partitions[name], nodes)
        self._limits[partition] = (time.monotonic(), found)
        return found

    def refuse_impossible(self, resources: Resources) -> None:
        """Raise ImpossibleRequest for a shape no node could hold; a cluster that cannot be asked
        right now is left to sbatch, which then fails on its own."""
        try:
            problems = self.limits(resources.partition).refuse(resources)
        except ImpossibleRequest:
            raise
        except ClusterError:
            return
        if problems:
            raise ImpossibleRequest("; ".join(problems))

    def check(self, shapes: dict[str, Shape]) -> tuple[list[str], list[str]]:
        """Problems: every shape this service would ask for (`shapes`, each named by who asks
        for it: a course, an exercise of a course) that the cluster could never run, or that
        sbatch refuses (with its course's account, QoS, wckey…), and every partition they use
        that runs nothing now (and why the cluster could not be asked, if it could not).
        Warnings: those partitions' nodes that take no jobs while others do."""
        unset = sorted({shape.course for shape in shapes.values() if shape.python is None})
        problems = (
            [
                f"course {course}: neither the course's python nor COURSE_PYTHON is set: "
                "jobs would run python3 from the node's PATH"
                for course in unset
            ]
            if self.python_unset
            else []
        )
        no_room = spool.no_room(self.spool, self.spool_min_free_mb)
        if no_room is not None:
            problems.append(f"the spool is full: {no_room}; nothing is sent")
        partitions: dict[str, list[str]] = {}  # why each partition in use runs nothing now
        warnings = []
        for who, shape in shapes.items():
            try:
                fits = self.limits(shape.partition)
                if fits.partition not in partitions:
                    partitions[fits.partition], some_down = self.availability(fits.partition)
                    warnings += some_down
                # where no node takes jobs, sbatch --test-only refuses every shape ("Requested
                # node configuration is not available"): the partition's problem says why
                found = fits.refuse(shape) or (
                    [] if partitions[fits.partition] else self._test_only(shape)
                )
            except ClusterError as exc:
                found = [str(exc)]
            problems += [f"{who}: {problem}" for problem in found]
        return problems + [problem for found in partitions.values() for problem in found], warnings

    def availability(self, partition: str) -> tuple[list[str], list[str]]:
        """Whether the partition runs jobs now, from one sinfo call. Problems: the partition is
        not up, or none of its nodes takes jobs; warnings: some of its nodes take none. Each such
        node is named with its state and sinfo's reason."""
        state, nodes = parse_partition_nodes(
            self.commands.run(
                [
                    "sinfo",
                    "--noheader",
                    "--Node",
                    f"--partition={partition}",
                    "--format=%a|%N|%t|%E",
                ]
            )
        )
        if not nodes:
            return [f"partition {partition} has no nodes"], []
        problems = (
            []
            if state == "up"
            else [f"partition {partition} is {state.upper()}, not UP: new jobs would not run"]
        )
        out = [
            f"node {node.name} is {node.state} ({node.reason or 'no reason given'})"
            for node in nodes
            if not node.takes_jobs
        ]
        if len(out) == len(nodes):
            return problems + [f"partition {partition}: no node takes jobs: {'; '.join(out)}"], []
        return problems, [f"partition {partition}: {line}" for line in out]

    def spool_space(self) -> str:
        """How much the spool holds and how much is free, for its admins."""
        free = spool.free_mb(self.spool)
        return (
            f"spool {self.spool}: holds {spool.held_mb(self.spool)} MB, "
            f"{'?' if free is None else free} MB free (SPOOL_MIN_FREE_MB: "
            f"{self.spool_min_free_mb})"
        )

    def _test_only(self, shape: Shape) -> list[str]:
        """What sbatch says of a job of this shape without making it (--test-only): an account,
        QoS, feature… the cluster does not know, which the limits cannot tell."""
        options = self.options(shape, "check")
        try:
            self.commands.run(["sbatch", "--test-only", *options], stdin="#!/bin/bash\ntrue\n")
        except Unanswered:  # no refusal: the check names the cluster not answering
            raise
        except ClusterError as exc:
            return [f"sbatch refuses it: {exc.output.strip()}"]
        return []
