"""The patch points otelstream could not find in the installed SDKs (``adapters._patch.PATCHER.missing()``): each one
is a mismatch the doctor names, because the measures it feeds are unknown (or its streams not observed at all) on
this stack. One absence is a release's, not a rename: openai before 3.32 has no ``openai._websocket_connection``, and
otelstream leaves that release's WebSocket mode unobserved on purpose (README "Supported SDKs").
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from dataclasses import dataclass
from typing import Final

from otelstream import names

_WS_BASE: Final = "openai._websocket_connection"  # WebSocket mode is observed from the release that has it
_HTTP_LIBRARIES: Final = ("httpx", "httpx2")  # patched for every SDK's streams (the send, the body)
# the packages whose patch points serve an SDK's streams, by its import name (google-genai's sends over aiohttp too)
_ROOTS: Final = {"google.genai": ("google", "aiohttp")}


def _roots(sdks: tuple[str, ...]) -> set[str]:
    return {root for sdk in sdks for root in _ROOTS.get(sdk, (sdk.partition(".")[0],))}


@dataclass(frozen=True)
class MissingPoint:
    point: str  # module.Class.method
    measures: tuple[str, ...]  # what becomes unknown (names.MEASURE_*); MEASURE_STREAM: not observed at all
    scopes: tuple[str, ...]

    @property
    def effect(self) -> str:
        if names.MEASURE_STREAM in self.measures:
            return "streams not observed at all"
        return "unknown: " + ", ".join(self.measures) if self.measures else "no measure depends on it"

    def to_json(self) -> dict[str, object]:
        return {"point": self.point, "measures": list(self.measures), "scopes": list(self.scopes)}


def import_patch_modules(sdks: tuple[str, ...]) -> None:
    """Import every module otelstream patches in the installed ``sdks`` (their patches apply, or are found missing,
    at the import): a patch point the doctor's streams do not pass (WebSocket mode) is checked too."""
    from otelstream.adapters import inventory

    roots = _roots(sdks)
    for module in sorted({p.module for p in inventory.patches()}):
        if module.partition(".")[0] not in roots:
            continue
        with contextlib.suppress(Exception):  # absent in this release (found missing by the patcher), or unimportable
            if importlib.util.find_spec(module) is not None:
                importlib.import_module(module)


def missing(sdks: tuple[str, ...]) -> tuple[list[MissingPoint], list[str]]:
    """(mismatches, notes): the missing patch points of ``sdks`` and of the HTTP libraries, and what this release
    lacks by design."""
    from otelstream.adapters import _patch

    points: list[MissingPoint] = []
    notes: set[str] = set()
    ws_absent = _patch.module_absent(_WS_BASE) if importlib.util.find_spec("openai") is not None else True
    for (module, path), patch in sorted(_patch.PATCHER.missing().items()):
        if module.partition(".")[0] not in (*_roots(sdks), *_HTTP_LIBRARIES):
            continue
        if set(patch.scopes) == {_patch.OPENAI_WEBSOCKET} and ws_absent:
            notes.add(f"{names.RESPONSES_WEBSOCKET}: this openai release has no {_WS_BASE}, so its WebSocket mode is "
                      "not observed (openai 3.32+ is)")  # fmt: skip
            continue
        points.append(MissingPoint(f"{module}.{path}", tuple(patch.measures), tuple(patch.scopes)))
    return points, sorted(notes)
