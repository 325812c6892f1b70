"""``nemoguardrails server``, unchanged except that it listens on 127.0.0.1 only.

NeMo Guardrails 0.24's ``server`` command hard-codes ``host="0.0.0.0"``; benchmarks on
this project stay on loopback, so this runs the same command with ``uvicorn.run`` told
to bind 127.0.0.1. Run it with NeMo's own interpreter (benchmarks/.venv-nemo):

    .venv-nemo/bin/python benchmarks/nemo/serve_loopback.py server --config DIR --port N
"""

import sys
from typing import Any

import uvicorn

_run = uvicorn.run


def _run_on_loopback(app: Any, **options: Any) -> None:
    _run(app, **{**options, "host": "127.0.0.1"})


uvicorn.run = _run_on_loopback  # the command imports uvicorn and calls uvicorn.run late

from nemoguardrails.__main__ import app  # noqa: E402  (after the patch, by design)

if __name__ == "__main__":
    sys.exit(app())
