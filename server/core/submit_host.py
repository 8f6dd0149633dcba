"""Where the cluster's commands run: here, or on SLURM_SUBMIT_HOST over ssh (as Open OnDemand's
Slurm adapter does), for a service on a machine without them. Slurm's commands
(worker/grading/slurm.py) and unmunge (server/core/munge.py) share this."""

from __future__ import annotations

import shlex
from pathlib import Path

from server.core.config import Settings

SSH_PERSIST_SECONDS = 60  # an idle shared ssh connection closes after this long


def command_prefix(settings: Settings) -> list[str]:
    """What goes before a command's arguments (joined by `remote_command`): nothing here, or
    ssh to the submit host over one shared connection (a new one costs about 0.2 s); ssh takes
    the first value given for an option, so SLURM_SSH_OPTIONS, first, override the sharing."""
    if not settings.slurm_submit_host:
        return []
    sockets = _ssh_sockets(Path(settings.spool_dir))
    shared = [
        "-o",
        "ControlMaster=auto",
        "-o",
        f"ControlPath={sockets}/%C",
        "-o",
        f"ControlPersist={SSH_PERSIST_SECONDS}",
    ]
    return ["ssh", *settings.slurm_ssh_options, *shared, settings.slurm_submit_host]


def remote_command(prefix: list[str], args: list[str]) -> list[str]:
    """The argument list that runs `args` where `prefix` says: ssh hands the remote shell one
    string, so each argument is quoted for it."""
    return [*prefix, shlex.join(args)] if prefix else args


def _ssh_sockets(spool: Path) -> Path:
    """The folder of ssh's shared connection: the service's account alone may use it."""
    folder = spool / "ssh"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)  # the spool's folders are the group's (2770): this one is not
    return folder
