"""Where KMeans clusters: the embeddings themselves, or their UMAP (``cluster_space``, conf/config.yaml;
docs/clusters.md, "Clustering space").

``cluster_space=umap`` reduces the embeddings to a few dimensions with UMAP (the local manifold of the texts: the step
of N2D and of BERTopic's fixed-K recipe; ``umap.fits`` UMAPs of different seeds side by side) and runs the KMeans of
the evaluation, of SCCL's centroids and AECL's pseudo-labels, of ``predictions.csv`` and of ``predict`` there.

Large corpora: UMAP is fitted on a seeded sample of at most ``umap.fit_sample`` texts; every other text is placed as
UMAP's own ``transform`` places a new point before its refinement epochs: at the membership-weighted mean of the
coordinates of its ``n_neighbors`` nearest sample texts (the weights of ``umap.umap_.smooth_knn_dist``), computed in
blocks. A text equal to a sample text (distance below ``EXACT``) takes that text's coordinates, as UMAP's transform
does, so the training texts of a run come back to the run's own assignments.

Refinement (``umap.refine=linear``, the default): the KMeans clusters of the fitted texts are taught to a linear
classifier on their embeddings (``textcore.linear_assigner``), and its argmax over every text is the final
assignment: it smooths UMAP's boundary errors in the original space (docs/clusters.md). ``cluster_centers_`` stay
the KMeans centres in UMAP coordinates; ``labels_`` are then the classifier's, not those centres' nearest. New texts
go through the classifier alone (no UMAP placement).

The fitted map is plain arrays (:class:`SpaceMap`: the sample's embeddings, their coordinates, the classifier's
weights and bias when refined, the settings as JSON),
saved in the run folder under ``cluster_space/`` and read back with ``numpy.load(allow_pickle=False)``: reading a
run folder runs no code from it. On a GPU, cuML's UMAP fits the sample when cuML is installed.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from textcore.errors import ConfigError, MissingFileError
from textcore.kmeans import squared_distances

log = logging.getLogger(__name__)

SPACES = ("embeddings", "umap")
METRICS = ("cosine", "euclidean")
REFINEMENTS = ("linear", "none")
FOLDER = "cluster_space"  # in a run folder: anchors.npy, coords.npy, space.json (+ weights.npy, bias.npy: refined)
EXACT = 1e-4  # a distance below this to a sample text is that text (re-embedding differs by float rounding)
FIT_SEED_STEP = 1000  # umap.fits > 1: fit j is seeded seed + 1000 j, apart from the seeds of other runs
BLOCK_ROWS = 1024  # texts placed per block: distances and neighbour indices to 20,000 sample texts, about 250 MB


@dataclass(frozen=True)
class SpaceSettings:
    """``cluster_space`` and the ``umap`` section of the configuration (conf/config.yaml)."""

    space: str = "embeddings"
    n_neighbors: int = 15
    n_components: int = 5
    min_dist: float = 0.0
    metric: str = "cosine"
    fit_sample: int = 20000
    refine: str = "linear"  # linear: the KMeans clusters taught to a linear classifier of the embeddings; none
    fits: int = 3  # UMAPs of the same texts, seeds apart, their coordinates side by side (n_components each)

    @property
    def umap(self) -> bool:
        return self.space == "umap"

    @classmethod
    def from_config(cls, space, umap: Mapping | None = None) -> "SpaceSettings":
        """Checked settings from ``cluster_space`` and the ``umap`` section; a bad value is a one-line
        ``ConfigError`` naming its key and the values allowed."""
        if space not in SPACES:
            raise ConfigError(f"cluster_space={space!r}: choose one of {' | '.join(SPACES)} (conf/config.yaml).")
        values = dict(umap or {})
        unknown = sorted(set(values) - set(cls.__dataclass_fields__) - {"space"})
        if unknown:
            raise ConfigError(f"umap.{unknown[0]}: not a setting of the UMAP clustering space; the settings are "
                              f"{', '.join(k for k in cls.__dataclass_fields__ if k != 'space')}.")
        settings = cls(space=space, **{k: v for k, v in values.items() if k != "space"})
        settings.check()
        return settings

    def check(self) -> None:
        for name, minimum in (("n_neighbors", 2), ("n_components", 1), ("fit_sample", 0), ("fits", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigError(f"umap.{name}={value!r}: a whole number >= {minimum}.")
        min_dist = self.min_dist
        if isinstance(min_dist, bool) or not isinstance(min_dist, (int, float)) or not 0 <= min_dist <= 1:
            raise ConfigError(f"umap.min_dist={self.min_dist!r}: a number from 0 to 1 (UMAP's min_dist).")
        if self.metric not in METRICS:
            raise ConfigError(f"umap.metric={self.metric!r}: choose one of {' | '.join(METRICS)}.")
        if self.refine not in REFINEMENTS:
            raise ConfigError(f"umap.refine={self.refine!r}: choose one of {' | '.join(REFINEMENTS)} (linear: the "
                              "UMAP's KMeans clusters refined by a linear classifier of the embeddings; none: as "
                              "fitted).")
        if 0 < self.fit_sample <= self.n_neighbors:
            raise ConfigError(f"umap.fit_sample={self.fit_sample}: more texts than umap.n_neighbors "
                              f"({self.n_neighbors}), or 0 (every text).")


EMBEDDINGS = SpaceSettings()


def space_record(settings: SpaceSettings) -> dict:
    """What results.json records of the clustering space: its name, and UMAP's settings when it is one."""
    return asdict(settings) if settings.umap else {"space": settings.space}


