"""Untrusted text (a program's output, a model's reply, an environment's observation) made safe to
print on a terminal.

A program or model can put escape sequences into its text: OSC (`ESC ] 0 ; title BEL`) retitles
the terminal or writes the clipboard, CSI moves the cursor or clears the screen, and bidi controls
reorder what a reader sees. `plain` removes every such sequence and every control character but
newline and tab; what remains is printable text, shown as it was meant.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

# ESC-introduced sequences: OSC/DCS/SOS/PM/APC strings up to BEL or ST, CSI with its parameters,
# and two-character escapes; then their 8-bit (C1) forms
_SEQUENCES = re.compile(
    r"\x1b[\]PX^_][^\n]*?(?:\x07|\x1b\\|\x9c|(?=\n)|$)"  # OSC, DCS, SOS, PM, APC to BEL/ST (or the line's end)
    r"|\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI
    r"|\x1b[ -/]*[0-~]?"  # other escapes (charset, keypad, ...)
    r"|[\x90\x9d\x98\x9e\x9f][^\n]*?(?:\x07|\x9c|(?=\n)|$)"  # 8-bit DCS, OSC, SOS, PM, APC
    r"|\x9b[0-?]*[ -/]*[@-~]?",  # 8-bit CSI
)
# what is left of C0/C1 (but newline and tab), DEL, and the bidi overrides and isolates
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def plain(text: str) -> str:
    """`text` without escape sequences or control characters (newline and tab kept)."""
    if text.isprintable():  # the common case costs one scan
        return text
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


def plain_data(value: Any, depth: int = 0) -> Any:
    """`value` (parsed JSON, a dumped record) with `plain` applied to every str in it, keys
    included: what `runs --json` and the viewer's JSON endpoints send (a page inserts it as text,
    where an RLO would still reorder what a reader sees). Past 200 levels a value is kept as it is."""
    kind = type(value)
    if kind is str:
        return plain(value)
    if depth > 200:
        return value
    if kind is dict:
        return {plain_data(k, depth + 1): plain_data(v, depth + 1) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [plain_data(v, depth + 1) for v in value]
    return value


def shell_word(value: object) -> str:
    """`value` (a run directory, a run id) as one word a POSIX shell reads back unchanged, for the
    commands we print to copy: a run directory's name is data anyone chose, and `x;touch y` or
    `$(...)` in it must not run when a hint is pasted (issue 54)."""
    return shlex.quote(str(value))
