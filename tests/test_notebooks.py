"""Execute every research notebook in smoke mode.

Each ``notebooks/*.ipynb`` runs top to bottom in a fresh ``python3`` kernel with
``PPBO_SMOKE=1`` (tiny MCMC settings and grids) and the non-interactive ``Agg``
matplotlib backend. Notebooks are executed from an in-memory copy; the file on disk
is never rewritten.
"""

import os
import sys
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def _kernel_env() -> dict[str, str]:
    """Environment of the kernel: smoke mode, Agg, and this interpreter first."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["PPBO_SMOKE"] = "1"
    env["MPLBACKEND"] = "Agg"
    return env


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_in_smoke_mode(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    # Raises CellExecutionError, with the cell and its traceback, on the first error.
    client.execute(env=_kernel_env())


def test_notebooks_are_committed_without_outputs():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOKS_DIR}"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            assert not cell.outputs, f"{path.name} cell {index} has outputs"
            assert cell.execution_count is None, f"{path.name} cell {index} was run"
