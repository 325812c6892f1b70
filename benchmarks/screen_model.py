"""How fast is the learned risk screen's ``score``?

Times ``ScreenModel.score`` (folding, the features, the weighted sum), ``score_folded``
(what L0 calls on the text it folded already), and, for scale on the same machine,
``L0Gate.scan`` with the scorer (the whole screen) and without it (the lexicon alone),
over messages of up to 500 characters drawn from the calibration data (risk/ of the data
directory, docs/data.md); each message's time is the median of several calls, median and
p99 are across messages. "first call" times each message once on a freshly loaded model
(its memo of word weights empty at the start; words seen in earlier messages are in it).

    python benchmarks/screen_model.py [--data DIR] [--texts 1000] [--json]

Results: benchmarks/README.md (current, and how to read them), benchmarks/LOG.md (history).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from foureyes.core.datadir import DATA_HOWTO, data_dir
from foureyes.core.fold import normalise
from foureyes.risk.l0 import L0Gate
from foureyes.risk.lexicon_report import load_risk_data
from foureyes.risk.screen_model import default_screen_model, load_screen_model

MAX_CHARS = 500
REPEATS = 11
SEED = 4


def _time(texts: list[str], call: Callable[[str], object], repeats: int = REPEATS) -> list[float]:
    times = []
    for text in texts:
        runs = []
        for _ in range(repeats):
            start = time.perf_counter_ns()
            call(text)
            runs.append(time.perf_counter_ns() - start)
        times.append(statistics.median(runs) / 1000)
    return times


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "messages": len(ordered),
        "median_us": round(statistics.median(ordered), 1),
        "p99_us": round(ordered[max(0, int(0.99 * len(ordered)) - 1)], 1),
        "max_us": round(ordered[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path)
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    directory = args.data or data_dir() / "risk"
    if not directory.is_dir():
        raise SystemExit(f"no calibration data at {directory}: pass --data DIR, or {DATA_HOWTO}")
    pool = [t.text[:MAX_CHARS] for t in load_risk_data(directory) if t.text.strip()]
    texts = random.Random(SEED).sample(pool, min(args.texts, len(pool)))
    first = _time(texts, load_screen_model().score, repeats=1)  # loading is not timed
    model = default_screen_model()
    gate = L0Gate.default()
    score, scan, lexicon = model.score, gate.scan, L0Gate(gate.lexicon).scan
    full = [t for t in texts if len(t) == MAX_CHARS]
    folded = [normalise(t).text for t in full]
    results = {
        "all": _summary(_time(texts, score)),
        "500 chars": _summary(_time(full, score)),
        "first call, all": _summary(first),
        "score_folded, 500 chars": _summary(_time(folded, model.score_folded)),
        "L0 scan, all": _summary(_time(texts, scan)),
        "L0 scan, 500 chars": _summary(_time(full, scan)),
        "lexicon alone, all": _summary(_time(texts, lexicon)),
        "lexicon alone, 500 chars": _summary(_time(full, lexicon)),
        "mean_chars": round(statistics.mean(len(t) for t in texts), 1),
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, row in results.items():
        print(name, row)


if __name__ == "__main__":
    main()
