"""The endpoint's bounds in two groups: RetryPolicy and Limits (as httpx2's Timeout/Limits)."""

from __future__ import annotations

import math

import pytest

from lionops import ConfigurationError, iModel
from lionops.endpoints.openai import Limits, RetryPolicy
from lionops.errors import ArgumentTypeError


def test_the_groups_are_taken_and_each_keyword_refines_them() -> None:
    model = iModel(provider="ollama", model="m", retry=RetryPolicy(max_retries=5, backoff_initial=1.0),
                   limits=Limits(timeout=5, deadline=30), backoff_max=4, silence_timeout=9)
    endpoint = model.endpoint
    assert endpoint.retry == RetryPolicy(max_retries=5, backoff_initial=1.0, backoff_max=4.0)
    assert endpoint.limits == Limits(timeout=5.0, deadline=30.0, silence_timeout=9.0)
    assert (endpoint.timeout, endpoint.deadline, endpoint.max_retries) == (5.0, 30.0, 5)
    assert "backoff_max" not in endpoint.default_options and "silence_timeout" not in endpoint.default_options
    assert [endpoint.retry.backoff(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 4.0]


def test_the_defaults_are_the_documented_ones() -> None:
    endpoint = iModel(provider="ollama", model="m").endpoint
    assert (endpoint.retry.max_retries, endpoint.retry.retry_after_cap, endpoint.retry.backoff(1)) == (2, 60.0, 0.5)
    assert (endpoint.limits.timeout, endpoint.limits.deadline, endpoint.limits.silence_timeout,
            endpoint.limits.max_response_bytes) == (60.0, 600.0, 60.0, 16 * 1024 * 1024)


@pytest.mark.parametrize(("group", "kw"), [
    (RetryPolicy, {"max_retries": -1}), (RetryPolicy, {"max_retries": math.inf}),
    (RetryPolicy, {"backoff_max": math.nan}),
    (RetryPolicy, {"retry_after_cap": -1}),
    (Limits, {"timeout": 0}), (Limits, {"deadline": -1}), (Limits, {"silence_timeout": math.nan}),
    (Limits, {"max_response_bytes": math.inf}), (Limits, {"max_response_bytes": 0}),
])
def test_a_bad_bound_is_a_configuration_error_in_the_group_and_as_a_keyword(group, kw) -> None:
    with pytest.raises(ConfigurationError):
        group(**kw)
    with pytest.raises(ConfigurationError):
        iModel(provider="ollama", model="m", **kw)


@pytest.mark.parametrize(("group", "kw"), [(RetryPolicy, {"backoff_factor": "2"}), (Limits, {"timeout": True}),
                                          (Limits, {"max_response_bytes": "1e6"})])
def test_a_bound_that_is_no_number_is_a_type_error(group, kw) -> None:
    with pytest.raises(ArgumentTypeError, match="takes a number"):
        group(**kw)
    with pytest.raises(TypeError):
        iModel(provider="ollama", model="m", **kw)


def test_a_group_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="retry must be a RetryPolicy"):
        iModel(provider="ollama", model="m", retry={"max_retries": 1})
    with pytest.raises(ConfigurationError, match="limits must be a Limits"):
        iModel(provider="ollama", model="m", limits=RetryPolicy())
