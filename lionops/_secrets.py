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
  out or its values redacted;
- partial echoes: every run of :data:`PARTIAL_ECHO` characters of a long
  key-like secret is masked as the whole one is (:func:`mask_partial_echoes`,
  part of :func:`replace_secrets`).

This module is at the bottom of the house: it imports nothing of lionops.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

__all__ = [
    "MARK", "TEXT_MARK", "MIN_SECRET", "is_secret_name", "is_secret_variable", "secret_variables",
    "PARTIAL_ECHO", "replace_secrets", "mask_partial_echoes", "redact_header", "scrub_url", "url_query_secrets",
    "url_secrets", "scrubbed_preview",
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


#: A run of this many characters of a long secret, or more, is a partial echo
#: (``Incorrect API key provided: sk-test-SENTI****-123``) and is masked too.
PARTIAL_ECHO = 8
#: Secrets shorter than this are masked whole only: a run of eight characters
#: of a short value (a date in a base URL's query) is ordinary text too often.
_PARTIAL_FROM = 16
#: The window the scan looks up: every run of ``PARTIAL_ECHO`` characters
#: holds a whole window starting at a multiple of it.
_WINDOW = PARTIAL_ECHO // 2
_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _folded(text: str) -> str:
    """``text`` lower-cased, as long as it is (an echo in another case is
    still an echo; each character keeps its place)."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_FOLD)


def replace_secrets(text: str, secrets: Iterable[str], mark: str = MARK) -> str:
    """``text`` with every one of ``secrets`` replaced by ``mark``, longest
    first (so a secret that holds another goes whole), then each partial
    echo of a long one (:func:`mask_partial_echoes`)."""
    values = sorted({s for s in secrets if s}, key=len, reverse=True)
    for value in values:
        text = text.replace(value, mark)
    return mask_partial_echoes(text, values, mark)


def _key_like(secret: str) -> bool:
    """Whether a secret reads as a key or token rather than a path or a phrase
    (a secret-named variable may hold ``/home/me/.config/creds.json``, whose
    runs are in ordinary text): only those are masked in part."""
    return not secret.startswith(("/", "~", ".")) and not any(c.isspace() for c in secret) and "\\" not in secret


@lru_cache(maxsize=64)
def _windows(secrets: tuple[str, ...]) -> dict[str, tuple[tuple[str, int], ...]]:
    """Each window of the long ``secrets``, lower-cased -> where it sits:
    (the secret lower-cased, offset)."""
    found: dict[str, list[tuple[str, int]]] = {}
    for secret in secrets:
        if len(secret) >= _PARTIAL_FROM and _key_like(secret):
            folded = _folded(secret)
            for at in range(len(folded) - _WINDOW + 1):
                found.setdefault(folded[at:at + _WINDOW], []).append((folded, at))
    return {window: tuple(places) for window, places in found.items()}


def _echo_at(text: str, start: int, places: tuple[tuple[str, int], ...]) -> tuple[int, int]:
    """The longest run of text around ``start`` that a secret holds, as (from, to)."""
    best = (start, start)
    for secret, at in places:
        left, back = start, at
        while left > 0 and back > 0 and text[left - 1] == secret[back - 1]:
            left, back = left - 1, back - 1
        right, ahead = start + _WINDOW, at + _WINDOW
        while right < len(text) and ahead < len(secret) and text[right] == secret[ahead]:
            right, ahead = right + 1, ahead + 1
        if right - left > best[1] - best[0]:
            best = (left, right)
    return best


def mask_partial_echoes(text: str, secrets: Iterable[str], mark: str = MARK) -> str:
    """``text`` with every run of :data:`PARTIAL_ECHO` characters or more of
    a secret of 16 characters or more replaced by ``mark``: a provider that
    echoes a key with its middle starred (or a prefix of it) shows none of it.
    Secrets that read as paths or phrases (a leading ``/``, ``~`` or ``.``, a
    backslash, a space) are masked whole only. Case does not count: a run
    echoed upper- or lower-cased is masked too.

    The scan looks up one window in every :data:`_WINDOW` characters, then
    grows each hit to the whole run the secret holds.
    """
    windows = _windows(tuple(secrets))
    if not windows:
        return text
    folded = _folded(text)
    hits = [i for i in range(0, len(folded) - _WINDOW + 1, _WINDOW) if folded[i:i + _WINDOW] in windows]
    if not hits:
        return text
    parts: list[str] = []
    done = 0
    for start in hits:
        if start < done:
            continue
        left, right = _echo_at(folded, start, windows[folded[start:start + _WINDOW]])
        if right - left >= PARTIAL_ECHO:
            left = max(left, done)
            parts += (text[done:left], mark)
            done = right
    return "".join(parts) + text[done:] if parts else text


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
