"""The label tuples resolved at the send: those kept per stream shape read as resolved afresh."""

from __future__ import annotations

from otelstream import names
from otelstream.core.report import StreamStart
from otelstream.export.labels import LabelTables


def _start(model: str | None, address: str | None = "api.example.com", port: int | None = 443) -> StreamStart:
    return StreamStart(surface=names.CHAT_COMPLETIONS, request_model=model, server_address=address, server_port=port)


def test_kept_tuples_read_as_resolved() -> None:
    tables = LabelTables(cap=5)
    starts = [_start("m1"), _start(None), _start("m1", None, None), _start("m2", "h2", 8080)]
    first = [tables.at_start(s, ()) for s in starts]
    assert [tables.at_start(s, ()) for s in starts] == first
    assert first == [tables._resolve(s, ()) for s in starts]
    assert len(tables._starts) == 4


def test_a_value_over_the_cap_is_not_kept_and_is_admitted_once_the_cap_is_raised() -> None:
    tables = LabelTables(cap=1)
    assert tables.at_start(_start("m1"), ())[2] == "m1"
    assert tables.at_start(_start("m2"), ())[2] == names.MODEL_OTHER
    tables.configure(2, (), 64)
    assert tables.at_start(_start("m2"), ())[2] == "m2"
    assert tables.at_start(_start("m2"), ())[2] == "m2"
