"""What to probe: targets from the command line or from a TOML file, validated before any request is sent.

    [[target]]
    name = "openai-chat"
    base_url = "https://api.openai.com/v1"
    surface = "chat_completions"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"     # the variable holding the key: the key itself never appears in the file
    requests = 3
    every = 60
    [target.headers_env]               # header name = the variable holding its value
    X-Gateway-Team = "GATEWAY_TEAM"

    [[target]]
    name = "bedrock"
    base_url = "https://bedrock-runtime.us-east-1.amazonaws.com"   # the endpoint URL
    surface = "converse"
    model = "anthropic.claude-3-haiku-20240307-v1:0"
    region = "us-east-1"               # credentials: the AWS chain, never a key in the file

    [[target]]
    name = "vertex"
    base_url = "https://us-central1-aiplatform.googleapis.com"
    surface = "generate_content"
    model = "gemini-2.5-flash"
    project = "my-project"             # Vertex AI, with Application Default Credentials
    location = "us-central1"

A bad file is one ``ProbeError`` naming the file, the line and the key. Keys and header values are read from the
environment when the clients are made (``secrets``), never stored in a ``Target`` nor printed.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from otelstream import names

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the backport, a conditional dependency
    import tomli as tomllib

TABLE: Final = "target"  # the array of tables, [[target]]
KEYS: Final = ("name", "base_url", "surface", "model", "api_key_env", "headers_env", "max_output_tokens", "requests",
               "every", "region", "project", "location")  # fmt: skip
REQUIRED: Final = ("name", "base_url", "surface", "model")
# Bounds: a probe is a few small requests, never a load test.
MAX_REQUESTS: Final = 100
MAX_CONCURRENCY: Final = 20
MAX_OUTPUT_TOKENS: Final = 4096
MAX_TIMEOUT_S: Final = 600.0
MIN_EVERY_S: Final = 1.0
MAX_NAME_LENGTH: Final = 64  # the label value's own cap (model_label_max_length): a longer name would be cut
DEFAULT_REQUESTS: Final = 5
DEFAULT_MAX_OUTPUT_TOKENS: Final = 32
VERTEX_LOCATION: Final = "global"  # google-genai's own default location
# the SDK module each surface is sent through, and the otelstream extra that installs it
SDK_BY_SURFACE: Final = {
    names.RESPONSES: "openai", names.RESPONSES_WEBSOCKET: "openai", names.CHAT_COMPLETIONS: "openai",
    names.COMPLETIONS: "openai", names.MESSAGES: "anthropic", names.GENERATE_CONTENT: "google.genai",
    names.CONVERSE: "boto3",
}  # fmt: skip
EXTRA_BY_SDK: Final = {"openai": "openai", "anthropic": "anthropic", "google.genai": "google", "boto3": "bedrock"}
# the key variables the SDKs themselves read when none is named, first set wins (google-genai prefers
# GOOGLE_API_KEY); boto3 has no key: its credentials come from the AWS chain
CONVENTIONAL_KEY_ENV: Final = {"openai": ("OPENAI_API_KEY",), "anthropic": ("ANTHROPIC_API_KEY",),
                               "google.genai": ("GOOGLE_API_KEY", "GEMINI_API_KEY")}  # fmt: skip
NO_KEY: Final = "otelstream-probe-no-key"  # sent when no key variable is set: servers without auth ignore it

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PROJECT = re.compile(r"[a-z0-9][a-z0-9.:-]{0,62}[a-z0-9]\Z")
_REGION = re.compile(r"[a-z][a-z0-9-]{1,30}[a-z0-9]\Z")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")  # an HTTP token (RFC 9110)


class ProbeError(Exception):
    """Bad arguments, a bad config file, a missing variable, a target that cannot be reached: one line, exit 2."""


@dataclass(frozen=True)
class Target:
    name: str
    base_url: str
    surface: str
    model: str
    api_key_env: str | None = None
    headers_env: tuple[tuple[str, str], ...] = ()  # (header name, variable holding its value)
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    requests: int = DEFAULT_REQUESTS
    every: float | None = None
    region: str | None = None  # converse: the AWS region (else the AWS chain's: AWS_DEFAULT_REGION, the profile)
    project: str | None = None  # generate_content: a Google Cloud project makes it Vertex AI (signed with ADC)
    location: str | None = None  # with project: its Vertex AI location (default VERTEX_LOCATION)

    @property
    def vertex(self) -> bool:
        return self.project is not None

    @property
    def sdk(self) -> str:
        return SDK_BY_SURFACE[self.surface]

    @property
    def extra(self) -> str:
        return EXTRA_BY_SDK[self.sdk]

    @property
    def shown_url(self) -> str:
        """The base URL as printed: no user, password, query or fragment (a key may hide in any of them)."""
        return shown_url(self.base_url)


@dataclass(frozen=True)
class RunOptions:
    """What bounds and judges every round, whichever target."""

    concurrency: int = 1
    timeout_s: float = 60.0
    # a proxy or load balancer closes a connection silent for longer (GCP's load balancer and Heroku: 30 s): the
    # keepalive and silence verdicts compare with it
    proxy_read_timeout_s: float = 30.0
    # the shipped TTFD SLO boundary (OtelstreamTimeToFirstDeltaSLO): a slower first delta is noted, not failed
    ttfd_budget_s: float = 2.56


def shown_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


@dataclass(frozen=True)
class Secrets:
    """Read from the environment when the clients are made; never printed, logged or exported."""

    api_key: str
    headers: Mapping[str, str]

    def __repr__(self) -> str:  # a traceback or a debugger must not show them either
        return f"Secrets(api_key=<hidden>, headers=<{len(self.headers)} hidden>)"


def secrets(target: Target, environ: Mapping[str, str] | None = None) -> Secrets:
    env = os.environ if environ is None else environ
    if target.api_key_env is not None:
        key = env.get(target.api_key_env, "")
        if not key:
            raise ProbeError(f"target {target.name!r}: api_key_env {target.api_key_env} is not set")
    elif target.sdk in CONVENTIONAL_KEY_ENV and not target.vertex:
        key = next((env[v] for v in CONVENTIONAL_KEY_ENV[target.sdk] if env.get(v)), NO_KEY)
    else:
        key = ""  # converse and Vertex AI: signed with the AWS chain's or Google's default credentials
    headers: dict[str, str] = {}
    for header, var in target.headers_env:
        value = env.get(var)
        if value is None:
            raise ProbeError(f"target {target.name!r}: headers_env {header} names {var}, which is not set")
        if "\n" in value or "\r" in value:
            raise ProbeError(f"target {target.name!r}: headers_env {header}: the value of {var} spans lines")
        headers[header] = value
    return Secrets(key, headers)


# --- validation, shared by the flags and the file -------------------------------------------------------------------
def check_name(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a non-empty string is needed")
    if len(value) > MAX_NAME_LENGTH or not value.isprintable():
        raise ValueError(f"printable, at most {MAX_NAME_LENGTH} characters")
    return value


def check_surface(value: object) -> str:
    if value not in names.SURFACES:
        raise ValueError(f"one of {', '.join(names.SURFACES)}")
    return str(value)


def check_region(value: object, surface: str) -> str:
    if surface != names.CONVERSE:
        raise ValueError(f"only surface {names.CONVERSE} takes a region (an AWS region)")
    if not isinstance(value, str) or not _REGION.match(value):
        raise ValueError("an AWS region name is needed (lower-case letters, digits and -, e.g. us-east-1)")
    return value


def check_project(value: object, surface: str) -> str:
    if surface != names.GENERATE_CONTENT:
        raise ValueError(f"only surface {names.GENERATE_CONTENT} takes a project (Vertex AI)")
    if not isinstance(value, str) or not _PROJECT.match(value):
        raise ValueError("a Google Cloud project id is needed (lower-case letters, digits, -, . and :)")
    return value


def check_location(value: object, project: str | None) -> str:
    if project is None:
        raise ValueError("a location needs a project (Vertex AI)")
    if not isinstance(value, str) or not _REGION.match(value):
        raise ValueError("a Vertex AI location is needed (lower-case letters, digits and -, e.g. us-central1)")
    return value


def check_api_key_env(value: object, surface: str, project: str | None = None) -> str:
    if project is not None:
        raise ValueError("a Vertex AI target (project) signs with Google's Application Default Credentials: no "
                         "api_key_env")  # fmt: skip
    if surface == names.CONVERSE:
        raise ValueError("surface converse signs with the AWS credential chain (AWS_PROFILE, AWS_ACCESS_KEY_ID and "
                         "AWS_SECRET_ACCESS_KEY, a role, AWS_BEARER_TOKEN_BEDROCK): no api_key_env")  # fmt: skip
    return check_env_name(value)


def check_base_url(value: object, surface: str | None) -> str:
    if not isinstance(value, str):
        raise ValueError("a URL string is needed")
    schemes = ("http", "https", "ws", "wss") if surface == names.RESPONSES_WEBSOCKET else ("http", "https")
    parts = urlsplit(value)
    if parts.scheme not in schemes or not parts.hostname:
        raise ValueError(f"an absolute {'/'.join(schemes)} URL is needed")
    try:
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return value


def check_model(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise ValueError("a non-empty printable string is needed")
    return value


def check_env_name(value: object) -> str:
    if not isinstance(value, str) or not _ENV_NAME.match(value):
        raise ValueError("the name of an environment variable is needed (letters, digits, _)")
    return value


def check_count(value: object, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"a whole number from {low} to {high} is needed")
    return value


def check_seconds(value: object, low: float, high: float = math.inf) -> float:
    bound = f"at least {low:g}" if high == math.inf else f"from {low:g} to {high:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"a number of seconds {bound} is needed")
    seconds = float(value)
    if not math.isfinite(seconds) or not low <= seconds <= high:
        raise ValueError(f"a number of seconds {bound} is needed")
    return seconds


def check_headers_env(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise ValueError('a table of header name = "VARIABLE" is needed')
    out: list[tuple[str, str]] = []
    for header, var in value.items():
        if not isinstance(header, str) or not _HEADER_NAME.match(header):
            raise ValueError(f"{header!r} is not an HTTP header name")
        try:
            out.append((header, check_env_name(var)))
        except ValueError as exc:
            raise ValueError(f"{header}: {exc}") from None
    return tuple(out)


# --- the file -------------------------------------------------------------------------------------------------------
def load_file(path: str, defaults: Mapping[str, Any] | None = None) -> list[Target]:
    """The targets of a TOML file; ``defaults`` (``requests``, ``max_output_tokens`` from the flags) fill the keys a
    target leaves out."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ProbeError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise ProbeError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        # the message ends "(at line L, column C)"; the line leads the error, as for every other mistake
        found = re.search(r"at line (\d+)", str(exc))
        raise ProbeError(f"{path}:{found.group(1) if found else 1}: invalid TOML: {exc}") from None
    return parse(data, text, path, defaults or {})


