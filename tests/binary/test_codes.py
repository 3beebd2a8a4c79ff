"""BinaryEmbedding: packing, validation, fingerprint, UNK code, bundle round trip and corruption."""

from __future__ import annotations

import numpy as np
import pytest

from deniable.binary import BinaryEmbedding, majority_code, pack_bits, unpack_bits
from deniable.errors import DataError


def _bits(n=12, nb=70, seed=0):
    return np.random.default_rng(seed).random((n, nb)) < 0.5


def test_pack_unpack_round_trip_and_layout():
    bits = _bits(5, 130)
    codes = pack_bits(bits)
    assert codes.dtype == np.uint64 and codes.shape == (5, 3)
    assert np.array_equal(unpack_bits(codes, 130), bits)
    one = np.zeros((1, 70), bool)
    one[0, 65] = True  # bit 65 -> word 1, position 1
    assert pack_bits(one).tolist() == [[0, 2]]


def test_from_bits_majority_unk_and_interface():
    bits = np.array([[1, 0, 1], [1, 1, 0], [0, 0, 1]], bool)
    be = BinaryEmbedding.from_bits(["a", "b", "c"], bits)
    assert be.unk_method == "majority"
    assert np.array_equal(be.bits(np.array([-1]))[0], majority_code(bits)) and majority_code(bits).tolist() == [True, False, True]
    assert len(be) == 3 and be.n_bits == 3 and be.words_per_code == 1
    assert be.ids_of(["b", "zz"]).tolist() == [1, -1]
    assert be.id_of("c") == 2 and be.uncased
    with pytest.raises(KeyError):
        be.id_of("zz")
    assert np.array_equal(be.bits(), bits)
    with pytest.raises(ValueError):
        be.codes[0, 0] = 1  # read-only


def test_fingerprint_depends_on_content():
    bits = _bits()
    words = [f"w{i}" for i in range(12)]
    a = BinaryEmbedding.from_bits(words, bits)
    b = BinaryEmbedding.from_bits(words, bits)
    bits2 = bits.copy()
    bits2[0, 0] ^= True
    c = BinaryEmbedding.from_bits(words, bits2)
    assert a.fingerprint == b.fingerprint != c.fingerprint and len(a.fingerprint) == 16


def test_validation_errors():
    words = ["a", "b"]
    with pytest.raises(DataError, match="duplicate"):
        BinaryEmbedding.from_bits(["a", "a"], np.zeros((2, 4), bool))
    with pytest.raises(DataError, match="shape"):
        BinaryEmbedding(words, np.zeros((3, 1), np.uint64), n_bits=4)
    with pytest.raises(DataError, match="padding"):
        BinaryEmbedding(words, np.full((2, 1), 1 << 10, np.uint64), n_bits=4)
    with pytest.raises(TypeError):
        BinaryEmbedding(words, np.zeros((2, 1), np.int64), n_bits=4)
    with pytest.raises(ValueError, match="n_bits"):
        BinaryEmbedding(words, np.zeros((2, 1), np.uint64), n_bits=0)
    with pytest.raises(DataError, match="newline"):
        BinaryEmbedding.from_bits(["a\nb", "c"], np.zeros((2, 4), bool))
    with pytest.raises(ValueError, match="unk_bits"):
        BinaryEmbedding.from_bits(words, np.zeros((2, 4), bool), unk_bits=np.zeros(3, bool))


def test_save_load_round_trip(tmp_path):
    bits = _bits(20, 100, seed=3)
    words = [f"wörd{i}" for i in range(20)]
    be = BinaryEmbedding.from_bits(words, bits, unk_bits=bits[3], metadata={"binarizer": {"method": "test"}})
    path = be.save(tmp_path / "x.brr")
    back = BinaryEmbedding.load(path)
    assert back.words == words and np.array_equal(back.codes, be.codes)
    assert np.array_equal(back.unk_code, be.unk_code) and back.unk_method == "given"
    assert back.fingerprint == be.fingerprint and back.metadata == {"binarizer": {"method": "test"}}
    assert path.stat().st_size % 1 == 0 and not list(tmp_path.glob(".*tmp"))


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d[: len(d) // 2], "checksum|truncated|size"),
        (lambda d: d[:10], "truncated"),
        (lambda d: b"XXXXXXXX" + d[8:], "magic"),
        (lambda d: d[:8] + b"\x02\x00\x00\x00" + d[12:], "version"),
        (lambda d: d[:100] + bytes([d[100] ^ 1]) + d[101:], "checksum"),
        (lambda d: d + b"\0", "checksum|size"),
        (lambda d: b"", "truncated"),
    ],
)
def test_corrupted_bundles_raise_data_error(tmp_path, mutate, match):
    be = BinaryEmbedding.from_bits([f"w{i}" for i in range(30)], _bits(30, 64, seed=1))
    data = be.to_bytes()
    bad = tmp_path / "bad.brr"
    bad.write_bytes(mutate(data))
    with pytest.raises(DataError, match=match) as info:
        BinaryEmbedding.load(bad)
    assert str(bad) in str(info.value)


def test_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        BinaryEmbedding.load(tmp_path / "nope.brr")
    with pytest.raises(DataError, match="directory"):
        BinaryEmbedding.load(tmp_path)
