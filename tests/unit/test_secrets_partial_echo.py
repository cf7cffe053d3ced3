"""A secret echoed in part (a provider's ``Incorrect API key provided:
sk-test-SENT****-123``, a prefix, a suffix, the middle starred) is masked as
the whole secret is: no run of eight of its characters is left, and text
that holds no such run is left as it is (``mask_partial_echoes``, applied by
every ``scrub`` and by the cassette ``Redactor``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lionops._redact import Redactor
from lionops._secrets import MARK, PARTIAL_ECHO, mask_partial_echoes, replace_secrets, scrubbed_message

KEY = "sk-test-SENTINEL-123"
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"


def runs_left(text: str, secret: str) -> list[str]:
    """The runs of ``PARTIAL_ECHO`` characters of ``secret`` still in ``text``, in any case."""
    secret, text = secret.lower(), text.lower()
    return [secret[i:i + PARTIAL_ECHO] for i in range(len(secret) - PARTIAL_ECHO + 1)
            if secret[i:i + PARTIAL_ECHO] in text]


@pytest.mark.parametrize("echo", [
    "Incorrect API key provided: sk-test-SENTINEL-***.",
    "Incorrect API key provided: sk-test-SENT****-123.",
    "key ****************SENTINEL-123 refused",
    "bad key (sk-test-S...NEL-123)",
    '{"error": "invalid x-api-key sk-test-SENTINEL"}',
    "TINEL-12",
    "sk-test-SENTINELsk-test-SENTINEL-12",
], ids=["suffix starred", "middle starred", "prefix starred", "ellipsis", "prefix in JSON", "eight inside",
        "repeated"])
def test_a_partial_echo_leaves_no_run_of_eight(echo: str) -> None:
    for shown in (replace_secrets(echo, [KEY]), Redactor(secrets=(KEY,), env=False, defaults=False).text(echo),
                  mask_partial_echoes(echo, [KEY])):
        assert not runs_left(shown, KEY), shown
        assert MARK in shown


def test_runs_shorter_than_eight_and_short_secrets_are_left_alone() -> None:
    assert replace_secrets("provided: sk-t****-123", [KEY]) == "provided: sk-t****-123"
    assert replace_secrets("2024-10-2 and 2024-10-21", ["2024-10-21"]) == "2024-10-2 and ***"  # 10 chars: whole only
    assert mask_partial_echoes("", [KEY]) == "" and mask_partial_echoes("abc", []) == "abc"


def test_a_governance_reason_echoing_part_of_a_secret_variable_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_TOKEN", "tok-0123456789abcdefXYZ")
    shown = scrubbed_message("denied: token tok-0123456789ab was revoked", {"SERVICE_TOKEN": "tok-0123456789abcdefXYZ"})
    assert "0123456789" not in shown and "revoked" in shown


@given(secret=st.text(ALPHABET, min_size=16, max_size=64),
       pieces=st.lists(st.tuples(st.text(" *.:'\"xyz", max_size=6), st.integers(0, 63), st.integers(PARTIAL_ECHO, 64)),
                       max_size=5))
def test_no_run_of_eight_of_a_long_secret_survives(secret: str, pieces: list[tuple[str, int, int]]) -> None:
    text = "".join(filler + secret[start % len(secret):][:length] for filler, start, length in pieces)
    shown = mask_partial_echoes(text, [secret])
    assert not runs_left(shown, secret)


@given(secret=st.text(ALPHABET, min_size=16, max_size=64), text=st.text(ALPHABET + " ", max_size=200))
def test_text_without_a_run_of_eight_is_unchanged(secret: str, text: str) -> None:
    if not runs_left(text, secret):
        assert mask_partial_echoes(text, [secret]) == text


@pytest.mark.parametrize("secret", ["/home/runner/.config/gcloud/creds.json", "~/.config/gcloud/creds.json",
                                    r"C:\Users\runner\creds.json", "correct horse battery staple"])
def test_a_secret_that_reads_as_a_path_or_a_phrase_is_masked_whole_only(secret: str) -> None:
    text = f"see /home/runner/.config/other and horse battery and {secret}"
    assert replace_secrets(text, [secret]) == text.replace(secret, MARK)


@pytest.mark.parametrize("echo", [
    "Incorrect API key provided: SK-TEST-SENTINEL-123.",
    "key sk-test-sentinel-123 refused",
    "bad key Sk-Test-Sentinel",
    "İİ then sk-test-sentinel-1",
], ids=["upper-cased", "lower-cased", "title-cased", "after a letter whose lower case is longer"])
def test_an_echo_in_another_case_leaves_no_run_of_eight(echo: str) -> None:
    for shown in (replace_secrets(echo, [KEY]), Redactor(secrets=(KEY,), env=False, defaults=False).text(echo),
                  mask_partial_echoes(echo, [KEY])):
        assert not runs_left(shown, KEY), shown
        assert MARK in shown
