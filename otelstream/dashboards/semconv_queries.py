"""The queries for the GenAI semantic-convention version the services emit (``--semconv``).

The shipped files query the default conventions' gen_ai.client.* series. For ``latest`` each such query is rewritten
to the v0.1.0 series; for ``dup`` to the new series ``or`` the old, each aggregated first, so where a process emits
both they are never added up, and a fleet still mid-migration (some processes on either) is read whole."""

from __future__ import annotations

import json
import re
from typing import Any

from otelstream import names

# the default conventions' families the rewrite replaces
OLD_FAMILIES = (*names.SEMCONV_RENAMED, names.PROM_TOKEN_USAGE)
_OLD = "|".join(re.escape(f) for f in OLD_FAMILIES)
_SUFFIX = r"(?P<suffix>_bucket|_sum|_count)"
_OLD_SERIES = re.compile(rf"\b(?:{_OLD}){_SUFFIX}?\b")
# `sum [by|without (...)] (rate(series{...}[range]))`: every query of a gen_ai.client.* series in the shipped files has
# this form (a test holds them to it)
_AGGREGATE = re.compile(
    rf"(?P<agg>sum(?:\s*(?:by|without)\s*\([^)]*\))?)\s*\(\s*rate\((?P<family>{_OLD}){_SUFFIX}"
    rf"(?P<sel>\{{[^}}]*\}})?\[(?P<range>[^\]]+)\]\)\s*\)"
)
# a rule test's input series (a `- series:` line and its `values:` line)
_SERIES_ITEM = re.compile(
    rf"^(?P<indent>[ \t]*)- series: '(?P<family>{_OLD}){_SUFFIX}(?P<sel>\{{[^']*\}})'\n"
    r"(?P<vindent>[ \t]*)values: '(?P<values>[^']*)'\n",
    re.M,
)
_TOKEN_TYPE = re.compile(rf'{names.LABEL_TOKEN_TYPE}="(?P<kind>[a-z]+)"')
_USAGE_COUNTERS = {
    names.TOKEN_TYPE_INPUT: names.PROM_USAGE_INPUT_TOKENS,
    names.TOKEN_TYPE_OUTPUT: names.PROM_USAGE_OUTPUT_TOKENS,
}
_DOTTED_RENAMED = {
    names.OTEL_OPERATION_DURATION: names.OTEL_INFERENCE_DURATION,
    names.OTEL_TIME_TO_FIRST_CHUNK: names.OTEL_INFERENCE_TIME_TO_FIRST_CHUNK,
    names.OTEL_TIME_PER_OUTPUT_CHUNK: names.OTEL_INFERENCE_TIME_PER_OUTPUT_CHUNK,
}


def _without_token_type(selector: str) -> tuple[str | None, str]:
    """(the token type a selector names, the selector without that matcher)."""
    found = _TOKEN_TYPE.search(selector)
    if found is None:
        return None, selector
    rest = (selector[: found.start()] + selector[found.end() :]).replace("{, ", "{").replace(", }", "}")
    rest = re.sub(r",\s*,", ",", rest)
    return found["kind"], "" if rest == "{}" else rest


def _usage_counter(kind: str) -> str:
    if kind not in _USAGE_COUNTERS:
        raise ValueError(f"no usage counter for the token type {kind!r}")
    return _USAGE_COUNTERS[kind]


def _latest_query(m: re.Match[str]) -> str:
    """The latest conventions' form of one `sum ... (rate(...))` of a default series."""
    agg, family, suffix, sel, window = m["agg"], m["family"], m["suffix"], m["sel"] or "", m["range"]
    if family != names.PROM_TOKEN_USAGE:
        return f"{agg} (rate({names.SEMCONV_RENAMED[family]}{suffix}{sel}[{window}]))"
    if suffix != "_sum":
        # a distribution across token types has no counterpart: the per-call histograms are one per type
        raise ValueError(f"{family}{suffix} has no counterpart under the latest conventions")
    kind, rest = _without_token_type(sel)
    if kind is not None:
        return f"{agg} (rate({_usage_counter(kind)}_total{rest}[{window}]))"
    # the token types are separate counters now; their label is put back, so a grouping by it still works
    parts = " or ".join(
        f'label_replace(rate({counter}_total{sel}[{window}]), "{names.LABEL_TOKEN_TYPE}", "{kind}", "", "")'
        for kind, counter in _USAGE_COUNTERS.items()
    )
    return f"{agg} ({parts})"


def _dup_query(m: re.Match[str]) -> str:
    old = re.sub(r"\s*\n\s*", " ", m[0]).replace("( ", "(").replace(" )", ")")
    return f"({_latest_query(m)} or {old})"


def _latest_series(m: re.Match[str]) -> str:
    """A rule test's input series under the latest conventions' name (same values)."""
    family, suffix, sel = m["family"], m["suffix"], m["sel"]
    if family != names.PROM_TOKEN_USAGE:
        name = names.SEMCONV_RENAMED[family] + suffix
    else:
        kind, sel = _without_token_type(sel)
        if suffix != "_sum" or kind is None:
            raise ValueError(f"{family}{suffix}{m['sel']} has no counterpart under the latest conventions")
        name = _usage_counter(kind) + "_total"
        modality = f'{names.LABEL_TOKEN_MODALITY}="{names.TOKEN_MODALITY_UNKNOWN}"'
        sel = "{" + modality + "}" if not sel else sel[:-1] + "," + modality + "}"
    return f"{m['indent']}- series: '{name}{sel}'\n{m['vindent']}values: '{m['values']}'\n"


def with_semconv(rel: str, content: bytes, semconv: str) -> bytes:
    """A shipped file for the gen_ai.client.* series of ``semconv`` (``names.SEMCONV_*``): the default conventions'
    as shipped; ``latest``: the v0.1.0 series; ``dup``: the v0.1.0 series or, where a process emits none, the default
    ones (a rule test's input series are then given under both names: the results must not change)."""
    if semconv == names.SEMCONV_DEFAULT:
        return content
    if semconv not in names.SEMCONV_MODES:
        raise ValueError(f"semconv {semconv!r}: one of {', '.join(names.SEMCONV_MODES)}")
    query = _latest_query if semconv == names.SEMCONV_LATEST else _dup_query
    if rel.endswith(".json"):
        dashboard = json.loads(content)
        exprs = []

        def panels(items: list[Any]) -> None:
            for panel in items:
                for target in panel.get("targets", []):
                    target["expr"] = _AGGREGATE.sub(query, target["expr"])
                    exprs.append(target["expr"])
                panels(panel.get("panels", []))

        panels(dashboard.get("panels", []))
        text = json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"
        left = "\n".join(exprs)
    else:
        text = _AGGREGATE.sub(query, content.decode("utf-8"))
        if semconv == names.SEMCONV_LATEST:
            text = _SERIES_ITEM.sub(_latest_series, text)
        else:
            text = _SERIES_ITEM.sub(lambda m: _latest_series(m) + m[0], text)
        left = re.sub(r"#[^\n]*", "", text)  # comments may name the old series: they query nothing
    if semconv == names.SEMCONV_LATEST:
        stray = sorted({m[0] for m in _OLD_SERIES.finditer(left)})
        if stray:  # a query of a form the rewrite does not know: better no file than one that reads nothing
            raise ValueError(f"{rel}: no latest-conventions rewrite for {', '.join(stray)}")
        for old, new in _DOTTED_RENAMED.items():
            text = text.replace(old, new)
    return text.encode("utf-8")
