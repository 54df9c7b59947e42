#!/usr/bin/env bash
# CI: the tests again against the oldest release of every supported SDK major, and others by name (README
# "Supported SDKs"; pyproject.toml's extras). The newest openai 3.x and anthropic 2.x are what `.ci/run` installs
# through the `test` extra, and the whole suite runs there, so they are not repeated here. The oldest supported pair
# (openai 2.31, anthropic 1.0) runs the adapter and integration tests (FULL), the other bounds the adapter tests
# (QUICK), so that the whole of CI stays under 45 min beside a main suite of about 25. By name (MORE_ROWS below): the
# middle releases, and the oldest pair's whole suite (WHOLE) but for what gives the same results on every release:
# tests/core, tests/offline, tests/export and the hostile-input tests of the core and the checker import no SDK (the
# core is pure; the checker and the sinks are fed recorded bodies and reports), and tests/dashboards checks the
# dashboards and rules against the series (its demo loads need openai 3.32+). Each row gets
# its own venv: a throwaway one under a temporary directory, or kept under SDK_VENVS/<row> (reused when it was built
# for the same row). SDK_MATRIX_ROWS="name ..." runs those rows only. Prints each row's time.
set -euo pipefail
cd "$(dirname "$0")/.."

# row name, openai, anthropic, what runs (WHOLE: all of tests that import an SDK; FULL: adapters and integration;
# QUICK: adapters), and the HTTP libraries' releases when not the newest ("-": whatever pip resolves). "newest": the
# SDK release the test extra resolves today, for the rows that hold the HTTP libraries back instead.
ROWS=(
  "openai3-oldest  3.0.0   2.0.0   QUICK  -"   # openai 3.0-3.31: WebSocket mode unobserved (no openai._websocket_connection)
  "openai2-oldest  2.31.0  1.0.0   FULL   httpx<0.29"  # openai 2.x on httpx (2.0-2.30 have no per-attempt send: unsupported)
  # the previous release line of the HTTP libraries under the newest SDKs: a minor release of either reshaped what
  # otelstream observes before (httpx2 2.17.0's aiter_bytes), so both lines stay tested
  "http-previous   newest  newest  QUICK  httpx2<2.17,httpx<0.29"
)
# Run by name only (SDK_MATRIX_ROWS="openai3-middle …"): CI's time goes to the bounds, the middle releases when an SDK
# changes shape between them.
MORE_ROWS=(
  "openai3-middle  3.32.0  2.7.0   QUICK  -"   # the first openai with WebSocket mode observed
  "openai2-middle  2.42.0  1.9.0   QUICK  -"   # anthropic 1.x: its request() is the request entry (no _request)
  "openai2-newest  2.54.0  1.17.0  FULL   -"
  "openai2-whole   2.31.0  1.0.0   WHOLE  httpx<0.29"
)
if [ -n "${SDK_MATRIX_ROWS:-}" ]; then ROWS+=("${MORE_ROWS[@]}"); fi
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
  read -r name oa an what http <<<"$row"
  if [ -n "${SDK_MATRIX_ROWS:-}" ] && [[ " $SDK_MATRIX_ROWS " != *" $name "* ]]; then continue; fi
  # the SDK requirements: exact releases, or the test extra's ranges ("newest")
  if [ "$oa" = newest ]; then sdks=("openai>=3.57,<4" "anthropic>=2.15,<3"); else sdks=("openai==${oa}" "anthropic==${an}"); fi
  pins=()
  if [ "$http" != - ]; then IFS=, read -r -a pins <<<"$http"; fi
  start=$SECONDS
  venv="$ROOT/$name"
  if [ "$(cat "$venv/sdk-matrix-row" 2>/dev/null)" != "$oa $an $what $http" ] || ! "$venv/bin/python" - "$oa" "$an" \
      2>/dev/null <<'PY'
import sys
import anthropic, httpx, openai, otelstream  # noqa: F401
sys.exit(0 if sys.argv[1] == "newest" or (openai.__version__, anthropic.__version__) == (sys.argv[1], sys.argv[2]) else 1)
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
    "$venv/bin/pip" install -q -e . "${sdks[@]}" "${needs[@]}" "${pins[@]}"
    echo "$oa $an $what $http" >"$venv/sdk-matrix-row"
  fi
  "$venv/bin/python" - "$oa" "$an" <<'PY'
import sys
import importlib.metadata as md
import anthropic, openai
if sys.argv[1] != "newest":
    assert (openai.__version__, anthropic.__version__) == (sys.argv[1], sys.argv[2]), (openai.__version__, anthropic.__version__)
