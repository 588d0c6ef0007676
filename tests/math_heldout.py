"""The math judge on replies it was not built with (issue 44): `python -m tests.math_heldout` prints,
per style of tests/data/math_judge_heldout_v2.jsonl, how many hand labels each judge agrees with:

- reinagent: `judge(reply, gold, question)` (reinagent/benchmarks/math_judge.py), as runs call it;
- math-verify alone: the library on the whole reply (no Finish[...], no question);
- lm-eval's two GSM8K filters (lm-evaluation-harness, tasks/gsm8k/gsm8k.yaml), re-implemented here
  from their regexes: strict-match takes the first `#### N`, flexible-extract the last number-like
  run; both then compare as exact match after dropping commas, `$`, and a final period.

and the false passes of each (label wrong, judge credits it). docs/math-judge.md shows the table.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

HELDOUT = Path(__file__).parent / "data" / "math_judge_heldout_v2.jsonl"
# issue 54's set: written by a procedure fixed first (docs/math-judge.md), frozen before the judge changed
HELDOUT_V3 = Path(__file__).parent / "data" / "math_judge_heldout_v3.jsonl"
# ... and a small one written after the change, frozen before any judge ran on it: the honest figure
HELDOUT_V4 = Path(__file__).parent / "data" / "math_judge_heldout_v4.jsonl"
SETS = {"v2": HELDOUT, "v3": HELDOUT_V3, "v4": HELDOUT_V4}
JUDGES = ("reinagent", "math-verify", "flexible-extract", "strict-match")

_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
_IGNORED = (",", r"\$", r"(?s).*#### ", r"\.$")


@dataclass(frozen=True)
class Reply:
    id: str
    style: str
    kind: str
    question: str | None
    reply: str
    gold: str
    label: bool


def load(path: Path = HELDOUT) -> list[Reply]:
    fields = Reply.__dataclass_fields__
    return [Reply(**{k: v for k, v in json.loads(line).items() if k in fields})
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _exact(prediction: str, gold: str) -> bool:
    for pattern in _IGNORED:
        prediction, gold = re.sub(pattern, "", prediction), re.sub(pattern, "", gold)
    return prediction.strip().lower() == gold.strip().lower()


def strict_match(reply: str, gold: str) -> bool:
    found = _STRICT.findall(reply)
    return bool(found) and _exact(found[0], gold)


def flexible_extract(reply: str, gold: str) -> bool:
    found = [next(g for g in groups if g) for groups in _FLEXIBLE.findall(reply)]
    return bool(found) and _exact(found[-1], gold)


def math_verify_alone(reply: str, gold: str) -> bool:
    from reinagent.benchmarks.math_judge import _math_verify

    mv = _math_verify()
    try:
        return bool(mv.verify(mv.parse(gold, parsing_timeout=None), mv.parse(reply, parsing_timeout=None),
                              timeout_seconds=None))
    except Exception:  # noqa: BLE001 - what it cannot read is not a match
        return False


def verdicts(row: Reply) -> dict[str, bool]:
    """Each judge's verdict (credited or not) on one reply."""
    from reinagent.benchmarks.math_judge import judge

    return {"reinagent": judge(row.reply, row.gold, question=row.question).success,
            "math-verify": math_verify_alone(row.reply, row.gold),
            "flexible-extract": flexible_extract(row.reply, row.gold),
            "strict-match": strict_match(row.reply, row.gold)}


def table(rows: list[Reply]) -> dict[str, Counter]:
    """style -> Counter: n, and per judge its agreements (`name`) and false passes (`name fp`)."""
    out: dict[str, Counter] = {}
    for row in rows:
        count = out.setdefault(row.style, Counter())
        count["n"] += 1
        for name, credited in verdicts(row).items():
            count[name] += credited is row.label
            count[name + " fp"] += credited and not row.label
    return out


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.math_heldout")
    parser.add_argument("--set", choices=sorted(SETS), default="v2", help="which held-out set to score")
    rows = load(SETS[parser.parse_args(argv).set])
    by_style = table(rows)
    total = sum(by_style.values(), Counter())
    labels = Counter(r.label for r in rows)
    kinds = Counter(r.kind for r in rows)
    print(f"## Held-out replies: {len(rows)} ({kinds['gsm8k']} GSM8K-style, {kinds['arithmetic']} arithmetic; "
          f"{labels[True]} right, {labels[False]} wrong by hand labels)\n")
    print("agreement with the hand labels (false passes in brackets)\n")
    print("| style | replies | " + " | ".join(JUDGES) + " |\n| --- | --- |" + " --- |" * len(JUDGES))
    for style, c in [*by_style.items(), ("**all**", total)]:
        cells = " | ".join(f"{c[j]} ({c[j + ' fp']})" for j in JUDGES)
        print(f"| {style} | {c['n']} | {cells} |")
    print("\n" + ", ".join(f"{j} {total[j]}/{total['n']} ({100 * total[j] / total['n']:.1f}%)" for j in JUDGES))


if __name__ == "__main__":
    main()
