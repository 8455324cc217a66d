"""Sphinx configuration of the ppbo documentation site.

Build: ``sphinx-build -W -b html docs docs/_build`` (the ``docs`` extra). The API
reference comes from the docstrings (autodoc + autosummary, Google style through
napoleon); the notebooks are copied from ``notebooks/`` and executed by myst-nb
in ppbo's smoke mode (``PPBO_SMOKE=1``: tiny MCMC settings, numbers are smoke,
not science). ``PPBO_DOCS_EXECUTE=off`` renders them without executing.
"""

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

project = "ppbo"
author = "the ppbo developers"
copyright = "the ppbo developers"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_nb",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "jupyter_execute"]

autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# Attributes sections as :ivar: fields: autodoc documents NamedTuple fields itself
napoleon_use_ivar = True
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]

# -- notebooks: copied in (the folder is generated), executed in smoke mode -------
NOTEBOOKS = HERE / "notebooks"
if NOTEBOOKS.exists():
    shutil.rmtree(NOTEBOOKS)
NOTEBOOKS.mkdir()
for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
    shutil.copy(notebook, NOTEBOOKS / notebook.name)
(NOTEBOOKS / "index.md").write_text(
    "# Notebooks\n\n"
    "Executed for this site in smoke mode (`PPBO_SMOKE=1`): tiny MCMC settings and\n"
    "grids, so the numbers and plots show what each step does, not converged "
    "results.\n\n"
    "```{toctree}\n:maxdepth: 1\n:glob:\n\n*\n```\n"
)

os.environ.setdefault("PPBO_SMOKE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# the kernel runs this interpreter's environment (the one with ppbo installed)
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
nb_execution_mode = os.environ.get("PPBO_DOCS_EXECUTE", "auto")
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

html_theme = "alabaster"
html_title = "ppbo"
html_static_path: list[str] = []
