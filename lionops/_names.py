"""Near misses of keyword names: a misspelled keyword is refused, not passed on.

Where leftover keywords are passed on (``operate()``'s become request
options, ADR-0022 D1; an API ``iModel``'s become default request options), a
name that is a small edit away from a real keyword is almost surely a typo
that would otherwise be sent to the provider instead of taking effect.
"""

from __future__ import annotations

from collections.abc import Iterable

from rapidfuzz import process
from rapidfuzz.distance import DamerauLevenshtein

__all__ = ["PROVIDER_OPTIONS", "closest", "near_miss"]

#: Request options of OpenAI-compatible servers: leftover keywords that are
#: never taken for a misspelled keyword, however close they are.
PROVIDER_OPTIONS: frozenset[str] = frozenset({
    "temperature", "top_p", "top_k", "min_p", "typical_p", "max_tokens", "max_completion_tokens",
    "min_tokens", "n", "seed", "stop", "user", "logprobs", "top_logprobs", "logit_bias",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "tool_choice",
    "parallel_tool_calls", "functions", "function_call", "stream", "stream_options", "metadata",
    "store", "reasoning", "reasoning_effort", "include_reasoning", "verbosity", "service_tier",
    "modalities", "audio", "prediction", "web_search_options", "safety_identifier",
    "prompt_cache_key", "extra_body", "extra_headers", "provider", "models", "route", "transforms",
    "keep_alive", "options", "format", "think", "num_ctx", "num_predict", "mirostat", "grammar",
    "json_schema", "structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
    "chat_template_kwargs", "ignore_eos", "skip_special_tokens", "best_of", "echo", "suffix",
    "deadline",
})


def near_miss(name: str, keywords: Iterable[str], allowed: Iterable[str] = ()) -> str | None:
    """The keyword ``name`` is probably a misspelling of, or ``None`` (a pure check).

    A near miss is within one edit of a keyword (two for names of eight
    characters or more; a swap of neighbours counts as one). ``name`` itself
    being a keyword, in ``allowed`` or in :data:`PROVIDER_OPTIONS`, or shorter
    than four characters, is never a near miss.
    """
    keywords = tuple(keywords)
    if len(name) < 4 or name in keywords or name in PROVIDER_OPTIONS or name in set(allowed):
        return None
    limit = 1 if len(name) < 8 else 2
    found = process.extractOne(name, keywords, scorer=DamerauLevenshtein.distance, score_cutoff=limit)
    return None if found is None else found[0]


def closest(name: str, names: Iterable[str], limit: int = 3) -> list[str]:
    """The names of ``names`` closest to ``name`` (at most ``limit``, closest
    first), for a "did you mean" hint on a misspelled name (a pure function).

    A name is close within a third of its length in edits (at least one; a
    swap of neighbours counts as one), or when one name contains the other
    (``"fund"`` for ``"refund"``).
    """
    pool = list(dict.fromkeys(n for n in names if isinstance(n, str)))
    if not name or not pool:
        return []
    cutoff = max(1, len(name) // 3)
    found = process.extract(name, pool, scorer=DamerauLevenshtein.distance, score_cutoff=cutoff, limit=limit)
    out = [n for n, _, _ in found]
    lowered = name.lower()
    for n in pool:
        if len(out) >= limit:
            break
        if n not in out and len(name) >= 3 and (lowered in n.lower() or n.lower() in lowered):
            out.append(n)
    return out