def parse(data: Mapping[str, Any], text: str, path: str, defaults: Mapping[str, Any]) -> list[Target]:
    lines = _Lines(text)
    for key in data:
        if key != TABLE:
            raise ProbeError(f"{path}:{lines.top_level(key)}: unknown key {key!r}: the file holds [[{TABLE}]] tables")
    tables = data.get(TABLE)
    if not isinstance(tables, list) or not tables:
        raise ProbeError(f"{path}: no [[{TABLE}]] table: list at least one target")
    targets: list[Target] = []
    seen: dict[str, int] = {}
    for index, table in enumerate(tables):
        if not isinstance(table, dict):
            raise ProbeError(f"{path}: {TABLE}[{index}] is not a table")
        target = _target(table, index, lines, path, defaults)
        if target.name in seen:
            raise ProbeError(f"{path}:{lines.key(index, 'name')}: key 'name': {target.name!r} names two targets")
        seen[target.name] = index
        targets.append(target)
    return targets


def _target(table: dict[str, Any], index: int, lines: _Lines, path: str, defaults: Mapping[str, Any]) -> Target:
    def fail(key: str, why: str) -> ProbeError:
        return ProbeError(f"{path}:{lines.key(index, key)}: {TABLE}[{index}] key {key!r}: {why}")

    for key in table:
        if key not in KEYS:
            raise fail(key, f"unknown key (known: {', '.join(KEYS)})")
    for key in REQUIRED:
        if key not in table:
            raise ProbeError(f"{path}:{lines.header(index)}: {TABLE}[{index}]: missing key {key!r}")
    values: dict[str, Any] = {}
    try:
        key = "name"
        values[key] = check_name(table[key])
        key = "surface"
        values[key] = check_surface(table[key])
        key = "base_url"
        values[key] = check_base_url(table[key], values["surface"])
        key = "model"
        values[key] = check_model(table[key])
        key = "project"
        if key in table:
            values[key] = check_project(table[key], values["surface"])
        key = "location"
        if key in table:
            values[key] = check_location(table[key], values.get("project"))
        key = "api_key_env"
        if key in table:
            values[key] = check_api_key_env(table[key], values["surface"], values.get("project"))
        key = "region"
        if key in table:
            values[key] = check_region(table[key], values["surface"])
        key = "headers_env"
        if key in table:
            values[key] = check_headers_env(table[key])
        key = "max_output_tokens"
        values[key] = check_count(table.get(key, defaults.get(key, DEFAULT_MAX_OUTPUT_TOKENS)), 1, MAX_OUTPUT_TOKENS)
        key = "requests"
        values[key] = check_count(table.get(key, defaults.get(key, DEFAULT_REQUESTS)), 1, MAX_REQUESTS)
        key = "every"
        if key in table:
            values[key] = check_seconds(table[key], MIN_EVERY_S)
    except ValueError as exc:
        raise fail(key, str(exc)) from None
    return Target(**values)


