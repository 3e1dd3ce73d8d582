"""2. The files a run reads and writes: its corpus (from the download catalogue, or the dataset's sample
when asked) and its output folder."""
from __future__ import annotations

import tempfile
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from textcore.errors import ConfigError, MissingFileError, OutputWriteError
from textcore.run_folder import folder_problem
from validation.lookup import (
    chosen_name,
    select,
)


def corpus_path(cfg: DictConfig) -> tuple[Path | None, str]:
    """The file the dataset reads and the key that names it (``dataset.path``, or ``data_dir`` + ``dataset.file``)."""
    path = select(cfg, "dataset.path")
    if path:
        return Path(str(path)), "dataset.path"
    file, folder = select(cfg, "dataset.file"), select(cfg, "dataset.data_dir")
    if file and folder:
        return Path(str(folder)) / str(file), "dataset.file"
    return None, "dataset.file"


def check_corpus(cfg: DictConfig) -> dict | None:
    """A run trains on its corpus, or on a sample only when asked; what results.json records about a sample.

    ``dataset.sample=true`` merges ``dataset.sample_settings`` into ``dataset`` (the stand-in the dataset
    config names) and returns what was read instead of what. Otherwise a file of the download catalogue
    (``datamodules/download/catalogue.py``) that is not there stops the run with one line naming it, its
    URL and the command that fetches it, before anything is loaded.
    """
    from datamodules.download import catalogue

    corpus, key = corpus_path(cfg)
    if bool(select(cfg, "dataset.sample", False)):
        settings = select(cfg, "dataset.sample_settings")
        if not settings:
            raise ConfigError(f"dataset.sample=true, but dataset={chosen_name(cfg, 'dataset')} names no sample "
                              "(dataset.sample_settings); drop dataset.sample or point the dataset at a smaller file.")
        with open_dict(cfg):
            cfg.dataset = OmegaConf.merge(cfg.dataset, settings)
        read, _ = corpus_path(cfg)
        return {"file": str(read), "instead_of": str(corpus) if corpus else None}
    item = catalogue.for_file(corpus) if corpus is not None else None
    if item is None:
        return None
    if not corpus.exists():
        dest = catalogue.dest_of(corpus, item)
        stand_in = "; or train on its sample with dataset.sample=true" if select(cfg, "dataset.sample_settings") \
            else ""
        raise MissingFileError(
            f"{key}: '{corpus}' is missing ({item.what.split(' (')[0].split(':')[0]}; from "
            f"{', '.join(catalogue.origins(item))}). "
            f"Get it with `{catalogue.download_command(item, dest)}` (or put the file there){stand_in}.")
    return {"file": str(corpus), "instead_of": None} if item.sample else None


def check_output_dir(cfg: DictConfig) -> Path | None:
    """The run folder exists (or is created) and a file can be written in it."""
    try:
        folder = select(cfg, "paths.output_dir")
    except Exception:  # noqa: BLE001 - ${hydra:...} outside a Hydra run: nothing to check
        return None
    if not folder:
        return None
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as err:
        reason = folder_problem(folder)
        raise OutputWriteError(
            f"the run folder '{folder}' cannot be written ({reason or err.strerror or err}). Point the run at a "
            "writable folder with `hydra.run.dir=<folder>` (or `paths.log_dir=<folder>` for all runs)."
        ) from None
    return folder
