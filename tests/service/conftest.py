"""Fixtures for the HTTP service: a small vocabulary so every mechanism builds in milliseconds."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the service needs the serve extra: pip install 'deniable[serve]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")

from deniable import Embedding
from deniable.binary import BinaryEmbedding

WORDS = ["the", "a", "meet", "me", "at", "station", "noon", "tomorrow", "we", "will", "go", "to", "park", "city", "river", "bank", "money", "send", "call", "phone", "doctor", "hospital", "visit", "friend", "house", "street", "car", "train", "bus", "walk", "run", "fast", "slow", "big", "small", "red", "blue", "green", "cat", "dog", "bird", "tree"]


def small_vocab(seed: int = 0) -> tuple[Embedding, BinaryEmbedding]:
    rng = np.random.default_rng(seed)
    emb = Embedding(WORDS, rng.standard_normal((len(WORDS), 6)).astype(np.float32))
    bits = rng.random((len(WORDS), 10)) < 0.5  # 10 bits: exact BRR probabilities are cheap
    return emb, BinaryEmbedding.from_bits(WORDS, bits)


@pytest.fixture(scope="module")
def vocab() -> tuple[Embedding, BinaryEmbedding]:
    return small_vocab()


@pytest.fixture(scope="module")
def make_client(vocab):
    from fastapi.testclient import TestClient

    from deniable.service import MechanismPool, ServiceConfig, create_app

    def make(**cfg):
        config = ServiceConfig(**cfg)
        pool = MechanismPool(vocab[0], vocab[1], mechanisms=config.mechanisms, max_cached=config.max_cached, compute_targets=config.compute_targets)
        return TestClient(create_app(config, pool=pool), raise_server_exceptions=False)

    return make


@pytest.fixture(scope="module")
def client(make_client):
    return make_client()
