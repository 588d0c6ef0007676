"""Mutation check of the search, sampling, trial-loop and Evaluator tests (issue 26 §5, issue 35 §7): each
mutant below is applied to a scratch copy of the package, the tests it names run against it, and
the mutant must fail at least one of them. Prints one line per mutant and exits 1 if any survives.

    .venv/bin/python scripts/search_mutants.py              # all mutants
    .venv/bin/python scripts/search_mutants.py tot-keep-1   # one
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEARCH = ("tests/test_lats.py", "tests/test_sampling.py", "tests/test_search.py",
          "-k", "not alfworld and not on_code and not cli")  # the slow CLI runs: the others cover these lines
LOOP = ("tests/test_strategy.py", "tests/test_resume.py",
        "-k", "reflection_after or memory_window or memory_size or repair or memory_before")
# the programming Evaluator (`--evaluator internal|hidden`): each mutant names the few tests that
# cover its line (the whole of tests/test_evaluator.py takes minutes on a loaded machine)
EVALUATOR = "tests/test_evaluator.py"
EVAL_RULES = (EVALUATOR, "-k", "which_verdict or score_is_the_record or pass_at_1_is_taken")  # on records
EVAL_STOP = (EVALUATOR, "-k", "own_tests_passing and default")  # the loop stops on its own tests
EVAL_LAST = (EVALUATOR, "-k", "last_trial_is_judged")  # hidden tests on the last trial only; resume
CODER_LOOP = ("tests/test_coder.py", "-k", "reflexion_beats_none")
# issue 44: the reflect trainer's reflection and its prompts; the rules a run and a resume keep
REFLECT_TRAINER = ("tests/test_rl_reflect.py", "-k", "cut_at_the_stop or trial_loops")


@dataclass(frozen=True)
class Mutant:
    path: str
    old: str  # the original text, exactly once in `path`
    new: str
    tests: tuple[str, ...] = SEARCH  # pytest arguments: the tests that must kill it


MUTANTS = {
    # the search (issue 26 §5)
    "uct-no-exploitation": Mutant("reinagent/rollouts/mcts.py", "return q + c * math.sqrt(", "return c * math.sqrt("),
    "uct-no-exploration": Mutant("reinagent/rollouts/mcts.py",
                                 "return q + c * math.sqrt(math.log(parent_visits + 1) / (visits + 1))", "return q"),
    "select-min": Mutant("reinagent/rollouts/mcts.py", "node = max(open_kids,", "node = min(open_kids,"),
    "simulate-least-valuable": Mutant("reinagent/rollouts/mcts.py", "return max(kids, key=lambda k: (self.prior(k)",
                                      "return min(kids, key=lambda k: (self.prior(k)"),
    "tot-ascending": Mutant("reinagent/rollouts/tot.py", "key=lambda i: (-(search.nodes[i].value or 0.0), i)",
                            "key=lambda i: ((search.nodes[i].value or 0.0), i)"),
    "tot-keep-1": Mutant("reinagent/rollouts/tot.py", "[: cfg.tot_keep]", "[:1]"),
    "value-first-sample": Mutant("reinagent/rollouts/value.py",
                                 "return sum(values) / len(values) if values else NEUTRAL",
                                 "return values[0] if values else NEUTRAL"),
    "seed-constant": Mutant("reinagent/llm/base.py", 'hashlib.sha256(f"{seed}:{rollout_id}".encode())',
                            'hashlib.sha256(f"{seed}".encode())'),
    # the paper's loops (issue 35 §7)
    "mcts-no-failed-backup": Mutant("reinagent/rollouts/mcts.py", "self.backprop(k, s.nodes[k].reward or 0.0)",
                                    "pass"),
    "search-reflections-unbounded": Mutant(
        "reinagent/rollouts/search.py",
        "if failure in self.reflected or (self.keep is not None and len(self.reflected) >= self.keep):",
        "if failure in self.reflected:"),
    "search-reflection-per-node": Mutant("reinagent/rollouts/search.py", "if failure in self.reflected or (",
                                         "if ("),
    "search-children-not-deduplicated": Mutant("reinagent/rollouts/search.py", "if step in seen[p]:", "if False:"),
    "reflect-after-success": Mutant(
        "reinagent/episode.py", "if not stops_loop(record, evaluator) and trial < cfg.num_trials",
        "if trial < cfg.num_trials", LOOP),
    "resume-ignores-memory-size": Mutant(
        "reinagent/runner.py", "config = RunConfig(**{**spec.config,",
        'config = RunConfig(**{**{k: v for k, v in spec.config.items() if k != "memory_size"},', LOOP),
    "memory-window-ignored": Mutant("reinagent/memory.py", "memory = EpisodicMemory(window=window)",
                                    "memory = EpisodicMemory()", LOOP),
    "memory-from-later-trials": Mutant("reinagent/memory.py", "for k in range(1, trial):",
                                       "for k in range(1, 1000):", LOOP),
    "resume-keeps-trials-after-a-lost-one": Mutant("reinagent/resuming.py", "lost = lost_trials(records)",
                                                   "lost = {}", LOOP),
    # the programming Evaluator (issue 35 §7): under `internal` the program's own tests end the loop
    # and the hidden tests judge once, the program the loop stopped with or the last trial's
    "loop-stops-on-hidden-verdict": Mutant(
        "reinagent/records.py",
        'return bool(record.internal_passed) if evaluator == "internal" else record.success',
        "return record.success", EVAL_RULES),
    "schedule-stops-on-hidden-verdict": Mutant(
        "reinagent/schedule.py", "stops_loop(done[(task_id, t)], evaluator)", "done[(task_id, t)].success",
        EVAL_STOP),
    "reflect-after-own-tests-pass": Mutant(
        "reinagent/episode.py", "if not stops_loop(record, evaluator) and trial < cfg.num_trials",
        "if not record.success and trial < cfg.num_trials", EVAL_STOP),
    "hidden-tests-every-trial": Mutant(
        "reinagent/rollouts/base.py",
        'if self.evaluator == "internal" and not internal and not self.last_trial:', "if False:", EVAL_LAST),
    "last-trial-never-judged": Mutant(
        "reinagent/rollouts/base.py",
        'if self.evaluator == "internal" and not internal and not self.last_trial:',
        'if self.evaluator == "internal" and not internal:', EVAL_LAST),
    "default-evaluator-hidden": Mutant("reinagent/plan.py", "return evaluator or bench.default_evaluator",
                                       'return evaluator or "hidden"', EVAL_STOP),
    "score-from-first-success": Mutant("reinagent/records.py", "if stops_loop(r, evaluator)), ordered[-1]",
                                       "if r.success), ordered[-1]", EVAL_RULES),
    "pass-at-1-from-last-trial": Mutant("reinagent/report/summary.py", 'else trials[0]["solved"] if trials else 0)',
                                        'else trials[-1]["solved"] if trials else 0)', EVAL_RULES),
    "internal-pass-at-1-from-trial-1": Mutant(
        "reinagent/report/summary.py", '"pass_at_1": (final["solved_cumulative"] if evaluator',
        '"pass_at_1": (trials[0]["solved"] if evaluator', EVAL_RULES),
    "solved-at-first-hidden-pass": Mutant("reinagent/report/summary.py", "if stopped_at.get(r.task_id) == t}",
                                          "if r.success}", EVAL_LAST),
    "tests-rewritten-every-trial": Mutant(
        "reinagent/episode.py", "return tuple(str(t) for t in tests) if isinstance(tests, list) else None",
        "return None", CODER_LOOP),
    "search-rewrites-tests": Mutant("reinagent/rollouts/steps.py", "if kept is not None:  # written",
                                    "if False:  # written", (EVALUATOR, "-k", "search_rollouts")),
    "old-run-resumes-internal": Mutant(
        "reinagent/records.py", 'return "hidden" if config.get("agent") == "coder" else None', "return None",
        (EVALUATOR, "-k", "older_than_the_flag")),
    "resume-reflects-on-hidden-verdict": Mutant("reinagent/resuming.py", "not stops_loop(r, evaluator) and r.error",
                                                "not r.success and r.error", EVAL_LAST),
    "served-env-drops-internal-result": Mutant(
        "reinagent/service/served.py", "return self.inner.internal_passed(task, trajectory)", "return None",
        (EVALUATOR, "-k", "env_server")),
    "internal-tests-kept-ignored": Mutant(
        "reinagent/agents/coder.py", "if self.kept is not None and len(tests) > self.kept:", "if False:",
        (EVALUATOR, "-k", "internal_tests_kept or reference_programming_loop")),
    "preset-without-internal-tests-kept": Mutant(
        "reinagent/reference.py",
        '    Reference("internal_tests_kept", 1, PROGRAMMING,\n'
        '              "1 internal test kept, picked at random (programming_runs/reflexion.py:37, internal_tests(..., 1))"),\n',
        "", ("tests/test_reference.py", "-k", "preset")),
    # issue 44: each line below survived the tests of 862ab4b
    "syntax-error-passes-own-tests": Mutant(
        "reinagent/benchmarks/programming.py", 'return bool(isinstance(result, dict) and result.get("passed") is True)',
        'return result is None or bool(isinstance(result, dict) and result.get("passed") is True)',
        (EVALUATOR, "-k", "syntax_error_fails")),
    "partial-internal-pass-ends-branch": Mutant(
        "reinagent/rollouts/steps.py", "child.terminal = reward >= 1.0", "child.terminal = reward > 0",
        (EVALUATOR, "-k", "some_of_its_own_tests")),
    "final-record-unsorted": Mutant("reinagent/records.py", "ordered = sorted(records, key=lambda r: r.trial)",
                                    "ordered = list(records)", (EVALUATOR, "-k", "whatever_order")),
    "truncation-boundary": Mutant("reinagent/agents/loop.py", 'count("\\n".join(lines)) > max_tokens',
                                  'count("\\n".join(lines)) >= max_tokens',
                                  ("tests/test_reference.py", "-k", "shorten_observations")),
    "failure-key-case-sensitive": Mutant("reinagent/rollouts/search.py", '" ".join(str(state.answer).split()).lower()',
                                         '" ".join(str(state.answer).split())',
                                         ("tests/test_search.py", "-k", "case_and_spacing")),
    "reflect-cut-by-characters": Mutant(
        "reinagent/rl/reflect.py",
        "ep.completion_ids, ep.env_mask, ep.logprobs = (ep.completion_ids[:keep], ep.env_mask[:keep],",
        "_unused = (ep.completion_ids[:keep], ep.env_mask[:keep],", REFLECT_TRAINER),
    # (dropping only `.split(STOP)[0]` is an equivalent mutant: the tokens are cut at the stop string
    # first, and no token of the embedded model's tokenizer holds the stop string and text after it)
    "reflect-keeps-text-after-stop": Mutant("reinagent/rl/reflect.py", "        if STOP in text:\n",
                                            "        if False:\n", REFLECT_TRAINER),
    "reflect-answer-token-limit": Mutant(
        "reinagent/rl/reflect.py", "max_new_tokens=self.cfg.reflection_max_tokens, seed=seed * 7 + 1)",
        "max_new_tokens=None, seed=seed * 7 + 1)", REFLECT_TRAINER),
    "reflect-first-trial-temperature-ignored": Mutant(
        "reinagent/rl/reflect.py", "first_t = temperature if first_t is None else first_t", "first_t = temperature",
        REFLECT_TRAINER),
    "reflect-raw-reflection-in-retry": Mutant("reinagent/rl/reflect.py", "return clean_reflection(text)",
                                              "return text", REFLECT_TRAINER),
    "resume-reflector-sees-every-reflection": Mutant(
        "reinagent/resuming.py",
        "shown = EpisodicMemory(reflections=list(past or [])).last(exp.config.reflector_memory)",
        "shown = list(past or [])", ("tests/test_reference.py", "-k", "only_its_last_plans")),
}

# --- the math judge (issue 44): each mutant is one line of reinagent/benchmarks/math_*.py; the
# held-out replies (tests/test_math_heldout.py) and the reproductions must kill it
MATH_JUDGE = ("tests/test_math_heldout.py", "-k", "heldout_reply_is_judged or reproductions")
MUTANTS.update({
    "math-plus-not-an-operator": Mutant("reinagent/benchmarks/math_words.py",
                                        'WORD_OPERATORS = {"plus": "+", "minus": "-"}', 'WORD_OPERATORS = {"minus": "-"}',
                                        MATH_JUDGE),
    "math-first-self-correction": Mutant("reinagent/benchmarks/math_text.py",
                                         "for i in range(len(marks) - 1, -1, -1):", "for i in range(len(marks)):",
                                         MATH_JUDGE),
    "math-first-hash-line": Mutant("reinagent/benchmarks/math_judge.py",
                                   "for place in (hashed[-1] if hashed else None,",
                                   "for place in (hashed[0] if hashed else None,", MATH_JUDGE),
})

# --- issue 54: each new reading of a long reply, and each of its guards, one line each; the frozen
# sets v3 and v4, the reproductions and the bounds (tests/test_math_layout.py) must kill it
MATH_LAYOUT = ("tests/test_math_layout.py", "-k", "judged or reproductions or bounds")
MUTANTS.update({
    "math-check-kept": Mutant("reinagent/benchmarks/math_judge.py", "text = without_conversions(without_check(text))",
                              "text = without_conversions(text)", MATH_LAYOUT),
    "math-check-ignores-a-fault": Mutant("reinagent/benchmarks/math_layout.py", "for p in (CUE, _FAULT, CORRECTION)",
                                         "for p in (CUE,)", MATH_LAYOUT),
    "math-check-of-any-number": Mutant("reinagent/benchmarks/math_layout.py",
                                       "if (cue is not None and cue.start() < check.start()) or same:",
                                       "if True:", MATH_LAYOUT),
    "math-answer-first-ignored": Mutant("reinagent/benchmarks/math_judge.py", "correction(text), first, text):",
                                        "correction(text), text):", MATH_LAYOUT),
    "math-answer-first-a-given": Mutant("reinagent/benchmarks/math_layout.py",
                                       "            return None  # an operand: the opening states a given",
                                       "            continue", MATH_LAYOUT),
    "math-answer-first-plain": Mutant("reinagent/benchmarks/math_layout.py", "return first if found[2] or derived else None",
                                      "return first", MATH_LAYOUT),
    "math-european-decimal-off": Mutant("reinagent/benchmarks/math_text.py",
                                        '    text = _EURO_DECIMAL.sub(lambda m: m.group(1).replace(".", "") + "." + m.group(2), text)\n',
                                        "", MATH_LAYOUT),
    "math-european-lone-group": Mutant("reinagent/benchmarks/math_text.py", r"(?:\.\d{3}){2,}+", r"(?:\.\d{3}){1,}+",
                                       MATH_LAYOUT),
    "math-check-of-a-given": Mutant("reinagent/benchmarks/math_layout.py",
                                    "and derived.get(value, len(text)) < check.start())", ")", MATH_LAYOUT),
    "math-cut-read": Mutant("reinagent/benchmarks/math_judge.py", "if committed is not None and not hashed:", "if False:",
                            MATH_LAYOUT),
    "math-cut-after-a-sentence": Mutant("reinagent/benchmarks/math_layout.py",
                                        r'or not re.search(r"\d|[-+*/×÷^=]", unfinished) else ""', 'else ""',
                                        MATH_LAYOUT),
    "math-conversion-kept": Mutant("reinagent/benchmarks/math_judge.py", "text = without_conversions(without_check(text))",
                                   "text = without_check(text)", MATH_LAYOUT),
    "math-conversion-without-units": Mutant("reinagent/benchmarks/math_layout.py",
                                            'if not first or first == found["other"].lower():',
                                            'if first == found["other"].lower():', MATH_LAYOUT),
    "math-minus-currency-kept": Mutant("reinagent/benchmarks/math_text.py", '_MINUS_CURRENCY.sub("-", ', "(", MATH_LAYOUT),
})


def failures(name: str | None, tests: tuple[str, ...]) -> list[str]:
    """The tests that fail on a scratch copy with mutant `name` applied (None: unmutated)."""
    with tempfile.TemporaryDirectory() as tmp:
        for folder in ("reinagent", "tests"):
            shutil.copytree(ROOT / folder, Path(tmp) / folder, ignore=shutil.ignore_patterns("__pycache__"))
        if name is not None:
            mutant = MUTANTS[name]
            target = Path(tmp) / mutant.path
            text = target.read_text(encoding="utf-8")
            if text.count(mutant.old) != 1:
                raise SystemExit(f"{name}: the original text is not in {mutant.path} exactly once; update this script")
            target.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                              cwd=tmp, env={**os.environ, "PYTHONPATH": tmp},
                              capture_output=True, text=True)
    failed = [line.split(" - ")[0].removeprefix("FAILED ") for line in proc.stdout.splitlines()
              if line.startswith("FAILED")]
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not failed):
        raise SystemExit(f"pytest could not run ({name or 'unmutated'}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return failed


def check(name: str) -> bool:
    """True when the mutant is killed (some test fails)."""
    failed = failures(name, MUTANTS[name].tests)
    print(f"{name}: {'killed by ' + ', '.join(failed) if failed else 'SURVIVED'}", flush=True)
    return bool(failed)


if __name__ == "__main__":
    names = sys.argv[1:] or list(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        raise SystemExit(f"unknown mutant {unknown[0]!r}; valid: {', '.join(MUTANTS)}")
    for tests in dict.fromkeys(MUTANTS[n].tests for n in names):  # each test set once, unmutated
        baseline = failures(None, tests)
        if baseline:
            raise SystemExit(f"the unmutated tests fail already: {', '.join(baseline)}")
    survived = [n for n in names if not check(n)]
    sys.exit(1 if survived else 0)
