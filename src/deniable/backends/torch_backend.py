"""PyTorch backend: Madlib, Mahalanobis, Vickrey, BRR and TEM sampled on a GPU (or on the CPU through torch).

Each class here subclasses the numpy mechanism and replaces only its sampler, so the guarantee,
the metric, ``distance``, ``probabilities``, ``privatize`` and every other method are the numpy
mechanism's own. Build them with ``deniable.get_mechanism(name, ..., backend="torch",
device="cuda")``.

**Same distributions.** The samplers draw from the same closed forms as the numpy ones (Madlib
§2.6: uniform direction × Gamma(d, 1/ε) radius; Mahalanobis Algorithm 1: that noise times
Σ_λ^{1/2}; BRR Algorithm 2: each bit flips with probability 1/(1+e^ε), nearest code, ties uniform;
TEM: the same exact rejection sampler over the same neighbour tables). The tests check each
against its closed form on CPU torch.

**Exact nearest neighbour.** Madlib, Mahalanobis and Vickrey search with the torch engine of
:mod:`deniable.neighbors` (:class:`~deniable.neighbors.torch_index.TorchEuclideanIndex`): a
matrix product per block (fp32 by default, ``precision="tf32"`` or ``"bf16"`` opt-in), certified
by the error bound that every exact engine shares, so the output is the float64 nearest word (or
two nearest, for Vickrey) in every precision; ``exact=False`` returns the raw low-precision
ranking (approximate). BRR's Hamming search uses ±1 codes: H(q, c) = (n − q·c)/2, an integer
that fp16 (on CUDA, n ≤ 2048 bits) or fp32 represents exactly, so it is exact by construction.

**TEM.** The device sampler takes its envelope (the sampling tables of
:class:`~deniable.mechanisms._exponential.SamplingTables`, built once by the numpy mechanism) to
the device and runs the rejection rounds of
:meth:`~deniable.mechanisms._exponential.ExponentialSampler.sample` in tensor arithmetic: the
one torch implementation of that sampler.

**Randomness.** Each ``sample_ids`` call draws one 63-bit seed from the caller's ``rng`` (numpy
Generator, int seed, ...) and seeds a ``torch.Generator`` on the device with it. A seed gives the
same output on the same device type, torch version and batch layout; outputs are **not**
bit-identical to the numpy backend, nor between CPU and CUDA (different generators and kernels),
nor across torch versions. The torch generators (Philox on CUDA, MT19937 on CPU) are statistical,
not cryptographic, whatever ``rng`` is (``rng="secure"`` only makes the seed unpredictable).

The privacy guarantee is the numpy mechanism's: the nearest-neighbour step is post-processing,
and the noise has the same distribution.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._optional import import_optional
from .._rng import RNGLike, as_generator
from .._validation import check_int
from ..embeddings.embedding import UNK_ID
from ..mechanisms.brr import BRR
from ..mechanisms.madlib import Madlib
from ..mechanisms.mahalanobis import Mahalanobis
from ..mechanisms.tem import TEM
from ..mechanisms.vickrey import Vickrey
from ..neighbors.torch_index import PRECISIONS, TorchEuclideanIndex, matmul_precision, resolve_device

__all__ = [
    "PRECISIONS",
    "TorchEuclideanIndex",
    "TorchHammingIndex",
    "TorchMadlib",
    "TorchMahalanobis",
    "TorchVickrey",
    "TorchBRR",
    "TorchTEM",
    "build",
    "torch_mechanisms",
    "torch_mechanism_class",
    "resolve_device",
    "torch_generator",
]

_DEFAULT_MEMORY = 1 << 30
_NOISE_CHUNK = 1 << 16


def _torch() -> Any:
    return import_optional("torch", purpose="backend='torch'")


def torch_generator(rng: RNGLike, device: Any) -> Any:
    """A ``torch.Generator`` on ``device`` seeded with 63 bits drawn from ``rng``."""
    torch = _torch()
    seed = int(as_generator(rng).integers(0, 2**63 - 1))
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


class _Pending:
    """Placeholder index while the numpy constructor runs (the device index replaces it)."""

    def search(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - never called
        raise RuntimeError("index not built yet")


# -- exact Hamming search ---------------------------------------------------------------------


class TorchHammingIndex:
    """Exact Hamming 1-NN on a torch device with BRR's tie rule (rank ⌊u·C⌋ among the C tied
    codes in ascending id order), through ±1 codes: H(q, c) = (n − q·c)/2.

    Parameters
    ----------
    bits
        ``(V, n_bits)`` boolean codes.
    device
        ``"cuda"``, ``"cuda:N"`` or ``"cpu"``.
    memory_bytes
        Bound on the score buffer of one block (default 1 GiB).
    """

    exact = True

    def __init__(self, bits: np.ndarray, *, device: Any = "cuda", memory_bytes: int = _DEFAULT_MEMORY) -> None:
        torch = _torch()
        bits = np.asarray(bits, dtype=bool)
        if bits.ndim != 2 or bits.shape[0] == 0:
            raise ValueError(f"bits must be a non-empty 2-D boolean array, got shape {bits.shape}")
        self.device = resolve_device(device)
        self.memory_bytes = check_int("memory_bytes", memory_bytes, minimum=1 << 16)
        self.size, self.n_bits = (int(s) for s in bits.shape)
        # ±1 products sum to integers |x| <= n_bits: exact in fp16 up to 2048 (every partial sum
        # too), in fp32 up to 2^24.
        self.dtype = torch.float16 if (self.device.type == "cuda" and self.n_bits <= 2048) else torch.float32
        self.codes = torch.from_numpy(np.where(bits, 1.0, -1.0).astype(np.float32)).to(self.device, self.dtype)

    def _rows_per_block(self) -> int:
        per_row = self.size * (self.codes.element_size() + 1 + 8)
        return int(max(16, self.memory_bytes // per_row))

    def search_pm(self, q: Any, u: Any) -> Any:
        """Nearest id for ±1 query rows ``q`` (device tensor, ``self.dtype``) with tie uniforms ``u``."""
        torch = _torch()
        n = int(q.shape[0])
        out = torch.empty(n, dtype=torch.int64, device=self.device)
        qb = self._rows_per_block()
        with matmul_precision("highest"):
            for s in range(0, n, qb):
                sc = q[s : s + qb] @ self.codes.T
                mx, arg = sc.max(dim=1)
                mask = sc == mx[:, None]
                cnt = mask.sum(1)
                rank = torch.minimum((u[s : s + qb] * cnt).long(), cnt - 1)
                rows = torch.nonzero(cnt > 1).flatten()
                if rows.numel():
                    cs = mask[rows].to(torch.int32).cumsum(1, dtype=torch.int32)
                    arg[rows] = (cs <= rank[rows, None]).sum(1)
                out[s : s + sc.shape[0]] = arg
        return out

    def search(self, queries: np.ndarray, ties: np.ndarray | None = None, rng: RNGLike = None) -> np.ndarray:
        """Same interface as :class:`deniable.binary.HammingIndex` (packed ``uint64`` queries)."""
        torch = _torch()
        from ..binary.codes import unpack_bits

        q = np.asarray(queries)
        n = int(q.shape[0])
        u = as_generator(rng).random(n) if ties is None else np.asarray(ties, dtype=np.float64).reshape(-1)
        if u.shape[0] != n:
            raise ValueError(f"ties must have one uniform per query ({n}), got {u.shape[0]}")
        pm = np.where(unpack_bits(q, self.n_bits), 1.0, -1.0).astype(np.float32)
        qt = torch.from_numpy(pm).to(self.device, self.dtype)
        return self.search_pm(qt, torch.from_numpy(u).to(self.device)).cpu().numpy()


# -- mechanisms -------------------------------------------------------------------------------


class _TorchMixin:
    """Replaces ``_sample_ids`` by a device sampler ``sample_ids_tensor``."""

    backend = "torch"
    device: Any
    n_words: int

    def _check_tensor_ids(self, ids: Any) -> Any:
        torch = _torch()
        if ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"ids must be an integer tensor, got {ids.dtype}")
        ids = ids.to(self.device, torch.int64).reshape(-1)
        if ids.numel():
            lo, hi = int(ids.min()), int(ids.max())
            if lo < UNK_ID or hi >= self.n_words:
                raise ValueError(f"ids must lie in [-1, {self.n_words - 1}] (-1 = out of vocabulary), got values in [{lo}, {hi}]")
        return ids

    def _sample_ids(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        torch = _torch()
        g = torch_generator(rng, self.device)
        t = torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64)).to(self.device)
        return self._sample_tensor(t, g).cpu().numpy()

    def sample_ids_tensor(self, ids: Any, generator: Any = None) -> Any:
        """Device-resident sampling: ``ids`` an integer tensor (any device; -1 = UNK), returns an
        int64 tensor on :attr:`device`. ``generator``: a ``torch.Generator`` on that device
        (``None``: seeded from OS entropy)."""
        ids = self._check_tensor_ids(ids)
        if generator is None:
            generator = torch_generator(None, self.device)
        return self._sample_tensor(ids, generator)

    def _sample_tensor(self, ids: Any, g: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _backend_params(self) -> dict[str, Any]:
        return {"backend": "torch", "device": str(self.device)}


class _TorchEuclidean(_TorchMixin):
    """Madlib-style sampling: point + noise, exact search, on the device."""

    epsilon: float
    embedding: Any
    index: Any

    def _setup(self, device: Any, precision: str, exact: bool, memory_bytes: int) -> None:
        torch = _torch()
        self.device = resolve_device(device)
        self.index = TorchEuclideanIndex(self.embedding.vectors, device=self.device, precision=precision, exact=exact, memory_bytes=memory_bytes)
        self._index_spec = f"torch-exact/{precision}" if exact else f"torch-approx/{precision}"
        self._mean_t = torch.from_numpy(np.array(self.embedding.mean, dtype=np.float32)).to(self.device)

    def points_tensor(self, ids: Any) -> Any:
        """Vectors of ``ids`` (float32 device tensor), the vocabulary mean for UNK_ID."""
        pts = self.index.vectors[ids.clamp(min=0)]
        return torch_where_unk(ids, pts, self._mean_t)

    def sample_noise_tensor(self, n: int, generator: Any) -> Any:
        """``n`` draws from p(z) ∝ exp(−ε‖z‖₂) (Madlib §2.6) as a float32 device tensor."""
        torch = _torch()
        d = self.embedding.dim
        z = torch.randn(n, d, generator=generator, device=self.device, dtype=torch.float32)
        z /= torch.linalg.vector_norm(z, dim=1, keepdim=True)
        shape = torch.full((n,), float(d), device=self.device, dtype=torch.float64)
        r = torch._standard_gamma(shape, generator=generator) / self.epsilon
        return z * r.to(torch.float32)[:, None]

    def _sample_tensor(self, ids: Any, g: Any) -> Any:
        torch = _torch()
        n = int(ids.shape[0])
        out = torch.empty(n, dtype=torch.int64, device=self.device)
        for s in range(0, n, _NOISE_CHUNK):
            chunk = ids[s : s + _NOISE_CHUNK]
            q = self.points_tensor(chunk) + self.sample_noise_tensor(int(chunk.shape[0]), g)
            out[s : s + chunk.shape[0]] = self.index.search_tensor(q)
        return out


def torch_where_unk(ids: Any, pts: Any, unk_point: Any) -> Any:
    torch = _torch()
    return torch.where((ids == UNK_ID)[:, None], unk_point[None, :], pts)


class TorchMadlib(_TorchEuclidean, Madlib):
    """:class:`~deniable.mechanisms.madlib.Madlib` sampled with torch (same guarantee: ε·d-privacy,
    d = Euclidean distance between embedding vectors, over the vocabulary ∪ {UNK}; Madlib paper
    Theorem 1; noise §2.6).

    Parameters
    ----------
    embedding, epsilon
        As for Madlib.
    device
        ``"cuda"`` (default), ``"cuda:N"`` or ``"cpu"``.
    precision, exact, memory_bytes
        Of the device search (:class:`TorchEuclideanIndex`).
    index
        Only ``"exact"`` (the device search); other indexes are numpy-backend options.
    batch_size
        Accepted for compatibility; the device sampler batches by ``memory_bytes``.
    """

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        device: Any = "cuda",
        precision: str = "fp32",
        exact: bool = True,
        memory_bytes: int = _DEFAULT_MEMORY,
        index: str = "exact",
        batch_size: int = 8192,
    ) -> None:
        _only_exact(index)
        super().__init__(embedding, epsilon=epsilon, index=_Pending(), batch_size=batch_size)
        self._setup(device, precision, exact, memory_bytes)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), **self._backend_params()}


class _TorchEllipticalNoise(_TorchEuclidean):
    """Mahalanobis noise on the device (Algorithm 1): Madlib's noise times Σ_λ^{1/2}."""

    lam: float
    _sqrt: np.ndarray

    def _setup_noise(self) -> None:
        """Put Σ_λ^{1/2} on the device (after ``_setup``)."""
        torch = _torch()
        self._sqrt_t = torch.from_numpy(np.array(self._sqrt, dtype=np.float32)).to(self.device)

    def sample_noise_tensor(self, n: int, generator: Any) -> Any:
        """``n`` draws of Y·Σ_λ^{1/2}·X (Algorithm 1) as a float32 device tensor."""
        z = super().sample_noise_tensor(n, generator)
        if self.lam == 0:
            return z
        with matmul_precision("highest"):
            return z @ self._sqrt_t


