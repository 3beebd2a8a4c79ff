"""Shared pieces of the torch samplers (:mod:`deniable.backends.torch_backend`): the optional
torch import, the device generator seeded from the caller's ``rng``, and the mixin that replaces a
numpy mechanism's sampler by a device one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._optional import import_optional
from .._rng import RNGLike, as_generator
from ..embeddings.embedding import UNK_ID

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

    def _in_chunks(self, ids: Any, sample_chunk: Callable[[Any], Any]) -> Any:
        """``sample_chunk(ids[s : s + _NOISE_CHUNK])`` for consecutive blocks, in order (so the
        generator's draws follow the ids), gathered into one int64 device tensor."""
        torch = _torch()
        n = int(ids.shape[0])
        out = torch.empty(n, dtype=torch.int64, device=self.device)
        for s in range(0, n, _NOISE_CHUNK):
            chunk = ids[s : s + _NOISE_CHUNK]
            out[s : s + chunk.shape[0]] = sample_chunk(chunk)
        return out

    def _backend_params(self) -> dict[str, Any]:
        return {"backend": "torch", "device": str(self.device)}

    def _params(self) -> dict[str, Any]:
        """The numpy mechanism's parameters, then the backend's (shown in ``repr``)."""
        return {**super()._params(), **self._backend_params()}  # type: ignore[misc]


def torch_where_unk(ids: Any, pts: Any, unk_point: Any) -> Any:
    torch = _torch()
    return torch.where((ids == UNK_ID)[:, None], unk_point[None, :], pts)


def _only_exact(index: Any) -> None:
    if index != "exact":
        raise ValueError(f"backend='torch' always searches exactly on the device; index={index!r} is a numpy-backend option (leave index='exact')")
