"""Programming benchmarks' shared parts (HumanEval and MBPP; the coder agent).

    extract.py   Python code and unit tests out of a model's free-form reply
    prompts.py   the coder agent's prompts and the programming Reflector's worked examples

`reinagent check-solutions` lives in benchmarks/check.py (it makes a benchmark; this package
knows none).
"""
