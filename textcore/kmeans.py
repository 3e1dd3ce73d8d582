"""KMeans as training and evaluation use it: one seeded interface over three backends.

``fast``: greedy k-means++ seeding (the variant scikit-learn uses) followed by scikit-learn's Lloyd
iterations, in float32; ``sklearn``: scikit-learn's KMeans; ``faiss``: faiss with random restarts, on the GPU
when faiss is a GPU build and there is one; ``torch``: the ``fast`` algorithm in torch, on the GPU when there is
one. A result says which backend and which device fitted it (``KMeansResult.device``). Every caller names the
backend: a run takes ``kmeans_backend`` (null: chosen for the run's device), a command outside training
``textcore.device_settings.OUTSIDE_TRAINING``. Training uses it for SCCL's centroid initialisation and AECL's
pseudo-labels; evaluation for every KMeans score.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from textcore.console import PhaseProgress
from textcore.errors import UserError

log = logging.getLogger(__name__)

KMEANS_BACKENDS = ("fast", "sklearn", "faiss", "torch")
DTYPES = {"float32": np.float32, "float64": np.float64}


class KMeansBackendError(UserError, ValueError):
    """An unknown KMeans backend was asked for."""


@dataclass
class KMeansResult:
    """A fitted KMeans, the same fields for every backend (scikit-learn's names).

    ``labels_`` [n] cluster of each row, ``cluster_centers_`` [k, d], ``inertia_`` (sum of squared
    distances to the nearest centre), ``backend`` and ``n_iter_`` (iterations of the kept restart,
    or per restart for faiss, which has no convergence test). ``fitted_rows``: how many rows the centres
    were fitted on (fewer than n when ``kmeans_fit`` was given a ``sample``; the others were then assigned to
    their nearest centre).
    """

    labels_: np.ndarray
    cluster_centers_: np.ndarray
    inertia_: float
    backend: str
    n_iter_: int
    fitted_rows: int | None = None
    device: str = "cpu"  # where the centres were fitted (and the rows beyond a sample assigned): cpu, cuda:0, ...

    def predict(self, embeddings) -> np.ndarray:
        """Nearest centre of each row of ``embeddings`` [m, d] -> [m]."""
        return assign_nearest(embeddings, self.cluster_centers_)[0]


ASSIGN_CHUNK_ROWS = 65536  # rows per distance block: [chunk, K] floats at a time, whatever the corpus size


def squared_distances(x, centres, x_squared=None, centres_squared=None):
    """[b, K] squared Euclidean distances of the rows ``x`` [b, d] to ``centres`` [K, d] as KMeans computes them,
    ||x||^2 - 2 x.c + ||c||^2 (one matrix product; rounding may leave a value slightly below 0). NumPy arrays or
    torch tensors alike, in their dtype and on their device; ``x_squared`` [b] and ``centres_squared`` [K] when the
    caller has them already (the iterations of a fit; the centres' norms summed in float64)."""
    if x_squared is None:
        x_squared = (x * x).sum(1)
    if centres_squared is None:
        centres_squared = (centres * centres).sum(1)
    return x_squared[:, None] - 2 * x @ centres.T + centres_squared[None, :]


def nearest(distances):
    """(squared distance to the nearest centre [b], clamped at 0; the centre's index [b], the first on ties) of
    a [b, K] matrix of :func:`squared_distances`, NumPy or torch."""
    if isinstance(distances, np.ndarray):
        index = distances.argmin(axis=1)
        return np.maximum(distances[np.arange(len(index)), index], 0), index
    values, index = distances.min(dim=1)
    return values.clamp_min(0), index


def nearest_centres(x, centres, x_squared=None, centres_squared=None):
    """The nearest-centre assignment of KMeans, training's, evaluation's and prediction's: :func:`nearest` of
    :func:`squared_distances` (the same arguments)."""
    return nearest(squared_distances(x, centres, x_squared, centres_squared))


def assign_nearest(embeddings, centres: np.ndarray, chunk_rows: int = ASSIGN_CHUNK_ROWS,
                   device: str | None = None) -> tuple[np.ndarray, float]:
    """(index of the nearest centre [m], sum of squared distances to it) of each row of ``embeddings`` [m, d]
    (an array or a memory-mapped file), Euclidean as KMeans assigns, in the centres' dtype, in blocks of
    ``chunk_rows`` rows so that the memory does not grow with m. ``device`` (a torch device such as a GPU): the
    rows go there block by block; the same nearest centres up to float rounding at exact ties."""
    c = np.asarray(centres)
    centres_squared = (c.astype(np.float64) ** 2).sum(1).astype(c.dtype)  # [K]
    if device is not None:
        import torch

        c, centres_squared = torch.as_tensor(c, device=device), torch.as_tensor(centres_squared, device=device)
    labels = np.empty(len(embeddings), dtype=np.int64)
    inertia = 0.0
    for start in range(0, len(embeddings), chunk_rows):
        x = np.asarray(embeddings[start:start + chunk_rows], dtype=np.asarray(centres).dtype)  # [b, d]
        if device is None:
            distance, index = nearest_centres(x, c, centres_squared=centres_squared)
            labels[start:start + len(x)] = index
            inertia += float(distance.sum(dtype=np.float64))
        else:
            distance, index = nearest_centres(torch.as_tensor(x, device=device), c, centres_squared=centres_squared)
            labels[start:start + len(x)] = index.cpu().numpy()
            inertia += float(distance.double().sum())
    return labels, inertia


def sample_rows(n: int, sample: int | None, seed: int) -> np.ndarray | None:
    """Sorted indices of a seeded sample of ``sample`` of ``n`` rows (what KMeans fits on, what the evaluations
    during training embed), or None when every row is used: ``sample`` None or 0, or ``n <= sample`` (the papers'
    sets, whose procedure is then exactly the plain one)."""
    if not sample or n <= sample:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, size=int(sample), replace=False))


