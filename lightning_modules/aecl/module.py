"""AECL: Attention-Enhanced Contrastive Learning for short text clustering (2025; docs/methods/aecl.md)."""
from __future__ import annotations

import torch
from lightning.pytorch.utilities import rank_zero_warn
from torch import nn

from lightning_modules.aecl.attention import ATTENTION_FORMS, SampleAttention, build_attention
from lightning_modules.aecl.losses import (
    INSTANCE_LOSS_FORMS,
    cluster_contrastive_loss,
    marginal_entropy_term,
    pseudo_label_loss,
    row_entropy_term,
    similarity_guided_loss,
)
from lightning_modules.shared.base import TextRepresentationModule
from lightning_modules.shared.heads import ContrastHead
from textcore.data_kinds import SHORT_TEXT
from textcore.errors import ConfigError, SetupError

STAGES = (1, 2, 3)


class ClusteringNetwork(nn.Module):
    """G_p: Dropout-Linear(D,d)-ReLU-Dropout-Linear(d,d)-ReLU-Linear(d,M) -> cluster logits (docs/methods/aecl.md)."""

    def __init__(self, in_dim: int, hidden: int, num_clusters: int, dropout: float = 0.5):
        super().__init__()
        self.net = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(in_dim, hidden), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, num_clusters),
        )

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.net(h)  # [N, M]


