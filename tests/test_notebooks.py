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

# One notebook per agent type; each has a `parameters` cell. (Distillation.ipynb is configured
# through the environment instead and runs in tests/test_distil.py.)
EXPECTED = ("ReAct", "CoT_context", "CoT_no_context", "Programming", "ALFWorld")
NOTEBOOKS = [ROOT / "notebooks" / f"{name}.ipynb" for name in EXPECTED]

ACTOR_RULES = [
    # After a reflection the first question is answered right: the story cell shows a fix.
    {"when": "(?s)^(?=.*lessons you wrote down)(?=.*VIVA Media AG changed)",
     "reply": "Thought: The lesson says to read the paragraph.\nAction: Finish[Gesellschaft mit beschränkter Haftung]"},
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


def _text(cell) -> str:
    parts = []
    for out in cell.outputs:
        if "text" in out:
            parts.append(out["text"])
        for key in ("text/markdown", "text/plain"):
            if key in out.get("data", {}):
                parts.append(out["data"][key])
    return "\n".join(parts)
