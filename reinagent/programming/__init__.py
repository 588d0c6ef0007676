"""Programming benchmarks' shared parts (HumanEval and MBPP; the coder agent).

    extract.py   Python code and unit tests out of a model's free-form reply
    prompts.py   the coder agent's prompts and the programming Reflector's worked examples
    check.py     `reinagent check-solutions`: outside solutions against a benchmark's hidden tests
"""
