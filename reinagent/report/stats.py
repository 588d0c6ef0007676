"""Confidence intervals for success rates.

Reflexion runs are small (often 10-100 tasks) and rates sit near 0 or 1, where the textbook
normal interval collapses to zero width or leaves [0, 1]. The Wilson score interval stays inside
[0, 1] and keeps close to its nominal coverage at these sizes, so every report uses it.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # two-sided 95% quantile of the standard normal


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for `successes` out of `n` (95% by default).

    With no trials at all nothing is known, so the interval is the whole of [0, 1].
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # Clamp away float dust so that 0/n gives exactly 0 and n/n exactly 1.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def format_rate(successes: int, n: int, *, interval: bool = True) -> str:
    """'3/10 30.0% [10.8, 60.3]': count, percentage and its 95% Wilson interval in percent."""
    if n == 0:
        return "0/0"
    text = f"{successes}/{n} {100 * successes / n:.1f}%"
    if interval:
        low, high = wilson_interval(successes, n)
        text += f" [{100 * low:.1f}, {100 * high:.1f}]"
    return text
