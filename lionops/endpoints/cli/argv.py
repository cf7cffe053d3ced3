"""Secrets in a command line."""

from __future__ import annotations

import re
from collections.abc import Sequence

_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "credential",
                           "credentials", "auth"})
_NAME_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)=(.+)$", re.DOTALL)
#: ``name = value`` / ``"name": "value"`` inside an argument (a ``-c`` config
#: string, an inline table, a JSON object); the value is quoted, or runs to a
#: space or a delimiter, and never starts a nested table.
_EMBEDDED = re.compile(
    r"""["']?([A-Za-z_][A-Za-z0-9_.-]*)["']?\s*[:=]\s*("(?:[^"\\]|\\.)*"|'[^']*'|[^\s,;{}\[\]"']+)""")
#: Credentials of an HTTP authorization inside an argument (``Authorization: Bearer V``, ``Bearer V``).
_AUTHORIZATION = re.compile(
    r"""(?:\bauthorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token)\s+)?|\b(?:bearer|basic)\s+)"""
    r"""([^\s"',;]+)""", re.IGNORECASE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _secret_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    if last.lower() == "env_key" or _CAMEL.sub("_", last).lower() == "env_key":  # names a variable
        return False
    return any(word in _SECRET_WORDS for word in re.split(r"[-_]", _CAMEL.sub("_", last).lower()))


def embedded_secrets(arg: str) -> list[str]:
    """Secret values written inside one argument or variable value
    (``api_key="V"``, ``{"token": "V"}``, ``Authorization: Bearer V``)."""
    found = [m.group(1) for m in _AUTHORIZATION.finditer(arg)]
    found += [m.group(2) for m in _EMBEDDED.finditer(arg) if _secret_name(m.group(1))]
    return found


def argv_secrets(argv: Sequence[str]) -> list[str]:
    """Secret values in a command line: the value of a flag naming a key,
    token, secret, password or auth (``--api-key V``, ``--api-key=V``,
    ``--apiKey V``, ``-k V``), of a ``NAME=VALUE`` argument whose name does
    (quotes around the value removed too), of such a name assigned inside an
    argument (``-c 'model_providers.x={api_key="V"}'``, ``'{"token": "V"}'``),
    and the credentials of an HTTP authorization written in an argument
    (``--header 'Authorization: Bearer V'``)."""
    found: list[str] = []
    take_next = False
    for arg in argv:
        arg = str(arg)
        found += embedded_secrets(arg)
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
    return [v for v in dict.fromkeys(out) if len(v) >= 4]
