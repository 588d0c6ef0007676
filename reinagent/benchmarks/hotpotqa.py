"""HotpotQA (distractor-docstore setting): multi-hop questions, exact match after SQuAD normalisation.

Offline, `Search[...]`/`Lookup[...]` cannot reach Wikipedia; the environment's docstore is the
question's own 10 context paragraphs (2 gold + 8 distractors). Results in this setting are not
comparable one to one with the paper's open-Wikipedia ReAct numbers; the run spec records it.
"""

from __future__ import annotations

import difflib
import json
import re
import string
from collections import Counter
from functools import lru_cache
from typing import Any, ClassVar

from reinagent.agents.prompts import hotpotqa as prompts
from reinagent.benchmarks.base import Benchmark, Task
from reinagent.env import Env, StepResult
from reinagent.errors import ConfigError, choices
from reinagent.paths import DATA_DIR
from reinagent.records import Evaluation, Trajectory

SPLIT_FILES = {
    "hard100": "hotpotqa-hard100.jsonl",
    "dev-first100": "hotpotqa-dev-first100.jsonl",
    "dev-qa7405": "hotpotqa-dev-qa7405.jsonl",
}
PAGE_SENTENCES = 5  # sentences a Search shows, as the paper's first paragraph did


class HotpotTask(Task):
    question: str
    answer: str
    type: str = ""
    level: str = ""
    titles: tuple[str, ...] = ()
    paragraphs: tuple[tuple[str, ...], ...] = ()
    supporting_titles: tuple[str, ...] = ()

    def gold_context(self) -> str:
        """The supporting paragraphs, one line each: what cot-context is given."""
        lines = []
        for title, sentences in zip(self.titles, self.paragraphs):
            if title in self.supporting_titles:
                lines.append(f"{title}: {''.join(sentences).strip()}")
        return "\n".join(lines)


# --- evaluation (SQuAD normalisation) -----------------------------------------------------------

def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str | None, gold: str) -> bool:
    """The official HotpotQA EM on the answer as given: `“X”` is not `X` (string.punctuation is ASCII)."""
    return prediction is not None and normalize_answer(prediction) == normalize_answer(gold)


def lenient_match(prediction: str | None, gold: str) -> bool:
    """EM after curly quotes too are dropped: a separate figure, never the success."""
    return prediction is not None and exact_match(prediction.translate(_CURLY), gold)


_CURLY = str.maketrans("", "", "“”‘’")


def f1_score(prediction: str | None, gold: str) -> float:
    pred, ref = normalize_answer(prediction or ""), normalize_answer(gold)
    # yes/no/noanswer only match exactly, as in the official HotpotQA script
    if pred in ("yes", "no", "noanswer") or ref in ("yes", "no", "noanswer"):
        return float(pred == ref)
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


# --- the docstore environment --------------------------------------------------------------------

class DocstoreEnv(Env):
    """Search/Lookup/Finish over a question's paragraphs. Actions arrive as `Name[argument]`."""

    def __init__(self, task: HotpotTask, max_steps: int):
        self.task = task
        self.max_steps = max_steps
        self.pages = {title: [s.strip() for s in sents if s.strip()] for title, sents in zip(task.titles, task.paragraphs)}
        self.reset()

    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.steps = 0
        self.page: list[str] | None = None
        self.lookup_keyword: str | None = None
        self.lookup_hits: list[str] = []
        self.lookup_index = 0
        self.answer: str | None = None
        self.ended = None
        return f"Question: {self.task.question}", {}

    def step(self, action: str) -> StepResult:
        from reinagent.agents.parsing import parse_call

        self.refuse_if_ended()  # a second Finish must not be judged again
        self.steps += 1
        call = parse_call(action, ("search", "lookup", "finish"))
        terminated, reward = False, 0.0
        if call is None:
            obs = INVALID_ACTION
        elif call.name == "search":
            obs = self.search(call.argument)
        elif call.name == "lookup":
            obs = self.lookup(call.argument)
        else:
            self.answer = call.given  # judged as given (official EM), not with its quotes stripped
            terminated = True
            reward = float(exact_match(self.answer, self.task.answer))
            obs = f"Episode finished, answer submitted: {self.answer}"
        truncated = not terminated and self.steps >= self.max_steps
        return self.ending((obs, reward, terminated, truncated, {"answer": self.answer}))

    def snapshot(self) -> dict[str, Any]:
        # Copies of the lists: a branch's Lookup cursor must never move its sibling's.
        return {"steps": self.steps, "page": None if self.page is None else list(self.page),
                "lookup_keyword": self.lookup_keyword, "lookup_hits": list(self.lookup_hits),
                "lookup_index": self.lookup_index, "answer": self.answer, "ended": self.ended}

    def restore(self, state: dict[str, Any]) -> None:
        self.steps, self.lookup_keyword = state["steps"], state["lookup_keyword"]
        self.lookup_index, self.answer = state["lookup_index"], state["answer"]
        self.ended = state.get("ended")
        self.page = None if state["page"] is None else list(state["page"])
        self.lookup_hits = list(state["lookup_hits"])

    def search(self, entity: str) -> str:
        title = self._find_title(entity)
        if title is None:
            similar = difflib.get_close_matches(entity, list(self.pages), n=5, cutoff=0.0)
            return f"Could not find [{entity}]. Similar: {similar}."
        self.page = self.pages[title]
        self.lookup_keyword = None
        return " ".join(self.page[:PAGE_SENTENCES])

    def _find_title(self, entity: str) -> str | None:
        want = normalize_answer(entity)
        for title in self.pages:
            if normalize_answer(title) == want:
                return title
        # "Winner" should find "Winner (band)": a title whose part before the parenthesis matches
        for title in self.pages:
            if normalize_answer(title.split(" (")[0]) == want:
                return title
        close = difflib.get_close_matches(entity.lower(), [t.lower() for t in self.pages], n=1, cutoff=0.85)
        if close:
            return next(t for t in self.pages if t.lower() == close[0])
        return None

    def lookup(self, keyword: str) -> str:
        if self.page is None:
            return "There is no page to look up in yet. Search[<topic>] first."
        if keyword.lower() != (self.lookup_keyword or "").lower():
            self.lookup_keyword = keyword
            self.lookup_hits = [s for s in self.page if keyword.lower() in s.lower()]
            self.lookup_index = 0
        if self.lookup_index >= len(self.lookup_hits):
            return "No more results."
        self.lookup_index += 1
        return f"(Result {self.lookup_index} / {len(self.lookup_hits)}) {self.lookup_hits[self.lookup_index - 1]}"