class TorchMahalanobis(_TorchEllipticalNoise, Mahalanobis):
    """:class:`~deniable.mechanisms.mahalanobis.Mahalanobis` sampled with torch (same guarantee:
    ε·d-privacy, d = regularized Mahalanobis distance; Mahalanobis paper Theorem 1, Algorithm 2).
    Parameters as :class:`TorchMadlib` plus ``lam``."""

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        lam: float = 0.5,
        device: Any = "cuda",
        precision: str = "fp32",
        exact: bool = True,
        memory_bytes: int = _DEFAULT_MEMORY,
        index: str = "exact",
        batch_size: int = 8192,
    ) -> None:
        _only_exact(index)
        super().__init__(embedding, epsilon=epsilon, lam=lam, index=_Pending(), batch_size=batch_size)
        self._setup(device, precision, exact, memory_bytes)
        self._setup_noise()

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), **self._backend_params()}


class TorchVickrey(_TorchEllipticalNoise, Vickrey):
    """:class:`~deniable.mechanisms.vickrey.Vickrey` sampled with torch. Same guarantee as the
    numpy class (its noise mechanism's: ε·d-privacy with d the Euclidean distance for
    ``metric="euclidean"``, Madlib Theorem 1, or the regularized Mahalanobis distance for
    ``metric="mahalanobis"``, Xu et al. 2020 Theorem 1; the choice between the two nearest words
    is post-processing). On the device: the noisy vector, the exact two nearest words
    (:meth:`TorchEuclideanIndex.two_nearest_tensor`) and a float64 uniform from the device
    generator against :func:`~deniable.mechanisms.vickrey.vickrey_first_probability`.
    Parameters as :class:`~deniable.mechanisms.vickrey.Vickrey` plus ``device``, ``precision``,
    ``exact`` and ``memory_bytes`` as :class:`TorchMadlib`."""

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        t: float = 0.75,
        metric: str = "euclidean",
        lam: float | None = None,
        device: Any = "cuda",
        precision: str = "fp32",
        exact: bool = True,
        memory_bytes: int = _DEFAULT_MEMORY,
        index: str = "exact",
        batch_size: int = 8192,
    ) -> None:
        _only_exact(index)
        super().__init__(embedding, epsilon=epsilon, t=t, metric=metric, lam=lam, batch_size=batch_size)
        self._setup(device, precision, exact, memory_bytes)
        self._setup_noise()

    def _sample_tensor(self, ids: Any, g: Any) -> Any:
        torch = _torch()
        n = int(ids.shape[0])
        if self.n_words == 1:
            return torch.zeros(n, dtype=torch.int64, device=self.device)
        out = torch.empty(n, dtype=torch.int64, device=self.device)
        for s in range(0, n, _NOISE_CHUNK):
            chunk = ids[s : s + _NOISE_CHUNK]
            m = int(chunk.shape[0])
            q = self.points_tensor(chunk) + self.sample_noise_tensor(m, g)
            nn, d = self.index.two_nearest_tensor(q)
            p_first = _first_probability_tensor(d[:, 0], d[:, 1], self.t)
            u = torch.rand(m, generator=g, device=self.device, dtype=torch.float64)
            out[s : s + m] = torch.where(u < p_first, nn[:, 0], nn[:, 1])
        return out

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "index": self._index_spec, **self._backend_params()}


