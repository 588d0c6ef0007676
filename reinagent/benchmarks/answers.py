"""`reinagent check-answers`: re-score outside answers with a benchmark's own judge.

    reinagent check-answers --benchmark gsm8k --answers answers.jsonl

Each line is `{"task_id": ..., "answer": ...}` with task ids as records write them (`test/0` for
GSM8K, `test/3+4` for arithmetic and arithmetic20, `dev-0000` for HotpotQA); the answer is a whole
reply or just the answer. stdout gets one JSON line per input line, in order: `task_id`, `success`
and `answer` (the answer the judge read: `Finish[...]`'s text when there is one; for math,
math-verify's pick otherwise; a restatement of the task's question is never an answer), plus the
benchmark's other figures (HotpotQA: `f1`, `em_lenient`). The judge is the one runs use
(reinagent/benchmarks/math_judge.py; HotpotQA's official EM), so a researcher can re-score any
outputs, as `check-solutions` does for programs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from reinagent.errors import ConfigError, ReinagentError, choices

# every benchmark whose answer is text (programs go to check-solutions, ALFWorld games have no answer)
BENCHMARKS = ("gsm8k", "arithmetic", "arithmetic20", "hotpotqa")
PROGRAMS = ("humaneval", "mbpp")


def _tasks(benchmark: str) -> dict[str, Any]:
    """task id -> task over every split (HotpotQA's splits share ids for the same question)."""
    from reinagent import benchmarks

    bench = benchmarks.make(benchmark)
    found: dict[str, Any] = {}
    for split in bench.splits:
        for task in bench.load_tasks(split):
            found.setdefault(task.task_id, task)
    return found


def read_answers(path: Path, known: dict[str, Any], benchmark: str) -> list[tuple[str, str]]:
    """[(task id, answer)] in file order; a ReinagentError naming the line for anything malformed."""
    if not path.is_file():
        raise ReinagentError(f"answers file {path} does not exist")
    rows: list[tuple[str, str]] = []
    with path.open("rb") as fh:  # bytes: a line that is not UTF-8 is that line's error, not the file's
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as err:
                raise ReinagentError(f"{where}: not UTF-8 text (byte {err.start + 1} of the line)") from None
            except json.JSONDecodeError as err:
                raise ReinagentError(f"{where}: malformed JSON ({err.msg})") from None
            except ValueError as err:  # an integer of more than 4,300 digits
                raise ReinagentError(f"{where}: malformed JSON ({str(err).splitlines()[0][:120]})") from None
            except RecursionError:  # [[[[...]]]] deeper than the parser's stack
                raise ReinagentError(f"{where}: malformed JSON (nested too deeply)") from None
            if not isinstance(row, dict) or "task_id" not in row or "answer" not in row:
                raise ReinagentError(f"{where}: expected an object with 'task_id' and 'answer'")
            if not isinstance(row["answer"], str) and row["answer"] is not None:
                raise ReinagentError(f"{where}: 'answer' must be a string or null")
            task_id = str(row["task_id"])
            if task_id not in known:
                example = next(iter(known))
                raise ReinagentError(f"{where}: unknown task_id {task_id!r} for {benchmark} (ids look like {example})")
            rows.append((task_id, row["answer"]))
    if not rows:
        raise ReinagentError(f"answers file {path} holds no answers")
    return rows


def score(benchmark: str, task, answer: str | None) -> dict[str, Any]:
    """One output line: the verdict of the benchmark's judge on `answer`."""
    if benchmark == "hotpotqa":
        from reinagent.agents.parsing import parse_call, split_thought_action
        from reinagent.benchmarks.hotpotqa import exact_match, f1_score, lenient_match

        _, action = split_thought_action(answer or "")
        call = parse_call(action, ("finish",))
        given = call.given if call is not None else (answer or "").strip()
        return {"task_id": task.task_id, "success": exact_match(given, task.answer), "answer": given,
                "f1": round(f1_score(given, task.answer), 4), "em_lenient": lenient_match(given, task.answer)}
    from reinagent.benchmarks.math_judge import judge

    verdict = judge(answer, task.answer, task.question)
    return {"task_id": task.task_id, "success": verdict.success, "answer": verdict.answer}


@click.command(name="check-answers")
@click.option("--benchmark", required=True, help=f"Benchmark whose judge to use: {choices(BENCHMARKS)}.")
@click.option("--answers", "answers", required=True, help="JSONL file of {\"task_id\", \"answer\"} lines.")
def check_answers(benchmark: str, answers: str) -> None:
    """Judge outside answers as runs do (math-verify; HotpotQA's official EM); one JSON line per
    input line on stdout."""
    benchmark = benchmark.strip().lower()
    if benchmark not in BENCHMARKS:
        hint = "; programs are judged by `reinagent check-solutions`" if benchmark in PROGRAMS else ""
        raise ConfigError(f"unknown benchmark {benchmark!r} for check-answers; valid: {choices(BENCHMARKS)}{hint}")
    known = _tasks(benchmark)
    rows = read_answers(Path(answers), known, benchmark)
    solved = 0
    for task_id, answer in rows:
        line = score(benchmark, known[task_id], answer)
        solved += line["success"]
        click.echo(json.dumps(line, ensure_ascii=False))
    print(f"{solved}/{len(rows)} answers correct ({benchmark})", file=sys.stderr)
