"""The canaries of ``otelstream/adapters/inventory.py``: everything otelstream takes from other libraries' internals
holds on the installed releases (CI runs this on every row of the SDK matrix, so a release that changes one fails
here, by name, before users see a wrong number), nothing the adapters read is missing from the inventory, and a fact
that no longer holds is one WARNING with its measures unknown."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
import wrapt

import otelstream
from otelstream import names
from otelstream.adapters import _patch, inventory
from otelstream.adapters._patch import Fact
from tests.adapters.test_websocket import ws_url  # noqa: F401 (a local WebSocket server, for the WebSocket facts)
from tests.reliability.order_canaries import ORDER_CANARIES
from tests.support.clients import anthropic_client, openai_client
from tests.support.google_facts import GOOGLE_LIVE
from tests.support.recording import RecordingListener
from tests.support.sdk_features import OPENAI_WEBSOCKET_LANES, OPENAI_WEBSOCKET_OBSERVED, WITHOUT_WEBSOCKET

ADAPTERS = Path(otelstream.__file__).parent / "adapters"
MSGS: Any = [{"role": "user", "content": "x"}]


def _id(point: Fact | _patch.Patch) -> str:
    return f"{point.module}:{point.path}"


def _installed(module: str) -> bool:
    root = module.partition(".")[0]
    return importlib.util.find_spec(root) is not None and not _patch.module_absent(module)


# --- the facts checked at import, and the patch points ------------------------------------------------------------
CHECKED = [f for f in inventory.FACTS if f.holds is not None]


@pytest.mark.parametrize("fact", CHECKED, ids=[_id(f) for f in CHECKED])
def test_checked_fact_holds(fact: Fact) -> None:
    if not _installed(fact.module):
        pytest.skip(f"{fact.module} is not installed here")
    assert fact.holds is not None
    assert fact.holds(importlib.import_module(fact.module)), f"{_id(fact)} no longer holds"


PATCHES = inventory.patches()


@pytest.mark.parametrize("patch", PATCHES, ids=[_id(p) for p in PATCHES])
def test_patch_point_resolves(patch: _patch.Patch) -> None:
    if not _installed(patch.module) or (_patch.OPENAI_WEBSOCKET in patch.scopes and not OPENAI_WEBSOCKET_OBSERVED):
        pytest.skip(f"{patch.module} is not in this release (its streams are reported unobserved)")
    module = importlib.import_module(patch.module)
    for path in (patch.path, patch.fallback):
        if path is None:
            continue
        try:
            wrapt.resolve_path(module, path)
            return
        except AttributeError:
            continue
    pytest.fail(f"patch point {_id(patch)} does not resolve")


# --- the facts only a live object shows -------------------------------------------------------------------------
def _openai_stream_attributes() -> None:
    stream = openai_client().chat.completions.create(model="gpt-test", messages=MSGS, stream=True)
    try:
        state = vars(stream)
        assert "_iterator" in state and state.get("_options") is not None and state.get("_client") is not None
    finally:
        stream.close()


def _anthropic_stream_attributes() -> None:
    stream = anthropic_client().messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True)
    try:
        assert stream._options is not None and stream._client is not None
    finally:
        stream.close()


def _anthropic_stream_iterator() -> None:
    lazy = isinstance(vars(anthropic.Stream).get("_iterator"), functools.cached_property)
    stream = anthropic_client().messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True)
    try:
        assert lazy or "_iterator" in vars(stream)  # built lazily (2.x) or at once (1.x)
    finally:
        stream.close()


def _openai_helpers_raw_stream() -> None:
    client = openai_client()
    with client.chat.completions.stream(model="gpt-test", messages=MSGS) as chat:
        assert isinstance(chat._raw_stream, openai.Stream)
    with client.responses.stream(model="gpt-test", input="x") as responses:
        assert isinstance(responses._raw_stream, openai.Stream)


def _anthropic_helper_raw_stream() -> None:
    with anthropic_client().messages.stream(model="claude-test", max_tokens=5, messages=MSGS) as stream:
        assert isinstance(stream._raw_stream, anthropic.Stream)


def _response_content() -> None:
    assert httpx2.Response(200, content=b"x")._content == b"x"


def _websocket_connection(url: str) -> None:
    with openai.OpenAI(api_key="sk-test", base_url=url).responses.connect() as conn:
        state = vars(conn)
        assert conn._connection.remote_address[0] == "127.0.0.1"
        assert all(key in state for key in ("_intentionally_closed", "_is_reconnecting", "_on_reconnecting"))
        assert "_make_ws" in state


def _websocket_lane(url: str) -> None:
    if not OPENAI_WEBSOCKET_LANES:
        pytest.skip("this openai release has no WebSocket lanes")
    from openai.lib.responses_websocket._session import ResponsesWebSocketLimits, ResponsesWebSocketSession

    limits = ResponsesWebSocketLimits(8, 1000, 4000, 1 << 20, 1 << 22)
    with (
        openai.OpenAI(api_key="sk-test", base_url=url).responses.connect() as conn,
        ResponsesWebSocketSession(conn, limits=limits) as session,
    ):
        lane = session.lane("x")
        assert lane._session.connection is conn and lane._state.stream_id == "x"


def _bedrock_exception_code() -> None:
    """An exception message of the stream reaches the caller as ``EventStreamError`` with its type as the code."""
    import boto3
    from botocore.exceptions import EventStreamError

    from tests.support.bedrock_server import BedrockServer

    with BedrockServer() as server:
        client = boto3.client(**server.client_kwargs())
        stream = client.converse_stream(modelId="throttled", messages=[{"role": "user", "content": [{"text": "x"}]}])
        with pytest.raises(EventStreamError) as caught:
            for _ in stream["stream"]:
                pass
    assert caught.value.response["Error"]["Code"] == "throttlingException"


_WS_CONNECTION = next(f.path for f in inventory.FACTS if f.path.startswith("WebSocketConnectionBase"))
_HELPERS = "ChatCompletionStream._raw_stream, ResponseStream._raw_stream"
LIVE: dict[tuple[str, str], Callable[..., None]] = {
    ("openai._streaming", "Stream._iterator"): _openai_stream_attributes,
    ("openai._streaming", "Stream._options, Stream._client"): _openai_stream_attributes,
    ("anthropic._streaming", "Stream._options, Stream._client"): _anthropic_stream_attributes,
    ("anthropic._streaming", "Stream._iterator"): _anthropic_stream_iterator,
    ("openai.lib.streaming", _HELPERS): _openai_helpers_raw_stream,
    ("anthropic.lib.streaming", "MessageStream._raw_stream"): _anthropic_helper_raw_stream,
    ("httpx2", "Response._content"): _response_content,
    ("openai._websocket_connection", _WS_CONNECTION): _websocket_connection,
    ("openai.lib.responses_websocket._session", "ResponsesWebSocketLane._session.connection, ._state.stream_id"):
        _websocket_lane,
    **ORDER_CANARIES,
    **GOOGLE_LIVE,
    ("botocore.exceptions", "EventStreamError.response['Error']['Code'] is the exception message's type"):
        _bedrock_exception_code,
}  # fmt: skip
UNCHECKED = [f for f in inventory.FACTS if f.holds is None]


def test_every_fact_has_a_canary() -> None:
    assert {(f.module, f.path) for f in UNCHECKED} == set(LIVE)


@pytest.mark.parametrize("fact", UNCHECKED, ids=[_id(f) for f in UNCHECKED])
def test_live_fact_holds(fact: Fact, request: pytest.FixtureRequest) -> None:
    check = LIVE[(fact.module, fact.path)]
    if not _installed(fact.module):  # a cloud SDK's facts where its extra is not installed (older-SDK CI rows)
        pytest.skip(f"{fact.module} is not installed here")
    if fact.module.startswith("openai._websocket") or fact.module.startswith("openai.lib.responses_websocket"):
        if not OPENAI_WEBSOCKET_OBSERVED:
            pytest.skip(WITHOUT_WEBSOCKET)
        check(request.getfixturevalue("ws_url"))
    else:
        check()


# --- nothing taken that the inventory does not list ---------------------------------------------------------------
def _our_names() -> set[str]:
    """Every name otelstream defines or binds itself (its own private names are not another library's)."""
    found: set[str] = set()
    for path in Path(otelstream.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                found.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    found.add(node.attr)
            elif isinstance(node, ast.alias):
                found.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.arg):
                found.add(node.arg)
    return found


def _private_names_read(path: Path, ours: set[str]) -> set[str]:
    """The private names (``_x``, not dunders) ``path`` reads off objects that are not its own, as an attribute or
    as a string (``getattr``, ``__dict__.get``)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # a string built from parts (``KEY + "_queued"``) is a key of ours, not a name read off another library
    parts = {id(n) for node in ast.walk(tree) if isinstance(node, (ast.BinOp, ast.JoinedStr)) for n in ast.walk(node)}
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            name = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            name = None if id(node) in parts else node.value
        if name and name.startswith("_") and not name.startswith("__") and name not in ours:
            found.add(name)
    return found


def _listed_names() -> set[str]:
    """Every identifier the inventory names, whole (a substring test would let ``_id`` pass inside ``stream_id``)."""
    points: list[Fact | _patch.Patch] = [*inventory.patches(), *inventory.FACTS]
    paths = " ".join(f"{p.path} {getattr(p, 'fallback', None) or ''}" for p in points)
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", paths))


def _adapter_modules() -> list[Path]:
    """Every module of the adapters package, its dependency subpackages (``adapters/openai/`` ...) included: the
    SDK-private reads live there."""
    return sorted(ADAPTERS.rglob("*.py"))


def test_the_scan_covers_the_adapter_subpackages() -> None:
    # a scan that stops at the top level would pass a read planted in any subpackage
    every = {Path(folder) / name for folder, _, files in os.walk(ADAPTERS) for name in files if name.endswith(".py")}
    assert set(_adapter_modules()) == every
    assert any(path.parent != ADAPTERS for path in every), "the SDK-private reads live in the subpackages"


def test_every_private_name_the_adapters_read_is_in_the_inventory() -> None:
    ours = _our_names()
    listed = _listed_names()
    unlisted = {
        f"{path.relative_to(ADAPTERS)}: {name}"
        for path in _adapter_modules()
        for name in _private_names_read(path, ours)
        if name not in listed
    }
    assert not unlisted, f"taken from another library but not in adapters/inventory.py: {sorted(unlisted)}"


# --- no decision from another library's code objects --------------------------------------------------------------
# what a frame, a generator or a function shows of the code that runs: reading one of these makes a region of code
# (a function, or the module's top level) a reader of code objects
CODE_ATTRIBUTES = frozenset({
    "__code__", "f_code", "co_name", "co_qualname", "co_filename", "co_firstlineno", "f_back", "f_lineno",
    "gi_code", "ag_code", "cr_code", "gi_frame", "ag_frame", "cr_frame", "gi_yieldfrom", "cr_await", "ag_await",
    "tb_frame",
})  # fmt: skip
FRAME_CALLS = frozenset({
    ("sys", "_getframe"), ("inspect", "currentframe"), ("inspect", "stack"), ("inspect", "trace"),
    ("inspect", "getframeinfo"), ("inspect", "getouterframes"), ("inspect", "getinnerframes"),
    ("traceback", "walk_stack"), ("traceback", "extract_stack"), ("traceback", "walk_tb"),
})  # fmt: skip
LOOKUPS = frozenset({"get", "startswith", "endswith", "index", "find", "count", "__contains__", "pop"})


def _reads_code(region: ast.AST) -> bool:
    for node in ast.walk(region):
        if isinstance(node, ast.Attribute) and node.attr in CODE_ATTRIBUTES:
            return True
        func = node.func if isinstance(node, ast.Call) else None
        named = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
        if named and (func.value.id, func.attr) in FRAME_CALLS:  # type: ignore[union-attr]
            return True
    return False


def _regions(tree: ast.Module) -> Iterator[ast.AST]:
    """The innermost functions, and the module's top level without its functions and classes' methods."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield node
    yield ast.Module(
        body=[n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))],
        type_ignores=[],
    )


