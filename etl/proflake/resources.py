"""Locate the queries/ and schemas/ folders, whether installed from a wheel or run from a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The wheel puts them inside the package (proflake/queries); a checkout or editable install keeps them
    at the repository's top level, above etl/proflake/."""
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"proflake's {name}/ folder is missing from the installation; reinstall proflake")
