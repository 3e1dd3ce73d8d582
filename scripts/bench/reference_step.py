"""The authors' SCCL training step, re-implemented here for scripts/bench/bench.py's ``train`` part: the step
our module's step is timed and checked against (their code is not in this repository)."""
from __future__ import annotations

import torch
import torch.nn.functional as F


class AuthorsSCCLStep:
    """SCCL's explicit-augmentation step as the authors' code computes it (amazon-research/sccl:
    ``training.py`` ``train_step_explicit``, ``models/Transformers.py`` ``SCCLBert``,
    ``utils/losses.py`` ``PairConLoss`` and ``KLDiv``), re-implemented on our module's weights.

    Their data loop tokenises the text and its two augmentations with ``batch_encode_plus(...,
    padding='max_length', max_length=32)``, stacks them to [B, 3, 32] and runs the backbone once
    per view; the loss is eta * PairConLoss(z2, z3) + KLDiv(log(q1 + 1e-8), p1) / B with eta = 1.
    """

    def __init__(self, model, max_length: int, eta: float = 1.0, temperature: float = 0.5):
        self.model = model
        self.max_length = max_length
        self.eta = eta
        self.temperature = temperature

    def prepare(self, tokenizer, raw: dict) -> tuple[torch.Tensor, torch.Tensor]:
        feats = [tokenizer(raw[v], padding="max_length", truncation=True, max_length=self.max_length,
                           return_tensors="pt") for v in ("original", "view1", "view2")]
        input_ids = torch.cat([f["input_ids"].unsqueeze(1) for f in feats], dim=1)  # [B, 3, 32]
        attention_mask = torch.cat([f["attention_mask"].unsqueeze(1) for f in feats], dim=1)  # [B, 3, 32]
        return input_ids, attention_mask

    def mean_embeddings(self, input_ids, attention_mask) -> torch.Tensor:
        output = self.model.encoder.backbone(input_ids=input_ids, attention_mask=attention_mask)
        mask = attention_mask.unsqueeze(-1)
        return torch.sum(output[0] * mask, dim=1) / torch.sum(mask, dim=1)  # [B, d]

    def cluster_prob(self, embeddings) -> torch.Tensor:
        alpha = self.model.alpha
        norm_squared = torch.sum((embeddings.unsqueeze(1) - self.model.centroids) ** 2, 2)  # [B, K]
        numerator = 1.0 / (1.0 + (norm_squared / alpha))
        numerator = numerator ** (float(alpha + 1) / 2)
        return numerator / torch.sum(numerator, dim=1, keepdim=True)

    @staticmethod
    def target_distribution(batch: torch.Tensor) -> torch.Tensor:
        weight = (batch**2) / (torch.sum(batch, 0) + 1e-9)
        return (weight.t() / torch.sum(weight, 1)).t()

    def pair_con_loss(self, features_1, features_2) -> torch.Tensor:
        batch_size = features_1.shape[0]
        features = torch.cat([features_1, features_2], dim=0)
        mask = ~torch.eye(batch_size, dtype=torch.bool).repeat(2, 2)
        pos = torch.exp(torch.sum(features_1 * features_2, dim=-1) / self.temperature)
        pos = torch.cat([pos, pos], dim=0)
        neg = torch.exp(torch.mm(features, features.t().contiguous()) / self.temperature)
        neg = neg.masked_select(mask).view(2 * batch_size, -1)
        return (-torch.log(pos / (neg.sum(dim=-1) + pos))).mean()

    def loss(self, input_ids, attention_mask) -> torch.Tensor:
        ids1, ids2, ids3 = torch.unbind(input_ids, dim=1)
        mask1, mask2, mask3 = torch.unbind(attention_mask, dim=1)
        embd1 = self.mean_embeddings(ids1, mask1)
        embd2 = self.mean_embeddings(ids2, mask2)
        embd3 = self.mean_embeddings(ids3, mask3)
        head = self.model.contrast_head.net
        feat1, feat2 = F.normalize(head(embd2), dim=1), F.normalize(head(embd3), dim=1)
        loss = self.eta * self.pair_con_loss(feat1, feat2)
        output = self.cluster_prob(embd1)
        target = self.target_distribution(output).detach()
        kl = torch.nn.KLDivLoss(reduction="sum")
        return loss + kl((output + 1e-08).log(), target) / output.shape[0]