def _compared_strings(region: ast.AST) -> Iterator[ast.Constant]:
    """The string literals a region compares or looks up: operands of ``==``/``in``/``is`` (inside a tuple, list, set
    or dict too), arguments of ``.get``/``.startswith``/..., and subscripts."""
    operands: list[ast.AST] = []
    for node in ast.walk(region):
        if isinstance(node, ast.Compare):
            operands += [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOOKUPS:
            operands += node.args
        elif isinstance(node, ast.Subscript):
            operands.append(node.slice)
        elif isinstance(node, ast.Dict):  # a table consulted by name
            operands += [k for k in node.keys if k is not None]
    for operand in operands:
        for inner in ast.walk(operand):
            if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                yield inner


def _module_tables(tree: ast.Module, region: ast.AST) -> list[ast.AST]:
    """The module-level assignments whose names the region reads (the table ``_OURS.get(co_name)`` consults)."""
    read = {n.id for n in ast.walk(region) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    tables: list[ast.AST] = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id in read for t in targets):
            tables.append(node)
    return tables


def _foreign_imports(tree: ast.Module) -> set[str]:
    """The names this module binds to another library (neither otelstream nor the standard library)."""
    ours = {"", "otelstream", *sys.stdlib_module_names}
    foreign: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            foreign.update(
                (alias.asname or alias.name).partition(".")[0]
                for alias in node.names
                if alias.name.partition(".")[0] not in ours
            )
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").partition(".")[0] not in ours:
            foreign.update(alias.asname or alias.name for alias in node.names)
    return foreign


def _own_definitions() -> set[str]:
    """The names otelstream's own code carries: its functions, classes and their parameters (a frame of ours is
    found by its function's name, a local of it by its parameter's). Variables are left out: one may hold another
    library's module (``httpx = sys.modules.get("httpx")``)."""
    found: set[str] = set()
    modules: set[str] = set(sys.stdlib_module_names)
    for path in Path(otelstream.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.arg):
                found.add(node.arg)
            elif isinstance(node, ast.Import):
                modules.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module.partition(".")[0])
    return found - modules