class _Lines:
    """Where keys sit in the file: tomllib gives values, not positions, and an error must name the line. A light
    scan: each ``[[target]]`` header starts a table, which runs to the next one; a key is the first line in it that
    assigns the key (``key =``, ``"key" =``, ``key.sub =``) or opens its sub-table (``[target.key]``)."""

    def __init__(self, text: str) -> None:
        self.text = text.splitlines()
        self.starts = [i for i, line in enumerate(self.text) if re.match(rf"\s*\[\[\s*{TABLE}\s*\]\]", line)]

    def header(self, index: int) -> int:
        return self.starts[index] + 1 if index < len(self.starts) else 1

    def key(self, index: int, key: str) -> int:
        if index >= len(self.starts):
            return 1
        end = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.text)
        pattern = re.compile(rf"""\s*(?:["']?{re.escape(key)}["']?\s*[=.]|\[\s*{TABLE}\.{re.escape(key)}\s*\])""")
        for i in range(self.starts[index], end):
            if pattern.match(self.text[i]):
                return i + 1
        return self.header(index)

    def top_level(self, key: str) -> int:
        pattern = re.compile(rf"""\s*(?:\[+\s*)?["']?{re.escape(key)}["']?\s*[=.\]]""")
        for i, line in enumerate(self.text):
            if pattern.match(line):
                return i + 1
        return 1
