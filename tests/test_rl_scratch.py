"""A killed `rl train` left its copies of the policy (517 MB for the embedded model) in the
system's temporary folder (issue 45): they now live in the output directory's scratch folder."""

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
