"""Prompt text of the coder agent and the programming Reflector's worked examples."""

from __future__ import annotations

IMPLEMENT_SYSTEM = (
    "You are an expert Python programmer. You are given a function to write. Reply with one "
    "```python code block that holds the complete function: its signature, its body, and any "
    "imports or helper functions it needs. Use only the Python standard library. Do not print "
    "anything, do not read input, and do not include example usage or tests."
)

IMPLEMENT_INSTRUCTION = "Write the complete implementation of `{entry_point}` now."

TESTS_SYSTEM = (
    "You write unit tests for Python functions. You are given a description of a function. "
    "Reply only with assert statements, one per line, each calling the function with concrete "
    "arguments and comparing the result with the exact expected value. Do not implement the "
    "function and do not add explanations."
)

TESTS_EXAMPLE = """Example, for a function `count_vowels(text: str) -> int` that counts the vowels a, e, i, o, u in a lowercase string:
assert count_vowels("hello") == 2
assert count_vowels("") == 0
assert count_vowels("rhythm") == 0
assert count_vowels("aeiou") == 5"""

TESTS_INSTRUCTION = (
    "Write {n} different unit tests for `{entry_point}`: one `assert` per line, covering "
    "ordinary inputs and edge cases."
)

# Feedback headings shown to the model after its own tests ran (never the hidden tests).
PASSED_HEADING = "Tests passed:"
FAILED_HEADING = "Tests failed:"

REFLECTION_EXAMPLES = '''Task:
Write a function `second_largest(numbers)` that returns the second largest distinct value of a list of integers.

Implementation:
```python
def second_largest(numbers):
    numbers.sort()
    return numbers[-2]
```

Feedback from your own unit tests:
Tests passed:
assert second_largest([1, 5, 3]) == 3
Tests failed:
assert second_largest([4, 4, 2]) == 2  # output: 4

Reflection: I assumed the values were distinct, so a repeated maximum came back as the second largest; I also sorted the caller's list in place. Next time I will work on sorted(set(numbers)), take the element before the last one, and never modify the input.

---

Task:
Write a function `is_palindrome(text)` that tells whether a string reads the same backwards, ignoring case and every character that is not a letter or a digit.

Implementation:
```python
def is_palindrome(text):
    return text == text[::-1]
```

Feedback from your own unit tests:
Tests passed:
assert is_palindrome("abba") == True
Tests failed:
assert is_palindrome("Never odd or even") == True  # output: False
assert is_palindrome("A man, a plan, a canal: Panama") == True  # output: False

Reflection: I compared the raw string with its reverse, but the task says to ignore case, spaces and punctuation, which both failing tests contain. Next time I will first keep only the characters for which ch.isalnum() is true, lowercase them, and compare that cleaned string with its reverse.

---

Task:
Write a function `running_total(values)` that returns the list of cumulative sums of a list of numbers.

Implementation:
```python
def running_total(values):
    total = 0
    result = []
    for v in values
        total += v
        result.append(total)
    return result
```

Feedback from your own unit tests:
The code does not parse: SyntaxError: expected ':' (line 4)

Reflection: My code never ran because the for statement on line 4 lacks its colon. The logic itself was fine. Next time I will re-read every def, for, if and while line for its trailing colon and check the indentation before answering.'''

# ----- the retry: the reference's chat for a Reflexion retry ----------------------------------
# The reference (noahshinn/reflexion, programming_runs/generators/generator_utils.py:38-63, the
# newest version) retries with a chat of six turns: system; a user turn holding a worked retry
# example; the previous implementation as the *assistant's* turn; a user turn with the unit-test
# results ending on the reflection label; the reflection as the *assistant's* turn; a user turn
# with the improved-implementation label and the signature. The coder builds the same turns
# (agents/coder.py `retry_messages`) from the labels and the worked example below, which are our
# own writing in the reference's structure. docs/strategies.md shows both side by side.

RETRY_SYSTEM = (
    "You are an expert Python programmer. You will be given your previous implementation of a "
    "function, the results of your own unit tests on it, and your reflection on what went wrong. "
    "Write the complete improved implementation (restate the signature) in one ```python code "
    "block. Use only the Python standard library. Do not print anything, do not read input, and "
    "do not include example usage or tests."
)

PREVIOUS_LABEL = "[previous impl]:"
RESULTS_LABEL = "[unit test results from previous impl]:"
REFLECTION_LABEL = "[reflection on previous impl]:"
IMPROVED_LABEL = "[improved impl]:"

# The worked retry example, in parts: a retry without a reflection (LAST_ATTEMPT) or without the
# previous implementation (REFLEXION alone) is shown the example without those parts.
EXAMPLE_PREVIOUS = '''```python
def count_words(text: str) -> int:
    """Return the number of words in text; words are separated by any amount of whitespace."""
    return len(text.split(" "))
```'''
EXAMPLE_RESULTS = '''Tests passed:
assert count_words("one two three") == 3
Tests failed:
assert count_words("  padded   words ") == 2  # output: 7
assert count_words("") == 0  # output: 1'''
EXAMPLE_REFLECTION = (
    "I split on a single space, so every extra space produced an empty string that I counted as a "
    "word, and the empty text gave one empty word. str.split() with no argument splits on runs of "
    "whitespace and drops the empty pieces, so returning len(text.split()) fixes both failures."
)
EXAMPLE_IMPROVED = '''```python
def count_words(text: str) -> int:
    """Return the number of words in text; words are separated by any amount of whitespace."""
    return len(text.split())
```'''
EXAMPLES_END = "END OF EXAMPLES"