def _only_exact(index: Any) -> None:
    if index != "exact":
        raise ValueError(f"backend='torch' always searches exactly on the device; index={index!r} is a numpy-backend option (leave index='exact')")


class TorchBRR(_TorchMixin, BRR):
    """:class:`~deniable.mechanisms.brr.BRR` sampled with torch (same guarantee: ε·d-privacy,
    d = Hamming distance between the binary codes, over the vocabulary ∪ {UNK}; BRR paper
    Theorem 3, Algorithms 2–3). Bits flip when a float64 uniform is < 1/(1+e^ε), as in numpy;
    ties are broken by the same rank rule, with uniforms from the device generator.

    Parameters
    ----------
    binary_embedding, epsilon, n_bits, method
        As for BRR.
    device
        ``"cuda"`` (default), ``"cuda:N"`` or ``"cpu"``.
    memory_bytes
        Bound on the score buffer of one block (default 1 GiB).
    index
        ``"auto"`` or ``"exact"`` (both: the exact device search).
    """

    index: Any  # a TorchHammingIndex (BRR's is a HammingSearch)

    def __init__(
        self,
        binary_embedding: Any = None,
        *,
        epsilon: float,
        device: Any = "cuda",
        memory_bytes: int = _DEFAULT_MEMORY,
        index: str = "auto",
        n_bits: int = 256,
        method: str | None = None,
    ) -> None:
        if index not in ("auto", "exact"):
            raise ValueError(f"backend='torch' always searches exactly on the device; index={index!r} is a numpy-backend option")
        super().__init__(binary_embedding, epsilon=epsilon, index=_Pending(), n_bits=n_bits, method=method)
        torch = _torch()
        from ..binary.codes import unpack_bits

        be = self.binary_embedding
        self.device = resolve_device(device)
        self.index = TorchHammingIndex(be.bits(), device=self.device, memory_bytes=memory_bytes)
        self._index_spec = "torch-exact"
        self._memory_bytes = memory_bytes
        unk = unpack_bits(be.unk_code[None, :], be.n_bits)[0]
        self._unk_pm = torch.from_numpy(np.where(unk, 1.0, -1.0).astype(np.float32)).to(self.device, self.index.dtype)

    def _sample_tensor(self, ids: Any, g: Any) -> Any:
        torch = _torch()
        n = int(ids.shape[0])
        out = torch.empty(n, dtype=torch.int64, device=self.device)
        for s in range(0, n, _NOISE_CHUNK):
            chunk = ids[s : s + _NOISE_CHUNK]
            m = int(chunk.shape[0])
            q = self.randomize_pm_tensor(chunk, g)
            u = torch.rand(m, generator=g, device=self.device, dtype=torch.float64)
            out[s : s + m] = self.index.search_pm(q, u)
        return out

    def randomize_pm_tensor(self, ids: Any, generator: Any) -> Any:
        """Randomized response (Algorithm 2) on the ±1 codes of ``ids`` (device tensor): each bit
        flips when a float64 uniform is below 1/(1+e^ε). Returns ±1 codes in the index's dtype."""
        torch = _torch()
        q = torch_where_unk(ids, self.index.codes[ids.clamp(min=0)], self._unk_pm)
        u = torch.rand(int(ids.shape[0]), self.n_bits, generator=generator, device=self.device, dtype=torch.float64)
        return torch.where(u < self.flip_probability, -q, q)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), **self._backend_params()}

    def __reduce__(self):
        return (_rebuild_brr, (self.binary_embedding, self.epsilon, str(self.device), self._memory_bytes))


