"""Action grammars for constrained decoding: one regular expression per agent's output format.

A 135M model given the paper's few-shot prompts almost never writes `Action: Search[...]` on its
own (1 of 270 committed embedded steps parsed). An engine with structured output (OpenVINO GenAI's
`StructuredOutputConfig(regex=...)`, backed by xgrammar) can only emit strings these expressions
accept, so every step parses; what the model says inside the brackets stays its own.

The expressions use the subset xgrammar compiles (literals, classes, alternation, bounded
repetition) and are written so that the project's tolerant parsers (`agents.parsing`,
`agents.alfworld_react.parse_move`, `programming.extract`) accept every match: the tests check
that with sampled outputs. Lengths are bounded so that a step always ends inside the agent's
max_tokens budget (a thought that could run on forever would be cut before its action).

`ConstrainedParams` carries the expression to a backend that supports it; `ConstrainedLLM` wraps
a model so that every call of one agent gets its grammar (backends without structured output are
refused at construction, not silently unconstrained).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reinagent.errors import ConfigError
from reinagent.llm.base import LLM, Completion, GenerationParams, Layer, innermost
from reinagent.records import Message

# Characters that are special in xgrammar's regex dialect (a subset of Python's, without the
# verbose escapes Python's re.escape may add).
_SPECIAL = set("\\.^$|?*+()[]{}")

# Free text on one line, no closing bracket (the argument of `Name[...]`).
_ARG = r"[^\]\n\[]{1,%d}"
_LINE = r"[^\n]{1,%d}"
# A thought may not contain a colon: `parse_output` reads any `...action:` inside it as the action
# label ("transaction: x" would hide the real action line).
_THOUGHT = r"[^\n:：]{1,%d}"

#: agent name -> the action names its format allows (HotpotQA agents)
HOTPOT_ACTIONS: dict[str, tuple[str, ...]] = {
    "react": ("Search", "Lookup", "Finish"),
    "cot": ("Finish",),
    "cot-context": ("Finish",),
    "cot-no-context": ("Finish",),
}


def escape(literal: str) -> str:
    """`literal` as a regular expression matching exactly it."""
    return "".join("\\" + ch if ch in _SPECIAL else ch for ch in literal)


def thought_action_regex(actions: Sequence[str], *, thought_chars: int = 120, arg_chars: int = 60) -> str:
    """`Thought: <one line>` then `Action: Name[argument]` with Name one of `actions`.

    A token is at least one character, so a budget of max_chars(...) tokens always completes a
    match; the defaults (about 200 characters, ~50 tokens of English) fit ReAct's 160 tokens."""
    if not actions:
        raise ValueError("an action grammar needs at least one action name")
    names = "|".join(escape(a) for a in actions)
    return f"Thought: {_THOUGHT % thought_chars}\nAction: ({names})\\[{_ARG % arg_chars}\\]"


def hotpot_regex(agent: str) -> str:
    """The grammar of a HotpotQA agent by its name (react, cot, cot-context, cot-no-context)."""
    try:
        return thought_action_regex(HOTPOT_ACTIONS[agent])
    except KeyError:
        raise ConfigError(f"no action grammar for agent {agent!r}; valid: {', '.join(HOTPOT_ACTIONS)}") from None


def choice_regex(choices: Sequence[str], *, think_chars: int | None = 200) -> str:
    """Exactly one of `choices` (ALFWorld's admissible commands at this step), or with
    `think_chars` a `think: ...` line (the paper's thoughts, which cost a turn)."""
    options = [escape(c) for c in dict.fromkeys(c.strip() for c in choices) if c]
    if think_chars:
        options.append(f"think: {_LINE % think_chars}")
    if not options:
        raise ValueError("a choice grammar needs at least one choice")
    return "(" + "|".join(options) + ")"


def code_block_regex(language: str = "python") -> str:
    """One fenced code block: ```python, code without a triple backtick, closing fence.

    Unbounded: xgrammar expands a counted repetition of a group into that many rules (measured:
    73 s to compile {1,3000} on two busy cores). A reply cut by max_tokens is an unclosed fence,
    which `programming.extract` reads all the same."""
    body = r"([^`]|`[^`]|``[^`])+"
    return f"```{escape(language)}\n{body}\n```"


@dataclass(frozen=True)
class ConstrainedParams(GenerationParams):
    """Sampling parameters plus the expression the whole output must match, or (ALFWorld) the
    choices this step allows, which a constrained actor turns into `choice_regex(choices)`.
    Backends without structured output read only the GenerationParams fields."""

    regex: str | None = None
    choices: tuple[str, ...] = ()


def with_choices(params: GenerationParams, choices: Sequence[str] | None) -> GenerationParams:
    """`params` carrying this step's admissible commands: a hint, used only when the run's actor
    is constrained (ALFWORLD_CHOICES below); any other backend ignores it."""
    if not choices:
        return params
    base = {f: getattr(params, f) for f in ("max_tokens", "temperature", "stop", "top_p", "seed")}
    return ConstrainedParams(**base, choices=tuple(choices))


