#!/usr/bin/env bash
# Create NeMo Guardrails' own virtual environment for benchmarks/gateway.py.
#
# NeMo Guardrails is only a point of comparison: it never enters foureyes' own
# environment or dependencies. It lives in benchmarks/.venv-nemo (gitignored), with
# usage statistics off. Idempotent: a venv that already has the pinned version is kept.
#
#   bash benchmarks/nemo/setup.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${NEMO_VENV:-$here/../.venv-nemo}"
python="${PYTHON:-python3}"
# 0.24 is the release issue 5 names; the `server` extra brings `nemoguardrails server`
# (FastAPI, uvicorn, openai<3). Its `openai` engine needs nothing more: 0.24 calls
# OpenAI-compatible endpoints with its own httpx client.
spec="nemoguardrails[server]==0.24.*"

export NEMO_GUARDRAILS_NO_USAGE_STATS=1
if [ -x "$venv/bin/python" ] && "$venv/bin/python" - <<'PY' 2>/dev/null; then
import importlib.metadata as m, sys
sys.exit(0 if m.version("nemoguardrails").startswith("0.24.") and m.version("uvicorn") else 1)
PY
    echo "NeMo Guardrails venv ready: $venv"
    exit 0
fi
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$spec"
"$venv/bin/python" -c "import importlib.metadata as m; print('nemoguardrails', m.version('nemoguardrails'), 'in $venv')"
