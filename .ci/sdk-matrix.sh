#!/usr/bin/env bash
# CI: the adapter and integration tests against the oldest, a middle and the newest release of every supported SDK
# major (README "Supported SDKs"; pyproject.toml's extras). The newest openai 3.x and anthropic 2.x are what `.ci/run`
# installs through the `test` extra, and the whole suite runs there, so they are not repeated here. Each row gets its
# own venv: a throwaway one under a temporary directory, or kept under SDK_VENVS/<row> (reused when it already has the
# row's releases). A middle release runs the adapter tests only (QUICK), the bounds everything. Prints each row's time.
set -euo pipefail
cd "$(dirname "$0")/.."

# row name, openai, anthropic, what runs (FULL: tests/adapters + tests/integration; QUICK: tests/adapters)
ROWS=(
  "openai3-oldest  3.0.0   2.0.0   FULL"   # openai 3.0-3.31: WebSocket mode unobserved (no openai._websocket_connection)
  "openai3-middle  3.32.0  2.7.0   QUICK"  # the first openai with WebSocket mode observed
  "openai2-oldest  2.31.0  1.0.0   FULL"   # openai 2.x on httpx (2.0-2.30 have no per-attempt send: unsupported)
  "openai2-middle  2.42.0  1.9.0   QUICK"  # anthropic 1.x: its request() is the request entry (no _request)
  "openai2-newest  2.54.0  1.17.0  FULL"
)
PYTHON="${PYTHON:-python3}"
if [ -n "${SDK_VENVS:-}" ]; then
  ROOT="$SDK_VENVS"
  mkdir -p "$ROOT"
else
  ROOT="$(mktemp -d)"
  trap 'rm -rf "$ROOT"' EXIT
fi

overall_start=$SECONDS
summary=()
for row in "${ROWS[@]}"; do
  read -r name oa an what <<<"$row"
  start=$SECONDS
  venv="$ROOT/$name"
  if ! "$venv/bin/python" - "$oa" "$an" 2>/dev/null <<'PY'
import sys
import anthropic, httpx, openai, otelstream  # noqa: F401
sys.exit(0 if (openai.__version__, anthropic.__version__) == (sys.argv[1], sys.argv[2]) else 1)
PY
  then
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    # the project without its extras (they ask for other SDK releases), the row's SDKs, and what these tests need
    "$venv/bin/pip" install -q -e . "openai==${oa}" "anthropic==${an}" "websockets>=13,<16" "httpx>=0.23" \
      "pytest>=8" "pytest-asyncio>=0.23" "pytest-timeout>=2.3" "hypothesis>=6.100"
  fi
  "$venv/bin/python" - "$oa" "$an" <<'PY'
import sys
import anthropic, openai
assert (openai.__version__, anthropic.__version__) == (sys.argv[1], sys.argv[2]), (openai.__version__, anthropic.__version__)
print(f"sdk-matrix: openai {openai.__version__}, anthropic {anthropic.__version__}")
PY
  tests=(tests/adapters)
  if [ "$what" = FULL ]; then tests+=(tests/integration); fi
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${tests[@]}"
  summary+=("$name (openai $oa, anthropic $an, $what): $((SECONDS - start)) s")
done
printf 'sdk-matrix: %s\n' "${summary[@]}"
echo "sdk-matrix: total $((SECONDS - overall_start)) s"
