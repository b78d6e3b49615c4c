"""Helpers shared by the peer scripts (bench.py, agree.py)."""

import os
import pathlib
import platform
import sys
from datetime import datetime, timezone

# OpenBLAS reads these when NumPy is imported; set to values tuned for another
# CPU they make NumPy markedly slower, which would flatter CatML's ratios.
BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

PEERS_DIR = pathlib.Path(__file__).resolve().parent
REPO_ROOT = PEERS_DIR.parent


def scrub_blas_env():
    """Re-exec this process without the OpenBLAS overrides.

    Must be called before NumPy is imported. run.sh already unsets them; this
    covers running a script directly with the venv's python.
    """
    if any(k in os.environ for k in BLAS_OVERRIDES):
        env = {k: v for k, v in os.environ.items() if k not in BLAS_OVERRIDES}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def blas_info():
    """Describe the BLAS NumPy loaded, as threadpoolctl sees it."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl not installed)"
    libs = [
        f"{i['internal_api']} {i.get('version') or '?'} "
        f"({i.get('architecture') or '?'}, {i['num_threads']} threads)"
        for i in threadpool_info()
        if i["user_api"] == "blas"
    ]
    return ", ".join(libs) or "none found"


def machine_info():
    import jax
    import jaxlib
    import numpy

    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "blas": blas_info(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
