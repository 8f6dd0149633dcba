"""The client file: the server's URL and the token that logging in keeps (`hpcgrade login`,
`%hpcgrade login`), at HPCGRADE_CLIENT_CONFIG, by default ~/.config/hpcgrade/client.toml,
readable by its owner alone.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from pathlib import Path


def path() -> Path:
    """HPCGRADE_CLIENT_CONFIG, else hpcgrade/client.toml in XDG_CONFIG_HOME or ~/.config."""
    if os.environ.get("HPCGRADE_CLIENT_CONFIG"):
        return Path(os.environ["HPCGRADE_CLIENT_CONFIG"])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "hpcgrade" / "client.toml"


def read() -> dict:
    """Its settings; empty when there is none. Raises ValueError for one that cannot be read."""
    where = path()
    try:
        with open(where, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{where}: {exc} — run `hpcgrade login` again") from None


def save(server: str, token: str) -> Path:
    """The file written anew, readable by its owner alone (it holds the token): as a new file
    beside the old one, moved over it. An old file that others could read keeps its mode when
    opened, and a symlink at its path would be followed, taking the token where it leads."""
    where = path()
    where.parent.mkdir(parents=True, exist_ok=True)
    descriptor, written = tempfile.mkstemp(dir=where.parent, prefix=f".{where.name}.")  # 0600
    try:
        with os.fdopen(descriptor, "w") as f:
            f.write(f"server = {json.dumps(server)}\ntoken = {json.dumps(token)}\n")
        os.replace(written, where)
    except BaseException:
        os.unlink(written)
        raise
    return where


def default_server() -> str | None:
    """HPCGRADE_SERVER, else the client file's server."""
    return os.environ.get("HPCGRADE_SERVER") or read().get("server")
