"""`Task`: one benchmark item, the type both sides of an episode name.

It lives on its own floor, below `benchmarks/base.py` (which makes tasks) and `agents/base.py`
(which acts on them), so neither imports the other for it. `reinagent.benchmarks.base.Task` and
`reinagent.benchmarks.Task` stay the public paths (re-exported there).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Task(BaseModel):
    """One benchmark item. Benchmarks subclass it with their own typed fields."""

    model_config = ConfigDict(frozen=True)
    task_id: str
