"""Notebook 05 runs top to bottom in smoke mode (see _notebooks.py)."""

import pytest
from _notebooks import notebook, run_in_smoke_mode


@pytest.mark.notebook
@pytest.mark.slow
def test_notebook_runs_in_smoke_mode():
    run_in_smoke_mode(notebook("05"))
