"""The client file: the server last logged in to and, for each server, the token that logging in
to it keeps (`hpcgrade login`, `%hpcgrade login`), at HPCGRADE_CLIENT_CONFIG, by default
~/.config/hpcgrade/client.toml, readable by its owner alone. A token is sent only to the server
that issued it: HPCGRADE_SERVER naming another server finds no saved token for it.
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
    """Its settings: `server` (absent when there is none) and `tokens`, each server's URL to its
    token; a file of one token (`server`, `token`, as written before tokens were kept per
    server) gives that token to its server alone. Raises ValueError for one that cannot be
    read."""
    where = path()
    try:
        with open(where, "rb") as f:
            kept = tomllib.load(f)
    except FileNotFoundError:
        return {"tokens": {}}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{where}: {exc} — run `hpcgrade login` again") from None
    tokens = kept.get("tokens", {})
    server = kept.get("server")
    if not isinstance(tokens, dict) or not all(isinstance(t, str) for t in tokens.values()):
        raise ValueError(f"{where}: its [tokens] are not URL = token lines — run `hpcgrade login`")
    if isinstance(server, str) and isinstance(kept.get("token"), str):
        tokens = {_key(server): kept["token"], **tokens}
    return {
        **({"server": server} if isinstance(server, str) else {}),
        "tokens": {_key(url): token for url, token in tokens.items()},
    }


def _key(server: str) -> str:
    return server.rstrip("/")


def save(server: str, token: str) -> Path:
    """`token` kept for `server`, now the default one, beside the other servers' tokens. The
    file is written anew, readable by its owner alone (it holds tokens): as a new file beside the
    old one, moved over it. An old file that others could read keeps its mode when opened, and
    a symlink at its path would be followed, taking the tokens where it leads. An old file that
    cannot be read is replaced."""
    try:
        tokens = read()["tokens"]
    except ValueError:
        tokens = {}
    tokens[_key(server)] = token
    where = path()
    where.parent.mkdir(parents=True, exist_ok=True)
    descriptor, written = tempfile.mkstemp(dir=where.parent, prefix=f".{where.name}.")  # 0600
    try:
        with os.fdopen(descriptor, "w") as f:
            # JSON's strings are TOML's basic strings
            f.write(f"server = {json.dumps(_key(server))}\n\n[tokens]\n")
            f.writelines(f"{json.dumps(url)} = {json.dumps(t)}\n" for url, t in tokens.items())
        os.replace(written, where)
    except BaseException:
        os.unlink(written)
        raise
    return where


def default_server() -> str | None:
    """HPCGRADE_SERVER, else the client file's server."""
    return os.environ.get("HPCGRADE_SERVER") or read().get("server")
