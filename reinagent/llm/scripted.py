"""`scripted:FILE`: a model whose replies come from a file, for tests and demos without a model.

The file (YAML or JSON) holds rules, tried in order; the first whose `when` regex is found in the
conversation (all messages joined) answers. A rule's `reply` is a text, or a list of texts indexed
by how many assistant turns the conversation already has (the step number), the last one repeating.
`default` answers otherwise. (Actor and reflector share one instance when they name the same
file, so rules tell the roles apart by the prompt: the Reflector's says "Your failed attempt".)

    rules:
      - when: "Question: Who wrote"
        reply: ["Thought: I should search.\nAction: Search[Hamlet]", "Action: Finish[Shakespeare]"]
      - when: "Your failed attempt"
        reply: "I answered too fast; next time I will check the date."
    default: "Action: Finish[unknown]"

A file whose top level is a list is taken as `rules`; a plain-text file is one reply for all.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from pathlib import Path

from reinagent.errors import ConfigError
from reinagent.llm.base import LLM, Completion, GenerationParams, strip_stop
from reinagent.records import Message


class ScriptedLLM(LLM):
    default_concurrency = 32

    def __init__(self, path: str, *, latency_s: float = 0.0):
        self.name = f"scripted:{path}"
        self.latency_s = latency_s
        self.rules, self.default = _load(Path(path))

    async def generate(self, messages: Sequence[Message], params: GenerationParams, *,
                       rollout_id: str | None = None) -> Completion:
        start = time.perf_counter()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        text = strip_stop(self.reply(messages), params.stop)
        prompt_tokens = sum(len(m.content.split()) for m in messages)
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(text.split()),
            latency_s=time.perf_counter() - start,
            cost_usd=0.0,
            model=self.name,
        )

    def reply(self, messages: Sequence[Message]) -> str:
        conversation = "\n".join(m.content for m in messages)
        step = sum(1 for m in messages if m.role == "assistant")
        for rule in self.rules:
            if rule["when"].search(conversation):
                replies = rule["reply"]
                return replies[min(step, len(replies) - 1)]
        return self.default


def check_script(path: Path) -> None:
    """A ConfigError now for a script the model could not read (checked before a run starts)."""
    _load(path)


def _load(path: Path) -> tuple[list[dict], str]:
    if not path.is_file():
        raise ConfigError(f"scripted model file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        return [], text
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"malformed scripted model file {path}: {err}") from None
    if isinstance(data, list):
        data = {"rules": data}
    if not isinstance(data, dict):
        raise ConfigError(f"scripted model file {path} must hold 'rules' and 'default'")
    rules = []
    for i, raw in enumerate(data.get("rules") or []):
        if not isinstance(raw, dict) or "reply" not in raw:
            raise ConfigError(f"{path}: rule {i + 1} needs 'when' and 'reply'")
        reply = raw["reply"]
        replies = [str(r) for r in reply] if isinstance(reply, list) else [str(reply)]
        try:
            when = re.compile(str(raw.get("when", "")), re.S)
        except re.error as err:
            raise ConfigError(f"{path}: rule {i + 1} has a bad regex: {err}") from None
        rules.append({"when": when, "reply": replies or [""]})
    return rules, str(data.get("default", ""))
