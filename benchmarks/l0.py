"""How fast is the L0 screen, and does its cost grow with the lexicon?

1. Latency: ``L0Gate.default().scan``, the whole screen (folding once, the lexicon's
   automaton and scoring, the learned scorer), over messages of up to 500 characters;
   median and p99 per message; beside it the lexicon alone (``L0Gate(lexicon)``).
2. Scaling (the lexicon alone): the same messages against the lexicon at 1x, 10x and
   100x its size (the extra keys are made of the lexicon's own words and characters, so
   they look like terms), side by side with a compiled regex alternation and a naive
   substring loop over the same keys and the same folded texts.

The messages are the calibration data (risk/ of the data directory, docs/data.md) cut to 500
characters when it is there, else synthetic messages built from the lexicon's vocabulary.

    python benchmarks/l0.py [--data DIR] [--texts 1000] [--compare-texts 60] [--json]

Results: benchmarks/README.md (current, and how to read them), benchmarks/LOG.md (history).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import ahocorasick

from foureyes.core.datadir import DATA_HOWTO, data_dir
from foureyes.core.fold import normalise
from foureyes.core.locale import detect_locale, is_covered
from foureyes.risk._lexicon import EntryKind, L0Category, Lexicon, LexiconEntry
from foureyes.risk.l0 import L0Gate
from foureyes.risk.lexicon_report import load_risk_data

MAX_CHARS = 500
REPEATS = 21
SCALES = (1, 10, 100)
SEED = 4


def messages(data: Path | None, count: int, rng: random.Random, vocabulary: list[str]) -> list[str]:
    if data is not None:
        texts = [t.text[:MAX_CHARS] for t in load_risk_data(data) if t.text.strip()]
        return rng.sample(texts, min(count, len(texts)))
    # No data: sentences of lexicon words and everyday filler, 20-500 characters; every
    # fourth one exactly MAX_CHARS long, so the full-length figures have messages to time.
    filler = "i just had a long day at work and the weather is grey again today".split()
    out = []
    for n in range(count):
        words = rng.choices(filler, k=rng.randint(4, 60)) + rng.sample(vocabulary, 2)
        rng.shuffle(words)
        text = " ".join(words)
        while n % 4 == 0 and len(text) < MAX_CHARS:
            text += " " + rng.choice(filler)
        out.append(text[:MAX_CHARS])
    return out


def per_message_us(
    scan: Callable[[str], object], texts: Sequence[str], repeats: int
) -> list[float]:
    """Each text's time for one call, in microseconds: the median of ``repeats`` timed calls.

    The median per text keeps a scheduler preemption (the machine is shared) from being
    read as the cost of that text; the spread across texts is what p99 reports.
    """
    times = []
    for text in texts:
        scan(text)  # warm-up
        samples = []
        for _ in range(repeats):
            started = time.perf_counter_ns()
            scan(text)
            samples.append(time.perf_counter_ns() - started)
        times.append(statistics.median(samples) / 1000)
    return times


def p99(values: list[float]) -> float | None:
    """The 99th percentile, ``None`` for fewer than two values (said so where printed)."""
    if len(values) < 2:
        return None
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def median(values: Sequence[float]) -> float | None:
    """The median, ``None`` for no values (said so where printed)."""
    return statistics.median(values) if values else None


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def scaled_lexicon(base: Lexicon, scale: int, rng: random.Random) -> Lexicon:
    """``base`` plus (scale - 1) x its key count of made-up keys from its own vocabulary."""
    words = sorted({w for key in base.keys for w in key.split() if w.isascii()})
    chars = sorted({c for key in base.keys for c in key if not c.isascii()})
    filler = LexiconEntry(
        "(synthetic)", EntryKind.TERM, L0Category.HOPELESSNESS, 0.1, "bench", "foureyes-calibration"
    )
    keys = dict(base.keys)
    while len(keys) < scale * len(base.keys):
        if rng.random() < 0.5:
            made_up = " ".join(rng.sample(words, rng.randint(2, 4)))
        else:
            made_up = "".join(rng.sample(chars, rng.randint(2, 5)))
        keys.setdefault(normalise(made_up).text, filler)
    return Lexicon(base.entries, keys, base.sources)


def automaton_pass(keys: Sequence[str]) -> Callable[[str], object]:
    automaton = ahocorasick.Automaton()
    for key in keys:
        automaton.add_word(key, key)
    automaton.make_automaton()
    return lambda text: list(automaton.iter(text))


def regex_alternation(keys: Sequence[str]) -> Callable[[str], object]:
    pattern = re.compile("|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True)))
    return lambda text: pattern.findall(text)


def substring_loop(keys: Sequence[str]) -> Callable[[str], object]:
    return lambda text: [k for k in keys if k in text]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="calibration data directory")
    parser.add_argument("--texts", type=int, default=1000, help="messages for the latency run")
    parser.add_argument(
        "--compare-texts", type=int, default=60, help="messages for the scaling comparison"
    )
    parser.add_argument(
        "--scales",
        type=lambda text: tuple(int(part) for part in text.split(",")),
        default=SCALES,
        help="lexicon sizes of the scaling comparison, as multiples (default 1,10,100)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    rng = random.Random(SEED)

    started = time.perf_counter()
    gate = L0Gate.default()
    build_s = time.perf_counter() - started
    risk = data_dir() / "risk"
    data = args.data or (risk if risk.is_dir() else None)
    skipped: list[str] = []
    if data is None:
        skipped.append(
            f"the calibration data (no {risk}): synthetic messages instead; {DATA_HOWTO}"
        )
    texts = messages(data, args.texts, rng, sorted(gate.keys))

    def whole_screen(text: str) -> object:
        # What triage runs on every message before any model: L0, the language check and
        # the reply locale.
        return gate.scan(text), is_covered(text), detect_locale(text)

    latency = per_message_us(gate.scan, texts, REPEATS)
    screened = per_message_us(whole_screen, texts, REPEATS)
    screened_full = [t for t, text in zip(screened, texts, strict=True) if len(text) == MAX_CHARS]
    full = [t for t, text in zip(latency, texts, strict=True) if len(text) == MAX_CHARS]
    lexicon_alone = per_message_us(L0Gate(gate.lexicon).scan, texts, REPEATS)
    lexicon_full = [
        t for t, text in zip(lexicon_alone, texts, strict=True) if len(text) == MAX_CHARS
    ]
    compare = texts[: args.compare_texts]
    folded = [normalise(t).text for t in compare]
    scaling: dict[str, dict[int, float]] = {
        "l0": {},
        "automaton": {},
        "regex": {},
        "substring": {},
    }
    sizes: dict[int, int] = {}
    matches: dict[int, int] = {}
    for scale in args.scales:
        lexicon = scaled_lexicon(gate.lexicon, scale, rng)
        keys = list(lexicon.keys)
        sizes[scale] = len(keys)
        repeats = max(3, REPEATS // scale)
        big_gate = L0Gate(lexicon)
        scaling["l0"][scale] = statistics.median(per_message_us(big_gate.scan, compare, repeats))
        matches[scale] = sum(len(big_gate.scan(text).matches) for text in compare)
        for name, make in (
            ("automaton", automaton_pass),
            ("regex", regex_alternation),
            ("substring", substring_loop),
        ):
            scaling[name][scale] = statistics.median(per_message_us(make(keys), folded, repeats))

    result = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "source": "calibration data" if data else "synthetic",
        "build_s": round(build_s, 3),
        "texts": len(texts),
        "mean_chars": round(statistics.mean(len(t) for t in texts), 1),
        "median_us": rounded(median(latency)),
        "p99_us": rounded(p99(latency)),
        "max_us": rounded(max(latency, default=None)),
        "full_length_texts": len(full),
        "full_length_median_us": rounded(median(full)),
        "full_length_p99_us": rounded(p99(full)),
        "lexicon_alone": {
            "median_us": rounded(median(lexicon_alone)),
            "p99_us": rounded(p99(lexicon_alone)),
            "full_length_median_us": rounded(median(lexicon_full)),
            "full_length_p99_us": rounded(p99(lexicon_full)),
        },
        "with_language_id": {
            "median_us": rounded(median(screened)),
            "p99_us": rounded(p99(screened)),
            "full_length_median_us": rounded(median(screened_full)),
            "full_length_p99_us": rounded(p99(screened_full)),
        },
        "skipped": skipped,
        "keys": sizes,
        "matches": matches,
        "median_us_by_scale": {
            name: {s: round(v, 2) for s, v in by_scale.items()}
            for name, by_scale in scaling.items()
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for what in skipped:
        print(f"skipped: {what}")
    print(
        f"L0Gate.default().scan (lexicon + learned scorer) over {len(texts)} messages "
        f"({result['source']}, <= {MAX_CHARS} chars, "
        f"mean {result['mean_chars']}); Python {result['python']} on {result['machine']}; "
        f"gate built in {build_s:.2f} s\n"
    )
    print(f"median {result['median_us']} us, p99 {result['p99_us']} us, max {result['max_us']} us")
    print(
        f"the {len(full)} messages of exactly {MAX_CHARS} characters: median "
        f"{result['full_length_median_us']} us, p99 {result['full_length_p99_us']} us"
    )
    whole = result["with_language_id"]
    print(
        f"with the language check (is_covered, detect_locale): median {whole['median_us']} us, "
        f"p99 {whole['p99_us']} us; at {MAX_CHARS} characters median "
        f"{whole['full_length_median_us']} us, p99 {whole['full_length_p99_us']} us"
    )
    alone = result["lexicon_alone"]
    print(
        f"the lexicon alone: median {alone['median_us']} us, p99 {alone['p99_us']} us; "
        f"at {MAX_CHARS} characters median {alone['full_length_median_us']} us, "
        f"p99 {alone['full_length_p99_us']} us\n"
    )
    print(f"Scaling (the lexicon alone): median us per message over {len(compare)} messages")
    print(
        "| lexicon | keys | matches | L0 scan | automaton pass | regex alternation "
        "| substring loop | regex / L0 | loop / L0 |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for scale in args.scales:
        l0, automaton, rx, loop = (
            scaling[n][scale] for n in ("l0", "automaton", "regex", "substring")
        )
        print(
            f"| {scale}x | {sizes[scale]} | {matches[scale]} | {l0:.1f} | {automaton:.1f} "
            f"| {rx:.1f} | {loop:.1f} | {rx / l0:.1f}x | {loop / l0:.1f}x |"
        )
    low, high = min(args.scales), max(args.scales)
    if high > low:  # one scale (--scales 1): no growth to print
        growth = " | ".join(
            f"{name}: {scaling[name][high] / scaling[name][low]:.1f}x" for name in scaling
        )
        print(f"\nGrowth from {low}x to {high}x: {growth}")


if __name__ == "__main__":
    main()