def code_object_decisions(path: Path, own: set[str]) -> list[str]:
    """Where ``path`` decides from code objects that are not otelstream's: in a region that reads frames or code
    objects, a string compared or looked up that names nothing of otelstream's (``co_name == "iter_raw"``,
    ``"httpx" in co_filename``), or a name bound to another library (``f_code is Response.iter_raw.__code__``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    foreign = _foreign_imports(tree)
    found: list[str] = []
    for region in _regions(tree):
        if not _reads_code(region):
            continue
        where = getattr(region, "name", "<module>")
        for part in [region, *_module_tables(tree, region)]:
            found += [f"{where}:{c.lineno}: {c.value!r}" for c in _compared_strings(part) if c.value not in own]
            found += [
                f"{where}:{n.lineno}: {n.id} (another library)"
                for n in ast.walk(part)
                if isinstance(n, ast.Name) and n.id in foreign
            ]
        found += [
            f"{where}:{n.lineno}: __code__"
            for n in ast.walk(region)
            if isinstance(n, ast.Attribute) and n.attr == "__code__"
        ]
    return found


def test_no_decision_compares_another_librarys_code_objects() -> None:
    # today's one reader, the adapters' close attribution, finds its own generators by their name and module globals
    own = _own_definitions()
    found = [
        f"{path.relative_to(ADAPTERS.parent)}: {where}"
        for path in sorted(Path(otelstream.__file__).parent.rglob("*.py"))
        for where in code_object_decisions(path, own)
    ]
    assert not found, f"decisions from another library's code objects: {found}"


@pytest.mark.parametrize(
    "source",
    [
        "def f(frame):\n    return frame.f_code.co_name == 'iter_raw'\n",
        "def f(frame):\n    return 'httpx' in frame.f_back.f_code.co_filename\n",
        "_SDK = {'iter_raw': 1}\ndef f(frame):\n    return _SDK.get(frame.f_code.co_name)\n",
        "import httpx2\ndef f(frame):\n    return frame.f_code is httpx2.Response.iter_raw.__code__\n",
        "import sys\ndef f():\n    return sys._getframe(1).f_code.co_name.startswith('iter_')\n",
        "def f(gen):\n    return gen.gi_code.co_qualname.endswith('Stream.__stream__')\n",
    ],
)
def test_the_code_object_check_finds(source: str, tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(source, encoding="utf-8")
    assert code_object_decisions(planted, _own_definitions())


# --- what a fact that does not hold does --------------------------------------------------------------------------
@pytest.fixture
def warnings_logged(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    _patch.PATCHER._warned.clear()
    caplog.set_level(logging.WARNING, logger="otelstream")
    yield lambda: [r.getMessage() for r in caplog.records if "is not as otelstream knows it" in r.getMessage()]
    _patch.PATCHER._warned.clear()


def test_a_fact_that_no_longer_holds_warns_once_and_leaves_its_measures_unknown(
    rec: RecordingListener, warnings_logged: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the patcher keeps the facts it was given for later instrument() cycles: this one is the test's alone
    monkeypatch.setattr(_patch.PATCHER, "_facts", {m: list(f) for m, f in _patch.PATCHER._facts.items()})
    changed = Fact("anthropic._streaming", "Stream.__stream__ (simulated change)", inventory.ATTRIBUTE,
                   lambda module: False, (names.MEASURE_KEEPALIVES,), (_patch.ANTHROPIC,))  # fmt: skip
    _patch.PATCHER.install([], [changed])
    _patch.PATCHER.install([], [changed])  # checked once per process and instrument() cycle
    assert len(warnings_logged()) == 1
    assert "anthropic._streaming.Stream.__stream__ (simulated change)" in warnings_logged()[0]
    assert "keepalives" in warnings_logged()[0]
    stream = anthropic_client().messages.create(model="claude-test", max_tokens=5, messages=MSGS, stream=True,
                                                extra_headers={"x-variant": "keepalive"})  # fmt: skip
    list(stream)
    r = rec.one()
    assert r.outcome == names.COMPLETED
    assert names.MEASURE_KEEPALIVES in r.unobserved and r.keepalives is None


def test_a_live_fact_found_missing_where_it_is_used(rec: RecordingListener,
                                                     warnings_logged: Callable[[], list[str]]) -> None:  # fmt: skip
    _patch.PATCHER.lacks(inventory.OPENAI_STREAM_ITERATOR)
    _patch.PATCHER.lacks(inventory.OPENAI_STREAM_ITERATOR)
    assert len(warnings_logged()) == 1 and "openai._streaming.Stream._iterator" in warnings_logged()[0]
    # its measure is the whole stream: openai sync streams are then not observed at all, rather than misreported
    list(openai_client().chat.completions.create(model="gpt-test", messages=MSGS, stream=True))
    assert rec.reports == []
