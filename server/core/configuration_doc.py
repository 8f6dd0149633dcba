"""docs/configuration.md, written from the settings' own definitions (server/core/config.py), so
that the reference cannot drift from the code: `hpcgrade settings > docs/configuration.md`."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from server.core.config import FIELDS, ROOT, Settings

INTRO = """\
# Configuration

<!-- Generated from server/core/config.py by `hpcgrade settings > docs/configuration.md`;
edit the settings' descriptions there, not this file (tests/core/test_config.py compares them). -->

The service (portal, API, workers, beat and the `hpcgrade` commands that reach the database or
the cluster) reads its settings from, each over the one before:

1. the defaults below;
2. a TOML file named by `HPCGRADE_CONFIG`: keys in lower case, and a `[slurm]` table for the
   `SLURM_*` settings (`[slurm] gpus = 1` is `SLURM_GPUS`); an example for a cluster is
   [deploy/hpcgrade.toml](../deploy/hpcgrade.toml);
3. environment variables `HPCGRADE_<NAME>`, a list or a table written as JSON
   (`HPCGRADE_SLURM_MODULES='["cuda/12.4"]'`).

Every value is checked once, at start-up: an unknown name or a wrong value stops it with a
message naming the setting. `<checkout>` below is the folder of this checkout.

Not settings of the service: the exercises folder (`HPCGRADE_EXERCISES`, default `exercises/` of
this checkout), the terminal client's `HPCGRADE_SERVER`, `HPCGRADE_TOKEN` and
`HPCGRADE_CLIENT_CONFIG`, and an exercise's own `[limits]`, `[deadline]` and `[slurm]` tables in
its `exercise.toml` (see [writing an exercise](writing-an-exercise.md)).
"""
HEADER = (
    "| setting | environment | TOML | type | default | what it does |\n|---|---|---|---|---|---|"
)


def markdown() -> str:
    groups: dict[str, list[str]] = {}
    for name, field in FIELDS.items():
        groups.setdefault(field.metadata["group"], []).append(_row(name, field))
    sections = [f"## {group}\n\n{HEADER}\n" + "\n".join(rows) for group, rows in groups.items()]
    return "\n\n".join([INTRO.rstrip("\n"), *sections]) + "\n"


def _row(name: str, field: dataclasses.Field) -> str:
    key = f"`[slurm] {name[6:].lower()}`" if name.startswith("SLURM_") else f"`{name.lower()}`"
    default = _default(getattr(Settings(), field.name))
    cells = [
        f"`{name}`",
        f"`HPCGRADE_{name}`",
        key,
        field.metadata["parse"].kind,
        default,
        field.metadata["about"],
    ]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (tuple, dict)):
        return f"`{json.dumps(list(value) if isinstance(value, tuple) else value)}`"
    return f"`{str(value).replace(str(ROOT), '<checkout>')}`"
