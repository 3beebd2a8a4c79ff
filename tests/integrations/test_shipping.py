"""A mechanism shipped as files: small to send, memory-mapped, loaded once per process."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np

import deniable
from deniable.integrations import shipping
from deniable.integrations.keyed import privatize_keyed
from deniable.integrations.shipping import pack, shipment_for

from ..conftest import random_embedding


def test_pack_and_load_give_the_same_mechanism(tmp_path):
    mech = deniable.get_mechanism("madlib", random_embedding(5000, 60), epsilon=3)  # 1.2 MB vectors
    ship = pack(mech, tmp_path)
    assert len(pickle.dumps(ship)) < 1000
    assert ship.nbytes > 1_200_000 and len(ship.files) >= 3  # the vectors as .npy files (the exact index keeps no copy)
    pkl = (tmp_path / ship.files[0]).stat().st_size
    assert pkl < ship.nbytes / 4  # the pickle itself keeps only the small parts
    shipping._LOADED.pop(ship.digest, None)
    loaded = ship.load()
    assert loaded is ship.load()  # once per process
    assert isinstance(loaded.embedding.vectors.base, np.memmap) or isinstance(loaded.embedding.vectors.base.base, np.memmap)
    assert not loaded.embedding.vectors.flags.writeable
    texts = ["w1 w2 w3", "w4000 w17", None]
    assert privatize_keyed(loaded, texts, [0, 1, 2], rng=1) == privatize_keyed(mech, texts, [0, 1, 2], rng=1)
    assert loaded.embedding.fingerprint == mech.embedding.fingerprint
    assert pack(mech, tmp_path).digest == ship.digest  # same content, same files


def test_shipment_for_caches_per_object_and_loads_in_a_fresh_process(tmp_path):
    mech = deniable.get_mechanism("madlib", random_embedding(3000, 100), epsilon=3)
    ship = shipment_for(mech)
    assert shipment_for(mech) is ship
    assert ship.load() is mech  # the packing process already holds it
    code = (
        "import pickle, sys; ship = pickle.loads(sys.stdin.buffer.read());"
        "from deniable.integrations.keyed import privatize_keyed;"
        "print(privatize_keyed(ship.load(), ['w1 w2 w2999'], [0], rng=5)[0])"
    )
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(ship), capture_output=True, check=True)
    assert out.stdout.decode().strip() == privatize_keyed(mech, ["w1 w2 w2999"], [0], rng=5)[0]


def test_tem_ships_its_tables_and_brr_falls_back_to_its_own_pickling(tmp_path):
    from deniable.binary import binarize
    from deniable.integrations._common import for_workers

    tem = for_workers(deniable.get_mechanism("tem", random_embedding(300, 8), epsilon=2, cache_dir=False))
    ship = pack(tem, tmp_path)
    shipping._LOADED.pop(ship.digest, None)
    loaded = ship.load()
    assert loaded._nb is not None  # the neighbourhood table came with it, not rebuilt
    texts = ["w1 w2 w299", "w7"]
    assert privatize_keyed(loaded, texts, [0, 1], rng=3) == privatize_keyed(tem, texts, [0, 1], rng=3)
    brr = deniable.get_mechanism("brr", binarize(random_embedding(60, 16), n_bits=16, rng=0), epsilon=3)
    ship = pack(brr, tmp_path)
    shipping._LOADED.pop(ship.digest, None)
    assert privatize_keyed(ship.load(), texts, [0, 1], rng=3) == privatize_keyed(brr, texts, [0, 1], rng=3)
