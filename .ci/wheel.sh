#!/usr/bin/env bash
# Packaging: `python -m build` makes a wheel and an sdist; the wheel alone, in clean venvs outside the checkout (no
# editable install, no repo on the path), runs the demo, writes the dashboards, and gives telemetry to a five-line
# service that follows the README's "Install into your service" literally. A file missing from the package fails here.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
provider_pid=""
cleanup() {
  if [ -n "$provider_pid" ]; then kill "$provider_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

python -m build --outdir "$work/dist" "$repo" >/dev/null
wheel="$(ls "$work"/dist/otelstream-*.whl)"
ls "$work"/dist/otelstream-*.tar.gz >/dev/null
cd "$work"  # nothing of the checkout importable from here on
export PYTHONPATH=""

# The demo and the dashboards from the wheel.
python3 -m venv "$work/demo"
"$work/demo/bin/pip" install -q "$wheel[demo]"
"$work/demo/bin/otelstream" demo --streams 40 --quiet >"$work/demo.txt"
grep -q "every outcome above is what the fault plan promised" "$work/demo.txt"
"$work/demo/bin/otelstream" dashboards "$work/dashboards" >/dev/null
for f in grafana/otelstream-streams.json prometheus/otelstream.rules.yml prometheus/otelstream.rules.test.yml; do
  test -s "$work/dashboards/$f" || { echo "wheel: otelstream dashboards wrote no $f" >&2; exit 1; }
done
"$work/demo/bin/otelstream" check "$("$work/demo/bin/python" -c 'import otelstream.examples as e, os; print(os.path.dirname(e.__file__))')"/chat-cut.sse >/dev/null || test $? -eq 1

# The README's install section, literally: a throwaway venv, the wheel with the extras it names, `import
# otelstream.auto` first in a five-line app; spans (console exporter) and /metrics must come out.
"$work/demo/bin/python" -c '
import sys, time
from otelstream.demo.provider import FakeProvider
p = FakeProvider().start()
open(sys.argv[1], "w").write(p.openai_base_url)
time.sleep(600)
' "$work/provider_url" &
provider_pid=$!
for _ in $(seq 100); do test -s "$work/provider_url" && break; sleep 0.1; done
python3 -m venv "$work/service"
"$work/service/bin/pip" install -q "$wheel[openai,anthropic,otlp]"
cat >"$work/app.py" <<'APP'
import otelstream.auto
import os, urllib.request, openai
client = openai.OpenAI(base_url=os.environ["PROVIDER_URL"], api_key="sk-test")
for _ in client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True): pass
otelstream.flush(); print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % os.environ["OTELSTREAM_PROMETHEUS_PORT"]).read().decode())
APP
port="$("$work/service/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
PROVIDER_URL="$(cat "$work/provider_url")" OTEL_SERVICE_NAME=wheel-check OTEL_TRACES_EXPORTER=console \
  OTELSTREAM_PROMETHEUS_PORT="$port" "$work/service/bin/python" "$work/app.py" >"$work/app.txt"
grep -q 'otelstream_streams_total{.*outcome="completed".*} 1.0' "$work/app.txt" \
  || { echo "wheel: the README's service exposed no otelstream_streams_total" >&2; cat "$work/app.txt" >&2; exit 1; }
grep -q '"name": "chat gpt-4o"' "$work/app.txt" && grep -q '"service.name": "wheel-check"' "$work/app.txt" \
  || { echo "wheel: the README's service exported no stream span" >&2; cat "$work/app.txt" >&2; exit 1; }
echo "wheel: $(basename "$wheel") installs, runs the demo and dashboards, and instruments a service"
