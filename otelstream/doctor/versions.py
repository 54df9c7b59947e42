"""The versions of everything a doctor run involves: the interpreter, the SDKs, the HTTP libraries they send with,
and otelstream itself (from the installed distributions' metadata; ``None`` when one is not installed)."""

from __future__ import annotations

import importlib.metadata
import platform
from typing import Final

DISTRIBUTIONS: Final = ("openai", "anthropic", "google-genai", "httpx2", "httpx", "aiohttp", "botocore", "aiobotocore",
                         "otelstream")  # fmt: skip


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def one_line(found: dict[str, str | None]) -> str:
    return ", ".join(f"{name} {version or 'not installed'}" for name, version in found.items())
