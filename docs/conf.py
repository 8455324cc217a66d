"""Sphinx configuration of the ppbo documentation site.

Build: ``sphinx-build -W -b html docs docs/_build`` (the ``docs`` extra). The API
reference comes from the docstrings (autodoc + autosummary, Google style through
napoleon); the notebooks are copied from ``notebooks/`` and executed in ppbo's
smoke mode (``PPBO_SMOKE=1``: tiny MCMC settings, numbers are smoke, not science)
with their plots (the inline matplotlib backend), then rendered by myst-nb.

They are executed here, before Sphinx reads any page, ``PPBO_DOCS_JOBS``
notebooks at a time (default 2) in fresh ``python3`` kernels, because myst-nb
executes each notebook while it reads it, one after the other even under
``sphinx-build -j`` (the notebooks fall into one read batch); myst-nb then
renders the executed copies (``nb_execution_mode = "off"``). A failing cell stops
the build with its traceback. The kernels share a persistent JAX compilation
cache (``JAX_COMPILATION_CACHE_DIR``, by default ``ppbo-docs-jax-cache`` in the
temporary directory), so a rebuild compiles little. ``PPBO_DOCS_EXECUTE=off``
renders the notebooks without executing them.
"""

import asyncio
import os
import shutil
import sys
import tempfile
import time
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

# the kernels run this interpreter's environment (the one with ppbo installed)
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]


def _kernel_env() -> dict[str, str]:
    """Environment of the notebook kernels: smoke mode, inline plots, one cache."""
    env = dict(os.environ)
    env["PPBO_SMOKE"] = "1"
    # ipykernel's own default, set explicitly: a non-interactive backend inherited
    # from the shell (MPLBACKEND=Agg) would drop every figure from the pages
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    env.setdefault(
        "JAX_COMPILATION_CACHE_DIR",
        os.path.join(tempfile.gettempdir(), "ppbo-docs-jax-cache"),
    )
    return env


async def _execute_notebooks(paths: list[Path], jobs: int) -> None:
    """Execute the notebooks at ``paths`` in place, ``jobs`` kernels at a time."""
    import nbclient
    import nbformat

    env = _kernel_env()
    slots = asyncio.Semaphore(jobs)

    async def execute(path: Path) -> None:
        async with slots:
            start = time.perf_counter()
            notebook = nbformat.read(path, as_version=4)
            client = nbclient.NotebookClient(
                notebook,
                timeout=900,
                kernel_name="python3",
                resources={"metadata": {"path": str(ROOT / "notebooks")}},
            )
            # raises CellExecutionError (the cell and its traceback) on an error
            await client.async_execute(env=env)
            nbformat.write(notebook, path)
            print(f"executed {path.name} in {time.perf_counter() - start:.0f} s")

    await asyncio.gather(*(execute(path) for path in paths))


if os.environ.get("PPBO_DOCS_EXECUTE", "on") != "off":
    asyncio.run(
        _execute_notebooks(
            sorted(NOTEBOOKS.glob("*.ipynb")),
            max(1, int(os.environ.get("PPBO_DOCS_JOBS", "2"))),
        )
    )
# executed above (or not at all): myst-nb renders the notebooks as they are
nb_execution_mode = "off"
nb_merge_streams = True

html_theme = "alabaster"
html_title = "ppbo"
html_static_path: list[str] = []
