"""Secrets in a command line."""

from __future__ import annotations

import re
from collections.abc import Sequence

_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "credential",
                           "credentials", "auth"})
_NAME_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)=(.+)$", re.DOTALL)


def _secret_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    if last == "env_key":  # names a variable, holds no secret
        return False
    return any(word in _SECRET_WORDS for word in re.split(r"[-_]", last))


def argv_secrets(argv: Sequence[str]) -> list[str]:
    """Secret values in a command line: the value of a flag naming a key,
    token, secret, password or auth (``--api-key V``, ``--api-key=V``,
    ``-k V``), and of a ``NAME=VALUE`` argument whose name does (quotes
    around the value removed too)."""
    found: list[str] = []
    take_next = False
    for arg in argv:
        arg = str(arg)
        if take_next:
            found.append(arg)
            take_next = False
            continue
        if arg.startswith("-") and len(arg) > 1:
            flag, eq, value = arg.partition("=")
            name = flag.lstrip("-")
            if name == "k" or (flag.startswith("--") and _secret_name(name)):
                if eq:
                    found.append(value)
                else:
                    take_next = True
            continue
        match = _NAME_VALUE.match(arg)
        if match and _secret_name(match.group(1)):
            found.append(match.group(2))
    out: list[str] = []
    for value in found:
        out.append(value)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            out.append(value[1:-1])
    return [v for v in out if len(v) >= 4]
