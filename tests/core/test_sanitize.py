"""The text cleaner every label, span name and attribute string passes through (issue 21, defect 1)."""

from __future__ import annotations

import unicodedata
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from otelstream import names
from otelstream.core.sanitize import clean_attributes, clean_text

# Every code point, lone surrogates included, with the troublesome ones made likely.
HOSTILE = st.sampled_from(
    ["\udce9", "\ud800", "\udfff", "\x00", "\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\u2028", "\u202e", "\u2066",
     "\u200b", "\ufeff", "\ue000", "\U0010ffff", "\u00a0", "\u0301", "😀", "\ufffd"]
)  # fmt: skip
TEXT = st.lists(st.one_of(st.characters(), HOSTILE, st.characters(codec="ascii")), max_size=400).map("".join)
# control, format, surrogate, private use, unassigned, line and paragraph separators
_FORBIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def _assert_clean(out: str, limit: int) -> None:
    out.encode("utf-8")  # strict: a lone surrogate raises here
    assert len(out) <= limit
    assert not any(unicodedata.category(ch) in _FORBIDDEN for ch in out), ascii(out)
    assert "\n" not in out and "\x00" not in out


@given(TEXT, st.integers(min_value=1, max_value=300))
def test_clean_text_is_encodable_bounded_control_free_and_idempotent(value: str, limit: int) -> None:
    out = clean_text(value, limit)
    _assert_clean(out, limit)
    assert clean_text(out, limit) == out
    # nothing but the replacements changes: same length (up to the cut), printable characters kept in place
    assert len(out) == min(len(value), limit)
    assert all(o == v or o == names.TEXT_REPLACEMENT for o, v in zip(out, value, strict=False))


@given(st.text(alphabet=st.characters(codec="ascii", categories=["L", "N", "P", "S", "Zs"]), max_size=300))
def test_clean_printable_text_is_returned_as_is(value: str) -> None:
    assert clean_text(value) == value[: names.MAX_TEXT_LENGTH]


def test_clean_text_examples() -> None:
    assert clean_text("gpt-4o\udce9") == "gpt-4o\ufffd"
    assert clean_text("a\nb\x00c\u202ed") == "a\ufffdb\ufffdc\ufffdd"
    assert clean_text("x" * 1000) == "x" * names.MAX_TEXT_LENGTH
    assert clean_text("modèle 😀") == "modèle 😀"


@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]),
                       st.one_of(TEXT, st.integers(), st.floats(), st.booleans(), st.tuples(TEXT, TEXT),
                                 st.lists(TEXT, max_size=3))))  # fmt: skip
def test_clean_attributes_cleans_every_string_value(attrs: dict[str, Any]) -> None:
    original = dict(attrs)
    clean_attributes(attrs)
    assert attrs.keys() == original.keys()
    for key, value in attrs.items():
        before = original[key]
        if isinstance(before, str):
            assert value == clean_text(before)
        elif isinstance(before, tuple | list):
            assert list(value) == [clean_text(v) for v in before]
        else:
            assert value is before  # numbers and booleans untouched
    again = dict(attrs)
    clean_attributes(again)
    assert again == attrs
