#!/usr/bin/env bash
# CI: otelstream beside a real GenAI peer instrumentation that records the gen_ai.client.* metrics itself
# (tests/telemetry/test_peer_metrics.py: those metrics once per call, otelstream's own series for every stream).
# Pinned, in a throwaway venv in a temporary directory (or PEERS_VENV, kept), so the main `[test]` venv stays free of
# it (there that test skips).
set -euo pipefail
cd "$(dirname "$0")/.."

PEERS=("opentelemetry-instrumentation-genai-openai==1.3b0")

if [ -n "${PEERS_VENV:-}" ]; then
  VENV="$PEERS_VENV"
else
  TMP="$(mktemp -d)"
  trap 'rm -rf "$TMP"' EXIT
  VENV="$TMP/venv"
fi
PYTHON="${PYTHON:-python3}"

"$PYTHON" -m venv "$VENV"
. "$VENV/bin/activate"
pip install -q --no-compile -e '.[test]' "${PEERS[@]}"
echo "peers: installed in ${SECONDS}s"
export OTELSTREAM_PEERS_REQUIRED=1  # a peer that fails to import fails the run instead of skipping
python -m pytest -q -p no:cacheprovider tests/telemetry/test_peer_metrics.py
