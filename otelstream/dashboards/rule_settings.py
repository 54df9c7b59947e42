"""The settings the rules are written with: ``slo_objective`` (the error budget) and ``stall_threshold_s`` (the
stalled alert's ``for:``, which is the stall threshold). The rules' unit tests hold for the defaults, so with other
values the ``*.test.yml`` files are not written."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_OBJECTIVE_LINE = re.compile(r"\* [0-9.]+(  # setting: slo_objective)")
_STALL_FOR_LINE = re.compile(r"for: [0-9a-z.]+(  # setting: stall_threshold_s)")


@dataclass(frozen=True)
class RuleSettings:
    """The settings the shipped rules are written with (the defaults: exactly the shipped file)."""

    slo_objective: float = 0.99
    stall_threshold_s: float = 30.0

    @property
    def default(self) -> bool:
        return self == RuleSettings()


def rule_settings(slo_objective: float | None = None, stall_threshold_s: float | None = None) -> RuleSettings:
    """The arguments, else the settings (``OTELSTREAM_SLO_OBJECTIVE``, ``OTELSTREAM_STALL_THRESHOLD_S``), validated
    as ``instrument()`` validates them."""
    from otelstream import config

    cfg = config.load({"slo_objective": slo_objective, "stall_threshold_s": stall_threshold_s})
    return RuleSettings(cfg.slo_objective, cfg.stall_threshold_s)


def with_rule_settings(content: bytes, settings: RuleSettings) -> bytes:
    """The rules file with the objective and the stalled alert's wait (the stall threshold, whole seconds) set."""
    text = content.decode("utf-8")
    text = _OBJECTIVE_LINE.sub(lambda m: f"* {settings.slo_objective:g}{m.group(1)}", text)
    wait = max(1, math.ceil(settings.stall_threshold_s))
    text = _STALL_FOR_LINE.sub(lambda m: f"for: {wait}s{m.group(1)}", text)
    return text.encode("utf-8")
