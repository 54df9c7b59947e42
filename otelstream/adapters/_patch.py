"""Applying and removing the wrapt patches: defensively, in any import order, idempotently, exactly undone.

Each ``Patch`` names a module and a dotted attribute path in it. Patches are applied from a wrapt post-import hook
on their module (registered once per process; it runs at once when the module is already imported), so
``instrument()`` may come before or after ``import openai``. Nothing here ever raises into the importing program.
``remove()`` unwraps exactly the wrappers it installed (by identity) and leaves the hooks registered but inert.

A path that does not resolve in the installed SDK (a release renamed it) is a *missing patch point*: one WARNING per
process names it and the measures it feeds (``Patch.measures``, ``names.MEASURE_*``), and from then on every stream
of the scopes it serves (``Patch.scopes``) reports those measures as unknown rather than wrong. The set per scope is
computed here when a module's patches are applied; a stream reads it once, at its start (``unobserved``). A patch
module the installed SDK does not have at all (an older release without that feature) is found missing when the SDK's
top-level package has been imported, the same way. Points without which a scope is not observed at all warn once per
scope, naming the first found: they are usually missing together (a release predating the feature). The scopes,
and the measure sets the adapters' patch points share (``REQUEST_MEASURES`` & co.), are defined here once.

A ``Patch`` may name a ``fallback`` path in the same module: the same choke point where an older release has it under
another name (anthropic 1.x has no ``_request`` below its public ``request``). It is patched only when ``path`` does
not resolve, so the wrapper runs once per call on every release.
"""

from __future__ import annotations

import importlib.machinery
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import wrapt

from otelstream import _guard, names
from otelstream.adapters import doubted

logger = logging.getLogger("otelstream")

Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

# Scopes: which streams a patch point serves (the SDK, sync or async, and openai's resume helper)
OPENAI, OPENAI_ASYNC, OPENAI_RESUME, OPENAI_WEBSOCKET = "openai", "openai.async", "openai.resume", "openai.websocket"
ANTHROPIC, ANTHROPIC_ASYNC = "anthropic", "anthropic.async"
HTTP, HTTP_ASYNC = "http", "http.async"  # the HTTP-level observer's streams (adapters/http/streams.py)
GOOGLE, GOOGLE_ASYNC = "google", "google.async"  # google-genai's generate_content streams (adapters/google/)
BEDROCK, BEDROCK_ASYNC = "bedrock", "bedrock.async"  # botocore / aiobotocore Bedrock runtime streams
_SCOPE_TEXT = {
    OPENAI: "openai sync streams",
    OPENAI_ASYNC: "openai async streams",
    OPENAI_RESUME: "openai streams resumed by the .stream(response_id=...) helper",
    OPENAI_WEBSOCKET: "openai WebSocket-mode responses",
    ANTHROPIC: "anthropic sync streams",
    ANTHROPIC_ASYNC: "anthropic async streams",
    GOOGLE: "google-genai sync streams",
    GOOGLE_ASYNC: "google-genai async streams",
    BEDROCK: "Bedrock runtime streams (botocore, sync)",
    BEDROCK_ASYNC: "Bedrock runtime streams (aiobotocore, async)",
    HTTP: "streams seen at the HTTP client (httpx / httpx2, sync)",
    HTTP_ASYNC: "streams seen at the HTTP client (httpx / httpx2, async)",
}
NOTHING_UNOBSERVED: frozenset[str] = frozenset()

# The clients' send is patched by http.streams, whose wrapper hands an SDK adapter's calls to request.http_send.
# Without that patch point t_request is the SDK send hook's time, which for anthropic includes preparing (signing, a
# Vertex token refresh) the request.
T_REQUEST_MEASURES = (names.MEASURE_TIME_TO_FIRST_EVENT, names.MEASURE_TIME_TO_FIRST_DELTA, names.MEASURE_DURATION)
# What an SDK's patch points alone observe (names.MEASURE_*): unknown for their streams when a release lacks them.
# The send path (t_request would otherwise be the request entry: before retries and their back-off):
SEND_MEASURES = (*T_REQUEST_MEASURES, names.MEASURE_RETRIES)
# The request entry (t_request would be the building of the Stream, after the headers; a request failing before a
# stream exists would make no call):
REQUEST_MEASURES = (*SEND_MEASURES, names.MEASURE_HTTP_ERRORS)
# A lifecycle point: without it no end could be attributed, so its streams are not observed rather than misreported
LIFECYCLE_MEASURES = (names.MEASURE_STREAM,)
SEND_SCOPES_SYNC = (OPENAI, ANTHROPIC)
SEND_SCOPES_ASYNC = (OPENAI_ASYNC, ANTHROPIC_ASYNC)


