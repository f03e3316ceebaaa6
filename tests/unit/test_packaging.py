"""The four top-level packages are redstring's own (docs/adr/0002)."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pytest

from streams.packaging import LAYERS, ForeignPackageError, check_own_packages

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", LAYERS)
def test_each_layer_is_imported_from_this_repository(name: str) -> None:
    module = importlib.import_module(name)
    assert module.REDSTRING_LAYER == name
    assert Path(module.__file__ or "").resolve().is_relative_to(ROOT)


def test_the_check_passes_for_our_packages() -> None:
    check_own_packages()


def test_a_foreign_package_of_the_same_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    impostor = types.ModuleType("contracts")
    impostor.__file__ = "/site-packages/contracts/__init__.py"
    monkeypatch.setitem(sys.modules, "contracts", impostor)
    with pytest.raises(ForeignPackageError, match="/site-packages/contracts"):
        check_own_packages()
