"""`mcts`: Language Agent Tree Search (LATS; Zhou et al., 2023), our own implementation.

One iteration, as in LATS:
- select: from the root down by UCT among the *open* children (not terminal, not closed); a node
  whose children all ended is closed and the walk backtracks to its parent (a failed terminal
  node is never selected again, so it keeps `visits <= 1`);
- expand the selected leaf into `mcts_children` steps sampled at `search_temperature` (one batch,
  each child in its own branch of the env); judge the children that ended (see search.py,
  `--search-judge`), reflect on the failures, value the open ones (the LLM value prompt, or the
  coder's internal pass rate): each open child's Q starts from its value;
- simulate from the most valuable open child: at every level sample `mcts_children` steps, judge
  and value them, and follow the best-valued one, to a terminal state (or the depth limit);
- backpropagate the simulation's return, the mean of the values along the simulated path (the
  terminal's judged reward last), to every node from the root to where it ended.

Memory as LATS bounds it (search.py): a failed terminal node gets a reflection only when its final
answer is new to the episode and fewer than `search_reflections` (3) exist; identical children of a
node are kept once. Every failed terminal node is still backed up (its 0 lowers its ancestors' Q).

A node's `q` is the mean of its prior (its value; a terminal node's reward) and every return
backed up through it, so UCT = q + c * sqrt(ln(N_parent + 1) / (n + 1)) weighs the LM's
judgement from the first selection on, not only the 0/1 rewards at the end. The search stops at
the first success its judge confirms, or after `mcts_iterations`.

One departure from LATS's code: when every child of the *root* has ended, LATS ends the search;
we expand the root again while iterations remain, its new children sampled with the reflections
on those failures in their prompts (a one-step agent, CoT, would otherwise get one expansion).
"""

from __future__ import annotations

import math
from typing import ClassVar

from reinagent.records import Evaluation, Trajectory
from reinagent.rollouts.base import Episode, Rollout, RolloutSettings
from reinagent.rollouts.search import Search, run_search

DEFAULT_ITERATIONS = 10  # benchmarks without their own `mcts_iterations`


class MctsRollout(Rollout):
    name: ClassVar[str] = "mcts"

    async def run(self, episode: Episode) -> tuple[Trajectory, Evaluation]:
        run = _Run(Search(episode, MctsRollout.name, "score"), self.settings)
        run.iterations = self.settings.mcts_iterations or getattr(episode.benchmark, "mcts_iterations", DEFAULT_ITERATIONS)
        return await run_search(run.search, run.body)


def uct(q: float, visits: int, parent_visits: int, c: float) -> float:
    """Exploitation (the backed-up value) plus exploration (favouring rarely visited nodes);
    defined for an unvisited node too, whose q is its LM value."""
    return q + c * math.sqrt(math.log(parent_visits + 1) / (visits + 1))


class _Run:
    """The state of one MCTS episode: the shared Search, the returns backed up through each node
    and the nodes closed because all their children ended."""

    def __init__(self, search: Search, settings: RolloutSettings):
        self.search = search
        self.settings = settings
        self.iterations = DEFAULT_ITERATIONS
        self.returns: dict[int, float] = {}  # per node: the sum of the returns backed up through it
        self.closed: set[int] = set()
        self.solved = False

    async def body(self) -> None:
        s = self.search
        for it in range(self.iterations):
            leaf = self.select()
            kids = await s.expand([leaf], self.settings.mcts_children, lambda p, j: f"mcts/it{it}/n{p}/c{j}")
            if await self.settle(kids, f"mcts/it{it}") or s.stopped:
                return
            if not kids:  # every sample repeated a child the node has (a root expanded again): resample
                continue
            for k in kids:
                if s.nodes[k].terminal:  # its verdict backed up once: it is never selected again
                    self.backprop(k, s.nodes[k].reward or 0.0)
            open_kids = [k for k in kids if not s.nodes[k].terminal]
            if open_kids:
                await self.simulate(self.most_valuable(open_kids), it)
                if self.solved or s.stopped:
                    return

    async def settle(self, kids: list[int], prefix: str) -> bool:
        """Judge the terminal kids, reflect on the failures, value the open ones (their Q starts
        there). True when one of them is a success (backed up, and the search ends)."""
        s = self.search
        ended = [k for k in kids if s.nodes[k].terminal]
        solved = await s.judge(ended)
        if solved:
            self.solved = True
            self.backprop(solved[0], s.nodes[solved[0]].reward or 1.0)
            return True
        each = self.settings.search_reflect_on == "every_failure"
        failed = ended if not each else [  # LATS's programming search: every failing program, open or not
            k for k in kids if s.nodes[k].terminal or (s.states[k].score is not None and s.states[k].score < 1.0)]
        await s.reflect(failed, prefix, each=each)  # first: the open siblings' values then know the lesson
        await s.value([k for k in kids if not s.nodes[k].terminal], lambda i: f"mcts/n{i}")
        for k in kids:
            s.nodes[k].q = self.prior(k)
        return False

    async def simulate(self, start: int, it: int) -> None:
        """From `start`, `mcts_children` sampled steps per level, following the best-valued one,
        to a terminal state; back up the mean of the values met on the way (the terminal's reward
        last). The samples not followed stay in the tree, open ones selectable later."""
        s = self.search
        node, met = start, [self.prior(start)]
        while not s.nodes[node].terminal:
            kids = await s.expand([node], self.settings.mcts_children, lambda p, j: f"mcts/it{it}/sim/n{p}/c{j}")
            if not kids:
                break
            if await self.settle(kids, f"mcts/it{it}/sim"):
                return
            node = self.most_valuable(kids)
            met.append(self.prior(node))
            if s.stopped:
                break
        self.backprop(node, sum(met) / len(met))

    def most_valuable(self, kids: list[int]) -> int:
        """The kid with the highest value (a terminal one: its reward); ties go to an open one,
        then to the first made."""
        s = self.search
        return max(kids, key=lambda k: (self.prior(k), not s.nodes[k].terminal, -k))

    def prior(self, k: int) -> float:
        """What the search thought of node k before any simulation: its judged reward if it ended,
        else its value (0 when the budget refused the value calls)."""
        n = self.search.nodes[k]
        return (n.reward if n.terminal else n.value) or 0.0

    def select(self) -> int:
        """From the root down by UCT among open children. A node whose children all ended is
        closed and the walk backtracks to its parent; the root is returned (to be expanded again)
        when it has no open child left."""
        s, c = self.search, self.settings.mcts_exploration
        node = 0
        while True:
            kids = s.children(node)
            if not kids:
                return node
            open_kids = [k for k in kids if not s.nodes[k].terminal and k not in self.closed]
            if not open_kids:
                if node == 0:
                    return node
                self.closed.add(node)
                node = s.nodes[node].parent
                continue
            parent_visits = s.nodes[node].visits
            node = max(open_kids, key=lambda k: (uct(self.q(k), s.nodes[k].visits, parent_visits, c), -k))

    def q(self, k: int) -> float:
        n = self.search.nodes[k]
        return n.q if n.q is not None else self.prior(k)

    def backprop(self, node: int, value: float) -> None:
        """Add `value` to every node from the root to `node`: one more visit, and Q the mean of
        the node's prior and all the returns backed up through it (the root has no prior)."""
        s = self.search
        for i in s.path(node):
            n = s.nodes[i]
            n.visits += 1
            self.returns[i] = self.returns.get(i, 0.0) + value
            if i == 0:
                n.q = self.returns[i] / n.visits
            else:
                n.q = (self.prior(i) + self.returns[i]) / (n.visits + 1)