def settings_of(cfg) -> SpaceSettings:
    """The settings of a composed run configuration (the clustering space of the embeddings when it has none)."""
    space = cfg.get("cluster_space", "embeddings") if hasattr(cfg, "get") else "embeddings"
    umap = cfg.get("umap") if hasattr(cfg, "get") else None
    if umap is not None and not isinstance(umap, Mapping):
        from omegaconf import OmegaConf

        umap = OmegaConf.to_container(umap, resolve=True)
    return SpaceSettings.from_config(space, umap)


@dataclass
class SpaceMap:
    """A fitted UMAP as arrays: ``anchors`` [m, d] (the fitted texts' embeddings, unit length for the cosine metric),
    ``coords`` [m, c * fits] (their coordinates in each of the ``umap.fits`` UMAPs, side by side: a new text's
    neighbours among the anchors place it in all of them at once) and the settings; with ``umap.refine=linear``,
    ``weights`` [K, d] and ``bias`` [K] of the classifier that assigns texts (``textcore.linear_assigner``), None
    before it is fitted."""

    anchors: np.ndarray
    coords: np.ndarray
    settings: SpaceSettings
    seed: int = 0
    weights: np.ndarray | None = None
    bias: np.ndarray | None = None

    @property
    def refined(self) -> bool:
        """Whether texts are assigned by the linear classifier (else by the nearest KMeans centre of their
        coordinates)."""
        return self.weights is not None

    def assign(self, embeddings, block_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(cluster [n], probabilities [n, 2] of it and of the runner-up) of ``embeddings`` [n, d] under the
        classifier, each block prepared as the fitted texts were (unit length for cosine)."""
        from textcore import linear_assigner

        metric = self.settings.metric
        return linear_assigner.assign(embeddings, self.weights, self.bias,
                                      block_rows or linear_assigner.BLOCK_ROWS, lambda b: _prepared(b, metric))

    def transform(self, embeddings, block_rows: int = BLOCK_ROWS) -> np.ndarray:
        """UMAP coordinates [n, c * fits] of ``embeddings`` [n, d], in blocks of ``block_rows`` texts."""
        from umap.umap_ import smooth_knn_dist

        data = np.asarray(embeddings)
        k = min(self.settings.n_neighbors, len(self.anchors))
        out = np.empty((len(data), self.coords.shape[1]), dtype=np.float32)
        anchors = self.anchors.astype(np.float32, copy=False)
        anchor_sq = (anchors ** 2).sum(1)
        for start in range(0, len(data), block_rows):
            block = _prepared(np.asarray(data[start:start + block_rows], dtype=np.float32), self.settings.metric)
            if self.settings.metric == "cosine":
                dist = 1.0 - block @ anchors.T
            else:
                dist = np.sqrt(np.maximum(squared_distances(block, anchors, centres_squared=anchor_sq), 0))
            np.maximum(dist, 0, out=dist)
            idx = np.argpartition(dist, k - 1, axis=1)[:, :k]
            near = np.take_along_axis(dist, idx, axis=1)
            order = np.argsort(near, axis=1, kind="stable")
            idx, near = np.take_along_axis(idx, order, 1), np.take_along_axis(near, order, 1)
            # UMAP's transform: local_connectivity - 1 = 0, so rho = 0 and the weight of a neighbour is exp(-d / sigma)
            sigmas, rhos = smooth_knn_dist(near.astype(np.float32), float(k), local_connectivity=0.0)
            weights = np.exp(-np.maximum(near - rhos[:, None], 0) / sigmas[:, None])
            weights /= weights.sum(1, keepdims=True).clip(1e-12)
            placed = np.einsum("nk,nkc->nc", weights, self.coords[idx]).astype(np.float32)
            exact = near[:, 0] <= EXACT
            placed[exact] = self.coords[idx[exact, 0]]
            out[start:start + len(block)] = placed
        return out

    # -- the run folder: arrays and JSON only -------------------------------------------------------------------
    def save(self, folder: Path) -> Path:
        from textcore.atomic_files import atomic_write_text

        folder = Path(folder) / FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "anchors.npy", self.anchors.astype(np.float32), allow_pickle=False)
        np.save(folder / "coords.npy", self.coords.astype(np.float32), allow_pickle=False)
        if self.refined:
            np.save(folder / "weights.npy", self.weights.astype(np.float32), allow_pickle=False)
            np.save(folder / "bias.npy", self.bias.astype(np.float32), allow_pickle=False)
        atomic_write_text(folder / "space.json", json.dumps({**asdict(self.settings), "seed": self.seed,
                                                             "fitted_texts": int(len(self.anchors))}, indent=1))
        return folder

    @classmethod
    def load(cls, folder: Path) -> "SpaceMap | None":
        """The map saved in a run folder (``<folder>/cluster_space``), or None when the run clustered its embeddings."""
        folder = Path(folder) / FOLDER
        if not (folder / "space.json").is_file():
            return None
        meta = json.loads((folder / "space.json").read_text())
        seed = int(meta.pop("seed", 0))
        meta.pop("fitted_texts", None)
        meta.setdefault("refine", "none")  # a map saved before the refinement existed assigned without it
        meta.setdefault("fits", 1)  # and one saved before several fits were kept side by side had one
        settings = SpaceSettings.from_config(meta.pop("space"), meta)
        weights = bias = None
        if settings.refine == "linear":
            for name in ("weights.npy", "bias.npy"):
                if not (folder / name).is_file():
                    raise MissingFileError(f"{folder / 'space.json'}: refine=linear but {name} is missing beside it; "
                                           f"copy the run's whole {FOLDER}/ folder.")
            weights = np.load(folder / "weights.npy", allow_pickle=False)
            bias = np.load(folder / "bias.npy", allow_pickle=False)
        return cls(np.load(folder / "anchors.npy", allow_pickle=False),
                   np.load(folder / "coords.npy", allow_pickle=False), settings, seed, weights, bias)


def _prepared(data: np.ndarray, metric: str) -> np.ndarray:
    if metric != "cosine":
        return data
    return data / np.linalg.norm(data, axis=1, keepdims=True).clip(1e-12)


def fit_space(embeddings, settings: SpaceSettings, seed: int, place_rest: bool = True) -> tuple[SpaceMap, np.ndarray]:
    """UMAP of ``embeddings`` [n, d]: the map and the coordinates [n, c * fits] of every row.

    Fitted on a seeded sample of ``settings.fit_sample`` rows when there are more (0: every row); the others are
    placed by :meth:`SpaceMap.transform`, unless ``place_rest`` is False: the coordinates are then the sample's only
    (the rows of :func:`fitted_rows`). The same seed gives the same coordinates (umap-learn with a ``random_state``
    runs single-threaded and is repeatable)."""
    data = np.asarray(embeddings)
    if len(data) <= settings.n_neighbors:
        raise ConfigError(f"cluster_space=umap: {len(data)} texts, fewer than umap.n_neighbors+1 "
                          f"({settings.n_neighbors + 1}); lower umap.n_neighbors or set cluster_space=embeddings.")
    rows = fitted_rows(len(data), settings, seed)
    fitted = _prepared(np.asarray(data if rows is None else data[rows], dtype=np.float32), settings.metric)
    coords = _umap_fit(fitted, settings, seed)
    space = SpaceMap(fitted, coords, settings, seed)
    if rows is None or not place_rest:
        return space, coords
    everything = space.transform(data)
    everything[rows] = coords
    return space, everything


def fitted_rows(n: int, settings: SpaceSettings, seed: int) -> np.ndarray | None:
    """The rows of ``n`` that UMAP is fitted on (sorted), or None: every row."""
    from textcore.kmeans import sample_rows

    return sample_rows(n, settings.fit_sample or None, seed)


def _umap_fit(data: np.ndarray, settings: SpaceSettings, seed: int) -> np.ndarray:
    """UMAP coordinates [n, n_components * fits] of ``data``: ``umap.fits`` UMAPs side by side, fit j seeded
    ``seed + FIT_SEED_STEP * j`` (one fit: ``seed`` itself); cuML's on a GPU when it is installed, else umap-learn's.

    Why several: one UMAP of many small topics tears some of them apart and glues others, differently for each seed;
    KMeans on several layouts side by side keeps the neighbourhoods they agree on (docs/clusters.md)."""
    return np.hstack([_one_umap(data, settings, seed + FIT_SEED_STEP * j) for j in range(settings.fits)])


def _one_umap(data: np.ndarray, settings: SpaceSettings, seed: int) -> np.ndarray:
    options = dict(n_neighbors=settings.n_neighbors, n_components=settings.n_components,
                   min_dist=float(settings.min_dist), metric=settings.metric, random_state=seed)
    cuml = _cuml_umap()
    if cuml is not None:
        return np.asarray(cuml(**options).fit_transform(data), dtype=np.float32)
    import warnings

    try:
        from umap import UMAP
    except ImportError as error:  # a GPU node's own Python, a trimmed environment: say what to do
        raise ImportError("cluster_space=umap needs the umap-learn package, which this Python lacks: "
                          "pip install umap-learn, or cluster_space=embeddings to cluster the embeddings "
                          "themselves") from error

    with warnings.catch_warnings():  # "n_jobs overridden to 1 by setting random_state": that is the point
        warnings.filterwarnings("ignore", message=".*n_jobs.*")
        return UMAP(**options).fit_transform(data).astype(np.float32)


def _cuml_umap():
    """cuML's UMAP class when cuML is installed and sees a GPU, else None (umap-learn then fits on the CPU)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        from cuml.manifold import UMAP  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001  cuML absent or unusable: umap-learn is the documented fallback
        return None
    return UMAP


def space_kmeans(embeddings, num_clusters: int, seed: int, n_init: int, backend: str, sample: int | None,
                 settings: SpaceSettings = EMBEDDINGS, **options):
    """``textcore.kmeans.kmeans_fit`` in the clustering space of ``settings``.

    With the embeddings' space this is ``kmeans_fit`` itself. With UMAP, KMeans runs on the coordinates; with
    ``refine=linear`` a linear classifier is then taught those clusters on the embeddings of the texts UMAP was fitted
    on, and ``labels_`` are its argmax over every row (``space_labels_``: the KMeans's own, nearest of
    ``cluster_centers_``). With the refinement and more rows than ``umap.fit_sample``, KMeans runs on the fitted
    sample's coordinates only, so ``coords`` and ``space_labels_`` are of the rows of :func:`fitted_rows`. The result
    keeps ``space`` (the :class:`SpaceMap`, for saving and for new texts), ``coords`` and ``embedding_centers_``
    ([K, d]: each cluster's mean embedding, what a cluster head starts from)."""
    from textcore.kmeans import kmeans_fit

    data = np.asarray(embeddings)
    if not settings.umap:
        result = kmeans_fit(data, num_clusters, seed, n_init, backend, sample=sample, **options)
        result.space = None
        result.embedding_centers_ = result.cluster_centers_
        return result
    refine = settings.refine == "linear"
    # refined, the classifier assigns every text: only the fitted sample needs coordinates (KMeans learns there), and
    # placing the rest of a large corpus, most of the cost at a million texts, would serve nothing
    space, coords = fit_space(data, settings, seed, place_rest=not refine)
    result = kmeans_fit(coords, num_clusters, seed, n_init, backend, sample=sample, **options)
    result.space = space
    result.coords = coords
    result.space_labels_ = result.labels_
    if refine:
        result.labels_ = refine_linear(space, data, result.labels_, num_clusters)
    result.embedding_centers_ = cluster_means(data, result.labels_, num_clusters)
    return result


def refine_linear(space: SpaceMap, embeddings: np.ndarray, labels: np.ndarray, num_clusters: int) -> np.ndarray:
    """The clusters [n] of every row of ``embeddings`` under a linear classifier taught ``labels`` [m] (the KMeans of
    the UMAP's fitted rows, one per row of ``space.anchors``, their prepared embeddings); the classifier is kept in
    ``space`` for saving and for new texts."""
    from textcore import linear_assigner

    space.weights, space.bias = linear_assigner.fit(space.anchors, labels, num_clusters, space.seed)
    return space.assign(embeddings)[0]


def cluster_means(embeddings: np.ndarray, labels: np.ndarray, num_clusters: int) -> np.ndarray:
    """[K, d] mean embedding of each cluster (a cluster without texts: zeros), one sparse product."""
    from scipy.sparse import csr_matrix

    labels = np.asarray(labels, dtype=np.int64)
    members = csr_matrix((np.ones(len(labels), dtype=np.float32), (labels, np.arange(len(labels)))),
                         shape=(num_clusters, len(labels)))
    sums = np.asarray(members @ np.asarray(embeddings, dtype=np.float32))
    counts = np.bincount(labels, minlength=num_clusters)[:, None]
    return (sums / np.maximum(counts, 1)).astype(np.float32)
