"""Secrets in text: which names hold them, the marks that replace them, URLs shown without them.

One home for what the endpoints (HTTP and CLI agents), the cassette
redactor (:mod:`lionops._redact`) and the loopback test server
(:mod:`lionops.testing.openai_server`) agree on:

- a *secret name*: a header, JSON field or query parameter whose name ends
  in a credential word (``Authorization``, ``x-api-key``, ``access_token``,
  ``cookie``, ...), :func:`is_secret_name`;
- a *secret variable*: an environment variable whose name contains one
  (``OPENAI_API_KEY``, ``GH_TOKEN``, ``DB_PASSWORD``, ``AUTH_HEADER``, ...),
  :func:`is_secret_variable`; the union of what the CLI endpoints and the
  cassette redactor each recognised before;
- the marks: :data:`MARK` (``***``) in URLs, headers, cassettes and the
  messages of HTTP endpoints, :data:`TEXT_MARK` (``[redacted]``) in the
  stderr tail and messages of CLI agent errors;
- :func:`scrub_url`: a URL without user info and fragment, its query left
  out or its values redacted.

This module is at the bottom of the house: it imports nothing of lionops.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

__all__ = [
    "MARK", "TEXT_MARK", "MIN_SECRET", "is_secret_name", "is_secret_variable", "secret_variables",
    "replace_secrets", "redact_header", "scrub_url", "url_query_secrets", "url_secrets", "scrubbed_preview",
    "scrubbed_message",
]

#: What a secret is replaced with in URLs, headers, cassettes and HTTP endpoint messages.
MARK = "***"
#: What a secret is replaced with in the stderr tail and messages of CLI agent errors.
TEXT_MARK = "[redacted]"
#: Shorter values are never treated as secrets (they would replace ordinary text).
MIN_SECRET = 4

_SECRET_NAME = re.compile(
    r"(?i)(^|[-_])(api[-_]?key|token|access[-_]?token|refresh[-_]?token|secret|client[-_]?secret|"
    r"password|passwd|authorization|cookie|set-cookie|credentials?|signature)$"
)
_SECRET_VARIABLE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether a header, field or query parameter name denotes a credential."""
    return bool(_SECRET_NAME.search(name.strip()))


def is_secret_variable(name: str) -> bool:
    """Whether an environment variable's name says its value is a credential."""
    return bool(_SECRET_VARIABLE.search(name))


def secret_variables(env: Mapping[str, str], *, min_length: int = MIN_SECRET) -> list[str]:
    """The values of ``env``'s secret variables at least ``min_length`` long."""
    return [v for k, v in env.items() if v and len(v) >= min_length and is_secret_variable(k)]


def replace_secrets(text: str, secrets: Iterable[str], mark: str = MARK) -> str:
    """``text`` with every one of ``secrets`` replaced by ``mark``, longest
    first (so a secret that holds another goes whole)."""
    for value in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(value, mark)
    return text


def redact_header(value: str) -> tuple[str, str]:
    """A credential header's value as shown, and the secret in it: an
    ``<scheme> <credential>`` value keeps its scheme (``Bearer ***``)."""
    scheme, _, token = value.partition(" ")
    if token and scheme.isalpha():
        return f"{scheme} {MARK}", token.strip()
    return MARK, value


def scrub_url(url: str, query: Callable[[str], str] | None = None) -> str:
    """``url`` without user info and fragment (they may hold credentials).

    The query is left out, or, with ``query``, kept with the value of each
    secret-named parameter replaced by :data:`MARK` and every other value
    passed through ``query`` (a scrubber of known secrets).
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    kept = ""
    if query is not None:
        pairs = [(k, MARK if is_secret_name(k) else query(v))
                 for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        kept = urlencode(pairs, safe="*")
    return urlunsplit((parts.scheme, host, parts.path, kept, ""))


def url_query_secrets(url: str) -> list[str]:
    """The parts of ``url`` that may be credentials: the query, and each query
    value both as written (percent-encoded) and decoded."""
    text = urlsplit(url).query
    found = [text]
    found += [value for _, value in parse_qsl(text)]
    found += [pair.partition("=")[2] for pair in text.split("&")]
    return [v for v in found if v]


def url_secrets(url: str) -> list[str]:
    """Every part of ``url`` that may be a credential: its user info (whole,
    the password, each as written and decoded) and its query values
    (:func:`url_query_secrets`). What every endpoint scrubs of its base URL."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return [url]  # cannot be read apart: the whole URL is the secret
    found = url_query_secrets(url)
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if userinfo:
        found.append(userinfo)
        raw_password = userinfo.partition(":")[2]
        found += [raw_password, unquote(raw_password)]
    if password:
        found.append(password)
    return [v for v in found if v]


def scrubbed_preview(text: str, scrub: Callable[[str], str], longest: int, limit: int = 300) -> str:
    """The first ``limit`` characters of ``scrub(text)``: scrubbed before the
    cut, so a secret that straddles the cut is removed whole, never shown in part.

    ``longest`` is the length of the longest secret. Only a prefix of ``text``
    is scrubbed, one whose scrubbed form is ``longest`` characters longer than
    the preview: a secret cut by the end of that prefix can then only sit in
    those extra characters, never in the preview.
    """
    window = 2 * (limit + longest)
    while True:
        clean = scrub(text[:window])
        if window >= len(text) or len(clean) >= limit + longest:
            return clean[:limit]
        window *= 4


_CREDENTIAL_TEXT = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}|\bsk-[A-Za-z0-9_-]{8,}")


def scrubbed_message(text: str, env: Mapping[str, str], limit: int = 200) -> str:
    """At most ``limit`` characters of ``text`` (an exception's message) with
    the values of ``env``'s secret variables, bearer and basic credentials and
    ``sk-`` keys replaced by :data:`TEXT_MARK`; ``...`` marks a cut."""
    secrets = sorted(secret_variables(env, min_length=8), key=len, reverse=True)

    def scrub(part: str) -> str:
        return _CREDENTIAL_TEXT.sub(TEXT_MARK, replace_secrets(part, secrets, TEXT_MARK))

    shown = scrubbed_preview(text, scrub, len(secrets[0]) if secrets else 0, limit + 1)
    return shown if len(shown) <= limit else shown[:limit] + "..."
