"""TEM sampled with torch: the exact rejection sampler over the numpy mechanism's sampling tables,
in tensor arithmetic on the device (see :mod:`deniable.backends.torch_backend`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..embeddings.embedding import UNK_ID
from ..mechanisms._em_base import precomputed_neighbors_param
from ..mechanisms.tem import TEM
from ..neighbors.torch_index import resolve_device
from ._torch_base import _torch, _TorchMixin

__all__ = ["TorchTEM"]


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
        precomputed_neighbors: int = 128,
        neighbors: str = "knn",
        cache_dir: Any = None,
        memory_bytes: int = 64 << 20,
        k: int | None = None,
    ) -> None:
        precomputed_neighbors = precomputed_neighbors_param(type(self).__name__, precomputed_neighbors, k)
        super().__init__(
            embedding, epsilon=epsilon, beta=beta, gamma=gamma, metric=metric, precomputed_neighbors=precomputed_neighbors, neighbors=neighbors,
            cache_dir=cache_dir, memory_bytes=memory_bytes,
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