@dataclass(frozen=True)
class Patch:
    module: str
    path: str  # "Class.method"
    wrapper: Wrapper
    # called with the original attribute once it is wrapped: per-process work done at the import, not in a stream
    prepare: Callable[[Any], object] | None = None
    # what this patch point alone observes (names.MEASURE_*: unknown for its scopes' streams when it is missing;
    # MEASURE_STREAM: those streams are then not observed at all), and which streams it serves
    measures: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    fallback: str | None = None  # the same choke point under another name, patched only where ``path`` is absent


@dataclass(frozen=True)
class Fact:
    """Something other than a patch point that otelstream takes from another library's internals: a private
    attribute it reads, a class it checks against (``kind``). ``holds(module)`` checks it on the installed release
    when ``module`` is imported (None: it can only be checked on a live object, where it is used: ``PATCHER.lacks``).
    When it does not hold: one WARNING, and ``measures`` become unknown for the streams of ``scopes``, as for a
    missing patch point."""

    module: str
    path: str  # what is taken, e.g. "Stream._iterator" or "SyncByteStream, AsyncByteStream"
    kind: str  # "attribute" / "class"
    holds: Callable[[ModuleType], bool] | None
    measures: tuple[str, ...]
    scopes: tuple[str, ...]


class Patcher:
    def __init__(self) -> None:
        self._lock = threading.RLock()  # RLock: a hook may run synchronously inside install()
        self._patches: dict[str, list[Patch]] = {}
        self._applied: dict[tuple[str, str], Any] = {}  # (module, path) -> the wrapt wrapper (the unwrap handle)
        self._applied_path: dict[tuple[str, str], str] = {}  # (module, path) -> the path patched (path or fallback)
        self._hooked: set[str] = set()
        self._hooked_roots: set[str] = set()  # SDK packages whose import checks for absent patch modules
        self._active = False
        self._facts: dict[str, list[Fact]] = {}  # module -> the facts checked when it is imported
        self._checked: set[tuple[str, str]] = set()
        self._missing: dict[tuple[str, str], Patch | Fact] = {}  # patch points absent, facts that do not hold
        self._warned: set[tuple[str, str]] = set()  # once per process, across instrument() cycles
        # scope -> the measures its streams cannot observe; replaced whole (streams read it without the lock)
        self._unobserved: dict[str, frozenset[str]] = {}

    @property
    def active(self) -> bool:
        return self._active

    def applied(self) -> dict[tuple[str, str], Any]:
        with self._lock:
            return dict(self._applied)

    def missing(self) -> dict[tuple[str, str], Patch | Fact]:
        with self._lock:
            return dict(self._missing)

    def unobserved(self, scope: str) -> frozenset[str]:
        """The measures the streams of ``scope`` cannot observe (once per stream: one dict lookup)."""
        return self._unobserved.get(scope, NOTHING_UNOBSERVED)

    def refresh_unobserved(self) -> None:
        """Recompute the per-scope sets (the self-check's verdicts changed: ``doubted``)."""
        with self._lock:
            self._update_unobserved()

    def _update_unobserved(self) -> None:
        by_scope: dict[str, set[str]] = {}
        for patch in self._missing.values():
            for scope in patch.scopes:
                by_scope.setdefault(scope, set()).update(patch.measures)
        for scope, doubts in doubted.by_scope().items():  # what the self-check found wrong, for the process's life
            by_scope.setdefault(scope, set()).update(doubts)
        self._unobserved = {scope: frozenset(found) for scope, found in by_scope.items()}

    def install(self, patches: Iterable[Patch], facts: Iterable[Fact] = ()) -> None:
        with self._lock:
            self._active = True
            for patch in patches:
                group = self._patches.setdefault(patch.module, [])
                if patch not in group:
                    group.append(patch)
            for fact in facts:
                if fact.holds is not None and fact not in self._facts.setdefault(fact.module, []):
                    self._facts[fact.module].append(fact)
            for module in [*self._patches, *(m for m in self._facts if m not in self._patches)]:
                if module not in self._hooked:
                    self._hooked.add(module)
                    # runs now when the module is already imported, else right after its import
                    wrapt.register_post_import_hook(self._on_import, module)
                elif module in sys.modules:
                    self._apply(sys.modules[module])
            for root in {module.partition(".")[0] for module in self._patches}:
                if root not in self._hooked_roots:
                    self._hooked_roots.add(root)
                    wrapt.register_post_import_hook(self._on_root_import, root)
                elif root in sys.modules:
                    self._find_absent(root)

    def _on_import(self, module: ModuleType) -> None:
        with _guard.guard("patch.on_import"), self._lock:
            if self._active:
                self._apply(module)

    def _on_root_import(self, module: ModuleType) -> None:
        with _guard.guard("patch.on_root_import"), self._lock:
            if self._active:
                self._find_absent(module.__name__)

    def _find_absent(self, root: str) -> None:
        """The SDK package ``root`` is imported: its patch modules that this release does not have at all are
        missing patch points (a module that exists but is imported later, or never, is not)."""
        for name, patches in self._patches.items():
            if name.partition(".")[0] != root or name in sys.modules or not module_absent(name):
                continue
            for patch in patches:
                self._note_missing((patch.module, patch.path), patch)

    def lacks(self, fact: Fact) -> None:
        """Where it is used, ``fact`` was found not to hold on a live object: one WARNING, its measures unknown from
        the next stream on."""
        with self._lock:
            self._note_missing((fact.module, fact.path), fact)

    def _check_facts(self, module: ModuleType) -> None:
        for fact in self._facts.get(module.__name__, ()):
            key = (fact.module, fact.path)
            if key in self._checked:
                continue
            self._checked.add(key)
            holds = False
            with _guard.guard("patch.check_fact"):
                assert fact.holds is not None
                holds = fact.holds(module)
            if not holds:
                self._note_missing(key, fact)

    def _note_missing(self, key: tuple[str, str], patch: Patch | Fact) -> None:
        if key in self._missing:
            return
        self._missing[key] = patch
        self._update_unobserved()
        # a scope left unobserved is one WARNING however many of its points are missing (openai < 3.32 lacks all of
        # WebSocket mode's): the others would only repeat it
        unobserved_scope = (patch.module.partition(".")[0], " ".join(patch.scopes))
        warn_key = unobserved_scope if names.MEASURE_STREAM in patch.measures else key
        if warn_key not in self._warned:
            self._warned.add(warn_key)
            logger.warning("%s", missing_message(patch))

    def _apply(self, module: ModuleType) -> None:
        self._check_facts(module)
        for patch in self._patches.get(module.__name__, ()):
            key = (patch.module, patch.path)
            if key in self._applied:
                continue
            path = patch.path
            try:
                original = wrapt.resolve_path(module, path)[2]
            except (AttributeError, ImportError):
                original = None
            if original is None and patch.fallback is not None:
                path = patch.fallback
                try:
                    original = wrapt.resolve_path(module, path)[2]
                except (AttributeError, ImportError):
                    original = None
            if original is None:
                self._note_missing(key, patch)
                continue
            if self._missing.pop(key, None) is not None:
                self._update_unobserved()
            self._applied[key] = wrapt.wrap_function_wrapper(module, path, patch.wrapper)
            self._applied_path[key] = path
            if patch.prepare is not None:
                with _guard.guard("patch.prepare"):
                    patch.prepare(original)

    def remove(self) -> None:
        with self._lock:
            self._active = False
            for key, handle in list(self._applied.items()):
                module = sys.modules.get(key[0])
                if module is not None:
                    with _guard.guard("patch.remove"):
                        wrapt.unwrap_object(module, self._applied_path.get(key, key[1]), handle, missing_ok=True)
                del self._applied[key]
                self._applied_path.pop(key, None)
            self._missing.clear()
            self._checked.clear()
            self._update_unobserved()


