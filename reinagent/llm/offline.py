"""What keeps the libraries we load from reaching the network on their own."""

from __future__ import annotations


def no_telemetry() -> None:
    """TRL pings huggingface.co from a background thread each time one of its trainers is built
    (trl BaseTrainer._send_telemetry: GRPO for reinagent.rl, SFT for reinagent.distil). We work
    offline and send nothing; that thread's failing DNS lookups also read the C environment while
    the main thread changed it, a crash in getenv seen in CI. huggingface_hub reads this flag at
    each send, so setting it needs no change to the environment."""
    from huggingface_hub import constants

    constants.HF_HUB_DISABLE_TELEMETRY = True
