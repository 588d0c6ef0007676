"""The workload of perf/local_engines.py and perf/peer_engines.py: 8 chat prompts of ~300 tokens.

Its own module so that both engine scripts read the same prompts without importing each other
(local_engines.py loads peer_engines.py in its child process; the prompts once lived in
local_engines.py, which closed an import circle). Imported as a sibling script, with the
repository root already on sys.path (local_engines.py puts it there).
"""

from __future__ import annotations

from reinagent.records import Message

TOPICS = ["the water cycle", "how vaccines work", "the French Revolution", "binary search", "photosynthesis",
          "the stock market", "plate tectonics", "how a compiler works"]
FILLER = ("Answer in plain prose for a curious student. Be accurate and concrete, avoid lists, and give one "
          "example. Keep a friendly tone and explain any technical word you use when it first appears. ")


def prompts() -> list[list[Message]]:
    """8 chat prompts of about 300 tokens each, all different from their first user token."""
    return [[Message(role="system", content="You are a helpful teacher."),
             Message(role="user", content=f"Explain {topic}. " + FILLER * 6)] for topic in TOPICS]