def check_kmeans_backend(backend: str | None) -> str:
    """``backend``, one of :data:`KMEANS_BACKENDS`; None (nothing chose one) is refused, not replaced."""
    if backend is None:
        raise KMeansBackendError(
            "no KMeans backend given (kmeans_backend is null): a training run chooses it for its device "
            f"(textcore/device_settings.py); elsewhere name one of {', '.join(KMEANS_BACKENDS)}")
    backend = str(backend)
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
    sample: int | None = None,
) -> KMeansResult:
    """KMeans of ``embeddings`` [n, d] into ``num_clusters``; the same seed gives the same clusters.

    ``sample`` (conf/config.yaml ``kmeans_sample``): with more rows than this, the centres are fitted on a
    seeded sample of ``sample`` rows (:func:`sample_rows`) and every row is then assigned to its nearest centre
    (:func:`assign_nearest`), so the cost of a corpus of millions is that of the sample plus one linear pass.
    With fewer rows (or ``sample`` None or 0) nothing changes.

    Backends (``KMEANS_BACKENDS``; None is refused: the caller names one):

    - ``fast``: scikit-learn's algorithm with a faster initialisation: ``n_init`` restarts, each a
      greedy k-means++ initialisation (``greedy_kmeans_plusplus``, seeded by ``seed``) followed by
      scikit-learn's Lloyd iterations (``max_iter`` 300, its tolerance test) on ``dtype``; the
      restart with the lowest inertia is kept. scikit-learn's own k-means++ computes its
      distances in float64 and takes most of the time for large K (3x longer than the iterations
      for K = 152 on GoogleNews).
    - ``faiss``: faiss's Lloyd iterations (``max_iter``, default ``FAISS_ITERATIONS``, each;
      faiss has no convergence test) from ``n_init`` random initialisations seeded by ``seed``,
      keeping the lowest inertia; every row is used (no subsampling). Always float32. On the GPU when faiss is a
      GPU build (faiss-gpu) and sees one, else on the CPU.
    - ``torch``: ``fast``'s algorithm (greedy k-means++ from a numpy generator seeded by ``seed``, Lloyd
      iterations until the centres move less than scikit-learn's tolerance, 1e-4 x the data's mean variance)
      written in torch, on CUDA when available, else on the CPU; an empty cluster keeps its centre.
    - ``sklearn``: scikit-learn's KMeans (k-means++ initialisation, ``n_init`` restarts,
      ``random_state=seed``, at most ``max_iter`` (300) iterations with its tolerance test, ``tol``
      (scikit-learn's 1e-4 when None; this backend only)) on
      ``dtype`` (float32 by default; ``float64`` is what the older evaluations used).

    With ``sample``, a backend that fitted on a GPU also assigns every row there (:func:`assign_nearest` with
    ``device``).
    """
    backend = check_kmeans_backend(backend)
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
    if sample is not None and (isinstance(sample, bool) or int(sample) < 0):
        raise ValueError(f"sample must be >= 0 rows (0: fit on every row), got {sample!r}")
    rows = sample_rows(len(data), sample, seed)
    if rows is not None:
        if int(sample) < num_clusters:
            raise ValueError(f"kmeans_sample={sample} is smaller than the {num_clusters} clusters asked for")
        fitted = kmeans_fit(data[rows], num_clusters, seed, n_init, backend, dtype, max_iter, tol)
        centres = fitted.cluster_centers_.astype(DTYPES[dtype])
        # every row assigned where the centres were fitted, block by block
        labels, inertia = assign_nearest(data, centres, device=None if fitted.device == "cpu" else fitted.device)
        return KMeansResult(labels, fitted.cluster_centers_, inertia, backend, fitted.n_iter_, fitted_rows=len(rows),
                            device=fitted.device)
    if backend == "faiss":
        result = _faiss_kmeans(data, num_clusters, seed, n_init, max_iter or FAISS_ITERATIONS)
    elif backend == "torch":
        result = _torch_kmeans(data.astype(DTYPES[dtype]), num_clusters, seed, n_init, max_iter or 300)
    elif backend == "fast":
        result = _fast_kmeans(data.astype(DTYPES[dtype]), num_clusters, seed, n_init, max_iter or 300)
    else:
        from sklearn.cluster import KMeans

        fitted = KMeans(n_clusters=num_clusters, random_state=seed, n_init=n_init, max_iter=max_iter or 300,
                        tol=1e-4 if tol is None else tol)
        result = _from_sklearn(fitted.fit(data.astype(DTYPES[dtype])), "sklearn")
    result.fitted_rows = len(data)
    return result


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
    with _restarts_progress(x, num_clusters, n_init) as progress:
        for _ in range(n_init):
            init = greedy_kmeans_plusplus(x, num_clusters, rng)
            fitted = KMeans(n_clusters=num_clusters, init=init, n_init=1, max_iter=max_iter, random_state=0).fit(x)
            if best is None or fitted.inertia_ < best.inertia_:
                best = fitted
            progress.advance()
    return _from_sklearn(best, "fast")


