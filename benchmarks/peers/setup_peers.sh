#!/usr/bin/env bash
# Create one virtual environment per public peer implementation, for benchmarks/bench_peers.py.
#
# Usage:
#   bash benchmarks/peers/setup_peers.sh [VENV_DIR] [PEER ...]
#
#   VENV_DIR  folder that receives one virtual environment per peer
#             (default: benchmarks/peers/.venvs, ignored by git)
#   PEER      which peers to install: mldp, pypantera (default: both)
#
# Environment:
#   PYTHON    interpreter used to create the environments (default: python3; the peers need
#             Python >= 3.9, mldp-text's pins need a Python with numpy < 2 wheels, e.g. 3.9-3.12)
#
# Each peer lives in its own environment, VENV_DIR/<peer>/, and is never installed into, or
# imported by, the environment that runs deniable: bench_peers.py starts the peer's own
# interpreter in a subprocess.
#
#   mldp       mldp-text 0.1.2 from PyPI (https://pypi.org/project/mldp-text/); it pulls
#              numpy<2, scipy<1.13, gensim, faiss-cpu, numba, nltk, pandas, scikit-learn
#              (about 0.5 GB with its bundled 300-d GloVe file).
#   pypantera  pypantera 1.0.2 from PyPI (https://pypi.org/project/pypantera/, source
#              https://github.com/Kekkodf/pypantera); its modules install as the top-level
#              package "src". It pins no numpy version; under numpy 2 its CusText fails
#              ("probabilities do not sum to 1": float32 scores stay float32 under numpy 2's
#              promotion rules), so numpy<2 (and pandas<3, which needs numpy 2) is installed.
#
# Afterwards: python benchmarks/bench_peers.py --venvs VENV_DIR
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venvs="${1:-$here/.venvs}"
shift || true
peers=("$@")
if [ ${#peers[@]} -eq 0 ]; then
    peers=(mldp pypantera)
fi
python="${PYTHON:-python3}"

spec_for() {
    case "$1" in
        mldp) echo "mldp-text==0.1.2" ;;
        pypantera) echo "pypantera==1.0.2 numpy<2 pandas<3" ;;
        *) echo "unknown peer '$1' (known: mldp, pypantera)" >&2; return 1 ;;
    esac
}

mkdir -p "$venvs"
for peer in "${peers[@]}"; do
    spec="$(spec_for "$peer")"
    dir="$venvs/$peer"
    echo "== $peer: $spec -> $dir"
    "$python" -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --upgrade pip
    read -r -a reqs <<< "$spec"
    "$dir/bin/python" -m pip install --quiet "${reqs[@]}"
    "$dir/bin/python" -m pip show "${spec%%==*}" | sed -n '1,2p'
done
echo "done: python benchmarks/bench_peers.py --venvs $venvs"
