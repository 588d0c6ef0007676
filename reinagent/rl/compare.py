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
