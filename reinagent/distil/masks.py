"""Chat examples -> token ids and labels: loss on the assistant's turns only.

SmolLM2's chat template (like most) has no `{% generation %}` markers, so TRL's
`assistant_only_loss` cannot find the assistant spans itself. We find them from the template:
for each assistant turn, the text rendered up to it (with the generation prompt) and through it
differ by exactly the turn, `content<|im_end|>` plus the template's trailing newline. The
conversation is tokenised piece by piece (prompt piece, assistant piece, ...), the way inference
sees it: the prompt is tokenised as a whole and the reply is generated after it. Assistant pieces
carry labels, including the end-of-turn token, which teaches the model to stop; the newline
after it is never generated, so it is not trained, and neither are prompts or observations.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reinagent.errors import ReinagentError

IGNORE = -100  # the label PyTorch's cross-entropy skips
# End-of-turn markers of common chat templates, beyond the tokenizer's own EOS token.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "</s>")
log = logging.getLogger("reinagent.distil")


def _render(tokenizer: Any, messages: Sequence[dict[str, str]], *, generation_prompt: bool = False) -> str:
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=generation_prompt)


def end_of_turn_tokens(tokenizer: Any) -> list[str]:
    tokens = [t for t in (tokenizer.eos_token, *END_OF_TURN) if t]
    return list(dict.fromkeys(tokens))


def chat_pieces(tokenizer: Any, messages: Sequence[dict[str, str]]) -> list[tuple[str, bool]]:
    """The templated conversation cut into (text, trained) pieces whose texts join to the whole."""
    if not getattr(tokenizer, "chat_template", None):
        raise ReinagentError("the base model's tokenizer has no chat template; distil an instruct (chat) model")
    ends = end_of_turn_tokens(tokenizer)
    pieces: list[tuple[str, bool]] = []
    done = ""
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = _render(tokenizer, messages[:i], generation_prompt=True)
        through = _render(tokenizer, messages[: i + 1])
        if not (before.startswith(done) and through.startswith(before)):
            raise ReinagentError("the chat template does not render a conversation as a growing prefix; cannot find assistant turns")
        reply = through[len(before) :].rstrip()  # content + end-of-turn token; the newline after it is not generated
        if not any(reply.endswith(end) for end in ends):
            raise ReinagentError(f"the chat template ends assistant turns with {reply[-20:]!r}, not an end-of-turn token ({', '.join(ends)})")
        pieces += [(before[len(done) :], False), (reply, True)]
        done = before + reply
    whole = _render(tokenizer, messages)
    if not whole.startswith(done):
        raise ReinagentError("the chat template renders the whole conversation differently from its parts")
    if whole[len(done) :]:
        pieces.append((whole[len(done) :], False))
    return [(text, trained) for text, trained in pieces if text]


def tokenize_chat(tokenizer: Any, messages: Sequence[dict[str, str]]) -> tuple[list[int], list[int]]:
    """input_ids and labels (IGNORE outside assistant turns) of one conversation."""
    ids: list[int] = []
    labels: list[int] = []
    for text, trained in chat_pieces(tokenizer, messages):
        piece = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids += piece
        labels += piece if trained else [IGNORE] * len(piece)
    return ids, labels


@dataclass
class LengthReport:
    """What tokenisation did to the dataset; long examples are counted, never silently cut."""

    examples: int = 0
    kept: int = 0
    too_long: int = 0
    action: str = "drop"  # what happened to the too-long examples: drop or truncate
    longest: int = 0
    tokens: int = 0  # all tokens kept (what the model reads)
    trained_tokens: int = 0  # tokens that carry loss


def tokenize_dataset(dataset: Any, tokenizer: Any, max_length: int, *, truncate: bool = False) -> tuple[Any, LengthReport]:
    """A `datasets.Dataset` of input_ids/labels (TRL uses ready labels as they are) and its report.

    An example longer than `max_length` is dropped (default: a cut trajectory would teach the model
    to stop before its answer), or truncated at the end when `truncate` (kept only if some of its
    assistant tokens survive). Either way a warning says how many and which way.
    """
    from datasets import Dataset

    report = LengthReport(examples=len(dataset), action="truncate" if truncate else "drop")
    rows = []
    for example in dataset:
        ids, labels = tokenize_chat(tokenizer, example["messages"])
        report.longest = max(report.longest, len(ids))
        if len(ids) > max_length:
            report.too_long += 1
            if not truncate:
                continue
            ids, labels = ids[:max_length], labels[:max_length]
            if all(label == IGNORE for label in labels):
                continue
        report.tokens += len(ids)
        report.trained_tokens += sum(label != IGNORE for label in labels)
        rows.append({"input_ids": ids, "labels": labels})
    report.kept = len(rows)
    if report.too_long:
        verb = "truncated to" if truncate else "dropped (longer than"
        tail = "" if truncate else ")"
        log.warning(
            "%d of %d examples %s %d tokens%s; the longest has %d tokens. Raise --max-length%s.",
            report.too_long, report.examples, verb, max_length, tail, report.longest,
            "" if truncate else " or pass --truncate-long to keep their beginnings",
        )
    columns = {"input_ids": [r["input_ids"] for r in rows], "labels": [r["labels"] for r in rows]}
    return Dataset.from_dict(columns), report
