"""The agents' prompt texts, one module per benchmark: the actor's instructions and few-shot
examples, and the Reflector's examples for the same attempts (kept beside them so the two stay
the same shape). The agents read them here, and the benchmarks hand the Reflector its examples
from here: a benchmark sits above its agents and may import them, never the other way round.

    hotpotqa.py         CoT (with and without context) and ReAct; the Reflector's examples per agent
    gsm8k.py            chain of thought for GSM8K; the Reflector's examples
    alfworld.py         ReAct's instructions and the demonstrations of each task type (data/alfworld_demos/)

The texts are byte for byte what recorded runs and the response cache were made with: a changed
character is a changed prompt, so every cached reply to it is missed.
"""
