"""CatML from Python: trace plain functions over NumPy arrays into typed CatML programs,
differentiate them (grad, jvp, vjp, hvp, hessian), evaluate them with the GIL released, and
read programs from LensIR JSON, listings and ONNX, and run training specs.

    import numpy as np, catml, catml.numpy as cnp
    f = lambda w, x: cnp.sum(cnp.tanh(x @ w) ** 2)
    g = catml.grad(f)(np.ones((3, 2)), np.ones((4, 3)))
"""

from ._catml import Error, TracerLeakError, TypeError, ValueError, __version__  # noqa: A004
from ._tracer import Tracer
from ._transforms import (
    Program, grad, hessian, hvp, jit, jvp, load, trace, value_and_grad, vjp,
)
from ._train import train
from . import numpy  # noqa: F401  (catml.numpy)
from . import nn  # noqa: F401  (catml.nn.functional)
from . import optim  # noqa: F401  (catml.optim.SGD, Adam)

__all__ = [
    "Error", "TypeError", "ValueError", "TracerLeakError", "Tracer", "Program", "trace", "jit",
    "grad", "value_and_grad", "jvp", "vjp", "hvp", "hessian", "load", "train", "numpy", "nn",
    "optim", "__version__",
]
