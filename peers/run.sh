#!/usr/bin/env bash
# Usage: peers/run.sh setup|bench|bench_conv|bench_attention|bench_per_example|agree|gemm [args...]
# Runs a peer script with the peers venv's python, creating the venv on first use.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${CATML_PEERS_VENV:-/work/.venv-peers}"

cmd="${1:-}"
[ $# -gt 0 ] && shift

# These OpenBLAS tuning overrides make NumPy's BLAS pick slow kernels on this
# machine; the peers must be timed with their defaults.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

case "$cmd" in
    setup)
        exec "$here/setup.sh" "$@" ;;
    bench|bench_conv|bench_attention|bench_per_example|agree)
        [ -x "$venv/bin/python" ] || "$here/setup.sh"
        exec "$venv/bin/python" "$here/$cmd.py" "$@" ;;
    gemm)
        # The GEMM candidates (a Cargo project of its own); OpenBLAS when Debian's is installed.
        features=()
        [ -e /usr/lib/x86_64-linux-gnu/libopenblas.so ] && features=(--features openblas)
        cd "$here/gemm"
        CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/../target}/gemm-candidates" \
            exec cargo run --release --locked -q "${features[@]}" -- "$@" ;;
    *)
        echo "usage: $0 setup|bench|bench_conv|bench_attention|bench_per_example|agree|gemm [args...]" >&2
        exit 2 ;;
esac
