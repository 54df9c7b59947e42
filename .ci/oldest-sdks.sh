#!/usr/bin/env bash
# CI: the adapter and integration tests against the OLDEST supported SDK releases (the newest are what `.ci/run`
# installs through the `test` extra). Keep OPENAI_OLDEST / ANTHROPIC_OLDEST equal to the lower bounds declared in
# pyproject.toml. A throwaway venv in a temporary directory (or OLDEST_VENV, kept); about 1.5-2 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

OPENAI_OLDEST="3.42.0"     # 3.41.0 fails tests/adapters/test_websocket.py (Responses WebSocket stream_id lanes)
ANTHROPIC_OLDEST="2.0.0"   # the first 2.x release: everything passes
if [ -n "${OLDEST_VENV:-}" ]; then
  VENV="$OLDEST_VENV"
else
  TMP="$(mktemp -d)"
  trap 'rm -rf "$TMP"' EXIT
  VENV="$TMP/venv"
fi
PYTHON="${PYTHON:-python3}"

"$PYTHON" -m venv "$VENV"
. "$VENV/bin/activate"
# the project without its extras (they ask for newer SDKs), the exact oldest SDKs, and only what these tests need
pip install -q -e . "openai==${OPENAI_OLDEST}" "anthropic==${ANTHROPIC_OLDEST}" "websockets>=13,<16" \
  "pytest>=8" "pytest-asyncio>=0.23" "pytest-timeout>=2.3" "hypothesis>=6.100"
python - <<PY
import anthropic, openai
assert openai.__version__ == "${OPENAI_OLDEST}", openai.__version__
assert anthropic.__version__ == "${ANTHROPIC_OLDEST}", anthropic.__version__
print(f"oldest SDKs: openai {openai.__version__}, anthropic {anthropic.__version__}")
PY
python -m pytest -q -p no:cacheprovider tests/adapters tests/integration
