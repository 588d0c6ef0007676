"""What ToT and MCTS share: the tree, batched expansion, values, judging, reflections, the result.

Determinism: every sampled call's rollout id is its place in the tree (given by the caller, e.g.
"mcts/it3/n7/c2"), node ids are given in request order after each batch, and each batch's budget
is decided before any of its calls is made; so a replayed episode (resume, response cache) makes
the same choices whatever order concurrent answers come back in. The seed a sampling backend is
sent is derived from the run's seed and that same place (`reinagent.llm.base.call_seed`).

Judging (`judge`): a terminal node is judged by the environment's reward (`--search-judge reward`,
the default: the feedback Reflexion and LATS both use), by the model's own value (`value`: no gold
answer inside the search), or, for the coder, by its internal tests (the hidden tests then judge
only the program the search returns, once). `Episode.evaluate` counts the benchmark's verdicts.

Bounded memory (as LATS bounds it): a reflection is written only for a failed trajectory whose final
answer no earlier reflection of the episode covers, and at most `search_reflections` (3) per
episode; every prompt shows all of them, so no prompt grows with the number of failed nodes.
Identical (thought, action) children of one node are kept once (LATS's `unique_states`).
"""

from __future__ import annotations

from collections.abc import Callable

from reinagent.agents.base import BudgetExhausted, Request
from reinagent.records import Evaluation, SearchNode, Trajectory
from reinagent.reflector import Reflector
from reinagent.rollouts.base import Episode
from reinagent.rollouts.steps import PathState, gather_in_order, make_stepper
from reinagent.rollouts.value import Scale, mean_value, value_params, value_requests


