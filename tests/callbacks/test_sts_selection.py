"""STS-B dev model selection (callbacks/evaluation/sts_selection.py): early-stopping rule, callback
bookkeeping without a Trainer, state, the STS encode helper and the --checkpoint CLI."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from callbacks.evaluation.sts_selection import StsSelection, selection_update
from tests.helpers.speed import CHUNKS


def run_rule(scores, patience, min_delta=0.0):
    best, bad, out = None, 0, []
    for s in scores:
        d = selection_update(best, bad, s, patience, min_delta)
        best, bad = d.best, d.bad_count
        out.append((d.improved, d.bad_count, d.stop))
    return best, out


def test_patience_counts_evaluations_without_gain_and_resets_on_gain():
    best, out = run_rule([0.50, 0.60, 0.55, 0.58, 0.61, 0.40, 0.41, 0.42], patience=3)
    assert best == 0.61
    assert out == [(True, 0, False), (True, 0, False), (False, 1, False), (False, 2, False),
                   (True, 0, False), (False, 1, False), (False, 2, False), (False, 3, True)]


def test_equal_score_is_no_gain_and_min_delta_is_required():
    _, out = run_rule([0.5, 0.5], patience=1)
    assert out[1] == (False, 1, True)
    _, out = run_rule([0.5, 0.505, 0.52], patience=5, min_delta=0.01)
    assert [o[0] for o in out] == [True, False, True]


def test_nan_never_improves_and_zero_patience_never_stops():
    best, out = run_rule([float("nan"), 0.3, float("nan")], patience=0)
    assert best == 0.3 and [o[0] for o in out] == [False, True, False] and not any(o[2] for o in out)
    _, out = run_rule([0.3] + [0.1] * 20, patience=None)
    assert not any(o[2] for o in out)


class FakeStrategy:
    def broadcast(self, obj, src=0):
        return obj


class FakeLogger:
    def __init__(self):
        self.logged = []

    def log_metrics(self, metrics, step):
        self.logged.append((step, metrics))


def fake_trainer():
    trainer = SimpleNamespace(global_step=0, is_global_zero=True, strategy=FakeStrategy(), loggers=[FakeLogger()],
                              callback_metrics={}, should_stop=False, saved=[])
    trainer.save_checkpoint = lambda path, weights_only=False: trainer.saved.append((trainer.global_step, path))
    return trainer


def test_callback_keeps_best_saves_on_gain_and_stops(tmp_path, monkeypatch):
    scores = iter([0.50, 0.60, 0.55, 0.58, 0.59, 0.70])
    callback = StsSelection(data_dir=str(tmp_path), every_n_steps=10, patience=3, output_dir=str(tmp_path))
    monkeypatch.setattr(callback, "score", lambda trainer, module: next(scores))
    trainer = fake_trainer()
    for step in range(1, 60):
        trainer.global_step = step
        callback.on_train_batch_end(trainer, None, None, None, step)
        if trainer.should_stop:
            break
    assert trainer.global_step == 50 and callback.stopped_step == 50  # 3 evaluations after the best at 20
    assert callback.best_score == 0.60 and callback.best_step == 20
    assert [s for s, _ in trainer.saved] == [10, 20]
    assert trainer.saved[0][1] == tmp_path / "checkpoints" / "best.ckpt"
    assert trainer.loggers[0].logged[-1] == (50, {"val/stsb_spearman": 0.59})
    summary = callback.summary()
    assert summary["best_step"] == 20 and summary["early_stopped_at"] == 50 and len(summary["history"]) == 5
    callback.on_train_end(trainer, None)  # the stopping step was evaluated: no second evaluation
    assert len(callback.history) == 5

    restored = StsSelection(data_dir=str(tmp_path), every_n_steps=10, patience=3)
    restored.load_state_dict(callback.state_dict())
    assert (restored.best_score, restored.best_step, restored.bad_count) == (0.60, 20, 3)
    assert restored.history == callback.history


def test_last_step_is_evaluated_at_the_end(tmp_path, monkeypatch):
    callback = StsSelection(data_dir=str(tmp_path), every_n_steps=10, patience=3, output_dir=None)
    monkeypatch.setattr(callback, "score", lambda trainer, module: 0.1 * trainer.global_step)
    trainer = fake_trainer()
    for step in range(1, 16):
        trainer.global_step = step
        callback.on_train_batch_end(trainer, None, None, None, step)
    callback.on_train_end(trainer, None)
    assert [h["step"] for h in callback.history] == [10, 15] and callback.best_step == 15
    assert trainer.saved == []  # no output_dir: nothing saved


def test_missing_dev_file_fails_at_fit_start(tmp_path):
    with pytest.raises(FileNotFoundError, match="sts_data_dir"):
        StsSelection(data_dir=str(tmp_path)).on_fit_start(None, None)


# -------------------------------------------------------------------------------------- encode helper, CLI


class RecordingEncoder:
    """Stands in for TextEncoder: records the truncation and pooling of each encode call."""

    def __init__(self):
        self.tokenizer = SimpleNamespace(model_max_length=512)
        self.backbone = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=128))
        self.max_length = 32
        self.calls = []

    def encode(self, texts, batch_size=128, pooling=None):
        self.calls.append((self.max_length, pooling, batch_size))
        return np.zeros((len(texts), 2))


def test_encode_fn_uses_backbone_limit_and_restores_training_truncation():
    from evaluation.benchmarks.sts import encoder_encode_fn

    enc = RecordingEncoder()
    encoder_encode_fn(enc, "cls_before_pooler", 16)(["a", "b"])
    encoder_encode_fn(enc, "mean", 16, max_length=64)(["a"])
    assert enc.calls == [(128, "cls_before_pooler", 16), (64, "mean", 16)]
    assert enc.max_length == 32


def test_cli_evaluates_a_lightning_checkpoint_with_its_eval_pooling(tmp_path):
    from ctclust.commands.sts import main
    from lightning_modules.simcse.module import SimCSE

    module = SimCSE(backbone="tiny", chunk_tokens=CHUNKS)
    with torch.no_grad():  # weights the fresh tiny backbone does not have
        module.encoder.backbone.embeddings.word_embeddings.weight.mul_(3.0)
    path = tmp_path / "m.ckpt"
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}, path)
    folder = tmp_path / "STS" / "STSBenchmark"
    folder.mkdir(parents=True)
    s1 = [f"the cat {i} sat" for i in range(10)]
    s2 = [f"a dog {i * 3 % 7} ran far" for i in range(10)]
    gold = [float(i % 4) for i in range(10)]
    (folder / "sts-test.csv").write_text("".join(f"g\tf\ty\t{i}\t{gold[i]}\t{s1[i]}\t{s2[i]}\n" for i in range(10)))

    out = tmp_path / "o"
    results = main(["--checkpoint", str(path), "--data-dir", str(tmp_path), "--tasks", "STSB", "--output", str(out)])
    module.encoder.max_length = 128  # the tiny backbone's position limit
    e1 = module.encoder.encode(s1, pooling="cls_before_pooler")
    e2 = module.encoder.encode(s2, pooling="cls_before_pooler")
    expected = spearmanr(torch.nn.functional.cosine_similarity(e1, e2).numpy(), gold).statistic
    assert results["avg"] == pytest.approx(expected, abs=1e-9) and math.isfinite(expected)
    assert "(cls_before_pooler)" in (tmp_path / "o" / "sts.md").read_text()


def test_cli_rejects_a_checkpoint_without_hyper_parameters(tmp_path, capsys):
    from ctclust.commands.sts import main

    path = tmp_path / "bad.ckpt"
    torch.save({"state_dict": {}}, path)
    with pytest.raises(SystemExit) as stopped:  # a user error: one line on stderr, exit 2
        main(["--checkpoint", str(path), "--data-dir", str(tmp_path)])
    assert stopped.value.code == 2 and "'backbone' hyper-parameter" in capsys.readouterr().err
