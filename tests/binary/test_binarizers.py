"""Binarizers: shapes, determinism, SimHash angle property, ITQ objective, autoencoder training."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deniable import Embedding
from deniable.binary import (
    AutoencoderBinarizer,
    BinaryEmbedding,
    ITQBinarizer,
    RandomProjectionBinarizer,
    binarize,
    get_binarizer,
    nn_overlap,
    pack_bits,
)


def _emb(n=200, d=16, seed=0):
    rng = np.random.default_rng(seed)
    # clustered data, so that neighbourhoods mean something
    centres = rng.standard_normal((10, d)) * 3
    X = centres[rng.integers(0, 10, n)] + rng.standard_normal((n, d))
    return Embedding([f"w{i}" for i in range(n)], X.astype(np.float32))


@pytest.mark.parametrize("method", ["random-projection", "itq", "autoencoder"])
def test_binarize_shapes_determinism_unk(method):
    emb = _emb()
    kw = {"epochs": 2} if method == "autoencoder" else {}
    a = binarize(emb, n_bits=12, method=method, rng=1, **kw)
    b = binarize(emb, n_bits=12, method=method, rng=1, **kw)
    assert isinstance(a, BinaryEmbedding) and a.n_bits == 12 and len(a) == 200 and a.words == emb.words
    assert a.fingerprint == b.fingerprint
    assert a.unk_method == "encoded-mean"
    assert a.metadata["binarizer"]["method"] == method and a.metadata["source_fingerprint"] == emb.fingerprint
    binz = get_binarizer(method, 12, **kw).fit(emb.vectors, rng=1)
    assert np.array_equal(pack_bits(binz.encode(emb.mean[None, :]))[0], a.unk_code)
    assert np.array_equal(pack_bits(binz.encode(emb.vectors)), a.codes)
    # on clustered data, binary neighbours agree with real ones far beyond chance (10/199)
    assert nn_overlap(emb, a, k=5, n_queries=None) > 0.3


def test_simhash_estimates_the_angle():
    theta = 1.0
    x = np.array([[1.0, 0.0], [math.cos(theta), math.sin(theta)], [-1.0, 0.0], [0.0, -1.0]])
    rp = RandomProjectionBinarizer(20000).fit(x, rng=3)
    rp.mean_ = np.zeros(2)  # project the raw vectors (not centred) to test the property itself
    b = rp.encode(x[:2])
    frac = float((b[0] != b[1]).mean())
    sd = math.sqrt((theta / math.pi) * (1 - theta / math.pi) / 20000)
    assert abs(frac - theta / math.pi) < 5 * sd


def test_itq_rotation_is_orthogonal_and_lowers_quantization_error():
    X = _emb(300, 12).vectors
    def err(b):
        v = (X - b.mean_) @ b.pca_ @ b.rotation_
        return float(((np.where(v >= 0, 1.0, -1.0) - v) ** 2).sum())
    start = ITQBinarizer(8, n_iter=0).fit(X, rng=5)
    fitted = ITQBinarizer(8, n_iter=30).fit(X, rng=5)
    R = fitted.rotation_
    assert np.allclose(R @ R.T, np.eye(8), atol=1e-10)
    assert err(fitted) < err(start)
    with pytest.raises(ValueError, match="n_bits"):
        ITQBinarizer(13).fit(X)


def test_autoencoder_training_reduces_loss_and_regularizer_orthogonalizes():
    X = _emb(400, 10).vectors
    ae = AutoencoderBinarizer(8, epochs=15, batch_size=32, lr=3e-3, reg=5.0).fit(X, rng=0)
    assert ae.losses_[-1] < ae.losses_[0]
    W = ae.W_
    assert np.abs(W @ W.T - np.eye(8)).max() < 0.2
    rec = ae.reconstruct(X)
    assert rec.shape == X.shape and np.isfinite(rec).all()
    # reconstruction beats predicting the mean
    assert ((rec - X) ** 2).sum() < ((X - X.mean(0)) ** 2).sum()


def test_autoencoder_without_encoder_bias_keeps_zero_bias():
    X = _emb(100, 6).vectors
    ae = AutoencoderBinarizer(4, epochs=2, encoder_bias=False).fit(X, rng=0)
    assert np.all(ae.c_ == 0)


def test_autoencoder_torch_backend_matches_interface():
    pytest.importorskip("torch")
    X = _emb(100, 6).vectors
    ae = AutoencoderBinarizer(4, epochs=2, backend="torch").fit(X, rng=0)
    assert ae.encode(X).shape == (100, 4)


def test_validation():
    emb = _emb(20, 4)
    with pytest.raises(ValueError, match="unknown binarizer"):
        binarize(emb, n_bits=4, method="pca")
    with pytest.raises(TypeError):
        binarize(np.zeros((3, 3)), n_bits=4)
    with pytest.raises(ValueError):
        AutoencoderBinarizer(4, backend="jax")
    with pytest.raises(ValueError):
        AutoencoderBinarizer(4, lr=0)
    with pytest.raises(ValueError):
        RandomProjectionBinarizer(0)
    with pytest.raises(RuntimeError, match="not fitted"):
        RandomProjectionBinarizer(4).encode(emb.vectors)
    with pytest.raises(ValueError, match="same words"):
        nn_overlap(emb, BinaryEmbedding.from_bits(["a", "b"], np.zeros((2, 3), bool)))


def _plain_emb(n, dim, seed=0):
    vecs = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return Embedding([f"w{i}" for i in range(n)], vecs)


def test_itq_bits_bounded_by_words_and_dimension():
    assert ITQBinarizer.max_bits(2, 300) == 2 and ITQBinarizer.max_bits(4, 3) == 3
    # fewer words than bits: was a matmul shape error, now names n_bits, n_words, dim and the fix
    with pytest.raises(ValueError, match=r"n_bits <= min\(n_words, dim\) = 2, got n_bits=256 \(n_words=2, dim=300\).*random-projection"):
        binarize(_plain_emb(2, 300), n_bits=256, method="itq")
    with pytest.raises(ValueError, match=r"= 3, got n_bits=4 \(n_words=10, dim=3\)"):
        binarize(_plain_emb(10, 3), n_bits=4, method="itq")
    be = binarize(_plain_emb(2, 300), n_bits=2, method="itq")  # exactly at the bound works
    assert be.n_bits == 2 and len(be) == 2


def test_binarizers_need_two_words_and_others_have_no_bit_bound():
    for method in ("itq", "random-projection", "autoencoder"):
        with pytest.raises(ValueError, match="at least 2 words.*n_words=1"):
            binarize(_plain_emb(1, 5), n_bits=2, method=method)
    be = binarize(_plain_emb(3, 2), n_bits=40, method="random-projection")
    assert be.n_bits == 40


def test_itq_large_vocabulary_path(monkeypatch):
    """Above the in-memory size ITQ fits with a blocked covariance (its PCA axes are the SVD's up
    to sign) and a row sample for the rotation; its codes keep neighbours as well as the
    in-memory fit does, and binarize() encodes in blocks to the same codes as encode()."""
    import deniable.binary.binarizers as bz
    from deniable.binary.codes import pack_bits
    from deniable.binary.quality import nn_overlap

    rng = np.random.default_rng(4)
    centres = rng.standard_normal((60, 24)) * 3
    X = (centres[rng.integers(0, 60, 6000)] + rng.standard_normal((6000, 24))).astype(np.float32)
    emb = Embedding([f"w{i}" for i in range(6000)], X)
    small = bz.ITQBinarizer(16).fit(X, rng=0)
    monkeypatch.setattr(bz, "_ITQ_IN_MEMORY_BYTES", 1 << 16)
    monkeypatch.setattr(bz, "_ITQ_SAMPLE", 2000)
    large = bz.ITQBinarizer(16).fit(X, rng=0)
    np.testing.assert_allclose(large.mean_, small.mean_, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.abs(large.pca_.T @ small.pca_), np.eye(16), atol=1e-6)  # same axes, up to sign
    np.testing.assert_allclose(large.rotation_ @ large.rotation_.T, np.eye(16), atol=1e-9)
    np.testing.assert_array_equal(large.encode_packed(X, block_bytes=4096), pack_bits(large.encode(X)))
    be_large = binarize(emb, n_bits=16, method="itq")
    monkeypatch.undo()
    be_small = binarize(emb, n_bits=16, method="itq")
    q_large, q_small = nn_overlap(emb, be_large, k=10, n_queries=500), nn_overlap(emb, be_small, k=10, n_queries=500)
    assert q_large >= 0.9 * q_small, (q_large, q_small)
    # control: random codes keep far fewer neighbours, so the comparison above has power
    rand = BinaryEmbedding(emb.words, rng.integers(0, 2**16, size=(6000, 1), dtype=np.uint64), n_bits=16)
    assert nn_overlap(emb, rand, k=10, n_queries=500) < 0.5 * q_small
