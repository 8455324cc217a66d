"""Every notebook is committed without outputs and has its own smoke-run module."""

from pathlib import Path

import pytest
from _notebooks import NOTEBOOKS, NOTEBOOKS_DIR

nbformat = pytest.importorskip("nbformat")


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


def test_every_notebook_has_a_smoke_test_module():
    here = Path(__file__).parent
    for path in NOTEBOOKS:
        number = path.name.split("_", 1)[0]
        module = here / f"test_notebook_{number}.py"
        assert module.exists(), f"{path.name} has no smoke-run module {module.name}"
