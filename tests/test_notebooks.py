"""Every notebook in notebooks/ runs top to bottom (nbclient) with small injected parameters.

The injected cell goes right after the cell tagged `parameters`, as papermill does, so the
notebook's own defaults stay what a researcher sees. The scripted model keeps this offline and
fast; one HotpotQA question is answered right only after a reflection, so the trajectory and
reflection cells have something to show.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, write_script

# One notebook per agent type, and Search (rollouts compared on GSM8K); each has a `parameters`
# cell. (Distillation.ipynb is configured through the environment instead and runs in
# tests/test_distil.py.)
EXPECTED = ("ReAct", "CoT_context", "CoT_no_context", "Programming", "ALFWorld", "Search")
NOTEBOOKS = [ROOT / "notebooks" / f"{name}.ipynb" for name in EXPECTED]

ACTOR_RULES = [
    # After a reflection the first question is answered right: the story cell shows a fix.
    {"when": "(?s)^(?=.*lessons you wrote down)(?=.*VIVA Media AG changed)",
     "reply": "Thought: The lesson says to read the paragraph.\nAction: Finish[Gesellschaft mit beschränkter Haftung]"},
    # Search.ipynb (GSM8K test/0, gold 18): right after the multi-turn feedback or a reflection.
    {"when": "(?s)^(?=.*(?:Unfortunately your answer is wrong|lessons you wrote down))(?=.*Janet’s ducks)",
     "reply": "Thought: 16 - 3 - 4 = 9 eggs, 9 * 2 = 18 dollars.\nAction: Finish[18]"},
]
REFLECTOR_RULES = [{"when": ".", "reply": "I answered without reading the context. Next time I will quote it."}]


def test_every_agent_type_has_a_notebook():
    missing = [p.name for p in NOTEBOOKS if not p.is_file()]
    assert not missing


def _benchmark_available(name: str) -> str | None:
    """None when the notebook's benchmark can run here, else why not."""
    import reinagent
    from reinagent.errors import ReinagentError

    try:
        bench = reinagent.make(name)
        bench.load_tasks(bench.default_split)[:1]
    except (ReinagentError, ImportError, OSError) as err:
        return str(err)
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
    namespace: dict = {}
    exec(nb.cells[tagged[0]].source, namespace)  # the defaults: every name the notebook may read
    assert {"model", "strategy", "num_trials", "num_envs"} <= set(namespace), path.name
    benchmark = namespace.get("benchmark", "hotpotqa")
    why = _benchmark_available(benchmark)
    if why:
        pytest.skip(f"benchmark {benchmark!r} is not available here: {why}")

    _inject_scripted_parameters(nb, tagged[0], path.stem, tmp_path)
    client = NotebookClient(nb, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the failing cell
    _check_outputs(nb, benchmark)


def test_jupyter_commands_from_the_readme(tmp_path):
    """`jupyter nbconvert --execute` (the README's command) runs a notebook; `jupyter lab` exists."""
    import subprocess
    import sys

    import nbformat

    jupyter = Path(sys.executable).with_name("jupyter")
    assert jupyter.is_file(), "the notebooks extra must install JupyterLab and nbconvert"
    lab = subprocess.run([str(jupyter), "lab", "--version"], capture_output=True, text=True, timeout=120)
    assert lab.returncode == 0 and lab.stdout.strip()[:1].isdigit(), lab.stderr
    source = ROOT / "notebooks" / "CoT_context.ipynb"
    nb = nbformat.read(source, as_version=4)
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    _inject_scripted_parameters(nb, tagged[0], source.stem, tmp_path)
    copy = tmp_path / source.name
    nbformat.write(nb, copy)
    proc = subprocess.run([str(jupyter), "nbconvert", "--to", "notebook", "--execute", str(copy),
                           "--output", "executed.ipynb", "--ExecutePreprocessor.timeout=240"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _check_outputs(nbformat.read(tmp_path / "executed.ipynb", as_version=4), "hotpotqa")


def _inject_scripted_parameters(nb, after: int, name: str, tmp_path: Path) -> None:
    """A cell after the `parameters` cell that points the notebook at scripted models (papermill's way)."""
    import nbformat

    actor = write_script(tmp_path / "actor.yaml", ACTOR_RULES)
    reflector = write_script(tmp_path / "reflector.yaml", REFLECTOR_RULES)
    overrides = {"model": actor, "reflector_model": reflector, "strategy": "reflexion",
                 "num_trials": 2, "num_envs": 2, "run_dir": str(tmp_path / "runs" / name)}
    injected = nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in overrides.items()),
                                         metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(after + 1, injected)


def _check_outputs(nb, benchmark: str) -> None:
    outputs = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    assert "success rate [95% CI]" in outputs  # the report table
    assert "image/png" in {k for c in nb.cells if c.cell_type == "code" for o in c.outputs for k in o.get("data", {})}
    assert "=== trial 1:" in outputs  # one task's trajectory
    if benchmark == "hotpotqa":
        assert "reflection written: I answered without reading the context" in outputs
        assert "=== trial 2: solved" in outputs
    if benchmark == "gsm8k":  # Search.ipynb: multi-turn solves test/0 on turn 2, from the feedback
        assert "turn 2: answer '18', right: True" in outputs
        assert all(f"\n{name} " in outputs for name in ("react", "tot", "mcts", "multi-turn"))  # table rows


def _text(cell) -> str:
    parts = []
    for out in cell.outputs:
        if "text" in out:
            parts.append(out["text"])
        for key in ("text/markdown", "text/plain"):
            if key in out.get("data", {}):
                parts.append(out["data"][key])
    return "\n".join(parts)


@pytest.mark.slow
def test_rl_notebook_runs(tmp_path):
    """notebooks/RL.ipynb (run, evaluate, train, evaluate) with a tiny random model and two GRPO
    steps; its defaults (the embedded model, 20 steps) are what a researcher runs."""
    pytest.importorskip("transformers")
    import nbformat
    import torch
    from nbclient import NotebookClient
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from reinagent.distil.train import resolve_base_model

    base = resolve_base_model("local")
    config = AutoConfig.from_pretrained(base)
    config.update({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "tiny")
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp_path / "tiny")

    nb = nbformat.read(ROOT / "notebooks" / "RL.ipynb", as_version=4)
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    overrides = {"model": f"local:{tmp_path / 'tiny'}", "max_steps": 2, "batch_size": 2, "group_size": 2,
                 "eval_tasks": 4, "max_response_length": 4, "output_dir": str(tmp_path / "out")}
    nb.cells.insert(tagged[0] + 1, nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in overrides.items()),
                                                              metadata={"tags": ["injected-parameters"]}))
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    assert "reward:" in outputs and "before: test" in outputs and ": success " in outputs and "checkpoint: " in outputs
    assert "image/png" in {k for c in nb.cells if c.cell_type == "code" for o in c.outputs for k in o.get("data", {})}
    assert (tmp_path / "out" / "checkpoint" / "rl.json").is_file()