class Search:
    def __init__(self, episode: Episode, name: str, scale: Scale):
        self.episode, self.name, self.scale = episode, name, scale
        self.actor = episode.actor
        self.stepper = make_stepper(episode, name)
        self.nodes: list[SearchNode] = []
        self.states: list[PathState] = []
        self.evaluations: dict[int, Evaluation] = {}
        self.reflections: list[str] = []  # the episode's reflections, in the order written
        self.reflected: set[tuple] = set()  # the failures they cover (failure_key)
        self.keep = episode.settings.search_reflections  # None: no bound (runs from before the bound)
        self.duplicates = 0  # sampled children dropped as identical to a sibling
        self.stopped: str | None = None  # the budget that ended the search early
        cfg = episode.settings
        self.samples = cfg.value_samples
        self.value_params = value_params(cfg.value_samples, cfg.search_temperature, cfg.seed)
        # what judges a terminal node inside the search (see the module's docstring)
        self.judge_by = "internal tests" if self.stepper.value_from_agent else cfg.search_judge
        self.reflector = getattr(episode, "reflector", None) or Reflector(
            episode.actor.llm, episode.benchmark.reflection_examples, max_tokens=getattr(cfg, "reflection_max_tokens", 200))

    # --- the tree ---------------------------------------------------------------------------------

    async def start(self) -> None:
        state = await self.stepper.start()
        self.nodes.append(SearchNode(id=0, observation=self.stepper.first_observation))
        self.states.append(state)

    def add(self, parent: int, state: PathState, output: str) -> int:
        step = state.steps[-1]
        node = SearchNode(
            id=len(self.nodes), parent=parent, depth=self.nodes[parent].depth + 1, output=output,
            thought=step.thought, action=step.action, observation=step.observation, terminal=state.terminal,
            value=state.score if self.stepper.value_from_agent else None,  # free: known from the step
        )
        self.nodes.append(node)
        self.states.append(state)
        self.actor.activity.nodes += 1
        return node.id

    def children(self, i: int) -> list[int]:
        return [n.id for n in self.nodes if n.parent == i]

    def path(self, i: int) -> list[int]:
        ids = []
        while i is not None:
            ids.append(i)
            i = self.nodes[i].parent
        return ids[::-1]

    def note_refusal(self, results) -> None:
        if any(r is None for r in results):
            self.stopped = self.actor.budget.exhausted or "call_budget"

    # --- model calls, one batch each -------------------------------------------------------------

    async def expand(self, parents: list[int], n: int, key: Callable[[int, int], str]) -> list[int]:
        """n sampled children of every parent: one batch of calls, then the steps concurrently,
        each in its own branch of the env. A sample whose (thought, action) a sibling already has
        makes no node (LATS's `unique_states`). Returns the new node ids in request order."""
        requests, asked = [], []
        for p in parents:
            messages = self.stepper.messages(self.states[p], self.reflections)
            for j in range(n):
                requests.append(Request(messages, self.stepper.params, key(p, j)))
                asked.append((p, messages))
        completions = await self.actor.complete_many(requests)
        self.note_refusal(completions)
        made, seen = [], {p: {self.stepper.output_key(self.states[p], self.nodes[k].output or "")
                              for k in self.children(p)} for p in parents}
        for (p, m), c in zip(asked, completions):
            if c is None:
                continue
            step = self.stepper.output_key(self.states[p], c.text)
            if step in seen[p]:
                self.duplicates += 1
                continue
            seen[p].add(step)
            made.append((p, m, c.text))
        states = await gather_in_order(self.stepper.advance(self.states[p], m, text) for p, m, text in made)
        return [self.add(p, s, text) for (p, _m, text), s in zip(made, states)]

    async def value(self, ids: list[int], key: Callable[[int], str], *, blind: bool = False) -> None:
        """Each node's value: the agent's own score (the coder's internal pass rate) or the mean
        of `value_samples` LLM judgements, all asked in one batch (their texts kept on the node).
        `blind`: the attempt is shown without the environment's verdict (a search judged by value)."""
        if self.stepper.value_from_agent:
            for i in ids:
                self.nodes[i].value = self.states[i].score
            return
        requests, owners = [], []
        for i in ids:
            for req in value_requests(self.attempt(i, blind=blind), self.reflections, self.scale, self.samples,
                                      self.value_params, key(i)):
                requests.append(req)
                owners.append(i)
        completions = await self.actor.complete_many(requests)
        self.note_refusal(completions)
        for i in ids:
            texts = [c.text if c is not None else None for c, o in zip(completions, owners) if o == i]
            self.nodes[i].value_samples = [t for t in texts if t is not None]
            self.nodes[i].value = mean_value(texts)

    def attempt(self, i: int, *, blind: bool = False) -> str:
        """The path to node i as its agent renders an attempt (what value and reflection read)."""
        state = self.states[i]
        text = self.episode.agent.render_attempt(self.episode.task, self.stepper.trajectory(state))
        if blind or not state.terminal:  # an ALFWorld trace ends with a verdict an open path has not had
            lines = text.rstrip().splitlines()
            if lines and lines[-1].startswith("STATUS:"):
                text = "\n".join(lines[:-1])
        return text

    async def judge(self, ids: list[int]) -> list[int]:
        """The search's verdict on terminal nodes, by `judge_by`; returns the ones it calls solved
        (reward 1). Only `reward` asks the benchmark (each verdict counted by the episode)."""
        if not ids:
            return []
        if self.judge_by == "reward":
            evaluations = await gather_in_order(
                self.episode.evaluate(self.stepper.trajectory(self.states[i])) for i in ids)
            for i, ev in zip(ids, evaluations):
                self.evaluations[i] = ev
                self.nodes[i].reward, self.nodes[i].success = ev.reward, ev.success
        else:
            if self.judge_by == "value":
                await self.value(ids, lambda i: f"{self.name}/n{i}/judge", blind=True)
            for i in ids:
                node = self.nodes[i]
                node.reward = (self.states[i].score if self.judge_by == "internal tests" else node.value) or 0.0
                node.success = node.reward >= 1.0
        return [i for i in ids if self.nodes[i].success]

    async def reflect(self, ids: list[int], prefix: str, *, each: bool = False) -> None:
        """A self-reflection on each failed terminal node whose failure (its final answer) none
        covers yet, while the episode holds fewer than `search_reflections`; for later expansions
        and values. The others are backed up as usual, without a reflection (as in LATS).
        `each`: every node given gets its own, the same program twice included (LATS's
        programming search reflects on every failing child), within the same bound."""
        todo = []
        for i in ids:
            failure = ("node", i) if each else self.failure_key(i)
            if failure in self.reflected or (self.keep is not None and len(self.reflected) >= self.keep):
                continue
            self.reflected.add(failure)
            todo.append(i)
        blind = self.judge_by == "value"  # judged without the environment's verdict: reflect without it too
        requests = [Request(self.reflector.prompt(self.attempt(i, blind=blind)), self.reflector.params,
                            f"{prefix}/n{i}/reflect", llm=self.reflector.llm, role="reflector") for i in todo]
        completions = await self.actor.complete_many(requests)
        self.note_refusal(completions)
        for i, c in zip(todo, completions):
            if c is not None:
                self.nodes[i].reflection = self.reflector.clean(c.text)
                if self.nodes[i].reflection:  # nothing of the model's own: no lesson to show, as in a trial's memory
                    self.reflections.append(self.nodes[i].reflection)

    def failure_key(self, i: int) -> tuple:
        """What makes a failed trajectory distinct: its final answer (case and spacing aside), as
        LATS's `get_unique_trajectories`; a path that ended without one (a depth limit, an ALFWorld
        game) by its actions."""
        state = self.states[i]
        if state.answer is not None:
            return ("answer", " ".join(str(state.answer).split()).lower())
        return ("path", tuple(s.action or s.output for s in state.steps))

    # --- the result ------------------------------------------------------------------------------

    def best(self) -> int:
        """A confirmed success if any; else the best judged terminal; else the best-valued node."""
        solved = [i for i, n in enumerate(self.nodes) if n.success]
        if solved:
            return solved[0]
        terminal = [i for i, n in enumerate(self.nodes) if n.terminal]
        pool = terminal or list(range(len(self.nodes)))
        return max(pool, key=lambda i: (self.nodes[i].reward or 0.0, self.nodes[i].value or 0.0,
                                        self.nodes[i].depth, -i))

    async def finish(self, best: int | None = None) -> tuple[Trajectory, Evaluation]:
        """The chosen path in steps/messages, the whole tree in `tree`, all calls in `calls`."""
        traj = self.actor.trajectory
        if self.nodes:
            best = self.best() if best is None else best
            path = self.stepper.trajectory(self.states[best])
            traj.messages, traj.steps, traj.answer = path.messages, path.steps, path.answer
            traj.end_reason, traj.extra = path.end_reason, path.extra
        if self.stopped and not (self.nodes and self.nodes[best].success):
            traj.extra["path_end_reason"] = traj.end_reason
            traj.end_reason = self.stopped
        traj.rollout, traj.tree = self.name, list(self.nodes)
        traj.extra["search"] = {"nodes": len(self.nodes), "reflections": len(self.reflections), "judge": self.judge_by,
                                "failed": sum(n.terminal and not n.success for n in self.nodes),
                                "duplicates": self.duplicates,
                                "replayed_actions": self.stepper.branching.replays,
                                "chosen": self.path(best) if self.nodes else []}
        # the benchmark judges the returned path (once; never again where the search asked it)
        evaluation = self.evaluations.get(best) if self.nodes else None
        return traj, evaluation or await self.episode.evaluate(traj)


async def run_search(search: Search, body) -> tuple[Trajectory, Evaluation]:
    """Start, run `body()`, finish; a budget that refuses even the first calls ends it cleanly."""
    try:
        await search.start()
        await body()
    except BudgetExhausted as stop:
        search.stopped = stop.reason
    except BaseException:  # a model or sandbox failure: the trial's error, with the tree so far
        search.actor.trajectory.rollout, search.actor.trajectory.tree = search.name, list(search.nodes)
        raise
    return await search.finish()
