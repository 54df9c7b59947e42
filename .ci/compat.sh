#!/usr/bin/env bash
# CI: the frameworks people stream through (tests/compat), each against the scripted server on 127.0.0.1, with and
# without otelstream. Pinned releases in a throwaway venv in a temporary directory (or COMPAT_VENV, kept), so the
# main `[test]` venv stays free of them (there tests/compat skips). About 3.5 minutes: 1.5 to install, 1.5 to run
# (on a quiet 2-core machine; 15 minutes when it was shared with other builds).
#
# Not here, because pip cannot install them beside openai >= 3.42 (the oldest release otelstream supports):
# - instructor: every release pins jiter < 0.15 (1.17.0) or openai < 3, and openai 3.42+ needs jiter >= 0.16.
# - llama-index-llms-openai after 0.1.27 (0.8.3 today) pins openai < 3: only its 0.1 line is tested.
set -euo pipefail
cd "$(dirname "$0")/.."

# Keep README.md's "Frameworks" list and docs/frameworks.md in step with these.
FRAMEWORKS=(
  "langchain-openai==1.8.1"
  "langchain-anthropic==1.7.10"
  "langchain-google-genai==4.4.3"
  "langchain-aws==1.9.1"  # ChatBedrockConverse
  "openai-agents==0.24.0"
  "pydantic-ai-slim[openai,anthropic,google,bedrock]==2.78.0"  # pydantic-ai with just these providers' SDKs
  "litellm==1.110.2"
  "llama-index-llms-openai==0.1.27"
)
# The SDK (and HTTP client) releases these were verified with (the main run tests the newest SDKs,
# .ci/oldest-sdks.sh the oldest).
# google-genai: 2.34.0, not the newest 3.x, because pydantic-ai-slim[google] 2.78.0 requires google-genai < 3.
# No aiobotocore: none of these frameworks streams through it (langchain-aws and pydantic-ai run sync boto3 on
# worker threads for their async calls).
SDKS=("openai==3.63.0" "anthropic==2.17.0" "google-genai==2.34.0" "boto3==1.43.117" "botocore==1.43.117"
      "httpx==0.28.1")  # httpx: litellm's own client and google-genai 2.x's sync one (the other SDKs use httpx2)

if [ -n "${COMPAT_VENV:-}" ]; then
  VENV="$COMPAT_VENV"
else
  TMP="$(mktemp -d)"
  trap 'rm -rf "$TMP"' EXIT
  VENV="$TMP/venv"
fi
PYTHON="${PYTHON:-python3}"

"$PYTHON" -m venv "$VENV"
. "$VENV/bin/activate"
# --no-compile: litellm alone is thousands of modules the tests never import; not compiling (nor later deleting)
# their bytecode saves most of the install's disk time
pip install -q --no-compile -e . "${SDKS[@]}" "${FRAMEWORKS[@]}" \
  "pytest>=8" "pytest-asyncio>=0.23" "pytest-timeout>=2.3" "hypothesis>=6.100"
echo "compat: installed in ${SECONDS}s"
python - <<'PY'
from importlib.metadata import version
names = ["openai", "anthropic", "google-genai", "botocore", "langchain-openai", "langchain-anthropic",
         "langchain-google-genai", "langchain-aws", "openai-agents", "pydantic-ai-slim", "litellm",
         "llama-index-llms-openai"]
print("compat:", ", ".join(f"{n} {version(n)}" for n in names))
PY
# the frameworks must not reach the network from CI: litellm's cost map comes from its own package
export LITELLM_LOCAL_MODEL_COST_MAP=True
export OTELSTREAM_COMPAT_REQUIRED=1  # a framework that fails to import fails the run instead of skipping
python -m pytest -q -p no:cacheprovider tests/compat
