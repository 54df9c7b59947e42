#!/usr/bin/env bash
# CI: the tests again against the oldest, a middle and the newest release of every supported SDK major (README
# "Supported SDKs"; pyproject.toml's extras). The newest openai 3.x and anthropic 2.x are what `.ci/run` installs
# through the `test` extra, and the whole suite runs there, so they are not repeated here. The oldest supported pair
# (openai 2.31, anthropic 1.0) runs the whole suite too (WHOLE), but for what gives the same results on every release,
# so that CI stays under 30 min: tests/core, tests/offline, tests/export and the hostile-input tests of the core and
# the checker import no SDK (the core is pure; the checker and the sinks are fed recorded bodies and reports), and
# tests/dashboards checks the dashboards and rules against the series (its demo loads need openai 3.32+). The other
# bounds run the adapter and integration tests (FULL), a middle release the adapter tests only (QUICK). Each row gets
# its own venv: a throwaway one under a temporary directory, or kept under SDK_VENVS/<row> (reused when it was built
# for the same row). Prints each row's time.
set -euo pipefail
cd "$(dirname "$0")/.."

# row name, openai, anthropic, what runs (WHOLE: all of tests that import an SDK; FULL: adapters and integration;
# QUICK: adapters)
ROWS=(
  "openai3-oldest  3.0.0   2.0.0   FULL"   # openai 3.0-3.31: WebSocket mode unobserved (no openai._websocket_connection)
  "openai3-middle  3.32.0  2.7.0   QUICK"  # the first openai with WebSocket mode observed
  "openai2-oldest  2.31.0  1.0.0   WHOLE"  # openai 2.x on httpx (2.0-2.30 have no per-attempt send: unsupported)
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
  if [ "$(cat "$venv/sdk-matrix-row" 2>/dev/null)" != "$oa $an $what" ] || ! "$venv/bin/python" - "$oa" "$an" \
      2>/dev/null <<'PY'
import sys
import anthropic, httpx, openai, otelstream  # noqa: F401
sys.exit(0 if (openai.__version__, anthropic.__version__) == (sys.argv[1], sys.argv[2]) else 1)
PY
  then
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    # the project without its extras (they ask for other SDK releases), the row's SDKs, and what these tests need:
    # for the whole suite, the test extra but its SDK pins and the tools only .ci/run itself uses (ruff, mypy, build)
    if [ "$what" = WHOLE ]; then
      mapfile -t needs < <("$PYTHON" - <<'PY'
import re, tomllib
with open("pyproject.toml", "rb") as f:
    extra = tomllib.load(f)["project"]["optional-dependencies"]["test"]
print("\n".join(r for r in extra if not re.match(r"(openai|anthropic|ruff|mypy|build)\b", r)))
PY
      )
    else
      needs=("websockets>=13,<16" "httpx>=0.23" "pytest>=8" "pytest-asyncio>=0.23" "pytest-timeout>=2.3"
             "hypothesis>=6.100")
    fi
    "$venv/bin/pip" install -q -e . "openai==${oa}" "anthropic==${an}" "${needs[@]}"
    echo "$oa $an $what" >"$venv/sdk-matrix-row"
  fi
  "$venv/bin/python" - "$oa" "$an" <<'PY'
import sys
import anthropic, openai
assert (openai.__version__, anthropic.__version__) == (sys.argv[1], sys.argv[2]), (openai.__version__, anthropic.__version__)
print(f"sdk-matrix: openai {openai.__version__}, anthropic {anthropic.__version__}")
PY
  case "$what" in
    WHOLE) tests=(tests --ignore=tests/core --ignore=tests/offline --ignore=tests/export --ignore=tests/dashboards
                  --ignore=tests/reliability/test_hostile_core.py --ignore=tests/reliability/test_hostile_offline.py) ;;
    FULL) tests=(tests/adapters tests/integration) ;;
    *) tests=(tests/adapters) ;;
  esac
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${tests[@]}"
  summary+=("$name (openai $oa, anthropic $an, $what): $((SECONDS - start)) s")
done
printf 'sdk-matrix: %s\n' "${summary[@]}"
echo "sdk-matrix: total $((SECONDS - overall_start)) s"
