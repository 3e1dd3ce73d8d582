"""Composing the project's Hydra config in tests."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

CONF = Path(__file__).resolve().parents[2] / "conf"


def compose_config(overrides: list[str], output_dir: Path | None = None):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        extra = [f"paths.output_dir={output_dir}"] if output_dir is not None else []
        return compose(config_name="config", overrides=overrides + extra)


def toy_overrides(csv: Path, steps: int = 4) -> list[str]:
    """SCCL on a toy CSV with the tiny backbone, a few steps, cheap KMeans."""
    return [
        "backbone=tiny",
        "dataset=csv",
        f"data_dir={csv.parent}",
        f"dataset.file={csv.name}",
        "dataset.text_column=text0",
        "dataset.aug_columns=[text1]",
        "dataset.augmentation=explicit",
        "batch_size=8",
        f"trainer.max_steps={steps}",
        "trainer.max_epochs=-1",  # steps alone, as many epochs of the toy as they take
        "trainer.enable_progress_bar=false",
        "trainer.log_every_n_steps=1",
        "trainer.enable_model_summary=false",
        "~callbacks.progress",
        "dataset.callbacks.clustering_eval.every_n_steps=2",
        "dataset.callbacks.clustering_eval.kmeans_n_init=2",
        "method.callbacks.centroid_init.n_init=2",
        "print_table=false",
        # pictures cost ~2 s a run; tests/evaluation/run_report/test_run_report.py covers them
        "callbacks.report.plots=false",
    ]


def load_script(name: str):
    """A module of scripts/ by its path there without ``.py``, e.g. ``load_script("studies/fidelity_runs")``;
    a bare file name is looked up in scripts/'s folders (``load_script("fidelity_runs")``)."""
    scripts = CONF.parent / "scripts"
    if "/" in name:
        path = scripts / f"{name}.py"
    else:
        [path] = scripts.glob(f"*/{name}.py")
    name = "scripts_" + str(path.relative_to(scripts).with_suffix("")).replace("/", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def write_wiki_and_stsb(folder: Path) -> tuple[Path, Path]:
    """A 40-line sentence file and a SentEval folder with STS-B dev and test of 12 pairs each: what a few
    steps of SimCSE / ClusterNS / PromptBERT read. Returns (sentence file, SentEval 'downstream' folder)."""
    wiki = folder / "wiki.txt"
    wiki.write_text("".join(f"sentence number {i} about topic {i % 3}\n" for i in range(40)))
    stsb = folder / "sts" / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    for split in ("dev", "test"):
        rows = [f"g\tf\ty\t{i}\t{i % 5}.0\ta cat number {i}\ta dog number {i * 7 % 11}" for i in range(12)]
        (stsb / f"sts-{split}.csv").write_text("\n".join(rows) + "\n")
    return wiki, folder / "sts"
