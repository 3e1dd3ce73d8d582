"""W&B works without an account: an offline run that `wandb sync` can upload later."""
from ctclust.training.train import train
from evaluation.across_runs.wandb_dashboard import has_wandb_credentials
from tests.helpers import compose_config, toy_overrides


def test_wandb_without_key_logs_offline(toy_corpus, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    assert not has_wandb_credentials()
    out = tmp_path / "run"
    train(compose_config(toy_overrides(toy_corpus, steps=2) + ["logger=wandb"], out))
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].glob("*.wandb"))
    assert max(f.stat().st_size for f in runs[0].glob("*.wandb")) > 0


def test_credentials_detected_from_key(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert has_wandb_credentials()
