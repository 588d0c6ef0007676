"""Agents: one file per agent type; `base.py` is what every agent implements.

    base.py             Agent, and Actor: the episode's model calls, recorded and within its budget
    loop.py parsing.py  the Thought/Action/Observation loop and its tolerant output parser
    react.py cot.py     HotpotQA: ReAct (Search, Lookup, Finish); chain of thought with or without context
    math_cot.py         chain of thought for math word problems (GSM8K, arithmetic)
    coder.py            the Reflexion programming agent (HumanEval, MBPP)
    alfworld_react.py   ReAct for ALFWorld; alfworld_expert.py plays the engine's expert plan (no model)
    prompts/            their prompt texts, one module per benchmark (and the Reflector's examples)

An agent never knows whether its environment is local or on an env server.
"""
