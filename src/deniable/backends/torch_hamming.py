"""BRR sampled with torch: randomized response on ±1 codes and an exact Hamming search on the
device, H(q, c) = (n − q·c)/2 (see :mod:`deniable.backends.torch_backend`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_int
from ..mechanisms.brr import BRR
from ..neighbors.torch_index import matmul_precision, resolve_device
from ._torch_base import _DEFAULT_MEMORY, _Pending, _torch, _TorchMixin, torch_where_unk

__all__ = ["TorchHammingIndex", "TorchBRR"]


class TorchHammingIndex:
    """Exact Hamming 1-NN on a torch device with BRR's tie rule (rank ⌊u·C⌋ among the C tied
    codes in ascending id order), through ±1 codes: H(q, c) = (n − q·c)/2.

    ``bits`` are the ``(V, n_bits)`` boolean codes; ``device`` (``"cuda"``, ``"cuda:N"`` or
    ``"cpu"``) and ``memory_bytes`` (the bound on one block's score buffer, default 1 GiB) are as
    for :class:`~deniable.neighbors.torch_index.TorchEuclideanIndex`.
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

        def nearest_of_noisy(chunk: Any) -> Any:
            q = self.randomize_pm_tensor(chunk, g)
            u = torch.rand(int(chunk.shape[0]), generator=g, device=self.device, dtype=torch.float64)
            return self.index.search_pm(q, u)

        return self._in_chunks(ids, nearest_of_noisy)

    def randomize_pm_tensor(self, ids: Any, generator: Any) -> Any:
        """Randomized response (Algorithm 2) on the ±1 codes of ``ids`` (device tensor): each bit
        flips when a float64 uniform is below 1/(1+e^ε). Returns ±1 codes in the index's dtype."""
        torch = _torch()
        q = torch_where_unk(ids, self.index.codes[ids.clamp(min=0)], self._unk_pm)
        u = torch.rand(int(ids.shape[0]), self.n_bits, generator=generator, device=self.device, dtype=torch.float64)
        return torch.where(u < self.flip_probability, -q, q)

    def __reduce__(self):
        return (_rebuild_brr, (self.binary_embedding, self.epsilon, str(self.device), self._memory_bytes))


def _rebuild_brr(be: Any, epsilon: float, device: str, memory_bytes: int) -> TorchBRR:
    return TorchBRR(be, epsilon=epsilon, device=device, memory_bytes=memory_bytes)
