"""`python -m worker.harness probe`: can this node grade safely, as this account?

It starts a student process the way a grade does and reports the sandbox layers it raised and
those it could not, and which of the code the jobs run (the harness, the exercises, the course
venv) this account could write: a submission that got out of its sandbox would write there, and
every later grade would run what it wrote. `hpcgrade sandbox check` runs it here and
`hpcgrade slurm check` in a job on the cluster's nodes.
"""

from __future__ import annotations

import getpass
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

from worker.harness import gpu_memory, sandbox
from worker.harness.jobs import Limits
from worker.harness.launch import Zygote, child_environment, import_torch_for_a_forked_zygote

MAX_LISTED = 10


def writable(roots: list[str]) -> list[str]:
    """Files and folders under `roots` this account may write (at most MAX_LISTED)."""
    found: list[str] = []
    for root in roots:
        for folder, folders, files in os.walk(root):
            folders[:] = [f for f in folders if f != "__pycache__"]
            # a link is replaced through its folder, which is looked at itself
            found += [
                p
                for p in [folder, *(os.path.join(folder, f) for f in files)]
                if not os.path.islink(p) and os.access(p, os.W_OK)
            ]
            if len(found) >= MAX_LISTED:
                return found[:MAX_LISTED]
    return found


def layers(required: tuple[str, ...], device: str) -> dict:
    """The layers a student process raises here, as a grade would start one, and on CUDA
    (`auto`: where torch sees a GPU, as a grade decides) whether CUDA starts in it."""
    limits = Limits()
    scratch = tempfile.mkdtemp(prefix="hpcgrade-probe-")
    import_torch_for_a_forked_zygote()
    import torch

    zygote = Zygote(child_environment(), fork=True)  # as a grader starts its own
    try:
        from worker.harness.student_process import Output, StudentProcess

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        confinement = sandbox.Confinement(
            scratch=scratch,
            memory_bytes=limits.memory_mb << 20,
            cpu_seconds=limits.cpu_seconds,
            file_bytes=limits.file_mb << 20,
            open_files=256,
            device=device,
            read_paths=sandbox.python_read_paths(),
            scratch_bytes=limits.scratch_mb << 20,
            threads=limits.threads,
            gpu_memory_bytes=limits.gpu_memory_mb << 20,
        )
        process = StudentProcess(zygote, confinement, limits, Output(limits.output_bytes))
        try:
            active = process.hello.get("layers", []) + (
                [process.scratch["layer"]] if "layer" in process.scratch else []
            )
            missing = process.hello.get("missing", []) + (
                [process.scratch["missing"]] if "missing" in process.scratch else []
            )
            cuda = process.hello.get("cuda") if device == "cuda" else None
            if cuda == "ready":
                try:
                    process.gpu_watch = gpu_memory.watch(
                        process.hello,
                        process.pid,
                        limits.gpu_memory_mb << 20,
                        lambda: gpu_memory.Nvml().used_bytes,
                    )
                    active.append(gpu_memory.layer(limits.gpu_memory_mb << 20))
                except gpu_memory.Unwatched as exc:
                    missing.append(f"gpu-memory: {exc}")
        finally:
            process.stop()  # its watch with it, before the zygote frees its pid
    finally:
        zygote.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "layers": active,
        "missing": missing,
        # on CUDA, as a grade requires it (session.py)
        "absent": sandbox.absent(required + (("gpu-memory",) if device == "cuda" else ()), active),
        **({"cuda": cuda or "no answer"} if device == "cuda" else {}),
    }


def probe(required: tuple[str, ...], code: list[str], device: str = "auto") -> dict:
    harness = str(Path(__file__).resolve().parent)
    found = layers(required, device)
    exposed = writable([harness, *code, sys.prefix])
    return {
        "node": platform.node(),
        "user": getpass.getuser(),
        "python": sys.executable,
        **found,
        "writable": exposed,
        "ok": not found["absent"] and not exposed and found.get("cuda", "ready") == "ready",
    }