def _restarts_progress(x, num_clusters: int, n_init: int) -> PhaseProgress:
    """Log lines for restarts that take long (a large K on a large sample): the terminal and the run's log."""
    return PhaseProgress(f"KMeans (K={num_clusters}, {len(x):,} rows)", n_init, "restarts", logger=log)


FAISS_ITERATIONS = 100  # Lloyd iterations per restart; faiss has no tolerance test (its default is 25)


def _faiss_kmeans(data: np.ndarray, num_clusters: int, seed: int, n_init: int, iterations: int) -> KMeansResult:
    import faiss

    x = np.ascontiguousarray(data, dtype=np.float32)  # [n, d]
    on_gpu = faiss_gpus() > 0
    kmeans = faiss.Kmeans(
        x.shape[1],
        num_clusters,
        niter=iterations,
        nredo=n_init,
        seed=int(seed) % (2**31),
        max_points_per_centroid=max(len(x), 1),  # use every row, as scikit-learn does
        min_points_per_centroid=1,  # no warning for small clusters
        verbose=False,
        gpu=on_gpu,
    )
    kmeans.train(x)
    distances, labels = kmeans.index.search(x, 1)  # [n, 1] each
    return KMeansResult(
        labels_=labels[:, 0].astype(np.int64),
        cluster_centers_=kmeans.centroids.copy(),
        inertia_=float(distances.sum()),
        backend="faiss",
        n_iter_=iterations,
        device=_current_cuda_device() if on_gpu else "cpu",
    )


