"""What this installation of otelstream is (its version) and how to install it with an extra, for every message that
tells a user to install something. otelstream is not on the public package index: a hint that installs it by its bare
name would fail, or install whatever someone registered under that name. The hints name what works today, a checkout
or the wheel a checkout builds, written here once."""

from __future__ import annotations

from importlib import metadata
from typing import Final

DISTRIBUTION: Final = "otelstream"


def version() -> str:
    """The installed distribution's version; the package's own ``__version__`` when it runs uninstalled (a checkout
    on ``PYTHONPATH``)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        from otelstream import __version__

        return __version__


def install_hint(extras: str) -> str:
    """The command that installs otelstream with ``extras`` (``"demo"``, ``"openai,otlp"``): from a checkout, or
    from the wheel ``python -m build`` writes into the checkout's ``dist/``."""
    wheel = f"dist/otelstream-{version()}-py3-none-any.whl"
    return (
        f"pip install '/path/to/otelstream[{extras}]' (a checkout of otelstream; it is not on the package index) "
        f"or pip install '{wheel}[{extras}]' (the wheel `python -m build` writes in the checkout)"
    )
