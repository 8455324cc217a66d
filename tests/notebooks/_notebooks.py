"""Execute the research notebooks in smoke mode, one test module per notebook.

Each ``notebooks/NN_*.ipynb`` runs top to bottom in a fresh ``python3`` kernel with
``PPBO_SMOKE=1`` (tiny MCMC settings and grids) and the non-interactive ``Agg``
matplotlib backend, from its own module ``test_notebook_NN.py``: the suite runs with
``--dist loadfile``, so one module per notebook lets the two workers share them
instead of one worker executing every notebook. Notebooks are executed from an
in-memory copy; the file on disk is never rewritten.
"""

import os
import sys
from pathlib import Path

import pytest

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def _kernel_env() -> dict[str, str]:
    """Environment of the kernel: smoke mode, Agg, and this interpreter first."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["PPBO_SMOKE"] = "1"
    env["MPLBACKEND"] = "Agg"
    return env


def notebook(number: str) -> Path:
    """The one notebook whose name starts with ``number`` (e.g. ``"03"``)."""
    matches = [p for p in NOTEBOOKS if p.name.startswith(f"{number}_")]
    assert len(matches) == 1, f"expected one notebook {number}_*.ipynb, got {matches}"
    return matches[0]


def run_in_smoke_mode(path: Path) -> None:
    """Execute the notebook at ``path``; raise on the first failing cell."""
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    # Raises CellExecutionError, with the cell and its traceback, on the first error.
    client.execute(env=_kernel_env())