http = ", ".join(f"{d} {md.version(d)}" for d in ("httpx2", "httpx") if list(md.distributions(name=d)))
print(f"sdk-matrix: openai {openai.__version__}, anthropic {anthropic.__version__}, {http}")
PY
  case "$what" in
    # the Gemini and Bedrock tests drive google-genai and botocore, whose releases do not move with these rows; the
    # drift drills (580 cells, minutes) reshape what the SDKs call, the same planted shapes on any release: .ci/run's
    WHOLE) tests=(tests --ignore=tests/core --ignore=tests/offline --ignore=tests/export --ignore=tests/dashboards
                  --ignore=tests/reliability/test_hostile_core.py --ignore=tests/reliability/test_hostile_offline.py
                  --ignore=tests/integration/test_gemini_live.py --ignore=tests/integration/test_gemini_server_smoke.py
                  --ignore=tests/integration/test_bedrock_server_smoke.py --ignore=tests/adapters/test_bedrock_live.py
                  --ignore=tests/adapters/test_bedrock_install.py --ignore=tests/adapters/test_bedrock_http.py
                  --ignore=tests/reliability/test_drift_drills_cloud.py
                  --ignore=tests/reliability/test_drift_drills.py) ;;
    FULL) tests=(tests/adapters tests/integration tests/reliability/test_http_reshapes.py
                 tests/reliability/test_inventory.py) ;;
    *) tests=(tests/adapters tests/reliability/test_http_reshapes.py tests/reliability/test_inventory.py) ;;
  esac
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${tests[@]}"
  # what the README asks users to run after an upgrade: the fault matrix on this row's SDK and HTTP releases
  "$venv/bin/otelstream" doctor
  summary+=("$name (openai $oa, anthropic $an, $what, HTTP $http): $((SECONDS - start)) s")
done

# The cloud SDKs on the oldest releases [google] and [bedrock] allow, and a middle one, in venvs without openai,
# anthropic or httpx2 (what `pip install otelstream[google]` or `[bedrock]` gives on those releases), and the doctor.
# FULL: the Gemini and Bedrock live tests (the Gemini caller's view compared with otelstream off once, sync; each
# Bedrock test compares it itself). CORE: every scripted fault once per client kind (Gemini's fault matrix; Bedrock's
# converse, invoke and HTTP errors on chunked bodies). The newest google-genai, and aiobotocore 3.10 with the botocore it pins (the only release
# [bedrock-async] allows), run in the whole suite above; botocore 1.43.0 predates that pin, so its row runs the sync
# Bedrock tests only, as does the middle row's newest boto3 (1.44: newer than aiobotocore lets the test extra take).
# row name, google-genai, boto3 (botocore alike; "newest": what [bedrock] resolves), what runs
CLOUD_ROWS=(
  "cloud-oldest  1.10.0  1.43.0  FULL"   # google-genai 1.10: httpx alone, no httpx_client option, drops in-band errors
  "cloud-middle  1.50.1  newest  CORE"   # the first google-genai that raises an in-band error to its caller
)
# The rows share one venv: each moves google-genai and boto3/botocore to its releases (a few packages, not a venv).
for row in "${CLOUD_ROWS[@]}"; do
  read -r name genai boto what <<<"$row"
  if [ -n "${SDK_MATRIX_ROWS:-}" ] && [[ " $SDK_MATRIX_ROWS " != *" $name "* ]]; then continue; fi
  if [ "$boto" = newest ]; then sdks=(--upgrade "google-genai==${genai}" "boto3>=1.43,<2" "botocore>=1.43,<2")
  else sdks=("google-genai==${genai}" "boto3==${boto}" "botocore==${boto}"); fi
  start=$SECONDS
  venv="$ROOT/cloud"
  if ! "$venv/bin/python" -c 'import otelstream, pytest' 2>/dev/null; then
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/pip" install -q -e . "httpx>=0.23" "pytest>=8" "pytest-asyncio>=0.23" "pytest-timeout>=2.3" \
      "hypothesis>=6.100"
  fi
  "$venv/bin/pip" install -q "${sdks[@]}"
  "$venv/bin/python" - "$genai" "$boto" <<'PY'
import sys
import importlib.metadata as md
genai, boto = md.version("google-genai"), md.version("botocore")
assert genai == sys.argv[1] and sys.argv[2] in ("newest", boto), (genai, boto)
assert not any(list(md.distributions(name=d)) for d in ("httpx2", "openai", "anthropic", "aiobotocore"))
print(f"sdk-matrix: google-genai {genai}, botocore {boto}, httpx {md.version('httpx')}, no httpx2")
PY
  if [ "$what" = FULL ]; then pick="not (uninstrumented and async)"
  else pick="(every_fault_one_report or test_converse or test_invoke_anthropic or test_http_errors) and not sized"; fi
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/integration/test_gemini_live.py \
    tests/adapters/test_bedrock_live.py -k "$pick"
  "$venv/bin/otelstream" doctor
  summary+=("$name (google-genai $genai, boto3 $boto, $what): $((SECONDS - start)) s")
done
printf 'sdk-matrix: %s\n' "${summary[@]}"
echo "sdk-matrix: total $((SECONDS - overall_start)) s"
