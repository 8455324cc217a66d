"""The documentation site lists the whole public API (no Sphinx build here)."""

import re
from pathlib import Path

import ppbo

API = Path(__file__).resolve().parents[1] / "docs" / "api"


def _entries() -> set[str]:
    """Names listed in the autosummary tables of the API pages."""
    names = set()
    for page in API.glob("*.rst"):
        current, inside = "", False
        for line in page.read_text().splitlines():
            module = re.match(r"\.\. currentmodule:: (\S+)", line)
            if module:
                current = module.group(1)
            if line.startswith(".. "):
                inside = line.startswith(".. autosummary::")
            elif line and not line.startswith(" "):
                inside = False
            entry = re.fullmatch(r"   ([A-Za-z_][\w.]*)", line)
            if inside and entry:
                name = entry.group(1)
                names.add(name if "." in name or not current else f"{current}.{name}")
    return names


def test_every_public_name_has_an_api_entry():
    entries = _entries()
    missing = [n for n in ppbo.__all__ if f"ppbo.{n}" not in entries]
    assert not missing, f"ppbo.__all__ names missing from docs/api/*.rst: {missing}"


def test_api_entries_exist():
    # an entry that names nothing would be a broken page (sphinx -W catches it too)
    import importlib

    for name in sorted(_entries()):
        module, _, attribute = name.rpartition(".")
        try:
            importlib.import_module(name)
        except ImportError:
            assert hasattr(importlib.import_module(module), attribute), name
