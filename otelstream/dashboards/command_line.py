"""The ``otelstream dashboards`` subcommand: its arguments, writing the files for the settings asked, and saying what
was written where and what to do with it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from otelstream import names
from otelstream.dashboards.attribute_variables import attribute_labels
from otelstream.dashboards.k8s_manifests import K8S_CONTENTS, K8S_FILES, k8s_manifests
from otelstream.dashboards.rule_settings import rule_settings
from otelstream.dashboards.shipped import rendered_files, write_all

DEFAULT_DIR = "otelstream-dashboards"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        nargs="?",
        default=DEFAULT_DIR,
        metavar="DIR",
        help=f"folder to write into, created if missing (default: ./{DEFAULT_DIR})",
    )
    parser.add_argument("--force", action="store_true", help="overwrite files that exist and differ")
    parser.add_argument(
        "--k8s",
        metavar="K8S_DIR",
        default=None,
        help="also write Kubernetes manifests there: a PrometheusRule, a ServiceMonitor and a Grafana dashboard "
        "ConfigMap (sidecar label grafana_dashboard=1)",
    )
    parser.add_argument(
        "--slo-objective",
        type=float,
        default=None,
        help="share of streams that must end well over 30 days, for the error-budget alerts (default: the "
        "slo_objective setting, 0.99)",
    )
    parser.add_argument(
        "--stall-threshold-s",
        type=float,
        default=None,
        help="the stall threshold the services use (the stalled alert waits as long again; default: the "
        "stall_threshold_s setting, 30)",
    )
    parser.add_argument(
        "--semconv",
        choices=names.SEMCONV_MODES,
        default=None,
        help="the GenAI semantic conventions your services emit (default: the semconv setting, read from "
        f"{names.SEMCONV_ENV}): latest queries the v0.1.0 gen_ai.client.inference.* series, dup reads them and "
        "falls back to the default ones",
    )
    parser.add_argument(
        "--metric-attributes",
        metavar="KEYS",
        default=None,
        help="comma-separated application attribute keys your metrics carry as labels (default: the "
        "metric_attributes setting); the dashboards get one variable each",
    )


def _configured_labels() -> list[str]:
    """The labels of the ``metric_attributes`` setting (its environment form)."""
    from otelstream import config

    return attribute_labels(config.load().metric_attributes)


def _configured_semconv() -> str:
    """The ``semconv`` setting (``OTEL_SEMCONV_STABILITY_OPT_IN``, as the services read it)."""
    from otelstream import config

    return config.load().semconv


def run(args: argparse.Namespace) -> int:
    dest = Path(args.dir)
    try:
        keys = getattr(args, "metric_attributes", None)
        labels = _configured_labels() if keys is None else attribute_labels(keys)
        settings = rule_settings(getattr(args, "slo_objective", None), getattr(args, "stall_threshold_s", None))
        semconv = getattr(args, "semconv", None) or _configured_semconv()
        files = rendered_files(labels, settings, semconv)
        written, conflicts = write_all(dest, files, bool(args.force))
        k8s = None if getattr(args, "k8s", None) is None else Path(args.k8s)
        if k8s is not None:
            k8s_written, k8s_conflicts = write_all(k8s, k8s_manifests(files), bool(args.force))
            written += k8s_written
            conflicts += k8s_conflicts
        if not settings.default:
            print("otelstream dashboards: the rule tests (*.test.yml) hold for the default settings only; not written",
                  file=sys.stderr)  # fmt: skip
    except (FileNotFoundError, OSError, ValueError) as exc:
        print(f"otelstream dashboards: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    if conflicts:
        for path in conflicts:
            print(f"otelstream dashboards: {path} exists and differs; not overwritten (use --force)", file=sys.stderr)
        return 1
    print(
        f"Import {dest / 'grafana'}/*.json into Grafana (Dashboards → New → Import) and add "
        f"{dest / 'prometheus' / 'otelstream.rules.yml'} to rule_files in prometheus.yml.",
        file=sys.stderr,
    )
    if k8s is not None:
        _say_k8s(k8s)
    return 0


def _say_k8s(k8s: Path) -> None:
    """What the Kubernetes manifests are and how to apply them (their paths say neither)."""
    print(f"Kubernetes manifests in {k8s} (for a cluster with prometheus-operator, instead of the above):",
          file=sys.stderr)  # fmt: skip
    width = max(len(str(k8s / name)) for name in K8S_FILES)
    for name in K8S_FILES:
        print(f"  {str(k8s / name).ljust(width)}  {K8S_CONTENTS[name]}", file=sys.stderr)
    print(f"Apply them in the namespace of the services that serve /metrics: kubectl apply -n <namespace> -f {k8s}",
          file=sys.stderr)  # fmt: skip