def _rebuild_brr(be: Any, epsilon: float, device: str, memory_bytes: int) -> TorchBRR:
    return TorchBRR(be, epsilon=epsilon, device=device, memory_bytes=memory_bytes)


class TorchTEM(_TorchMixin, TEM):
    """:class:`~deniable.mechanisms.tem.TEM` sampled with torch: the same exact rejection sampler
    (class docs of TEM) over the same sampling tables, on the device. Same guarantee (TEM paper
    Theorem 2): ε·d-privacy for the chosen metric over the vocabulary ∪ {UNK}. A user-callable
    metric is evaluated on the CPU for the (rare) draws that need a distance.

    Parameters: those of TEM plus ``device``.
    """

    def __init__(
        self,
        embedding: Any,
        *,
        epsilon: float,
        device: Any = "cuda",
        beta: float = 0.001,
        gamma: float | None = None,
        metric: Any = "euclidean",
        k: int = 128,
        neighbors: str = "knn",
        cache_dir: Any = None,
        memory_bytes: int = 64 << 20,
    ) -> None:
        super().__init__(
            embedding,
            epsilon=epsilon,
            beta=beta,
            gamma=gamma,
            metric=metric,
            k=k,
            neighbors=neighbors,
            cache_dir=cache_dir,
            memory_bytes=memory_bytes,
            storage="table",  # the device holds the sampling tables
        )
        self.device = resolve_device(device)
        self._dev: dict[str, Any] | None = None

    def _device_tables(self) -> dict[str, Any]:
        if self._dev is None or self._dev["tables"] is not self._get_tables():
            torch = _torch()
            T = self._get_tables()

            def put(a: np.ndarray, dtype: Any) -> Any:
                return torch.from_numpy(np.ascontiguousarray(a)).to(self.device, dtype)

            self._dev = {
                "tables": T,
                "start": put(T.start, torch.int64),
                "count": put(T.count, torch.int64),
                "ids": put(T.ids, torch.int64),
                "cum": put(T.cum, torch.float64),
                "list_mass": put(T.list_mass, torch.float64),
                "unif_mass": put(T.unif_mass, torch.float64),
                "complete": put(T.complete, torch.bool),
                "env": put(T.env, torch.float64),
                "points": put(np.vstack([self.embedding.vectors, self.embedding.mean[None, :]]), torch.float32),
                "halvings": T.halvings,
            }
        return self._dev

    def _distances(self, D: dict[str, Any], rows: Any, y: Any) -> Any:
        """d(points[rows[i]], vectors[y[i]]) in float64 on the device (callable metric: CPU)."""
        torch = _torch()
        if callable(self.metric):
            from ..neighbors.neighborhoods import row_distances

            d = row_distances(self._pts, self.embedding.vectors, rows.cpu().numpy(), y.cpu().numpy(), self.metric)
            return torch.from_numpy(d).to(self.device)
        A = D["points"][rows].double()
        B = D["points"][y].double()
        if self.metric == "angular":
            A = A / torch.linalg.vector_norm(A, dim=1, keepdim=True)
            B = B / torch.linalg.vector_norm(B, dim=1, keepdim=True)
            chord = torch.linalg.vector_norm(A - B, dim=1)
            return 2.0 * torch.asin(torch.clamp(chord / 2.0, max=1.0))
        diff = A - B
        if self.metric == "euclidean":
            return torch.linalg.vector_norm(diff, dim=1)
        if self.metric == "manhattan":
            return diff.abs().sum(1)
        return diff.abs().amax(1)  # chebyshev

    def _sample_tensor(self, ids: Any, g: Any) -> Any:
        """The rejection rounds of :meth:`~deniable.mechanisms._exponential.ExponentialSampler.sample`
        in tensor arithmetic, over the numpy mechanism's own
        :class:`~deniable.mechanisms._exponential.SamplingTables` (put on the device once): the
        one torch implementation of the exact sampler. Same distribution, other random streams."""
        torch = _torch()
        D = self._device_tables()
        a, gam, V = self.epsilon / 2.0, self.gamma, self.n_words
        rows = torch.where(ids == UNK_ID, torch.full_like(ids, V), ids)
        out = torch.empty(ids.shape[0], dtype=torch.int64, device=self.device)
        pending = torch.arange(ids.shape[0], device=self.device)
        f64 = dict(generator=g, device=self.device, dtype=torch.float64)
        while pending.numel():
            r = rows[pending]
            S = D["list_mass"][r]
            x = torch.rand(r.shape[0], **f64) * (S + D["unif_mass"][r])
            from_list = x < S
            sel = torch.nonzero(from_list).flatten()
            if sel.numel():
                rl, xl = r[sel], x[sel]
                base = D["start"][rl]
                lo = torch.zeros_like(rl)
                hi = D["count"][rl] - 1
                for _ in range(D["halvings"]):
                    mid = (lo + hi) >> 1
                    right = D["cum"][base + mid] <= xl
                    lo = torch.where(right, mid + 1, lo)
                    hi = torch.where(right, hi, mid)
                out[pending[sel]] = D["ids"][base + lo]
            rest = torch.nonzero(~from_list).flatten()
            if not rest.numel():
                break
            tok = pending[rest]
            ru = r[rest]
            y = torch.randint(0, V, (ru.shape[0],), generator=g, device=self.device)
            accept = D["complete"][ru].clone()
            check = torch.nonzero(~accept).flatten()
            if check.numel():
                rc = ru[check]
                d = self._distances(D, rc, y[check])
                log_ratio = torch.clamp(-a * (torch.clamp(d, max=gam) - D["env"][rc]), max=0.0)
                accept[check] = torch.rand(check.shape[0], **f64) < torch.exp(log_ratio)
            out[tok[accept]] = y[accept]
            pending = tok[~accept]
        return out

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), **self._backend_params()}