def alfworld_choices(messages: Sequence[Message], params: GenerationParams) -> str | None:
    """ALFWorld's grammar: one of the admissible commands of this step (the agent attaches them
    with `with_choices`), or a `think:` line. The choices follow from the game's state, which the
    conversation determines, so the cache keys it by this grammar's name and the messages."""
    choices = getattr(params, "choices", ())
    return choice_regex(choices) if choices else None


ALFWORLD_CHOICES = "alfworld-choices"  # the name that stands for `alfworld_choices` in cache keys


def with_regex(params: GenerationParams, regex: str | None) -> GenerationParams:
    """`params` with `regex` attached (or removed, with None)."""
    base = {f: getattr(params, f) for f in ("max_tokens", "temperature", "stop", "top_p", "seed")}
    return ConstrainedParams(**base, regex=regex) if regex else GenerationParams(**base)


def regex_of(params: GenerationParams) -> str | None:
    return getattr(params, "regex", None)


class ConstrainedLLM(Layer):
    """Every call through it gets `grammar(messages)` as its output constraint.

    `grammar` is a fixed expression or a function of the conversation and the call's parameters
    (ALFWorld's choice list changes every step). The inner backend must declare `supports_regex = True`."""

    forwards = False  # a backend's extras are read below the grammar, not through it

    def __init__(self, inner: LLM, grammar: str | Callable[[Sequence[Message], GenerationParams], str | None]):
        if not getattr(innermost(inner), "supports_regex", False):
            raise ConfigError(
                f"model {inner.name!r} cannot constrain its output; use --no-constrained, or an engine "
                "with structured output (local, local:PATH)"
            )
        super().__init__(inner)
        self.grammar = grammar

    async def generate(self, messages: Sequence[Message], params: GenerationParams, *, rollout_id: str | None = None) -> Completion:
        regex = self.grammar(messages, params) if callable(self.grammar) else self.grammar
        return await self.inner.generate(messages, with_regex(params, regex), rollout_id=rollout_id)


CODER_BENCHMARKS = ("humaneval", "mbpp")

# Rollouts whose every actor call is one agent step (tot/mcts also ask the actor for values).
STEP_ROLLOUTS = ("react", "multi-turn")


def grammar_function(grammar: str) -> str | Callable[[Sequence[Message], GenerationParams], str | None]:
    """What ConstrainedLLM applies for `choose_grammar`'s answer: a regex as it is, a name its function."""
    return alfworld_choices if grammar == ALFWORLD_CHOICES else grammar


def grammar_of(benchmark: str, agent: str, rollout: str) -> str | None:
    """The action grammar of a benchmark's agent under a rollout, whatever the backend; None when
    it has none."""
    if rollout not in STEP_ROLLOUTS:
        return None
    if benchmark == "hotpotqa" and agent in HOTPOT_ACTIONS:
        return hotpot_regex(agent)
    if benchmark == "alfworld" and agent == "react":
        return ALFWORLD_CHOICES
    if benchmark in CODER_BENCHMARKS and agent == "coder":
        # both of the coder's calls: its own tests (assert lines, which extract_tests reads inside
        # a fence too) and the implementation (extract_code reads the fenced block)
        return code_block_regex()
    return None


def choose_grammar(wanted: bool | None, benchmark: str, agent: str, rollout: str, model: str,
                   base_url: str | None, precision: str | None = None) -> str | None:
    """The grammar the run's actor is held to (a regex, or ALFWORLD_CHOICES: the regex changes
    every step, `grammar_function` gives the function), or None; decided once, by plan.resolve,
    what the model stack applies and the spec records (as `constrained`). `wanted` (--constrained)
    None: on where the engine has structured output (OpenVINO: `local`, `local:FILE.gguf`,
    `local:IR_DIR`, a HF directory written as GGUF) and the agent has a grammar; True insists (a
    ConfigError naming the way out when it cannot be done); False: off."""
    if wanted is False:
        return None
    if not structured_output(model, base_url, precision):
        if wanted:
            raise ConfigError(f"--constrained needs an engine with structured output (local, local:PATH), not "
                              f"{model!r}; or run with --no-constrained")
        return None
    grammar = grammar_of(benchmark, agent, rollout)
    if grammar is None and wanted:
        raise ConfigError(
            f"--constrained has no grammar for {benchmark} {agent} with rollout {rollout} yet; valid: hotpotqa "
            f"with {', '.join(HOTPOT_ACTIONS)}, alfworld with react, or humaneval/mbpp with coder, and rollout "
            f"{' or '.join(STEP_ROLLOUTS)} (or run with --no-constrained)")
    return grammar


def structured_output(model: str, base_url: str | None, precision: str | None = None) -> bool:
    """Whether `model` runs on the one engine with structured output, OpenVINO (a HF directory
    that runs on transformers does not)."""
    from reinagent.llm import backend_of, on_openvino

    try:
        return backend_of(model, base_url) == "local" and on_openvino(model, precision)
    except ConfigError:  # a name only the caller knows (the RL trainer's policy), a missing path
        return False
