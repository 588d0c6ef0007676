"""Before/after on the same held-out tasks: `rl eval --save` keeps which tasks an evaluation
solved; `rl eval --baseline` pairs two of them task by task (exact McNemar test on the tasks that
changed), which is what says whether training helped more than chance would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reinagent.errors import ConfigError


def save_eval(result: Any, path: str | Path) -> None:
    from reinagent.store import atomic_write

    data = {"weights": result.weights, "split": result.split, "n": result.n, "task_ids": list(result.task_ids),
            "solved": list(result.solved), "success_rate": result.success_rate}
    atomic_write(Path(path), json.dumps(data, indent=1) + "\n")


def load_eval(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data.get("task_ids"), list) or not isinstance(data.get("solved"), list):
            raise ValueError("no task_ids/solved lists")
    except (OSError, ValueError, AttributeError) as err:
        raise ConfigError(f"{path} is not a file written by `rl eval --save`: {err}") from None
    return data


def compare_lines(base: dict[str, Any], result: Any) -> list[str]:
    """Which tasks changed, then `held-out success: B% -> A% on N tasks, McNemar p = P`."""
    from reinagent.report.significance import mcnemar_exact

    if set(base["task_ids"]) != set(result.task_ids):
        raise ConfigError(f"the baseline evaluated other tasks ({len(base['task_ids'])} on split {base.get('split')}) "
                          f"than this one ({result.n} on {result.split}); evaluate the same split and num_tasks")
    before, after = set(base["solved"]), set(result.solved)
    n = len(result.task_ids)
    gained, lost = len(after - before), len(before - after)
    return [f"against {base.get('weights') or 'the baseline'}: {gained} tasks gained, {lost} lost, "
            f"{len(before & after)} solved by both",
            f"held-out success: {100 * len(before) / n:.1f}% -> {100 * len(after) / n:.1f}% on {n} tasks, "
            f"McNemar p = {mcnemar_exact(gained, lost):.3g}"]


def _pct(k: int, n: int) -> float:
    return 100 * k / n if n else 0.0


def reflect_demo_lines(eval_dir: str | Path) -> list[str]:
    """scripts/reflect_demo.sh's closing lines from its evaluation runs (NAME-reflexion and
    NAME-none for NAME in base, grpo, reflect): each model's retry success after a trial-1
    failure with and without reflection, paired over the tasks both strategies failed at trial 1,
    then the two headline lines. Each figure names its own set of failures and each p-value the two
    things it compares (issue 44 §4): the base and trained models failed different tasks at trial 1,
    so their REFLEXION retries are set side by side on their own failures and tested (paired) only
    over the failures both made; REFLEXION against NONE is tested on the trained model's failures."""
    from reinagent.report.significance import retry_between
    from reinagent.report.summary import summarize

    runs = {f"{m}-{s}": summarize(Path(eval_dir) / f"{m}-{s}") for m in ("base", "grpo", "reflect")
            for s in ("reflexion", "none")}
    lines, gaps = [], {}
    for model, label in (("base", "base model"), ("grpo", "control, plain GRPO for the same steps"),
                         ("reflect", "trained with reflect")):
        r = retry_between(runs[f"{model}-none"], runs[f"{model}-reflexion"])
        if r is None:
            raise ConfigError(f"{eval_dir}: {model}-reflexion and {model}-none are not 2-trial runs of the same tasks")
        n, a, c = r["both_failed"], r["other_solved"], r["base_solved"]
        gaps[model] = _pct(a, n) - _pct(c, n)
        same = (runs[f"{model}-none"]["solved_tasks"]["failed_first_trial"]
                == runs[f"{model}-reflexion"]["solved_tasks"]["failed_first_trial"])
        lines.append(f"{label}: retry success after reflection {_pct(a, n):.1f}% vs without (NONE) {_pct(c, n):.1f}% "
                     f"on {n} failures, McNemar p = {r['p_mcnemar']:.3g} (REFLEXION vs NONE)"
                     + ("" if same else " (the strategies' first attempts differed: paired over tasks both failed)"))
    lines.append(f"gap REFLEXION - NONE: base {gaps['base']:+.1f} points, GRPO control {gaps['grpo']:+.1f}, "
                 f"reflect {gaps['reflect']:+.1f}")
    base, trained = runs["base-reflexion"]["retry_after_failure"], runs["reflect-reflexion"]["retry_after_failure"]
    models = retry_between(runs["base-reflexion"], runs["reflect-reflexion"])  # over failures both models made
    r = retry_between(runs["reflect-none"], runs["reflect-reflexion"])
    n = r["both_failed"]
    k = models["both_failed"]
    lines += [f"retry success after reflection, base -> trained: {_pct(base['solved_second'], base['failed_first']):.1f}% "
              f"of the base model's {base['failed_first']} failures -> "
              f"{_pct(trained['solved_second'], trained['failed_first']):.1f}% of the trained model's "
              f"{trained['failed_first']}; on the {k} failures both made {_pct(models['base_solved'], k):.1f}% -> "
              f"{_pct(models['other_solved'], k):.1f}%, McNemar p = {models['p_mcnemar']:.3g} "
              "(trained REFLEXION vs base REFLEXION)",
              f"retry success on the trained model's {n} failures: {_pct(r['other_solved'], n):.1f}% after reflection "
              f"vs {_pct(r['base_solved'], n):.1f}% without (NONE), McNemar p = {r['p_mcnemar']:.3g} "
              "(trained REFLEXION vs trained NONE)"]
    return lines


def main(argv: list[str]) -> int:
    """python -m reinagent.rl.compare EVAL_DIR (scripts/reflect_demo.sh): its closing lines, or a
    one-line error (exit 2) for a missing or incomplete folder."""
    import sys

    from reinagent.errors import ReinagentError

    if len(argv) != 1:
        print("usage: python -m reinagent.rl.compare EVAL_DIR  (scripts/reflect_demo.sh's OUTDIR/eval)", file=sys.stderr)
        return 2
    try:
        lines = reflect_demo_lines(argv[0])
    except ReinagentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
