"""``dataset.num_clusters=auto``: K chosen from the training texts, without labels, before training."""
from __future__ import annotations

import json
import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from textcore.errors import writing

log = logging.getLogger(__name__)


def choose_k_settings(cfg: DictConfig) -> DictConfig:
    """The run's ``choose_k`` section over conf/config.yaml's (where its defaults are set): a configuration
    composed without the section, or with part of it, scans as the default one does."""
    from evaluation.clustering.choose_k import conf_defaults

    return OmegaConf.merge(conf_defaults(), cfg.get("choose_k") or {})


def resolve_auto_clusters(cfg: DictConfig, datamodule, output_dir: Path) -> dict | None:
    """K for a datamodule that asks for ``auto`` (None for any other): set on the datamodule, and returned as
    results.json's ``num_clusters_choice``.

    The texts are embedded by the untrained backbone with the method's pooling and the run's token
    limit, and ``evaluation.clustering.choose_k`` scans ``choose_k.k`` under ``choose_k.rule``, in the run's clustering
    space (``cluster_space``: with a UMAP, K is chosen among the UMAP's clusters, where the run's KMeans will be).
    The choice is kept in ``<run>/choose_k/choose_k.json``, so a resumed run reuses it instead of choosing again.
    """
    if getattr(datamodule, "requested_clusters", None) != "auto":
        return None
    from evaluation.clustering.choose_k import choose_k, scan_rows, write_outputs
    from textcore.cluster_space import settings_of
    from textcore.device_settings import OUTSIDE_TRAINING
    from textcore.encoding.encoder import EncoderSettings, TextEncoder

    folder = output_dir / "choose_k"
    saved = folder / "choose_k.json"
    if saved.is_file():
        result = json.loads(saved.read_text())
        log.info("num_clusters=auto: K=%d, as chosen before (%s)", result["recommended"]["k"], saved)
    else:
        settings = choose_k_settings(cfg)
        pooling = cfg.method.get("pooling") or "mean"
        # embedded and clustered on the CPU before training, as the evaluation tools do
        encoder = TextEncoder.from_name(cfg.backbone.name, EncoderSettings.outside_training(
            pooling, int(cfg.max_length))).eval()
        texts = datamodule.texts
        keep = scan_rows(len(texts), int(settings.max_texts))
        if keep is not None:  # the scan's seeded sample is all that is embedded
            texts = [texts[i] for i in keep]
        log.info("num_clusters=auto: embedding %d texts with the untrained %s and scanning K=%s",
                 len(texts), cfg.backbone.name, settings.k)
        embeddings = encoder.encode(texts, batch_size=128).numpy()
        result = choose_k(embeddings, settings.k, int(settings.kmeans_runs), settings.rule,
                          int(settings.silhouette_sample), kmeans_backend=OUTSIDE_TRAINING["kmeans_backend"],
                          log=log.info, max_texts=int(settings.max_texts), space=settings_of(cfg),
                          seed=int(cfg.get("seed") or 0))
        with writing(saved):
            write_outputs(result, folder, f"{cfg.dataset.name} ({cfg.backbone.name}, before training)")
    datamodule.requested_clusters = int(result["recommended"]["k"])
    rec = result["recommended"]
    log.info("num_clusters=auto: K=%d (%s); HDBSCAN found %s clusters", rec["k"], rec["rule_text"],
             result["hdbscan"].get("clusters"))
    return {"k": rec["k"], "rule": rec["rule"], "rule_text": rec["rule_text"], "ks": result["ks"],
            "hdbscan_clusters": result["hdbscan"].get("clusters"), "details": str(saved)}
