"""Export a trained encoder for use outside this project.

    python tools.py export --run <run dir | .ckpt | any model reference> --output DIR

writes
- ``DIR/hf``: the backbone and tokenizer (``save_pretrained``), loadable with
  ``AutoModel.from_pretrained`` / ``AutoTokenizer.from_pretrained``; the pooling is not part of
  a Hugging Face model, it is recorded in ``DIR/export.json``;
- ``DIR/sentence-transformers``: a folder ``SentenceTransformer(path)`` loads with the model's
  evaluation pooling: ``mean`` -> Pooling(mean); ``cls_before_pooler`` -> Pooling(cls);
  ``cls`` -> Pooling(cls) + Dense(d, d, Tanh) holding the trained MLP (SimCSE's training pooler).
  The sequence limit is the encoder's ``max_length`` (32 for the papers' training) unless
  ``--max-seq-length`` says otherwise. No Normalize module is added: embeddings are the same
  vectors the project evaluates.
- from a clustering run (and without ``--pooling``): the run's ``kmeans_centroids.npy``, its ``.json``
  and ``clusters.json`` inside ``DIR/sentence-transformers``, for ``python tools.py predict``.
- from a run folder: a model card, ``README.md`` in both folders (``evaluation.model_io.model_card``).

``--push-to-hub <repo id>`` then uploads the sentence-transformers folder to the Hugging Face Hub; without
credentials or network it stops before uploading, with one message, the folder written. ``--dry-run``
writes the folders and the card only.
"""

from __future__ import annotations

import json
from pathlib import Path

from textcore import run_folder
from textcore.errors import ConfigError, UserError

ST_POOLING = {"mean": "mean", "cls_before_pooler": "cls", "cls": "cls"}


class HubUploadError(UserError):
    """The Hub cannot be reached or the user is not logged in; the exported folder stays on disk."""


def write_cards(run_ref: str | Path, info: dict, repo_id: str | None) -> list[str]:
    """The model card of a run folder (or of a checkpoint inside one) in both exported folders."""
    from evaluation.model_io.model_card import build_card

    run = _run_of(run_ref)
    if run is None or not run.results_file.is_file() or not run.config_file.is_file():
        return []
    card = build_card(run.path, repo_id)
    written = []
    for folder in (info["sentence_transformers"], info["hf"]):
        (Path(folder) / "README.md").write_text(card)
        written.append(str(Path(folder) / "README.md"))
    return written


def upload_to_hub(folder: str | Path, repo_id: str) -> str:
    """Upload ``folder`` to the model repository ``repo_id`` (created if needed); the checks come first."""
    import os

    from huggingface_hub import HfApi, get_token

    later = f"`hf upload {repo_id} {folder}` uploads it later."
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        raise HubUploadError(f"--push-to-hub {repo_id}: HF_HUB_OFFLINE is set, so nothing was uploaded; the model "
                             f"and its card are in {folder}. {later}")
    token = get_token()
    if not token:
        raise HubUploadError(f"--push-to-hub {repo_id}: no Hugging Face credentials (run `hf auth login` or "
                             f"set HF_TOKEN), so nothing was uploaded; the model and its card are in {folder}. {later}")
    api = HfApi(token=token)
    try:
        api.whoami()
    except Exception as err:  # noqa: BLE001 - no network, a revoked token: one message, the folder kept
        raise HubUploadError(f"--push-to-hub {repo_id}: the Hub cannot be reached ({type(err).__name__}), so "
                             f"nothing was uploaded; the model and its card are in {folder}. {later}") from None
    api.create_repo(repo_id, exist_ok=True)
    return api.upload_folder(repo_id=repo_id, folder_path=str(folder)).commit_url


