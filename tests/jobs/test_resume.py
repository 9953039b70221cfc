"""What a job cut by its deadline reports of its runs: where each training checkpoint stands."""

import pytest
import torch

from rt_lib.jobs.resume import main, where_runs_stand
from rt_lib.model import TransformerConfig, build_model
from rt_lib.tasks import modular_addition
from rt_lib.training.train import TrainConfig, train


def _run(path, steps=6, hook=None):
    task = modular_addition(7, train_fraction=0.8, split_seed=0)
    model = build_model(TransformerConfig(d_vocab=7, n_ctx=2, d_model=16, n_heads=4), 0)
    cfg = TrainConfig(steps=steps, batch_size=8, lr=1e-3, weight_decay=0.0, warmup_steps=0,
                      eval_every=2, progress=False, threads=1,
                      checkpoint_path=str(path), checkpoint_every=2)
    return train(model, task, cfg, grad_hook=hook)


def test_each_checkpoint_says_how_far_its_run_got_and_its_last_evaluation(tmp_path, capsys):
    results = tmp_path / "results"
    done = _run(results / "gpu/02_x/resume/abc/random_transformer_d16_r0.pt")

    def cut(model, step):  # the deadline, during step 5: the checkpoint of step 4 stays
        if step == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(results / "gpu/11_y/runs/key1/last.pt", hook=cut)
    broken = results / "gpu/02_x/resume/abc/trained_transformer_d16_r0.pt"
    _run(broken)
    broken.write_bytes(broken.read_bytes()[:100])  # a part that did not come back whole
    (results / "gpu/11_y/runs/key1/snapshots").mkdir()
    torch.save({"W_E": torch.zeros(2)}, results / "gpu/11_y/runs/key1/snapshots/1.pt")  # no run

    rows = {r["run"]: r for r in where_runs_stand(results)}
    assert len(rows) == 3
    first = rows["gpu/02_x/resume/abc/random_transformer_d16_r0.pt"]
    last = done.history.iloc[-1]
    assert (first["step"], first["steps"], first["finished"]) == (6, 6, True)
    assert first["test_acc"] == pytest.approx(last["test_acc"]) and first["seconds"] > 0
    second = rows["gpu/11_y/runs/key1/last.pt"]
    assert (second["step"], second["finished"]) == (4, False)
    assert "unreadable" in rows["gpu/02_x/resume/abc/trained_transformer_d16_r0.pt"]

    assert main([str(results)]) == 0
    out = capsys.readouterr().out
    assert "last.pt: unfinished, step 4 of 6" in out and "r0.pt: finished, step 6 of 6" in out
    assert "trained_transformer_d16_r0.pt: unreadable" in out
    assert main([]) == 2
