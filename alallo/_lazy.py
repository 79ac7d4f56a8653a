"""A package's public names, loaded on first use (PEP 562: a module's ``__getattr__`` and
``__dir__``), so that importing one module of a wing does not import the rest of it, and
``import alallo`` costs almost nothing (the CLI and the trainers start fast)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, origins: Mapping[str, tuple[str, str | None]],
               public: Sequence[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``.

    Args:
        package: the package's ``__name__``.
        origins: each public name: the module it comes from (relative to ``package``) and
            its name there, or None for the module itself.
        public: the package's ``__all__`` (what ``dir()`` lists).

    A name, once loaded, is kept in the package's namespace; an unknown one raises
    ``AttributeError`` as Python's own lookup does.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        origin = origins.get(name)
        if origin is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(origin[0], package)
        value = module if origin[1] is None else getattr(module, origin[1])
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(public)

    return __getattr__, __dir__