def _first_probability_tensor(d1: Any, d2: Any, t: float) -> Any:
    """:func:`~deniable.mechanisms.vickrey.vickrey_first_probability` on device tensors (float64),
    so the sampler never copies to the host."""
    torch = _torch()
    num = (1.0 - t) * d2
    den = t * d1 + num
    return torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)), torch.full_like(den, 1.0 - t))


_CLASSES: dict[str, type] = {"madlib": TorchMadlib, "mahalanobis": TorchMahalanobis, "vickrey": TorchVickrey, "brr": TorchBRR, "tem": TorchTEM}


def torch_mechanisms() -> list[str]:
    """Names of the mechanisms with a torch backend."""
    return sorted(_CLASSES)


def torch_mechanism_class(name: str) -> type:
    """The torch class of mechanism ``name``; ``ValueError`` naming the torch backends when it has none."""
    if name not in _CLASSES:
        raise ValueError(f"mechanism {name!r} has no torch backend (torch backends: {', '.join(torch_mechanisms())}); use backend='numpy'")
    return _CLASSES[name]


def build(name: str, embedding: Any = None, *, epsilon: float, device: Any = "cuda", **params: Any) -> Any:
    """Build mechanism ``name`` with the torch backend on ``device``."""
    cls = torch_mechanism_class(name)
    if embedding is None:
        from ..embeddings import load_embedding

        embedding = load_embedding()
    return cls(embedding, epsilon=epsilon, device=device, **params)
