"""Redaction: what never reaches a cassette.

A :class:`Redactor` replaces secrets in text and in JSON-compatible values:

- values of credential headers (``Authorization``, ``api-key``, ``x-api-key``,
  ``cookie``, anything naming a key, token, secret or password); the bearer
  or key value is also removed wherever else it appears in the same exchange;
- string values of JSON fields with credential names (``api_key``,
  ``access_token``, ``client_secret``, ``password``, ...);
- built-in patterns for common key shapes (``sk-...``, ``Bearer ...``, AWS,
  GitHub, Slack, Google keys) and the caller's ``patterns`` (regular expressions);
- literal ``secrets`` and, by default, the values of environment variables
  whose names say key, token, secret or password; of those 16 characters
  long or more, also every run of 8 of their characters (a partial echo).

The same redactor normalizes a live request before it is compared with a
recorded one, so a secret in the request never makes replay diverge.

Patterns given in code are trusted as written. Patterns read from a cassette
file are not: :func:`pattern_problem` accepts only those whose work per text
position is bounded, so a cassette cannot make redaction (and so replay)
run for ever (catastrophic backtracking, e.g. ``(a|aa)+$``).
"""

from __future__ import annotations

import os
import re
import re._constants as _sre  # type: ignore[import-not-found]  # typeshed has no stubs for re's private parser
import re._parser as _sre_parse  # type: ignore[import-not-found]  # (the same)
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ._secrets import MARK, MIN_SECRET, is_secret_name, mask_partial_echoes, redact_header, scrub_url, secret_variables

__all__ = ["Redactor", "DEFAULT_PATTERNS", "REPLACEMENT", "pattern_problem", "MAX_PATTERN_LENGTH",
           "MAX_PATTERNS", "MAX_QUANTIFIER", "MAX_WORK"]

#: What a secret is replaced with (the same mark the endpoint's ``scrub`` uses).
REPLACEMENT = MARK

#: Key shapes redacted by default (regular expressions).
DEFAULT_PATTERNS: tuple[str, ...] = (
    r"\bsk-[A-Za-z0-9_\-]{8,}",
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
    r"\bAIza[0-9A-Za-z_\-]{35}",
)



#: A pattern read from a cassette is at most this many characters long.
MAX_PATTERN_LENGTH = 200
#: A cassette holds at most this many redaction patterns.
MAX_PATTERNS = 32
#: The largest upper bound of a quantifier in a pattern read from a cassette.
MAX_QUANTIFIER = 256
#: The most character steps a pattern read from a cassette may take at one
#: text position: its backtracking choices (the product of the ranges
#: ``max - min + 1`` of the quantifiers a match can go back into) times the
#: longest text it examines (an unbounded tail counted at its minimum).
MAX_WORK = 256

_SINGLE = frozenset({_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN})
_REPEATS = frozenset({_sre.MAX_REPEAT, _sre.MIN_REPEAT})


class _Refused(Exception):
    pass


def _work(items: Any, final: bool) -> tuple[int, int]:
    """``(choices, span)`` of a parsed sequence: backtracking choices and the
    longest text examined from one position. A quantifier at the very end of
    the pattern never backtracks (nothing after it can fail), so it adds no
    choices and may be unbounded; it examines at most its minimum before it
    can fail."""
    seq = list(items)
    choices, span = 1, 0
    for i, (op, arg) in enumerate(seq):
        last = final and i == len(seq) - 1
        if op in _SINGLE:
            c, w = 1, 1
        elif op is _sre.AT:
            c, w = 1, 0
        elif op is _sre.SUBPATTERN:
            c, w = _work(arg[-1], last)
        elif op is _sre.BRANCH:
            parts = [_work(branch, last) for branch in arg[1]]
            c, w = sum(p[0] for p in parts), max(p[1] for p in parts)
        elif op in _REPEATS:
            low, high, body = arg
            body = list(body)
            if not (len(body) == 1 and body[0][0] in _SINGLE):
                raise _Refused("a quantifier may repeat only one character, class or '.', not a group")
            if high is _sre.MAXREPEAT:
                if not last:
                    raise _Refused("only the pattern's last element may repeat without an upper bound")
                c, w = 1, max(low, 1)
            elif high > MAX_QUANTIFIER:
                raise _Refused(f"a quantifier's upper bound is at most {MAX_QUANTIFIER}")
            else:
                c, w = (1 if last else high - low + 1), high
        else:
            raise _Refused(f"{str(op).lower()} (backreferences, lookarounds, conditionals, atomic "
                           "groups, possessive quantifiers) is not allowed")
        choices, span = choices * c, span + w
        if choices * max(span, 1) > MAX_WORK:
            raise _Refused(f"it may take more than {MAX_WORK} steps at one text position "
                           "(backtracking choices times the text it examines)")
    return choices, span


