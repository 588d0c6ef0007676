"""`mcts`: Language Agent Tree Search (LATS; Zhou et al., 2023), our own implementation.

One iteration: select a leaf by UCT from the root; expand it into `mcts_children` steps sampled
at `search_temperature` (one batch, each child in its own branch of the env); judge the children
that ended (the benchmark's evaluate) and value the rest (the LLM value prompt, or the fraction of
the coder's own tests passed); simulate from the most valuable open child, one sampled step per
level, to a terminal state; backpropagate its reward. Every failed terminal state gets a
self-reflection that goes into later expansions' prompts and into the value prompt. The search
stops at the first success the benchmark confirms, or after `mcts_iterations`.
"""

from __future__ import annotations

import math
from typing import ClassVar

from reinagent.records import Evaluation, Trajectory
from reinagent.rollouts.base import Episode, Rollout
from reinagent.rollouts.search import Search, run_search

DEFAULT_ITERATIONS = 10  # benchmarks without their own `mcts_iterations`


class MctsRollout(Rollout):
    name: ClassVar[str] = "mcts"

    async def run(self, episode: Episode) -> tuple[Trajectory, Evaluation]:
        run = _Run(episode, self.config)
        return await run_search(run.search, run.body)


class _Run:
    """The state of one MCTS episode: the shared Search plus the backpropagated returns."""

    def __init__(self, episode: Episode, config):
        self.search = Search(episode, MctsRollout.name, "score")
        self.config = config
        self.iterations = config.mcts_iterations or getattr(episode.benchmark, "mcts_iterations", DEFAULT_ITERATIONS)
        self.returns: list[float] = []  # per node: the sum of backpropagated rewards
        self.solved = False

    async def body(self) -> None:
        s = self.search
        for it in range(self.iterations):
            leaf = self.select()
            if s.nodes[leaf].terminal:  # a finished path chosen again: its verdict counts again
                self.backprop(leaf, s.nodes[leaf].reward or 0.0)
                continue
            kids = await s.expand([leaf], self.config.mcts_children, lambda p, j: f"mcts/it{it}/n{p}/c{j}")
            if await self.settle(kids, f"mcts/it{it}") or s.stopped or not kids:
                return
            open_kids = [k for k in kids if not s.nodes[k].terminal]
            if not open_kids:
                continue
            start = max(open_kids, key=lambda k: (s.nodes[k].value or 0.0, -k))
            await self.simulate(start, it)
            if self.solved or s.stopped:
                return

    async def settle(self, kids: list[int], prefix: str) -> bool:
        """Judge the terminal kids, value the open ones, reflect on the failures, backpropagate
        the verdicts. True when one of them is a confirmed success."""
        s = self.search
        ended = [k for k in kids if s.nodes[k].terminal]
        solved = await s.judge(ended)
        if solved:
            self.solved = True
            self.backprop(solved[0], s.nodes[solved[0]].reward or 1.0)
            return True
        await s.reflect(ended, prefix)  # first: the open siblings' values then know the lesson
        await s.value([k for k in kids if not s.nodes[k].terminal], lambda i: f"mcts/n{i}")
        for k in ended:
            self.backprop(k, s.nodes[k].reward or 0.0)
        return False

    async def simulate(self, node: int, it: int) -> None:
        """One sampled step per level from `node` to a terminal state, which is judged (and
        backpropagated by `settle`); when the budget stops the walk, the value of the last node
        reached is backpropagated instead."""
        s = self.search
        while not s.nodes[node].terminal:
            kids = await s.expand([node], 1, lambda p, j: f"mcts/it{it}/sim/n{p}")
            if not kids:
                break
            node = kids[0]
            if not s.nodes[node].terminal:
                await s.value([node], lambda i: f"mcts/n{i}")
                if s.stopped:
                    break
        if s.nodes[node].terminal:
            await self.settle([node], f"mcts/it{it}/sim")
        else:
            self.backprop(node, s.nodes[node].value or 0.0)

    def select(self) -> int:
        """From the root down by UCT; an unvisited child first (the most valuable, then the
        first made), so every child is tried once before any is tried twice. A node whose
        children all ended (failed: a success stops the search) is expanded again: its new
        children are sampled with the reflections on those failures in their prompt."""
        s, c = self.search, self.config.mcts_exploration
        node = 0
        while (kids := s.children(node)) and not all(s.nodes[k].terminal for k in kids):
            parent_visits = max(1, s.nodes[node].visits)

            def uct(k: int) -> tuple[float, float, int]:
                n = s.nodes[k]
                if n.visits == 0:
                    return (math.inf, n.value or 0.0, -k)
                q = self.returns[k] / n.visits
                return (q + c * math.sqrt(math.log(parent_visits) / n.visits), n.value or 0.0, -k)

            node = max(kids, key=uct)
        return node

    def backprop(self, node: int, reward: float) -> None:
        s = self.search
        while len(self.returns) < len(s.nodes):
            self.returns.append(0.0)
        for i in s.path(node):
            s.nodes[i].visits += 1
            self.returns[i] += reward
