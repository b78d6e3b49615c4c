"""`catml.train`: a training spec run from Python as `catml train` runs it."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Union

from . import _catml


def train(spec: Union[str, "os.PathLike[str]"], resume: bool = False,
          quiet: bool = False) -> Dict[str, Any]:
    """Runs the training spec (TOML) at `spec` as `catml train SPEC` does: the same progress
    and files, the same one-line errors (as `catml.ValueError`). Returns the last epoch's
    metrics, the dict whose JSON the command prints. `resume` continues from the spec's
    checkpoint; `quiet` prints nothing."""
    return json.loads(_catml.train(os.fspath(spec), resume, quiet))