def module_absent(name: str) -> bool:
    """Whether the installed package cannot have the module ``name``: the first level of it not yet imported is not
    found in its (imported) parent package. Looks at the parent's ``__path__`` only: nothing is imported."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if prefix in sys.modules:
            continue
        parent = sys.modules.get(".".join(parts[: i - 1])) if i > 1 else None
        search = getattr(parent, "__path__", None) if parent is not None else None
        if i > 1 and search is None:
            return True  # the parent is a plain module: no submodules
        return importlib.machinery.PathFinder.find_spec(prefix, search) is None
    return False


def scope_text(scope: str) -> str:
    """Which streams ``scope`` names, in words (for WARNINGs)."""
    return _SCOPE_TEXT.get(scope, scope)


def missing_message(patch: Patch | Fact) -> str:
    """The one WARNING for a missing patch point or a fact that no longer holds: which one, and what becomes unknown
    (or unobserved) for whom."""
    sdk = patch.module.partition(".")[0]
    whom = ", ".join(_SCOPE_TEXT.get(scope, scope) for scope in patch.scopes) or "no stream"
    if names.MEASURE_STREAM in patch.measures:
        effect = f"{whom} are not observed at all (no span, no report, no metrics)"
    elif patch.measures:
        effect = f"for {whom} these measures are unknown (absent, never guessed): {', '.join(patch.measures)}"
    else:
        effect = "no measure depends on it"
    if isinstance(patch, Fact):
        return (
            f"otelstream: {patch.kind} {patch.module}.{patch.path} is not as otelstream knows it in the installed "
            f"{sdk} (changed in this release?); {effect}"
        )
    return (
        f"otelstream: patch point {patch.module}.{patch.path} is missing from the installed {sdk} "
        f"(renamed in this release?); {effect}"
    )


PATCHER = Patcher()
