"""Build the prebuilt 256-bit codes of the bundled default embedding, reproducibly.

Fits the default binarizer (``deniable.binary.DEFAULT_METHOD``) on the bundled default embedding
(GloVe 840B 300d, 33,849 words) with seed 0 and writes the BRR bundle
``src/deniable/binary/data/glove840b300d_34k_256.brr`` (layout: ``docs/bundle_format.md``).

``--compare`` instead fits every binarizer and prints the 10-NN overlap between real (Euclidean)
and binary (Hamming) space on a fixed random sample of query words (the table in
``docs/results/binarizers.md``).

Usage::

    python scripts/build_default_binary.py            # write the default code file
    python scripts/build_default_binary.py --compare  # compare the binarizers
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

from deniable import load_embedding
from deniable.binary import BINARIZERS, DEFAULT_BINARY_FILE, DEFAULT_METHOD, binarize, nn_overlap

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "deniable" / "binary" / "data" / DEFAULT_BINARY_FILE
SEED = 0
N_BITS = 256


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", action="store_true", help="compare all binarizers instead of building")
    ap.add_argument("--queries", type=int, default=2000, help="query words sampled for the overlap (default 2000)")
    ap.add_argument("--epochs", type=int, default=None, help="autoencoder epochs (default: the binarizer's default)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    emb = load_embedding()
    ae = {} if args.epochs is None else {"epochs": args.epochs}
    if args.compare:
        print(f"embedding {emb.fingerprint}: {len(emb)} words x {emb.dim}; {N_BITS} bits; seed {SEED}; "
              f"10-NN overlap on {args.queries} random query words (seed 0)")
        print("| binarizer | 10-NN overlap | fit + encode time |")
        print("|---|---|---|")
        for method in BINARIZERS:
            t = time.perf_counter()
            b = binarize(emb, n_bits=N_BITS, method=method, rng=SEED, **(ae if method == "autoencoder" else {}))
            dt = time.perf_counter() - t
            ov = nn_overlap(emb, b, k=10, n_queries=args.queries, rng=0)
            print(f"| {method} | {ov:.3f} | {dt:.1f} s |", flush=True)
        return
    t = time.perf_counter()
    b = binarize(emb, n_bits=N_BITS, method=DEFAULT_METHOD, rng=SEED, **(ae if DEFAULT_METHOD == "autoencoder" else {}))
    b.save(args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, sha256 {hashlib.sha256(args.out.read_bytes()).hexdigest()}) "
          f"method={DEFAULT_METHOD} fingerprint={b.fingerprint} in {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
