"""Every package's public surface is its sorted ``__all__`` (httpx's test_exported_members)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import foureyes


def _packages() -> list[str]:
    names = ["foureyes"]
    for info in pkgutil.walk_packages(foureyes.__path__, "foureyes."):
        leaf = info.name.rsplit(".", 1)[-1]
        if info.ispkg and not leaf.startswith("_") and ".migrations" not in info.name:
            names.append(info.name)
    return names


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(foureyes.__path__, "foureyes."):
        if not info.ispkg and ".migrations" not in info.name and "._" not in info.name:
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", _packages())
def test_package_exports_exactly_its_all(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(getattr(module, "__all__", []))
    assert exported == sorted(exported, key=str), f"{name}.__all__ is not sorted"
    for n in exported:  # a lazy name (a module __getattr__) lands in the namespace on use
        assert hasattr(module, n), f"{name}.__all__ names missing {n}"
    public = {
        n
        for n, v in vars(module).items()
        if (not n.startswith("_") or n == "__version__")
        and not isinstance(v, ModuleType)
        and n != "annotations"
    }
    assert set(exported) == public, f"{name}: __all__ and namespace differ"


@pytest.mark.parametrize("name", _modules())
def test_module_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    if exported is None:
        return
    assert list(exported) == sorted(exported, key=str), f"{name}.__all__ is not sorted"
    for n in exported:
        assert hasattr(module, n), f"{name}.__all__ names missing {n}"
        value = getattr(module, n)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__doc__, f"{name}.{n} has no docstring"
