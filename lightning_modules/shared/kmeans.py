"""KMeans as training and evaluation use it: one seeded interface over three backends.

``fast`` (default): greedy k-means++ seeding (the variant scikit-learn uses) followed by
scikit-learn's Lloyd iterations, in float32; ``sklearn``: scikit-learn's KMeans; ``faiss``:
faiss-cpu with random restarts. Training uses it for SCCL's centroid initialisation and AECL's
pseudo-labels; evaluation for every KMeans score.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from errors import UserError

KMEANS_BACKENDS = ("fast", "sklearn", "faiss")
DEFAULT_KMEANS_BACKEND = "fast"
DTYPES = {"float32": np.float32, "float64": np.float64}


class KMeansBackendError(UserError, ValueError):
    """An unknown KMeans backend was asked for."""


@dataclass
class KMeansResult:
    """A fitted KMeans, the same fields for every backend (scikit-learn's names).

    ``labels_`` [n] cluster of each row, ``cluster_centers_`` [k, d], ``inertia_`` (sum of squared
    distances to the nearest centre), ``backend`` and ``n_iter_`` (iterations of the kept restart,
    or per restart for faiss, which has no convergence test).
    """

    labels_: np.ndarray
    cluster_centers_: np.ndarray
    inertia_: float
    backend: str
    n_iter_: int

    def predict(self, embeddings) -> np.ndarray:
        """Nearest centre of each row of ``embeddings`` [m, d] -> [m]."""
        x = np.asarray(embeddings, dtype=self.cluster_centers_.dtype)
        distances = (x**2).sum(1, keepdims=True) - 2 * x @ self.cluster_centers_.T + (self.cluster_centers_**2).sum(1)
        return distances.argmin(axis=1).astype(np.int64)


def resolve_kmeans_backend(backend: str | None) -> str:
    """``backend`` checked, or the default (``DEFAULT_KMEANS_BACKEND``) for None."""
    backend = DEFAULT_KMEANS_BACKEND if backend is None else str(backend)
    if backend not in KMEANS_BACKENDS:
        raise KMeansBackendError(f"unknown KMeans backend '{backend}'; choose one of {', '.join(KMEANS_BACKENDS)}")
    return backend


def kmeans_fit(
    embeddings: np.ndarray,
    num_clusters: int,
    seed: int = 0,
    n_init: int = 10,
    backend: str | None = None,
    dtype: str = "float32",
    max_iter: int | None = None,
    tol: float | None = None,
) -> KMeansResult:
    """KMeans of ``embeddings`` [n, d] into ``num_clusters``; the same seed gives the same clusters.

    Backends (``KMEANS_BACKENDS``; None: ``DEFAULT_KMEANS_BACKEND``):

    - ``fast``: scikit-learn's algorithm with a faster initialisation: ``n_init`` restarts, each a
      greedy k-means++ initialisation (``greedy_kmeans_plusplus``, seeded by ``seed``) followed by
      scikit-learn's Lloyd iterations (``max_iter`` 300, its tolerance test) on ``dtype``; the
      restart with the lowest inertia is kept. scikit-learn's own k-means++ computes its
      distances in float64 and takes most of the time for large K (3x longer than the iterations
      for K = 152 on GoogleNews).
    - ``faiss``: faiss-cpu's Lloyd iterations (``max_iter``, default ``FAISS_ITERATIONS``, each;
      faiss has no convergence test) from ``n_init`` random initialisations seeded by ``seed``,
      keeping the lowest inertia; every row is used (no subsampling). Always float32.
    - ``sklearn``: scikit-learn's KMeans (k-means++ initialisation, ``n_init`` restarts,
      ``random_state=seed``, at most ``max_iter`` (300) iterations with its tolerance test, ``tol``
      (scikit-learn's 1e-4 when None; this backend only)) on
      ``dtype`` (float32 by default; ``float64`` is what the older evaluations used).
    """
    backend = resolve_kmeans_backend(backend)
    if tol is not None and backend != "sklearn":
        raise ValueError(f"tol is scikit-learn's convergence tolerance: use backend='sklearn' (got '{backend}')")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got '{dtype}'")
    if n_init < 1:
        raise ValueError(f"n_init must be >= 1, got {n_init}")
    data = np.asarray(embeddings)
    if data.ndim != 2:
        raise ValueError(f"KMeans needs a 2-D array of embeddings, got shape {data.shape}")
    if num_clusters > len(data):
        raise ValueError(f"KMeans asked for {num_clusters} clusters but has only {len(data)} samples")
    if backend == "faiss":
        return _faiss_kmeans(data, num_clusters, seed, n_init, max_iter or FAISS_ITERATIONS)
    if backend == "fast":
        return _fast_kmeans(data.astype(DTYPES[dtype]), num_clusters, seed, n_init, max_iter or 300)
    from sklearn.cluster import KMeans

    fitted = KMeans(n_clusters=num_clusters, random_state=seed, n_init=n_init, max_iter=max_iter or 300,
                    tol=1e-4 if tol is None else tol)
    return _from_sklearn(fitted.fit(data.astype(DTYPES[dtype])), "sklearn")


def _from_sklearn(fitted, backend: str) -> KMeansResult:
    """A fitted scikit-learn ``KMeans`` as a ``KMeansResult`` named ``backend``."""
    return KMeansResult(
        labels_=fitted.labels_.astype(np.int64),
        cluster_centers_=fitted.cluster_centers_,
        inertia_=float(fitted.inertia_),
        backend=backend,
        n_iter_=int(fitted.n_iter_),
    )


def greedy_kmeans_plusplus(x: np.ndarray, num_clusters: int, rng: np.random.Generator) -> np.ndarray:
    """Greedy k-means++ centres [k, d] of ``x`` [n, d] (Arthur & Vassilvitskii 2007; the variant of
    scikit-learn's ``kmeans_plusplus``): the first centre uniformly at random; each next one the best,
    by the resulting potential (sum of squared distances to the nearest centre), of 2 + ln(k)
    candidates drawn with probability proportional to the current squared distance. Distances are
    computed in ``x``'s dtype from cached squared norms, one [candidates, n] product per centre.
    """
    n = len(x)
    trials = 2 + int(np.log(num_clusters))
    squared = np.einsum("ij,ij->i", x, x)  # [n]
    centres = np.empty((num_clusters, x.shape[1]), dtype=x.dtype)
    first = int(rng.integers(n))
    centres[0] = x[first]
    closest = np.maximum(squared - 2 * (x @ x[first]) + squared[first], 0)  # [n] squared distance to the nearest centre
    potential = closest.sum(dtype=np.float64)
    for c in range(1, num_clusters):
        draws = rng.random(trials) * potential
        candidates = np.minimum(np.searchsorted(np.cumsum(closest, dtype=np.float64), draws), n - 1)  # [t]
        distances = squared[candidates, None] - 2 * (x[candidates] @ x.T) + squared[None, :]  # [t, n]
        np.maximum(distances, 0, out=distances)
        np.minimum(closest[None, :], distances, out=distances)  # nearest-centre distances with each candidate
        potentials = distances.sum(axis=1, dtype=np.float64)  # [t]
        best = int(potentials.argmin())
        closest, potential = distances[best], potentials[best]
        centres[c] = x[candidates[best]]
    return centres


def _fast_kmeans(x: np.ndarray, num_clusters: int, seed: int, n_init: int, max_iter: int) -> KMeansResult:
    from sklearn.cluster import KMeans

    x = np.ascontiguousarray(x)
    rng = np.random.default_rng(seed)
    best = None
    for _ in range(n_init):
        init = greedy_kmeans_plusplus(x, num_clusters, rng)
        fitted = KMeans(n_clusters=num_clusters, init=init, n_init=1, max_iter=max_iter, random_state=0).fit(x)
        if best is None or fitted.inertia_ < best.inertia_:
            best = fitted
    return _from_sklearn(best, "fast")


FAISS_ITERATIONS = 100  # Lloyd iterations per restart; faiss has no tolerance test (its default is 25)


def _faiss_kmeans(data: np.ndarray, num_clusters: int, seed: int, n_init: int, iterations: int) -> KMeansResult:
    import faiss

    x = np.ascontiguousarray(data, dtype=np.float32)  # [n, d]
    kmeans = faiss.Kmeans(
        x.shape[1],
        num_clusters,
        niter=iterations,
        nredo=n_init,
        seed=int(seed) % (2**31),
        max_points_per_centroid=max(len(x), 1),  # use every row, as scikit-learn does
        min_points_per_centroid=1,  # no warning for small clusters
        verbose=False,
    )
    kmeans.train(x)
    distances, labels = kmeans.index.search(x, 1)  # [n, 1] each
    return KMeansResult(
        labels_=labels[:, 0].astype(np.int64),
        cluster_centers_=kmeans.centroids.copy(),
        inertia_=float(distances.sum()),
        backend="faiss",
        n_iter_=iterations,
    )
