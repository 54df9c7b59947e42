"""``otelstream probe``: the command line.

    otelstream probe --base-url URL --surface S --model M [--api-key-env VAR | --region R] [--requests 5]
                     [--concurrency 1] [--max-output-tokens 32] [--timeout 60] [--json] [--strict]
    otelstream probe --config probes.toml [--every 60] [--serve 9465]

Exit status of a single run: 2 when the arguments, the file or a named variable are wrong, or a target cannot be
reached (one line on stderr, never a traceback; reachable targets are still reported); else 1 with ``--strict`` when
a verdict failed (a request did not complete, an anomaly, a silence longer than a proxy's read timeout); else 0. The
monitor (``--every``) exits 0 when stopped by SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn
from urllib.parse import urlsplit

from otelstream import names
from otelstream.probe import config as C
from otelstream.probe.config import ProbeError, RunOptions, Target

_SINGLE = ("base_url", "surface", "model", "api_key_env", "region", "project", "location", "name")


def _checked(check: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _int(low: int, high: int) -> Callable[[str], Any]:
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
        return C.check_count(value, low, high)

    return _checked(check)


def _seconds(low: float, high: float = float("inf"), above: bool = False) -> Callable[[str], Any]:
    def check(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number of seconds") from None
        if above and value <= low:
            raise ValueError(f"a number of seconds above {low:g} is needed")
        return C.check_seconds(value, low, high)

    return _checked(check)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Send small, fixed, built-in streamed requests through the real SDK, with otelstream observing them as in a "
        "service, and report a row per request and a conformance verdict per target. No prompt, output, key or "
        "header value is ever printed, logged or exported."
    )
    # bad arguments are one line and exit 2, like every other refusal of this command (argparse adds its usage);
    # `otelstream` routes flags no subcommand knows here too
    setattr(parser, "error", _one_line_error(parser.prog))  # noqa: B010 - an instance attribute shadows the method
    one = parser.add_argument_group("one target")
    one.add_argument("--base-url", help="the API's base URL as the SDK takes it (http://host:8000/v1); "
                     "responses_websocket also takes a ws:// or wss:// URL; converse: the endpoint URL")  # fmt: skip
    one.add_argument("--surface", choices=names.SURFACES, metavar="SURFACE",
                     help=f"one of {', '.join(names.SURFACES)}")  # fmt: skip
    one.add_argument("--model", help="the model to ask (converse: the model or inference profile id)")
    one.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding the API key (default: "
                     "the SDK's own, OPENAI_API_KEY / ANTHROPIC_API_KEY / GOOGLE_API_KEY or GEMINI_API_KEY, when "
                     "set); not for converse, which signs with the AWS credential chain")  # fmt: skip
    one.add_argument("--region", help="converse: the AWS region (default: the AWS chain's, AWS_DEFAULT_REGION or the "
                     "profile's)")  # fmt: skip
    one.add_argument("--project", help="generate_content on Vertex AI: the Google Cloud project (signed with "
                     "Application Default Credentials)")  # fmt: skip
    one.add_argument("--location", help=f"with --project: the Vertex AI location (default {C.VERTEX_LOCATION})")
    one.add_argument("--name", help="the target's name, the probe_name label (default: host-surface)")
    parser.add_argument("--config", metavar="FILE", help="a TOML file of [[target]] tables (docs/probe.md)")
    parser.add_argument("--requests", type=_int(1, C.MAX_REQUESTS), default=None, metavar="N",
                        help=f"requests per target and round (default {C.DEFAULT_REQUESTS}; a file's own win)")
    parser.add_argument("--concurrency", type=_int(1, C.MAX_CONCURRENCY), default=1, metavar="N",
                        help="requests open at once per target (default 1)")  # fmt: skip
    parser.add_argument("--max-output-tokens", type=_int(1, C.MAX_OUTPUT_TOKENS), default=None, metavar="N",
                        help=f"the answer's token limit (default {C.DEFAULT_MAX_OUTPUT_TOKENS})")  # fmt: skip
    parser.add_argument("--timeout", type=_seconds(0, C.MAX_TIMEOUT_S, above=True), default=60.0, metavar="S",
                        help="seconds for the connection and each read (the SDK's timeout); a request still "
                        "streaming a second later is ended by the probe (default 60)")  # fmt: skip
    parser.add_argument("--proxy-read-timeout", type=_seconds(0, above=True), default=30.0, metavar="S",
                        help="the read timeout of the proxies on the path: a longer keepalive gap or silence fails "
                        "the verdict (default 30)")  # fmt: skip
    parser.add_argument("--ttfd-budget", type=_seconds(0, above=True), default=2.56, metavar="S",
                        help="a slower first delta is noted in the verdict (default 2.56, the shipped TTFD SLO)")
    parser.add_argument("--json", action="store_true", help="JSON instead of text (one object per line with --every)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when any request did not complete or any anomaly was seen")  # fmt: skip
    parser.add_argument("--every", type=_seconds(C.MIN_EVERY_S), default=None, metavar="S",
                        help="a synthetic monitor: a round every S seconds until SIGTERM/SIGINT")  # fmt: skip
    parser.add_argument("--serve", type=_int(0, 65535), default=None, metavar="PORT",
                        help="with --every: serve /metrics on this port (address: OTELSTREAM_PROMETHEUS_ADDR)")


def _one_line_error(prog: str) -> Callable[[str], NoReturn]:
    def error(message: str) -> NoReturn:
        print(f"{prog}: {message} ({prog} --help lists the arguments)", file=sys.stderr)
        raise SystemExit(2)

    return error


def targets_of(args: argparse.Namespace) -> list[Target]:
    """The targets the arguments name; a ``ProbeError`` for any mistake."""
    defaults = {k: v for k, v in (("requests", args.requests), ("max_output_tokens", args.max_output_tokens))
                if v is not None}  # fmt: skip
    given = [k for k in _SINGLE if getattr(args, k, None) is not None]
    if args.config is not None:
        if given:
            flags = ", ".join("--" + k.replace("_", "-") for k in given)
            raise ProbeError(f"{flags}: one target's flags, not with --config (the file names the targets)")
        return C.load_file(args.config, defaults)
    missing = [k for k in ("base_url", "surface", "model") if getattr(args, k, None) is None]
    if len(missing) == 3:
        raise ProbeError("give --config FILE, or --base-url, --surface and --model")
    if missing:
        raise ProbeError("missing " + ", ".join("--" + k.replace("_", "-") for k in missing))
    try:
        key = "--base-url"
        base_url = C.check_base_url(args.base_url, args.surface)
        key = "--model"
        model = C.check_model(args.model)
        key = "--project"
        project = None if args.project is None else C.check_project(args.project, args.surface)
        key = "--location"
        location = None if args.location is None else C.check_location(args.location, project)
        key = "--api-key-env"
        api_key_env = None if args.api_key_env is None else C.check_api_key_env(args.api_key_env, args.surface,
                                                                                project)  # fmt: skip
        key = "--region"
        region = None if args.region is None else C.check_region(args.region, args.surface)
        key = "--name"
        name = C.check_name(args.name if args.name is not None else
                            f"{urlsplit(base_url).hostname}-{args.surface}")  # fmt: skip
    except ValueError as exc:
        raise ProbeError(f"{key}: {exc}") from None
    return [Target(name=name, base_url=base_url, surface=args.surface, model=model, api_key_env=api_key_env,
                   region=region, project=project, location=location, **defaults)]  # fmt: skip


def run(args: argparse.Namespace) -> int:
    try:
        targets = targets_of(args)
        monitor = args.every is not None or any(t.every is not None for t in targets)
        if args.serve is not None and not monitor:
            raise ProbeError("--serve needs --every (or every in the config): /metrics is the monitor's")
        if monitor and args.strict:
            raise ProbeError("--strict judges a single run: not with --every")
        if monitor and args.every is None:
            lacking = [t.name for t in targets if t.every is None]
            if lacking:
                raise ProbeError(f"target {lacking[0]!r} has no every: set it in the file or pass --every")
        for target in targets:  # every variable named is set before anything is sent
            C.secrets(target)
        options = RunOptions(concurrency=args.concurrency, timeout_s=args.timeout,
                             proxy_read_timeout_s=args.proxy_read_timeout, ttfd_budget_s=args.ttfd_budget)  # fmt: skip
        return _run(targets, options, args, monitor)
    except ProbeError as exc:
        print(f"otelstream probe: {exc}", file=sys.stderr)
        return 2


def _run(targets: list[Target], options: RunOptions, args: argparse.Namespace, monitor: bool) -> int:
    from otelstream.probe import requests
    from otelstream.probe.observe import Session

    for target in targets:  # a missing SDK or missing cloud credentials: argument errors, before any request
        requests.require_sdk(target)
        requests.require_credentials(target)
    session = Session([t.surface for t in targets], serve=args.serve)
    session.start()
    try:
        if monitor:
            from otelstream.probe import monitor as M

            return M.run(targets, options, session, args.every, bool(args.json))
        return _once(targets, options, session, args)
    finally:
        session.close()


def _once(targets: Sequence[Target], options: RunOptions, session: Any, args: argparse.Namespace) -> int:
    from otelstream.probe import rendering, runner, verdict

    async def all_targets() -> list[verdict.TargetResult]:
        rounds = await asyncio.gather(*(runner.run_round(t, options, session.inbox) for t in targets))
        return [verdict.evaluate(t, rows, options) for t, rows in zip(targets, rounds, strict=True)]

    results = asyncio.run(all_targets())
    reached = [r for r in results if not r.verdict.unreachable]
    if reached:
        print(rendering.json_text(reached) if args.json else rendering.text(reached), flush=True)
    lost = [r for r in results if r.verdict.unreachable]
    for result in lost:
        reason = next((row.connect_reason or row.raised for row in result.rows), None) or "no connection"
        print(f"otelstream probe: target {result.target.name!r} ({result.target.shown_url}) cannot be reached: "
              f"{reason}", file=sys.stderr)  # fmt: skip
    if lost:
        return 2
    if args.strict and not all(r.ok for r in results):
        return 1
    return 0