def export_encoder(
    encoder, pooling: str, out_dir: str | Path, max_seq_length: int | None = None, source: str = ""
) -> dict:
    """Write ``out_dir/hf`` and ``out_dir/sentence-transformers`` for a ``TextEncoder``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling, Transformer
    from torch import nn

    if getattr(encoder, "prompt", None) is not None and pooling.startswith("prompt"):
        raise ConfigError(
            f"this model embeds a text by the [MASK] state of a template (pooling '{pooling}', PromptBERT), which a "
            "sentence-transformers folder cannot express; evaluate it from its run folder or checkpoint "
            "(python tools.py evaluate --model <run>), or export another pooling with "
             "--pooling mean"
        )
    if pooling not in ST_POOLING:
        raise ConfigError(f"--pooling must be one of {sorted(ST_POOLING)}, got '{pooling}'")
    if pooling == "cls" and encoder.mlp is None:
        raise ConfigError("--pooling cls needs the encoder's MLP, but this encoder was not trained with cls pooling")
    out_dir = Path(out_dir)
    hf_dir, st_dir = out_dir / "hf", out_dir / "sentence-transformers"
    hf_dir.mkdir(parents=True, exist_ok=True)
    encoder.backbone.save_pretrained(hf_dir)
    encoder.tokenizer.save_pretrained(hf_dir)

    length = max_seq_length or encoder.max_length
    modules: list[nn.Module] = [
        Transformer(str(hf_dir), max_seq_length=length),
        Pooling(encoder.dim, pooling_mode=ST_POOLING[pooling]),
    ]
    if pooling == "cls":
        linear = encoder.mlp[0]
        modules.append(
            Dense(
                encoder.dim,
                encoder.dim,
                bias=True,
                activation_function=nn.Tanh(),
                init_weight=linear.weight.detach().clone(),
                init_bias=linear.bias.detach().clone(),
            )
        )
    SentenceTransformer(modules=modules, device="cpu").save(str(st_dir))
    info = {
        "source": source,
        "pooling": pooling,
        "sentence_transformers_modules": [type(m).__name__ for m in modules],
        "max_seq_length": length,
        "dim": encoder.dim,
        "hf": str(hf_dir),
        "sentence_transformers": str(st_dir),
    }
    (out_dir / "export.json").write_text(json.dumps(info, indent=2))
    return info


def _run_of(model_ref: str | Path) -> run_folder.RunFolder | None:
    """The run folder ``model_ref`` is or whose checkpoint it is, or None."""
    ref = Path(model_ref)
    return run_folder.RunFolder.of_checkpoint(ref) if ref.suffix == ".ckpt" else run_folder.RunFolder(ref)


def export(
    model_ref: str | Path, out_dir: str | Path, pooling: str | None = None, max_seq_length: int | None = None,
    trust_checkpoint: bool = False,
) -> dict:
    """Load ``model_ref`` with ``evaluation.model_io.load.load_encoder`` and export it. ``trust_checkpoint``: the
    user's opt-in for a checkpoint holding more than tensors and plain values."""
    from evaluation.model_io.load import load_encoder

    encoder, eval_pooling = load_encoder(model_ref, pooling, trust_checkpoint)
    info = export_encoder(encoder, eval_pooling, out_dir, max_seq_length, source=str(model_ref))
    if pooling is None:  # the centroids live in the space of the run's own evaluation pooling
        copied = copy_cluster_files(model_ref, Path(info["sentence_transformers"]))
        if copied:
            info["cluster_files"] = copied
            (Path(out_dir) / "export.json").write_text(json.dumps(info, indent=2))
    return info


def copy_cluster_files(model_ref: str | Path, st_dir: Path) -> list[str]:
    """A run's final KMeans centroids and cluster descriptions (``callbacks.evaluation.run_report``), copied into the
    sentence-transformers folder so that ``evaluation.model_io.predict --run <that folder>`` can assign new texts."""
    import shutil

    from evaluation.model_io import run_files

    run = _run_of(model_ref)
    if run is None:
        return []
    run_dir = run.path
    names = [run_files.CENTROIDS, run_files.CENTROIDS_META, run_files.CLUSTERS_JSON]
    copied = []
    for name in names if run.has(run_folder.CENTRES) else []:
        if (run_dir / name).is_file():
            shutil.copyfile(run_dir / name, st_dir / name)
            copied.append(str(st_dir / name))
    from textcore.cluster_space import FOLDER

    if copied and (run_dir / FOLDER).is_dir():  # cluster_space=umap: the centroids are in this map's coordinates
        shutil.copytree(run_dir / FOLDER, st_dir / FOLDER, dirs_exist_ok=True)
        copied.append(str(st_dir / FOLDER))
    return copied


def export_model(*, run: str, output: Path, pooling: str | None, max_seq_length: int | None, push_to_hub: str | None,
                 dry_run: bool, trust_checkpoint: bool) -> dict:
    """``python tools.py export`` (its options, ctclust.commands.export): the encoder's folders and model card in
    ``output``, ``export.json`` beside them, and the upload to ``push_to_hub`` unless ``dry_run``."""
    info = export(run, output, pooling, max_seq_length, trust_checkpoint)
    cards = write_cards(run, info, push_to_hub)
    if cards:
        info["model_card"] = cards
    (Path(output) / "export.json").write_text(json.dumps(info, indent=2))
    if push_to_hub and not dry_run:
        info["hub_commit"] = upload_to_hub(info["sentence_transformers"], push_to_hub)
    print(json.dumps(info, indent=2))
    return info

