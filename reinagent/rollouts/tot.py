"""`tot`: Tree of Thoughts as breadth-first search (Yao et al., 2023).

At each depth every kept path gets `tot_breadth` sampled next steps (one batch); every candidate
is valued by the LLM (`value_samples` judgements: sure / likely / impossible), and the best
`tot_keep` open paths go on. A finished path whose value is at least every open candidate's ends
the search (nothing deeper is judged more promising); at the depth limit the best finished path
(else the best open one) is the answer. The benchmark judges only that one path: ToT chooses by
its own value (the mean of the samples), never by the hidden answer.
"""

from __future__ import annotations

from typing import ClassVar

from reinagent.records import Evaluation, Trajectory
from reinagent.rollouts.base import Episode, Rollout
from reinagent.rollouts.search import Search, run_search


class TotRollout(Rollout):
    name: ClassVar[str] = "tot"

    async def run(self, episode: Episode) -> tuple[Trajectory, Evaluation]:
        search = Search(episode, self.name, "words")
        cfg = self.settings

        async def body() -> None:
            frontier = [0]
            for depth in range(search.stepper.max_depth):
                kids = await search.expand(frontier, cfg.tot_breadth, lambda p, j: f"tot/d{depth}/n{p}/c{j}")
                await search.value(kids, lambda i: f"tot/n{i}", blind=search.judge_by == "value")
                if search.stopped or not kids:
                    return
                ranked = sorted(kids, key=lambda i: (-(search.nodes[i].value or 0.0), i))
                if search.nodes[ranked[0]].terminal:
                    return  # the best candidate is a finished path: stop here
                frontier = [i for i in ranked if not search.nodes[i].terminal][: cfg.tot_keep]

        return await run_search(search, body)