def faiss_gpus() -> int:
    """GPUs faiss can use: 0 for a CPU build (faiss-cpu) or a machine without one."""
    import faiss

    return faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0


def _current_cuda_device() -> str:
    import torch

    return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cuda"


def _torch_kmeans(x: np.ndarray, num_clusters: int, seed: int, n_init: int, max_iter: int,
                  device: str | None = None) -> KMeansResult:
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    data = torch.as_tensor(np.ascontiguousarray(x), device=device)  # [n, d]
    squared = (data * data).sum(1)  # [n]
    tol = 1e-4 * float(data.var(0, unbiased=False).mean())  # scikit-learn's tolerance
    rng = np.random.default_rng(seed)
    best = None
    with _restarts_progress(data, num_clusters, n_init) as progress:
        for _ in range(n_init):
            centres = _torch_kmeans_plusplus(data, squared, num_clusters, rng)
            for iteration in range(1, max_iter + 1):
                labels = nearest_centres(data, centres, x_squared=squared)[1]  # [n]
                sums = torch.zeros_like(centres).index_add_(0, labels, data)  # [k, d]
                counts = torch.bincount(labels, minlength=num_clusters).unsqueeze(1)  # [k, 1]
                moved = torch.where(counts > 0, sums / counts.clamp_min(1), centres)  # [k, d]
                shift = float(((moved - centres) ** 2).sum())
                centres = moved
                if shift <= tol:
                    break
            distances, labels = nearest_centres(data, centres, x_squared=squared)
            inertia = float(distances.sum())
            if best is None or inertia < best[0]:
                best = (inertia, labels, centres, iteration)
            progress.advance()
    inertia, labels, centres, iterations = best
    return KMeansResult(labels_=labels.cpu().numpy().astype(np.int64), cluster_centers_=centres.cpu().numpy(),
                        inertia_=inertia, backend="torch", n_iter_=iterations, device=str(data.device))


def _torch_kmeans_plusplus(data, squared, num_clusters: int, rng: np.random.Generator):
    """``greedy_kmeans_plusplus`` in torch: the draws come from ``rng`` on the host, the distances stay on the
    data's device (one read of the potential per centre)."""
    import torch

    n = data.shape[0]
    trials = 2 + int(np.log(num_clusters))
    first = int(rng.integers(n))
    chosen = [first]
    closest = (squared - 2 * (data @ data[first]) + squared[first]).clamp_min(0)  # [n]
    potential = float(closest.double().sum())
    for _ in range(1, num_clusters):
        draws = torch.as_tensor(rng.random(trials) * potential, device=data.device)  # [t]
        cumulative = torch.cumsum(closest.double(), 0)  # [n]
        candidates = torch.searchsorted(cumulative, draws).clamp_max(n - 1)  # [t]
        distances = (squared[candidates, None] - 2 * (data[candidates] @ data.T) + squared[None, :]).clamp_min(0)
        distances = torch.minimum(closest[None, :], distances)  # [t, n]
        potentials = distances.double().sum(1)  # [t]
        best = int(potentials.argmin())
        closest, potential = distances[best], float(potentials[best])
        chosen.append(int(candidates[best]))
    return data[torch.as_tensor(chosen, device=data.device)].clone()  # [k, d]