INVALID_ACTION = "Invalid action. Valid actions are Search[<topic>], Lookup[<keyword>] and Finish[<answer>]."


class AnswerEnv(Env):
    """Chain of thought: one action, Finish[answer], and the episode ends."""

    def __init__(self, task: HotpotTask, max_steps: int):
        self.task, self.max_steps = task, max_steps
        self.reset()

    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.steps, self.answer, self.ended = 0, None, None
        return f"Question: {self.task.question}", {}

    def snapshot(self) -> dict[str, Any]:
        return {"steps": self.steps, "answer": self.answer, "ended": self.ended}

    def restore(self, state: dict[str, Any]) -> None:
        self.steps, self.answer, self.ended = state["steps"], state["answer"], state.get("ended")

    def step(self, action: str) -> StepResult:
        from reinagent.agents.parsing import parse_call

        self.refuse_if_ended()  # one answer per episode: a second one is not judged
        self.steps += 1
        call = parse_call(action, ("finish",))
        if call is None:
            obs = "Invalid action. Answer with Finish[<answer>]."
            return self.ending((obs, 0.0, False, self.steps >= self.max_steps, {"answer": None}))
        self.answer = call.given  # judged as given (official EM), not with its quotes stripped
        reward = float(exact_match(self.answer, self.task.answer))
        return self.ending((f"Answer submitted: {self.answer}", reward, True, False, {"answer": self.answer}))


# --- the benchmark -------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _load_split(split: str) -> tuple[HotpotTask, ...]:
    path = DATA_DIR / "hotpotqa" / SPLIT_FILES[split]
    tasks = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        ctx = row.get("context") or {}
        tasks.append(
            HotpotTask(
                task_id=row["id"], question=row["question"], answer=row["answer"],
                type=row.get("type", ""), level=row.get("level", ""),
                titles=tuple(ctx.get("title", ())),
                paragraphs=tuple(tuple(s) for s in ctx.get("sentences", ())),
                supporting_titles=tuple(dict.fromkeys((row.get("supporting_facts") or {}).get("title", ()))),
            )
        )
    return tuple(tasks)


class HotpotQA(Benchmark):
    name: ClassVar[str] = "hotpotqa"
    description: ClassVar[str] = "HotpotQA distractor-docstore setting, exact match"
    agents: ClassVar[tuple[str, ...]] = ("react", "cot-context", "cot-no-context")
    default_agent: ClassVar[str] = "cot-context"
    splits: ClassVar[tuple[str, ...]] = tuple(SPLIT_FILES)
    default_split: ClassVar[str] = "hard100"
    reflection_examples: ClassVar[str] = prompts.REFLECTION_EXAMPLES
    reflection_examples_by_agent: ClassVar[dict[str, str]] = {
        "cot-context": prompts.COT_CONTEXT_REFLECTION_EXAMPLES, "cot-no-context": prompts.COT_REFLECTION_EXAMPLES}
    mcts_iterations: ClassVar[int] = 30  # LATS's setting for HotpotQA

    def load_tasks(self, split: str) -> list[HotpotTask]:
        if split not in SPLIT_FILES:
            raise ConfigError(f"unknown split {split!r} for hotpotqa; valid: {choices(SPLIT_FILES)}")
        return list(_load_split(split))

    def check_config(self, settings) -> None:
        if settings.agent in ("react", "cot-context") and settings.split == "dev-qa7405":
            raise ConfigError(
                f"split dev-qa7405 has no paragraphs, which {settings.agent} needs; "
                "use hard100 or dev-first100, or the cot-no-context agent"
            )

    def make_env(self, task: HotpotTask, settings) -> Env:
        if settings.agent == "react":
            return DocstoreEnv(task, settings.max_steps or 6)
        return AnswerEnv(task, settings.max_steps or 1)

    def make_agent(self, name: str, settings):
        if name == "react":
            from reinagent.agents.react import ReactAgent

            return ReactAgent(settings)
        from reinagent.agents.cot import CotAgent

        if name == "cot-context":
            return CotAgent(settings, with_context=True)
        if name == "cot-no-context":
            return CotAgent(settings, with_context=False)
        raise ConfigError(f"unknown agent {name!r} for hotpotqa; valid: {choices(self.agents)}")

    async def evaluate(self, task: HotpotTask, trajectory: Trajectory, settings) -> Evaluation:
        success = exact_match(trajectory.answer, task.answer)
        return Evaluation(
            success=success, reward=float(success), f1=f1_score(trajectory.answer, task.answer),
            detail={"gold": task.answer, "em_lenient": lenient_match(trajectory.answer, task.answer)},
        )

    def settings(self) -> dict[str, Any]:
        return {"docstore": "distractor-docstore (the question's 10 context paragraphs)"}
