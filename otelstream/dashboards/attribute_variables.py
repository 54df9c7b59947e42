"""A dashboard variable per application metric attribute: when the application names metric attributes (the
``metric_attributes`` setting, or ``--metric-attributes``), the Grafana dashboards are written with one variable per
attribute label, and every otelstream selector filters by it."""

from __future__ import annotations

import json
from typing import Any

from otelstream import names

# Every otelstream selector of the shipped dashboards starts with these matchers (the model test holds them to it);
# ALERTS selectors use `"$instance|"` and are left alone: alerts carry no application attributes.
SCOPE = 'job=~"$job", instance=~"$instance"'
# series of a process, not of its streams: they carry no application attribute, which a filter on one would hide
_PROCESS_SERIES = (names.PROM_SELF_CHECK_FAILURES,)


def attribute_labels(keys: str | tuple[str, ...] | list[str]) -> list[str]:
    """The label of each application attribute key, exactly as the metric sinks name it; a key they would refuse
    (reserved, another key's label) is an error here."""
    from otelstream.attribution import valid_key
    from otelstream.export.points import Schema, attribute_label

    items = [k.strip() for k in (keys.split(",") if isinstance(keys, str) else keys) if k.strip()]
    for key in items:
        why = valid_key(key)
        if why is not None:
            raise ValueError(f"metric attribute {key!r}: {why}")
    kept, refused = Schema.usable(tuple(dict.fromkeys(items)))
    if refused:
        raise ValueError("; ".join(f"metric attribute {key!r}: {why}" for key, why in refused))
    return [attribute_label(key) for key in kept]


def with_attribute_variables(content: bytes, labels: list[str]) -> bytes:
    """A Grafana dashboard with one variable per attribute label (after ``surface``) that every selector uses.

    The variable's All is ``.*``, not Grafana's list of values: streams started outside any ``attributes()`` block
    have the label empty, and a list of the values would hide them.
    """
    if not labels:
        return content
    dashboard = json.loads(content)
    variables = dashboard["templating"]["list"]
    taken = {v["name"] for v in variables}
    clash = sorted(taken.intersection(labels))
    if clash:
        raise ValueError(f"metric attribute label(s) {', '.join(clash)} would shadow a dashboard variable")
    datasource = {"type": "prometheus", "uid": "${datasource}"}
    added = [
        {
            "type": "query",
            "name": label,
            "label": label,
            "description": f"The application attribute {label} (metric_attributes), capped per process: "
            "extra values show as _OTHER; empty for streams started without it.",
            "datasource": datasource,
            "query": {
                "query": f"label_values(otelstream_streams_total{{{SCOPE}}}, {label})",
                "refId": f"{label}-query",
                "qryType": 1,
            },
            "refresh": 2,
            "multi": True,
            "includeAll": True,
            "allValue": ".*",
            "sort": 1,
            "regex": "",
            "hide": 0,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "options": [],
        }
        for label in labels
    ]
    names = [v["name"] for v in variables]
    at = names.index("surface") + 1 if "surface" in names else len(variables)
    variables[at:at] = added
    scope = SCOPE + "".join(f', {label}=~"${label}"' for label in labels)

    def panels(items: list[Any]) -> None:
        for panel in items:
            for target in panel.get("targets", []):
                if any(series in target["expr"] for series in _PROCESS_SERIES):
                    continue
                target["expr"] = target["expr"].replace(SCOPE + ",", scope + ",").replace(SCOPE + "}", scope + "}")
            panels(panel.get("panels", []))

    panels(dashboard.get("panels", []))
    return (json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
