"""GPU nearest-neighbour search (PyTorch) for the evaluation runs: a drop-in ``index`` for Madlib /
Mahalanobis (Euclidean 1-NN) and BRR (Hamming 1-NN with the library's tie rule).

The search is post-processing of the mechanism's noisy point, so swapping the index keeps every
guarantee; the noise is still drawn by the library's own sampler on the CPU. Both searches are
exact (Euclidean in float32 with TF32 off; Hamming with ±1 codes in float16, whose integer dot
products ≤ 256 are exact) and are checked against the library's exact indexes by
``python scripts/gpu_search.py`` (prints the agreement).
"""

from __future__ import annotations

import numpy as np


def _torch():
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


class TorchEuclideanIndex:
    """Exact Euclidean 1-NN over ``vectors`` on a CUDA device: argmin ‖v‖² − 2·q·v."""

    def __init__(self, vectors: np.ndarray, *, device: str = "cuda", batch: int = 16384) -> None:
        torch = _torch()
        self.torch, self.device, self.batch = torch, device, batch
        self.V = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32)).to(device)
        self.norms = (self.V * self.V).sum(dim=1)

    def search(self, queries: np.ndarray) -> np.ndarray:
        torch = self.torch
        q_all = np.ascontiguousarray(queries, dtype=np.float32)
        out = np.empty(q_all.shape[0], dtype=np.int64)
        with torch.no_grad():
            for s in range(0, q_all.shape[0], self.batch):
                q = torch.from_numpy(q_all[s : s + self.batch]).to(self.device)
                d = self.norms[None, :] - 2.0 * (q @ self.V.T)
                out[s : s + q.shape[0]] = d.argmin(dim=1).cpu().numpy()
        return out


class TorchHammingIndex:
    """Exact Hamming 1-NN over packed codes on a CUDA device; ties broken as
    :class:`deniable.binary.hamming.HammingIndex` does (the tied id of rank ⌊u·C⌋ in ascending id
    order, u from ``ties`` or ``rng``)."""

    def __init__(self, codes: np.ndarray, n_bits: int, *, device: str = "cuda", batch: int = 4096) -> None:
        from deniable.binary.codes import unpack_bits

        torch = _torch()
        self.torch, self.device, self.batch, self.n_bits = torch, device, batch, n_bits
        self._unpack = lambda c: unpack_bits(c, n_bits)
        bits = self._unpack(codes)
        self.C = torch.from_numpy(np.where(bits, 1.0, -1.0).astype(np.float16)).to(device)

    def search(self, queries: np.ndarray, ties: np.ndarray | None = None, rng=None) -> np.ndarray:
        from deniable._rng import as_generator

        torch = self.torch
        q_bits = self._unpack(np.asarray(queries, dtype=np.uint64))
        n = q_bits.shape[0]
        u = np.asarray(ties, dtype=np.float64) if ties is not None else as_generator(rng).random(n)
        out = np.empty(n, dtype=np.int64)
        with torch.no_grad():
            for s in range(0, n, self.batch):
                q = torch.from_numpy(np.where(q_bits[s : s + self.batch], 1.0, -1.0).astype(np.float16)).to(self.device)
                S = q @ self.C.T  # n_bits - 2·Hamming, exact in float16
                best = S.max(dim=1, keepdim=True).values
                mask = best == S
                count = mask.sum(dim=1)
                uu = torch.from_numpy(u[s : s + q.shape[0]]).to(self.device)
                rank = torch.minimum((uu * count).floor().long(), count - 1)
                cs = mask.cumsum(dim=1)
                pick = (mask & (cs == (rank + 1)[:, None])).int().argmax(dim=1)
                out[s : s + q.shape[0]] = pick.cpu().numpy()
        return out


def gpu_index_for(mechanism):
    """The GPU index matching ``mechanism`` (Madlib/Mahalanobis: Euclidean; BRR: Hamming), or None."""
    from deniable import BRR, Madlib

    if isinstance(mechanism, BRR):
        return TorchHammingIndex(mechanism.binary_embedding.codes, mechanism.n_bits)
    if isinstance(mechanism, Madlib):  # Mahalanobis too: the search is Euclidean on noisy points
        return TorchEuclideanIndex(mechanism.embedding.vectors)
    return None


if __name__ == "__main__":
    import time

    import deniable
    from deniable.binary.hamming import HammingIndex
    from deniable.neighbors import make_index

    emb = deniable.load_embedding()
    rng = np.random.default_rng(0)
    q = emb.vectors[rng.integers(0, len(emb), 20000)] + rng.normal(0, 0.6, (20000, emb.dim)).astype(np.float32)
    t = time.time()
    a = make_index("exact", emb.vectors).search(q.astype(np.float32))
    t_cpu = time.time() - t
    g = TorchEuclideanIndex(emb.vectors)
    g.search(q[:10])
    t = time.time()
    b = g.search(q)
    print(f"euclidean: agreement {np.mean(a == b):.6f} over {len(q)} queries; cpu {len(q) / t_cpu:.0f} q/s, gpu {len(q) / (time.time() - t):.0f} q/s")
    brr = deniable.BRR(epsilon=1.0)
    codes = brr.binary_embedding.codes
    noisy = brr.randomize_codes(codes[rng.integers(0, len(codes), 20000)], rng)
    ties = rng.random(20000)
    a = HammingIndex(codes).search(noisy, ties=ties)
    b = TorchHammingIndex(codes, brr.n_bits).search(noisy, ties=ties)
    print(f"hamming: agreement {np.mean(a == b):.6f} over {len(noisy)} queries (same ties)")
