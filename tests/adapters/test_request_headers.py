"""The rate-limit headroom read from an answer's headers: the raw-bytes path reads what ``items()`` would."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from otelstream.adapters import request


class _ItemsOnly:
    """An answer whose headers offer only ``items()``: the general path."""

    def __init__(self, headers: httpx2.Headers) -> None:
        self.headers = _Items(headers)


class _Items:
    def __init__(self, headers: httpx2.Headers) -> None:
        self._headers = headers

    def items(self) -> Any:
        return self._headers.items()


CASES = [
    [],
    [("content-type", "text/event-stream")],
    [("X-RateLimit-Remaining-Requests", "99"), ("x-ratelimit-limit-requests", "100")],
    [("x-ratelimit-limit-tokens", "1000"), ("x-ratelimit-remaining-requests", "3"), ("x-request-id", "r1")],
    [("x-ratelimit-remaining-tokens", "5"), ("x-ratelimit-remaining-tokens", "6")],  # twice: joined, not a number
    [("x-ratelimit-remaining-tokens", "-1"), ("x-ratelimit-limit-tokens", "nan"), ("x-ratelimit-limit-requests", "")],
    [("anthropic-ratelimit-tokens-remaining", "1e3"), ("anthropic-ratelimit-input-tokens-limit", "7" * 30)],
    [("anthropic-ratelimit-output-tokens-limit", "8"), ("ANTHROPIC-RATELIMIT-OUTPUT-TOKENS-REMAINING", " 4 ")],
    [("x-ratelimit-limit-requests", "10"), ("x-other", "caf\u00e9")],  # not ASCII: the general path
]


@pytest.mark.parametrize("pairs", CASES)
def test_raw_path_reads_what_items_reads(pairs: list[tuple[str, str]]) -> None:
    headers = httpx2.Headers([(k.encode("utf-8"), v.encode("utf-8")) for k, v in pairs])
    response = httpx2.Response(200, headers=headers)
    assert request.ratelimits_of(response) == request.ratelimits_of(_ItemsOnly(headers))


def test_headers_that_fail_read_as_none_sent() -> None:
    class Broken:
        @property
        def headers(self) -> Any:
            raise RuntimeError("no headers")

    assert request.ratelimits_of(Broken()) == ()


def test_server_of_client_answers_as_server_of_for_each_base_url() -> None:
    urls = [httpx2.URL("https://api.example.com/v1/"), httpx2.URL("http://localhost:8080/"), httpx2.URL("http://h/")]
    for url in urls + urls[::-1]:
        assert request.server_of_client(url) == request.server_of(url)
    assert request.server_of_client(None) == (None, None)

    class Mutable:
        host, port, scheme = "a", None, "https"

    m = Mutable()
    assert request.server_of_client(m) == ("a", 443)
    m.host = "b"  # not an httpx URL: never kept
    assert request.server_of_client(m) == ("b", 443)
