"""How large do the prompts of one MCTS episode get as its nodes fail? (issue 35 §2)

Runs one CoT MCTS episode on HotpotQA (cot-context, the first task of hard100, default search
settings: 30 iterations x 5 children, 3 value samples) with a model that is always wrong, twice:

- `same`: a scripted model (`scripted:FILE`) whose every answer is the same wrong one, as in the
  issue's report (150 nodes and 150 reflections before the bound);
- `distinct`: the loopback OpenAI-compatible server answering a new wrong answer every time, the
  case the bound exists for (every failure is new, so de-duplication alone would not help).

Every reflection is about 50 words, as a real one is. It prints, per episode, the nodes, the failed
terminal nodes, the reflections written, the model calls, the largest prompt of the episode and the
sum of all prompts (in the backend's prompt tokens: words for both), and for `distinct` the most
reflections one prompt showed. Runs on any version of the package (it passes no new setting).

    .venv/bin/python perf/search_memory.py [--iterations 30]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reinagent import run  # noqa: E402
from reinagent.llm.fake_server import FakeOpenAIServer  # noqa: E402
from reinagent.runner import load_run  # noqa: E402

LESSON = ("I answered with a name I had not checked against the paragraphs, so my final answer was wrong. "
          "Next time I will first find the paragraph that names the entity in the question, read the "
          "sentence that answers it, and copy the answer exactly as written there before I finish.")


def _episode(tmp: Path, name: str, iterations: int | None, **model: Any):
    extra = {"mcts_iterations": iterations} if iterations else {}
    with contextlib.redirect_stderr(io.StringIO()):
        run_dir = run(benchmark="hotpotqa", agent="cot-context", rollout="mcts", strategy="none", num_trials=1,
                      num_envs=1, run_dir=str(tmp / name), cache=False, progress=False, **model, **extra)
    _spec, (record,) = load_run(run_dir)
    return record


def _line(name: str, record, lessons_shown: int | None) -> str:
    tree, calls = record.trajectory.tree, record.trajectory.calls
    failed = sum(n.terminal and not n.success for n in tree)
    reflections = sum(bool(n.reflection) for n in tree)
    shown = "" if lessons_shown is None else f", most reflections in one prompt {lessons_shown}"
    return (f"{name:9s} nodes {len(tree)}, failed {failed}, reflections {reflections}, calls {len(calls)}, "
            f"largest prompt {max(c.prompt_tokens for c in calls)} tokens, all prompts "
            f"{sum(c.prompt_tokens for c in calls)} tokens{shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=None, help="default: the benchmark's (30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        script = tmp / "same.json"
        script.write_text(json.dumps({"rules": [{"when": "Your failed attempt", "reply": LESSON}],
                                      "default": "Thought: a guess.\nAction: Finish[wrong]"}))
        same = _episode(tmp, "same", args.iterations, model=f"scripted:{script}")
        print(_line("same", same, None))

        answers, lessons = itertools.count(1), itertools.count(1)

        def reply(messages: list[dict[str, Any]]) -> str:
            text = "\n".join(str(m.get("content")) for m in messages)
            if "Your failed attempt" in text:
                return f"Lesson #{next(lessons)}: {LESSON}"
            if "The attempt:" in text:
                return "The answer is not supported.\nScore: 3"
            return f"Thought: a guess.\nAction: Finish[wrong {next(answers)}]"

        with FakeOpenAIServer(reply=reply) as server:
            distinct = _episode(tmp, "distinct", args.iterations, model="openai/fake", base_url=server.base_url)
            shown = max("\n".join(str(m.get("content")) for m in r["messages"]).count("Lesson #")
                        for r in server.requests)
        print(_line("distinct", distinct, shown))


if __name__ == "__main__":
    main()