class AECL(TextRepresentationModule):
    """Encoder (mean pooling) → V; G_z → Z; sample-level attention → (H, S); G_p(H) → P.

    Both views (X⁰ the original text, X¹ its augmentation) go through the same networks.
    The loss depends on the stage (Algorithm 1), which ``lightning_modules.aecl.callbacks.stage_switch.AECLStageSwitch``
    sets at the start of every epoch from ``e1`` and ``e2``:

    - stage 1: λ1·L_I;
    - stage 2: λ1·L_I + λ2·L_P with KMeans pseudo-labels of V⁰ over the whole training set
      (the callback fills ``pseudo_labels``, indexed by ``batch["index"]``);
    - stage 3: L_C + λ1·L_I + λ2·L_P(argmax p⁰ where max p⁰ > ``confidence_threshold``)
      + λ3·(-row entropy of P⁰) + λ4·(marginal-entropy term), both entropies maximised.

    ``reference=True`` trains what the reference code's train.py optimises (see
    ``lightning_modules.aecl.losses``): stacked-matrix L_I with its 2N×2N broadcast of the two-view ratio, L_C with
    the positive in its denominator, stage-3 pseudo-labels where max p⁰ >= the threshold (the
    paper: >), stage-3 L_P averaged over the whole batch, and the marginal term Σ_v (log M - H(q^v)).
    ``instance_loss`` picks the L_I form on its own (``paper`` | ``reference`` | ``rowwise``);
    left None it follows ``reference``. ``attention`` picks the attention network G_h: ``paper``
    (eqs 1-3: H = S·T) or ``transformer`` (the authors' single-head post-norm encoder layer with its
    residual, feed-forward block and dropout; ``lightning_modules.aecl.attention``); left None it
    follows ``reference``.

    Logged every step, in every stage: ``train/confident_share`` (share of the batch whose
    max p⁰ passes the stage-3 threshold: the pseudo-label share stage 3 would use) and
    ``train/confidence_mean`` (mean max p⁰), so the budget at which stage 3 gets confident
    pseudo-labels can be read off a run.

    Batches follow ``ShortTextDataModule``: X⁰ is ``batch["original"]`` when present, else
    ``batch["view1"]`` (with one augmentation column view1 is the original); X¹ is
    ``batch["view2"]``.

    DDP: the attention, Λ_i and every loss are computed per process on the local batch (no
    all-gather): S mixes the samples one process sees, so 4 processes with 64 texts each train
    as four batches of 64, not as one of 256. Gradients are averaged over processes as usual.

    State kept in checkpoints (buffers): ``stage`` (1, 2, 3), ``pseudo_labels`` (LongTensor over
    the whole training set, -1 = none) and ``pseudo_label_epoch`` (the epoch they were computed
    for, so a run resumed in the middle of a stage-2 epoch keeps them).

    Args (paper defaults, docs/methods/aecl.md):
        num_clusters: M. projection_dim: D of Z, H (128).
        tau_instance: τ_I (1.0; reference code 0.5). tau_cluster: τ_C (0.5; reference 1.0).
        lambda1..lambda4: weights of L_I, L_P, row entropy, marginal entropy (10, 5, 0.01, 10).
        confidence_threshold: stage-3 pseudo-label threshold (0.95).
        reference: the reference code's variant of every loss (see above).
        instance_loss: L_I form, ``paper`` | ``reference`` | ``rowwise``; None follows ``reference``.
        attention: G_h, ``paper`` | ``transformer``; None follows ``reference`` (transformer with reference=True).
        guided_instance_loss: False is AECL Table 3's "No IC" ablation: L_I without the similarity-guided
            term (eq 7), only the two-view contrast (eq 6).
        e1, e2: stage lengths in epochs; read by the stage callback.
        dropout: dropout of the clustering network (0.5).
    """

    paper = ('AECL: Yao and Li, "Discriminative Representation learning via Attention-Enhanced Contrastive '
             'Learning for Short Text Clustering", 2025')
    citation = """@article{yao-li-2025-aecl,
  title = {Discriminative Representation learning via Attention-Enhanced Contrastive Learning for Short Text
    Clustering},
  author = {Yao, Zhihao and Li, Bo},
  year = {2025}
}"""
    trains_on = (SHORT_TEXT,)
    default_objective = "clustering.final.head_acc"  # AECL predicts with its clustering network
    cluster_context = True

    def has_cluster_head(self) -> bool:
        return True

    @torch.no_grad()
    def cluster_probabilities(self, embeddings: torch.Tensor, context: torch.Tensor | None = None,
                              chunk: int = 256) -> torch.Tensor:
        """[M, K] for new texts' embeddings [M, d]: each text forms a batch with the ``context`` embeddings
        [C, d] and itself (its last row), as the attention over samples saw batches in training; the new
        texts do not see each other."""
        if context is None:
            raise ValueError("AECL's clustering network needs context embeddings (other texts of a batch)")
        z_context = self.projector(context)  # [C, D]
        out = []
        for start in range(0, embeddings.shape[0], chunk):
            rows = []
            for z in self.projector(embeddings[start : start + chunk]):  # [D] each
                h, _ = self.attention(torch.cat([z_context, z.unsqueeze(0)]))  # [C+1, D]
                rows.append(h[-1])
            out.append(torch.softmax(self.cluster_head(torch.stack(rows)), dim=1))  # [m, K]
        return torch.cat(out)

    def __init__(
        self,
        num_clusters: int,
        projection_dim: int = 128,
        tau_instance: float = 1.0,
        tau_cluster: float = 0.5,
        lambda1: float = 10.0,
        lambda2: float = 5.0,
        lambda3: float = 0.01,
        lambda4: float = 10.0,
        confidence_threshold: float = 0.95,
        e1: int = 10,
        e2: int = 1,
        reference: bool = False,
        instance_loss: str | None = None,
        guided_instance_loss: bool = True,
        dropout: float = 0.5,
        attention: str | None = None,
        **encoder,
    ):
        if num_clusters is None or int(num_clusters) < 2:
            raise ConfigError(f"method.num_clusters must be >= 2 for AECL, got {num_clusters}")
        if tau_instance <= 0 or tau_cluster <= 0:
            raise ConfigError("method.tau_instance and method.tau_cluster must be positive")
        if not 0.0 <= confidence_threshold < 1.0:
            raise ConfigError(f"method.confidence_threshold must be in [0, 1), got {confidence_threshold}")
        if int(e1) < 0 or int(e2) < 0:
            raise ConfigError(f"method.e1 and method.e2 must be >= 0 epochs, got {e1} and {e2}")
        if instance_loss is not None and instance_loss not in INSTANCE_LOSS_FORMS:
            raise ConfigError(
                f"method.instance_loss must be one of {INSTANCE_LOSS_FORMS} or null, got '{instance_loss}'"
            )
        if attention is not None and attention not in ATTENTION_FORMS:
            raise ConfigError(f"method.attention must be one of {ATTENTION_FORMS} or null, got '{attention}'")
        super().__init__(**encoder)
        self.save_hyperparameters(ignore=["optimizer"])
        dim = self.encoder.dim
        self.projector = ContrastHead(dim, projection_dim, normalize=False)  # G_z
        self.attention_form = attention if attention is not None else ("transformer" if reference else "paper")
        self.attention = build_attention(self.attention_form, projection_dim)  # G_h
        self.cluster_head = ClusteringNetwork(projection_dim, dim, num_clusters, dropout)  # G_p
        self.num_clusters = int(num_clusters)
        self.tau_instance = tau_instance
        self.tau_cluster = tau_cluster
        self.lambdas = (lambda1, lambda2, lambda3, lambda4)
        self.confidence_threshold = confidence_threshold
        self.e1, self.e2 = int(e1), int(e2)
        self.reference = reference
        self.instance_loss = instance_loss
        self.guided_instance_loss = bool(guided_instance_loss)
        self.register_buffer("training_stage", torch.tensor(1, dtype=torch.long))
        self.register_buffer("pseudo_labels", torch.empty(0, dtype=torch.long))
        self.register_buffer("pseudo_label_epoch", torch.tensor(-1, dtype=torch.long))
        # the pseudo-label buffer is sized by the training set, known only when a callback fills it
        self.register_load_state_dict_pre_hook(_resize_pseudo_labels)
        # the step reads this copy of the stage buffer (no wait for the GPU); set_stage and loads keep them equal
        self._stage = 1
        self.register_load_state_dict_pre_hook(_read_stage)

    @property
    def instance_loss_form(self) -> str:
        """The L_I form in use: ``instance_loss`` when set, else the one ``reference`` implies."""
        if self.instance_loss is not None:
            return self.instance_loss
        return "reference" if self.reference else "paper"

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        # Checkpoints written before the attention form was a setting hold the paper's network (key1/key2/value)
        # even when trained with reference=True; rebuild that network so they load and continue as trained.
        super().on_load_checkpoint(checkpoint)
        state = checkpoint.get("state_dict", {})
        if "attention.key1.weight" in state and self.attention_form != "paper":
            rank_zero_warn(
                "This AECL checkpoint was trained with the paper's attention network (H = S·T); it is loaded "
                "with that network. Today reference=true uses the authors' transformer layer "
                "(method.attention=transformer)."
            )
            self.attention_form = "paper"
            self.hparams["attention"] = "paper"
            device = self.training_stage.device
            self.attention = SampleAttention(state["attention.key1.weight"].shape[1]).to(device)

    # -- state used by the stage callback -----------------------------------------------------------
    @property
    def stage(self) -> int:
        return self._stage

    def set_stage(self, stage: int) -> None:
        if stage not in STAGES:
            raise ValueError(f"AECL stage must be one of {STAGES}, got {stage}")
        self.training_stage.fill_(stage)
        self._stage = int(stage)

    @torch.no_grad()
    def set_pseudo_labels(self, labels: torch.Tensor, epoch: int) -> None:
        """KMeans pseudo-labels [n_train] (row order of the training set) computed for ``epoch``."""
        labels = torch.as_tensor(labels, dtype=torch.long).to(self.pseudo_labels.device)
        if labels.dim() != 1 or ((labels < -1) | (labels >= self.num_clusters)).any():
            raise ValueError(f"pseudo-labels must be a 1-D tensor of -1 or 0..{self.num_clusters - 1}")
        self.pseudo_labels = labels.clone()
        self.pseudo_label_epoch.fill_(epoch)

    # -- forward pieces ---------------------------------------------------------------------------------
    def forward_view(self, tokens: dict[str, torch.Tensor], pooling: str | None = None) -> dict[str, torch.Tensor]:
        """One view through every network: V [N, d], Z [N, D], H [N, D], S [N, N], logits [N, M]."""
        return self.view_heads(self.embed(tokens, pooling=pooling))

    def view_heads(self, v: torch.Tensor) -> dict[str, torch.Tensor]:
        """One view's encoder embeddings V [N, d] through G_z, the attention and G_p (see ``forward_view``)."""
        z = self.projector(v)  # [N, D]
        h, s = self.attention(z)  # [N, D], [N, N]
        return {"v": v, "z": z, "h": h, "s": s, "logits": self.cluster_head(h)}

    def on_train_start(self) -> None:
        if not any(getattr(cb, "drives_aecl_stages", False) for cb in self.trainer.callbacks):
            rank_zero_warn(
                "AECL has no stage callback, so it stays in stage 1 (L_I only): add "
                "lightning_modules.aecl.callbacks.stage_switch.AECLStageSwitch "
                "(method.callbacks.stage_switch in conf/method/aecl.yaml)."
            )

    # -- training -------------------------------------------------------------------------------------------
    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor | None:
        n = batch["index"].shape[0]
        if n < 2:  # the contrastive losses need a negative; a last batch of one text is skipped
            rank_zero_warn("AECL skips a training batch with fewer than 2 texts (dataset.drop_last=true avoids it)")
            return None
        stage = self.stage
        x0 = batch["original"] if "original" in batch else batch["view1"]
        v0, v1 = self.embed_views([x0, batch["view2"]])  # [N, d] each
        out0, out1 = self.view_heads(v0), self.view_heads(v1)
        p0 = torch.softmax(out0["logits"], dim=1)  # [N, M]
        p1 = torch.softmax(out1["logits"], dim=1)  # [N, M]
        clusters = p0.detach().argmax(dim=1)  # [N] Λ_i: same predicted cluster
        lambda1, lambda2, lambda3, lambda4 = self.lambdas
        losses = {
            "instance_loss": similarity_guided_loss(
                out0["z"], out1["z"], out0["h"], out1["h"], out0["s"], out1["s"], clusters,
                self.tau_instance, form=self.instance_loss_form, guided=self.guided_instance_loss,
            )
        }
        confidence = p0.detach().max(dim=1).values  # [N] max p⁰
        losses["confident_share"] = self._is_confident(confidence).float().mean()
        losses["confidence_mean"] = confidence.mean()
        total = lambda1 * losses["instance_loss"]
        if stage >= 2:
            targets = self._pseudo_targets(batch["index"], p0) if stage == 2 else self._confident_targets(p0)
            reduction = "batch" if (self.reference and stage == 3) else "labelled"
            losses["pseudo_loss"] = pseudo_label_loss(out1["logits"], targets, reduction)
            losses["pseudo_label_share"] = (targets >= 0).float().mean()
            total = total + lambda2 * losses["pseudo_loss"]
        if stage == 3:
            losses["cluster_loss"] = cluster_contrastive_loss(p0, p1, self.tau_cluster, reference=self.reference)
            losses["row_entropy_term"] = row_entropy_term(p0)
            losses["marginal_entropy_term"] = marginal_entropy_term(p0, p1, "reference" if self.reference else "paper")
            total = total + losses["cluster_loss"]
            total = total + lambda3 * losses["row_entropy_term"] + lambda4 * losses["marginal_entropy_term"]
        self.log("train/loss", total, batch_size=n)  # no prog_bar: Lightning would read it every step
        for key, value in losses.items():
            self.log(f"train/{key}", value, batch_size=n)
        return total

    def _pseudo_targets(self, index: torch.Tensor, p0: torch.Tensor) -> torch.Tensor:
        if self.pseudo_labels.numel() == 0:  # set together with pseudo_label_epoch (a shape: no read from the GPU)
            raise SetupError(
                "AECL is in stage 2 but has no KMeans pseudo-labels: add "
                "lightning_modules.aecl.callbacks.stage_switch.AECLStageSwitch (method.callbacks.stage_switch), "
                "which computes them."
            )
        # checked on the device (raises at once on the CPU, at the next synchronisation on a GPU)
        torch._assert_async(index.max() < self.pseudo_labels.numel(),
                            f"a batch index is outside the {self.pseudo_labels.numel()} pseudo-labels: they were "
                            "computed for a different training set")
        return self.pseudo_labels[index]  # [N]

    def _is_confident(self, confidence: torch.Tensor) -> torch.Tensor:
        """[N] bool: max p⁰ passes the threshold, >= in the reference code, > in the paper (docs/methods/aecl.md)."""
        if self.reference:
            return confidence >= self.confidence_threshold
        return confidence > self.confidence_threshold

    def _confident_targets(self, p0: torch.Tensor) -> torch.Tensor:
        confidence, predicted = p0.detach().max(dim=1)  # [N], [N]
        return torch.where(self._is_confident(confidence), predicted, torch.full_like(predicted, -1))  # [N]

    # -- evaluation ---------------------------------------------------------------------------------------------
    @torch.no_grad()
    def eval_step(self, batch: dict) -> dict[str, torch.Tensor]:
        """On the original texts: ``embeddings`` (mean-pooled V), ``projections`` (Z) and
        ``head_pred`` (argmax of G_p(H)).

        The attention mixes the samples of the EVALUATION batch, so ``head_pred`` depends on
        which texts share a batch: the datamodule's eval batches are fixed (length-sorted by default; one
        seeded random permutation in batches of 400 with ``dataset.eval_sort_by_length=false
        dataset.eval_shuffle_seed=0 dataset.eval_batch_size=400``, as the authors evaluate), which keeps
        predictions deterministic. ``projections`` lets the NS diagnostic
        (``lightning_modules.aecl.callbacks.attention_ns``) recompute S per eval batch without another encoder pass.
        """
        out = self.forward_view(batch["original"], pooling=self.eval_pooling)
        return {"embeddings": out["v"], "projections": out["z"], "head_pred": out["logits"].argmax(dim=1)}


def _read_stage(module, state_dict, prefix, *args) -> None:
    saved = state_dict.get(prefix + "training_stage")
    if saved is not None:
        module._stage = int(saved)


def _resize_pseudo_labels(module, state_dict, prefix, *args) -> None:
    saved = state_dict.get(prefix + "pseudo_labels")
    if saved is not None and saved.shape != module.pseudo_labels.shape:
        module.pseudo_labels = torch.empty_like(saved, device=module.pseudo_labels.device)