def pattern_problem(pattern: Any) -> str | None:
    """Why ``pattern`` (read from a file, so untrusted) is refused, or ``None``.

    Accepted: a string of at most :data:`MAX_PATTERN_LENGTH` characters that
    compiles, cannot match the empty text, and whose quantifiers each repeat
    one character, class or ``.``; only the last element may be unbounded
    (``{8,}``, ``+``), the others have upper bounds of at most
    :data:`MAX_QUANTIFIER`; backreferences, lookarounds, conditionals,
    atomic groups and possessive quantifiers are refused; and it takes at
    most :data:`MAX_WORK` steps at one text position (backtracking choices
    times the text it examines). Applying such a pattern takes time linear in
    the text. ``sk-[A-Za-z0-9]{20,}``, ``tok_\\d{6}`` and
    ``(?:sk|pk)_live_[0-9a-z]{24}`` pass; ``(a|aa)+$``, ``(a+)+``, ``a*a*b``,
    ``(\\w+\\s?)*`` and ``.{0,256}a{200,}`` do not.
    """
    if not isinstance(pattern, str):
        return f"a pattern is a string, got {type(pattern).__name__}"
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"it is {len(pattern)} characters long (at most {MAX_PATTERN_LENGTH})"
    try:
        parsed = _sre_parse.parse(pattern)
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        return f"it does not compile: {exc}"
    if parsed.getwidth()[0] == 0:
        return "it can match the empty text"
    try:
        _work(parsed, True)
    except _Refused as exc:
        return str(exc)
    return None


def _env_secrets() -> list[str]:
    return secret_variables(os.environ, min_length=8)


@dataclass(frozen=True, slots=True)
class Redactor:
    """Replaces secrets in text, JSON values, headers and URLs (see the module docstring).

    Args:
        patterns: extra regular expressions whose matches are secrets.
        secrets: literal secret values (4 characters or more).
        defaults: apply :data:`DEFAULT_PATTERNS` and credential field names.
        env: treat secret-named environment variables' values as secrets.
        scrubbers: extra ``str -> str`` filters (an endpoint's ``scrub``).

    Credential *headers* are redacted even with ``defaults=False``: a
    cassette never holds an ``Authorization`` value.

    Raises:
        re.error: a pattern does not compile (at construction).
    """

    patterns: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    defaults: bool = True
    env: bool = True
    scrubbers: tuple[Callable[[str], str], ...] = field(default=(), compare=False)
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _literals: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pats = (*(DEFAULT_PATTERNS if self.defaults else ()), *self.patterns)
        object.__setattr__(self, "_compiled", tuple(re.compile(p) for p in pats))
        found = [*self.secrets, *(_env_secrets() if self.env else ())]
        literals = sorted({s for s in found if isinstance(s, str) and len(s) >= MIN_SECRET}, key=len, reverse=True)
        object.__setattr__(self, "_literals", tuple(literals))

    def with_secrets(self, values: Iterable[str]) -> Redactor:
        """A redactor that also removes ``values`` (shorter than 4 characters ignored)."""
        new = tuple(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET and v not in self.secrets)
        return self if not new else replace(self, secrets=(*self.secrets, *new))

    def with_scrubbers(self, scrubbers: Iterable[Callable[[str], str]]) -> Redactor:
        return replace(self, scrubbers=(*self.scrubbers, *scrubbers))

    # ------------------------------------------------------------ text and values

    def text(self, value: str) -> str:
        """``value`` with every known secret replaced by :data:`REPLACEMENT`."""
        for literal in self._literals:
            value = value.replace(literal, REPLACEMENT)
        value = mask_partial_echoes(value, self._literals, REPLACEMENT)
        for pattern in self._compiled:
            value = pattern.sub(REPLACEMENT, value)
        for scrub in self.scrubbers:
            value = scrub(value)
        return value

    def value(self, data: Any) -> Any:
        """A redacted copy of JSON-compatible ``data``: strings filtered,
        string values of credential-named fields replaced whole."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, Mapping):
            out: dict[str, Any] = {}
            for k, v in data.items():
                key = str(k)
                if self.defaults and isinstance(v, str) and v and REPLACEMENT not in v and is_secret_name(key):
                    out[key] = REPLACEMENT
                else:
                    out[key] = self.value(v)
            return out
        if isinstance(data, (list, tuple)):
            return [self.value(v) for v in data]
        return data

    # ------------------------------------------------------------ transport

    def headers(self, headers: Iterable[tuple[str, str]]) -> tuple[dict[str, str], list[str]]:
        """Redacted headers (names lower-cased) and the secret values found in them.

        A credential header keeps its scheme (``Bearer ***``).
        """
        out: dict[str, str] = {}
        found: list[str] = []
        for name, value in headers:
            key = name.lower()
            if is_secret_name(key):
                out[key], secret = redact_header(value)
                found.append(secret)
            else:
                out[key] = self.text(value)
        return out, found

    def url(self, url: str) -> str:
        """``url`` without user info and with credential query values redacted."""
        return scrub_url(url, self.text)

    def __repr__(self) -> str:
        return (f"Redactor(patterns={len(self._compiled)}, secrets={len(self._literals)}, "
                f"defaults={self.defaults}, env={self.env})")
