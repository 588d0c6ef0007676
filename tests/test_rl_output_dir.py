"""`rl train`'s output directory (issue 45): a killed run left its copies of the policy (517 MB
for the embedded model) in the system's temporary folder, now in the output directory's scratch
folder; docs/learning.md's `rl run` then `rl train` with one config was refused (the run
directory of `rl run` filled output_dir), and only after loading the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_rl import tiny_model  # noqa: F401 - the fixture


@pytest.mark.slow
def test_the_policys_copies_go_to_the_output_dir_not_the_temp_dir(tiny_model, tmp_path, monkeypatch):
    """Was: the OpenVINO rollouts' copy of the policy (517 MB for the embedded model) went to a
    TemporaryDirectory in /tmp, which a killed `rl train` left behind. The engine is replaced by
    one that records its folder and fails on first use, as a run killed mid-step stops."""
    import tempfile

    from reinagent.rl import ov_rollout
    from reinagent.rl.agent import RLAgent
    from reinagent.rl.loop import SCRATCH
    from reinagent.rl.policy import load_policy

    system_tmp = tmp_path / "tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    folders: list[Path] = []

    class Recording:
        version = None

        def __init__(self, tokenizer, max_batch=32, workdir=None):
            folders.append(Path(workdir) if workdir else Path(tempfile.mkdtemp()))
            folders[-1].mkdir(parents=True, exist_ok=True)
            (folders[-1] / "policy.gguf").write_bytes(b"GGUF")

        def generate(self, *args, **kwargs):
            raise RuntimeError("killed mid-step")

        def close(self):
            pass

    monkeypatch.setattr(ov_rollout, "OpenVINORollouts", Recording)
    monkeypatch.setattr(ov_rollout, "check_engine", lambda *a: None)
    model, tokenizer = load_policy(f"local:{tiny_model}")
    out = tmp_path / "out"
    agent = RLAgent(model=model, tokenizer=tokenizer, env_name="arithmetic", max_turns=1, max_response_length=4,
                    num_tasks=2, batch_size=2, group_size=2, max_steps=1, threads=1, trainer="trl",
                    rollout_engine="openvino", output_dir=str(out))
    with pytest.raises(RuntimeError, match="killed mid-step"):
        agent.train()
    assert folders == [out / SCRATCH / "openvino"]
    assert list(system_tmp.iterdir()) == [] and not (out / SCRATCH).exists()


def _plain_agent(tmp_path, **extra):
    from reinagent.rl.agent import RLAgent

    settings = dict(env_name="arithmetic", model="local", max_turns=1, max_response_length=4, num_tasks=2,
                    batch_size=2, group_size=2, max_steps=1, threads=1, output_dir=str(tmp_path / "out"))
    return RLAgent(**{**settings, **extra})


def test_a_refusal_comes_before_the_model_loads(tmp_path, monkeypatch):
    """Was: `rl train` loaded the model (29 s), then refused the output_dir."""
    from reinagent.errors import ConfigError
    from reinagent.rl import agent as agent_module

    def never(*args, **kwargs):
        raise AssertionError("the policy was loaded before the output_dir was checked")

    monkeypatch.setattr(agent_module, "load_policy", never)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="notes.txt.*overwrite = true"):
        _plain_agent(tmp_path).train()
    from tests.test_report import COMPLETE, make_run

    (tmp_path / "out" / "notes.txt").unlink()
    make_run(tmp_path / "out" / "rollouts", COMPLETE)  # a training run of our own loop: it cannot resume
    with pytest.raises(ConfigError, match="trainer 'reinagent' trains with reinagent's own loop, which cannot resume"):
        _plain_agent(tmp_path, trainer="reinagent").train()


@pytest.mark.slow
def test_rl_train_after_rl_run_in_the_same_output_dir(tiny_model, tmp_path):
    """docs/learning.md's order: `rl run` writes a run directory into output_dir, then `rl train`
    with the same config trains beside it (was: "output_dir exists and is not empty"); a rerun
    with overwrite replaces the training run and keeps the episodes of `rl run`."""
    from tests.conftest import run_cli
    from tests.test_report import COMPLETE, make_run
    from tests.test_rl import _toml

    episodes = make_run(tmp_path / "out" / "arithmetic-react-20261129-080000", COMPLETE)  # what `rl run` leaves
    config = _toml(tmp_path, f"local:{tiny_model}", max_steps=1, trainer="trl")
    first = run_cli("rl", "train", "--config", str(config))
    assert first.returncode == 0, first.stderr[-3000:]
    assert (tmp_path / "out" / "checkpoint").is_dir() and (episodes / "spec.json").is_file()
    again = run_cli("rl", "train", "--config", str(config), "--overwrite")
    assert again.returncode == 0, again.stderr[-3000:]
    assert (episodes / "records.jsonl").is_file() and (tmp_path / "out" / "checkpoint").is_dir()
