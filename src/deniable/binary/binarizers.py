"""Binarizers: real word embeddings -> ``n_bits``-bit codes, fitted on the public embedding only.

* :class:`AutoencoderBinarizer` — the near-lossless binarization autoencoder of Tissier,
  Gravier, Habrard (AAAI 2019), the binarizer the BRR paper uses (§4, §6: "transforms it into a
  binary representation with 256 dimensions as described in [20]"): code
  ``b = H(W x + c)`` (Heaviside), reconstruction ``y = tanh(Wᵀ b + s)``, loss
  ``‖x − y‖² + λ · ½‖W Wᵀ − I‖²_F`` (the regularizer keeps W's rows near-orthonormal), trained with
  the straight-through gradient for H. numpy by default; ``backend="torch"`` uses torch if
  installed (same model and loss). By default the encoder bias c is held at 0 (see
  ``encoder_bias``).
* :class:`RandomProjectionBinarizer` — the signs of random Gaussian projections of the centred
  vectors (SimHash; Hamming distance then estimates the angle between vectors).
* :class:`ITQBinarizer` — iterative quantization (Gong & Lazebnik 2011): PCA to ``n_bits``
  dimensions, then the rotation minimizing the quantization error to the hypercube vertices.

Inputs are centred on the vocabulary mean, so the UNK point (the mean vector, as in Madlib) is
encoded like any other vector. Quality on the default embedding (10-NN overlap between real and
binary space) is in ``docs/results/binarizers.md``; :data:`DEFAULT_METHOD` is the best there.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from .._blas import single_threaded_blas
from .._optional import import_optional
from .._rng import RNGLike, as_generator
from .._validation import check_int, check_positive
from .codes import BinaryEmbedding, pack_bits

__all__ = [
    "Binarizer",
    "AutoencoderBinarizer",
    "RandomProjectionBinarizer",
    "ITQBinarizer",
    "BINARIZERS",
    "DEFAULT_METHOD",
    "get_binarizer",
    "binarize",
]


class Binarizer(ABC):
    """Fit on vectors ``(V, d)``; :meth:`encode` maps vectors to boolean ``(n, n_bits)`` codes."""

    name = "binarizer"

    def __init__(self, n_bits: int) -> None:
        self.n_bits = check_int("n_bits", n_bits, minimum=1)
        self.mean_: np.ndarray | None = None

    @abstractmethod
    def fit(self, vectors: np.ndarray, rng: RNGLike = None) -> Binarizer:
        """Learn the map from ``vectors`` (float ``(V, d)``)."""

    @abstractmethod
    def _encode_centred(self, x: np.ndarray) -> np.ndarray: ...

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """Boolean codes ``(n, n_bits)`` of ``vectors``."""
        if self.mean_ is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit() first")
        x = np.atleast_2d(np.asarray(vectors, dtype=np.float64)) - self.mean_
        return self._encode_centred(x)

    def encode_packed(self, vectors: np.ndarray, *, block_bytes: int = 32 << 20) -> np.ndarray:
        """Packed ``uint64`` codes ``(n, ceil(n_bits/64))`` of ``vectors`` (as
        ``pack_bits(encode(vectors))``), encoded in blocks of rows: no float64 copy of the matrix."""
        from .codes import pack_bits

        vectors = np.atleast_2d(vectors)
        n = vectors.shape[0]
        out = np.empty((n, (self.n_bits + 63) // 64), dtype=np.uint64)
        step = max(1, block_bytes // (8 * max(1, vectors.shape[1], self.n_bits)))
        for s in range(0, n, step):
            out[s : s + step] = pack_bits(self.encode(vectors[s : s + step]))
        return out

    def params(self) -> dict[str, Any]:
        """JSON-serializable parameters (recorded in bundle metadata)."""
        return {"method": self.name, "n_bits": self.n_bits}

    @classmethod
    def max_bits(cls, n_words: int, dim: int) -> int | None:
        """Largest code length this binarizer can fit on ``n_words`` vectors of ``dim``
        dimensions (``None``: no limit)."""
        return None

    def _check_shape(self, shape: tuple[int, ...]) -> None:
        """The input checks of every fit: a (n_words >= 2, dim) matrix and n_bits within
        :meth:`max_bits`."""
        if len(shape) != 2:
            raise ValueError(f"vectors must be a 2-D array (n_words, dim), got shape {shape}")
        if shape[0] < 2:
            raise ValueError(
                f"binarizing needs at least 2 words (the codes are fitted on the vocabulary's spread), "
                f"got n_words={shape[0]}; use a larger vocabulary"
            )
        limit = self.max_bits(shape[0], shape[1])
        if limit is not None and self.n_bits > limit:
            raise ValueError(
                f"the {self.name!r} binarizer needs n_bits <= min(n_words, dim) = {limit}, got n_bits={self.n_bits} "
                f"(n_words={shape[0]}, dim={shape[1]}); use n_bits <= {limit}, more words, "
                f"or method='random-projection' or 'autoencoder' (no such limit)"
            )

    def _centre(self, vectors: np.ndarray) -> np.ndarray:
        x = np.asarray(vectors, dtype=np.float64)
        self._check_shape(x.shape)
        self.mean_ = x.mean(axis=0)
        return x - self.mean_


class RandomProjectionBinarizer(Binarizer):
    """Sign of ``n_bits`` random Gaussian projections of the centred vectors (SimHash)."""

    name = "random-projection"

    def fit(self, vectors: np.ndarray, rng: RNGLike = None) -> RandomProjectionBinarizer:
        x = self._centre(vectors)
        self.projection_ = as_generator(rng).standard_normal((x.shape[1], self.n_bits))
        return self

    def _encode_centred(self, x: np.ndarray) -> np.ndarray:
        return x @ self.projection_ > 0


#: ITQ fits in memory (an SVD of the centred float64 matrix) up to this size; larger inputs use
#: the blocked covariance and a row sample (:meth:`ITQBinarizer._fit_large`).
_ITQ_IN_MEMORY_BYTES = 256 << 20
_ITQ_SAMPLE = 50_000


class ITQBinarizer(Binarizer):
    """Iterative quantization: PCA to ``n_bits`` ≤ d dimensions, then an orthogonal rotation R
    alternately minimizing ‖B − V R‖²_F over B ∈ {−1, 1} and R (orthogonal Procrustes).

    Parameters
    ----------
    n_bits
        Code length; at most ``min(n_words, dim)`` of the fitted vectors (:meth:`max_bits`).
    n_iter
        Alternating iterations (50 in the ITQ paper).
    """

    name = "itq"

    def __init__(self, n_bits: int, *, n_iter: int = 50) -> None:
        super().__init__(n_bits)
        self.n_iter = check_int("n_iter", n_iter, minimum=0)

    @classmethod
    def max_bits(cls, n_words: int, dim: int) -> int | None:
        # PCA to n_bits dimensions: the SVD of the (n_words, dim) data has min(n_words, dim) axes
        return min(int(n_words), int(dim))

    def fit(self, vectors: np.ndarray, rng: RNGLike = None) -> ITQBinarizer:
        vectors = np.asarray(vectors)
        if vectors.ndim == 2 and vectors.shape[0] * vectors.shape[1] * 8 > _ITQ_IN_MEMORY_BYTES:
            return self._fit_large(vectors, rng)
        x = self._centre(vectors)
        with single_threaded_blas():  # LAPACK on 2 busy cores: 9.6 s multi-threaded vs 1.2 s (34K x 300)
            _, _, vt = np.linalg.svd(x, full_matrices=False)
        self.pca_ = vt[: self.n_bits].T
        v = x @ self.pca_
        return self._rotate(v, rng)

    def _fit_large(self, vectors: np.ndarray, rng: RNGLike) -> ITQBinarizer:
        """The same fit for a vocabulary whose float64 copy would be large: mean and covariance
        in float64 blocks, PCA axes from the covariance's eigenvectors (each axis signed so its
        largest component is positive), and the rotation learned on a seeded sample of
        ``_ITQ_SAMPLE`` (50,000) rows, in float32 (ITQ's alternating steps only need the spread of the data). The
        working set stays a few hundred MB at any vocabulary size."""
        gen = as_generator(rng)
        self._check_shape(vectors.shape)
        n, d = vectors.shape
        step = max(1, (32 << 20) // (8 * d))
        total = np.zeros(d)
        for s in range(0, n, step):
            total += vectors[s : s + step].astype(np.float64).sum(axis=0)
        self.mean_ = total / n
        cov = np.zeros((d, d))
        for s in range(0, n, step):
            b = vectors[s : s + step].astype(np.float64) - self.mean_
            cov += b.T @ b
        with single_threaded_blas():
            w, e = np.linalg.eigh(cov)
        axes = e[:, np.argsort(w)[::-1][: self.n_bits]]
        axes *= np.where(axes[np.abs(axes).argmax(axis=0), np.arange(axes.shape[1])] < 0, -1.0, 1.0)
        self.pca_ = axes
        rows = np.sort(gen.choice(n, size=min(n, _ITQ_SAMPLE), replace=False))
        v = ((vectors[rows].astype(np.float64) - self.mean_) @ self.pca_).astype(np.float32)
        return self._rotate(v, gen)

    def _rotate(self, v: np.ndarray, rng: RNGLike) -> ITQBinarizer:
        # v is float64 on the in-memory path, float32 on the large one (a quarter of the working set)
        with single_threaded_blas():
            r, _ = np.linalg.qr(as_generator(rng).standard_normal((self.n_bits, self.n_bits)))
        dt = v.dtype
        for _ in range(self.n_iter):
            b = np.where(v @ r.astype(dt) >= 0, dt.type(1.0), dt.type(-1.0))
            with single_threaded_blas():  # a small SVD: threads only spin (seconds on busy cores)
                u, _, wt = np.linalg.svd((v.T @ b).astype(np.float64))
            r = u @ wt
        self.rotation_ = r
        return self

    def _encode_centred(self, x: np.ndarray) -> np.ndarray:
        return (x @ self.pca_) @ self.rotation_ >= 0

    def params(self) -> dict[str, Any]:
        return {**super().params(), "n_iter": self.n_iter}


class AutoencoderBinarizer(Binarizer):
    """Near-lossless binarization autoencoder (Tissier et al. 2019), trained with Adam.

    Model: ``b = H(W x̃ + c)``, ``y = tanh(Wᵀ b + s)``, with x̃ the centred vector divided by a
    scale (the 99.9th percentile of |x̃|) and clipped to [−1, 1] so tanh can reconstruct it. Loss
    per batch: mean squared reconstruction error + ``reg`` · ½‖W Wᵀ − I‖²_F. The Heaviside step
    has zero gradient almost everywhere, so training passes the gradient straight through it
    (∂b/∂z := 1).

    Parameters
    ----------
    n_bits
        Code length (rows of W).
    epochs, batch_size, lr
        Adam training schedule over the vocabulary.
    reg
        Weight λ of the orthogonality regularizer.
    backend
        ``"numpy"`` (default) or ``"torch"`` (optional dependency; same model).
    encoder_bias
        Learn the encoder bias c as Tissier et al. do. Default ``False``: c stays 0, so each bit
        thresholds a projection of the centred vector. On the default embedding a learned c drifted
        during training and unbalanced the bits (10-NN overlap 0.314 after 10 epochs of batch 64,
        against 0.508 with c = 0; ``docs/results/binarizers.md``).
    verbose
        Print the loss per epoch to stderr.
    """

    name = "autoencoder"

    def __init__(
        self,
        n_bits: int,
        *,
        epochs: int = 5,
        batch_size: int = 256,
        lr: float = 1e-3,
        reg: float = 1.0,
        backend: str = "numpy",
        encoder_bias: bool = False,
        verbose: bool = False,
    ) -> None:
        super().__init__(n_bits)
        self.encoder_bias = bool(encoder_bias)
        self.epochs = check_int("epochs", epochs, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.lr = check_positive("lr", lr)
        if isinstance(reg, bool) or not isinstance(reg, (int, float)) or reg < 0:
            raise ValueError(f"reg must be a number >= 0, got {reg!r}")
        self.reg = float(reg)
        if backend not in ("numpy", "torch"):
            raise ValueError(f"backend must be 'numpy' or 'torch', got {backend!r}")
        self.backend = backend
        self.verbose = bool(verbose)
        self.losses_: list[float] = []

    def params(self) -> dict[str, Any]:
        return {**super().params(), "epochs": self.epochs, "batch_size": self.batch_size, "lr": self.lr, "reg": self.reg, "backend": self.backend, "encoder_bias": self.encoder_bias}

    def _prepare(self, vectors: np.ndarray) -> np.ndarray:
        x = self._centre(vectors)
        scale = float(np.quantile(np.abs(x), 0.999))
        self.scale_ = scale if scale > 0 else 1.0
        return np.clip(x / self.scale_, -1.0, 1.0)

    def fit(self, vectors: np.ndarray, rng: RNGLike = None) -> AutoencoderBinarizer:
        x = self._prepare(vectors)
        gen = as_generator(rng)
        _n, d = x.shape
        # Glorot-uniform initialization of W (n_bits x d).
        lim = np.sqrt(6.0 / (d + self.n_bits))
        w0 = gen.uniform(-lim, lim, size=(self.n_bits, d))
        if self.backend == "torch":
            self._fit_torch(x, w0, gen)
        else:
            self._fit_numpy(x, w0, gen)
        return self

    def _fit_numpy(self, x: np.ndarray, w: np.ndarray, gen: np.random.Generator) -> None:
        n, d = x.shape
        x = x.astype(np.float32)
        params = [w.astype(np.float32), np.zeros(self.n_bits, np.float32), np.zeros(d, np.float32)]  # W, c, s
        m = [np.zeros_like(p) for p in params]
        v = [np.zeros_like(p) for p in params]
        b1, b2, eps = 0.9, 0.999, 1e-8
        eye = np.eye(self.n_bits, dtype=np.float32)
        t = 0
        for epoch in range(self.epochs):
            t0 = time.perf_counter()
            order = gen.permutation(n)
            total = 0.0
            for s in range(0, n, self.batch_size):
                xb = x[order[s : s + self.batch_size]]
                W, c, sb = params
                z = xb @ W.T + c
                b = (z > 0).astype(np.float32)
                y = np.tanh(b @ W + sb)
                diff = y - xb
                bs = xb.shape[0]
                total += float(np.einsum("ij,ij->", diff, diff))
                gy = (2.0 / bs) * diff * (1.0 - y * y)  # d loss / d(pre-tanh)
                gW = b.T @ gy  # decoder path, (n_bits, d)
                gb = gy @ W.T  # d loss / d b, straight through to z
                gW += gb.T @ xb  # encoder path
                gc = gb.sum(axis=0) if self.encoder_bias else np.zeros_like(c)
                gs = gy.sum(axis=0)
                if self.reg:
                    gW += self.reg * 2.0 * ((W @ W.T - eye) @ W)  # ∂/∂W of ½‖WWᵀ−I‖²_F
                t += 1
                for p, g, mm, vv in zip(params, (gW, gc, gs), m, v):
                    mm *= b1
                    mm += (1 - b1) * g
                    vv *= b2
                    vv += (1 - b2) * g * g
                    p -= self.lr * (mm / (1 - b1**t)) / (np.sqrt(vv / (1 - b2**t)) + eps)
            self.losses_.append(total / n)
            if self.verbose:
                import sys

                print(f"autoencoder epoch {epoch + 1}/{self.epochs}: reconstruction {total / n:.4f} ({time.perf_counter() - t0:.1f}s)", file=sys.stderr)
        self.W_, self.c_, self.s_ = (p.astype(np.float64) for p in params)

    def _fit_torch(self, x: np.ndarray, w0: np.ndarray, gen: np.random.Generator) -> None:
        torch = import_optional("torch", purpose="the torch backend of the binarization autoencoder")
        tg = torch.Generator().manual_seed(int(gen.integers(2**62)))
        X = torch.from_numpy(x.astype(np.float32))
        W = torch.tensor(w0, dtype=torch.float32, requires_grad=True)
        c = torch.zeros(self.n_bits, requires_grad=self.encoder_bias)
        s = torch.zeros(x.shape[1], requires_grad=True)
        opt = torch.optim.Adam([W, c, s] if self.encoder_bias else [W, s], lr=self.lr)
        eye = torch.eye(self.n_bits)
        n = X.shape[0]
        for _epoch in range(self.epochs):
            perm = torch.randperm(n, generator=tg)
            total = 0.0
            for i in range(0, n, self.batch_size):
                xb = X[perm[i : i + self.batch_size]]
                z = xb @ W.T + c
                b = z + ((z > 0).float() - z).detach()  # straight-through Heaviside
                y = torch.tanh(b @ W + s)
                rec = ((y - xb) ** 2).sum(dim=1).mean()
                loss = rec + self.reg * 0.5 * ((W @ W.T - eye) ** 2).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(rec.detach()) * xb.shape[0]
            self.losses_.append(total / n)
        self.W_ = W.detach().numpy().astype(np.float64)
        self.c_ = c.detach().numpy().astype(np.float64)
        self.s_ = s.detach().numpy().astype(np.float64)

    def _encode_centred(self, x: np.ndarray) -> np.ndarray:
        xs = np.clip(x / self.scale_, -1.0, 1.0)
        return xs @ self.W_.T + self.c_ > 0

    def reconstruct(self, vectors: np.ndarray) -> np.ndarray:
        """Decoder output for ``vectors`` (in the original units), to check the reconstruction."""
        b = self.encode(vectors).astype(np.float64)
        return np.tanh(b @ self.W_ + self.s_) * self.scale_ + self.mean_


BINARIZERS: dict[str, type[Binarizer]] = {
    "autoencoder": AutoencoderBinarizer,
    "random-projection": RandomProjectionBinarizer,
    "itq": ITQBinarizer,
}

#: The binarizer with the best 10-NN overlap on the default embedding (docs/results/binarizers.md).
DEFAULT_METHOD = "itq"


def get_binarizer(method: str | None, n_bits: int, **params: Any) -> Binarizer:
    """A binarizer by name (``None``: :data:`DEFAULT_METHOD`)."""
    method = DEFAULT_METHOD if method is None else method
    if method not in BINARIZERS:
        raise ValueError(f"unknown binarizer {method!r}; choose one of {', '.join(BINARIZERS)}")
    return BINARIZERS[method](n_bits, **params)


def binarize(embedding: Any, *, n_bits: int = 256, method: str | None = None, rng: RNGLike = 0, **params: Any) -> BinaryEmbedding:
    """Binarize a :class:`~deniable.embeddings.Embedding` into a :class:`BinaryEmbedding`.

    The binarizer is fitted on the embedding's vectors only (public data), and the UNK code is
    the binarizer's code of the embedding's mean vector (``unk_method="encoded-mean"``).

    Parameters
    ----------
    embedding
        The real-valued embedding.
    n_bits
        Code length (default 256, as the BRR paper §6).
    method
        ``"autoencoder"``, ``"random-projection"``, ``"itq"``; ``None`` = :data:`DEFAULT_METHOD`.
    rng
        Seed or Generator for the binarizer's random initialization (default 0: reproducible).
    **params
        Binarizer parameters (e.g. ``epochs`` for the autoencoder).
    """
    from ..embeddings.embedding import Embedding

    if not isinstance(embedding, Embedding):
        raise TypeError(f"embedding must be a deniable.Embedding, got {type(embedding).__name__}")
    binarizer = get_binarizer(method, n_bits, **params).fit(embedding.vectors, rng=rng)
    codes = binarizer.encode_packed(embedding.vectors)  # blocks of rows: bounded memory at any V
    unk = binarizer.encode(embedding.mean[None, :])
    meta = {
        "binarizer": binarizer.params(),
        "source_fingerprint": embedding.fingerprint,
        "source": embedding.source,
        "source_dim": embedding.dim,
    }
    return BinaryEmbedding(
        embedding.words,
        codes,
        n_bits=n_bits,
        unk_code=pack_bits(unk)[0],
        unk_method="encoded-mean",
        metadata=meta,
        source=f"binarize({embedding.source or embedding.fingerprint}, {binarizer.name}, {n_bits} bits)",
    )
