"""Callables: tell sync from async from generator functions; import them by reference.

``module:attribute`` references (GraphSpec nodes, routers, reducers) are
imported here, under one rule set: no relative imports, no dunder attribute
paths, and an optional allow-list of module prefixes checked before importing.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "BadReference",
    "allowed_module_prefixes",
    "callable_name",
    "check_reference",
    "import_reference",
    "is_async_callable",
    "is_generator_callable",
    "module_allowed",
    "parse_reference",
    "positional_arity",
    "takes_context",
]


def _unwrap(fn: Any) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _call_target(fn: Any) -> Any:
    fn = _unwrap(fn)
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return fn
    # A callable object's behaviour is its class's __call__ method.
    call = type(fn).__dict__.get("__call__") or next(
        (klass.__dict__["__call__"] for klass in type(fn).__mro__ if "__call__" in klass.__dict__),
        None,
    )
    return call if call is not None else fn


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` returns a coroutine."""
    return inspect.iscoroutinefunction(_call_target(fn))


def is_generator_callable(fn: Any) -> bool:
    """Whether calling ``fn`` returns a (sync or async) generator."""
    target = _call_target(fn)
    return inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target)


def positional_arity(fn: Callable[..., Any]) -> int | None:
    """How many positional arguments ``fn`` accepts (``None`` for ``*args``/unknown)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    count = 0
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return None
        if parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            count += 1
    return count


def takes_context(fn: Callable[..., Any]) -> bool:
    """Whether a node function wants the NodeContext as its second argument.

    It does when its second positional parameter is required, or is named
    ``context``/``ctx``, or is annotated as a NodeContext. A second parameter
    with a default under another name (``lambda s, name=name: ...``, the usual
    way to bind a loop variable) is the function's own, and is left alone.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind
        in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.VAR_POSITIONAL,
        )
    ]
    if len(positional) < 2:
        return False
    second = positional[1]
    if second.kind is inspect.Parameter.VAR_POSITIONAL:
        return True  # def node(state, *rest): it accepts the context
    if second.default is inspect.Parameter.empty or second.name in ("context", "ctx"):
        return True
    return "NodeContext" in str(second.annotation)


def callable_name(fn: Any) -> str:
    """A readable name for ``fn`` (function name, class name, or repr)."""
    fn = _unwrap(fn)
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "lambda" if name == "<lambda>" else str(name)


# ------------------------------------------------------------- import references


class BadReference(ValueError):
    """A ``module:attribute`` reference that is malformed, refused, or cannot be imported.

    The message says what is wrong but not where; callers add the place (a
    GraphSpec names the spec path). A ValueError, so a Pydantic validator that
    lets it through reports it at the field it came from.
    """


def parse_reference(reference: str) -> tuple[str, tuple[str, ...]]:
    """Split ``pkg.module:attr.path`` into the module name and the attribute names.

    Every part must be a Python identifier. Attribute names may not be dunders
    (``__globals__``, ``__class__``, ``__builtins__``...): those lead from a
    harmless function to everything the interpreter holds, so no reference may
    walk through them. The module name may (``__main__`` is a usual module).

    Raises:
        BadReference: the reference is malformed or walks through a dunder.
    """
    module, sep, attribute = reference.partition(":")
    if not sep or not module or not attribute:
        raise BadReference(f"{reference!r} is not of the form 'module:attribute'")
    if module.startswith("."):
        raise BadReference(
            f"{reference!r} is a relative import; name the module from the top "
            f"(for example 'mypackage{module}:{attribute}')"
        )
    if not all(part.isidentifier() for part in module.split(".")):
        raise BadReference(f"{reference!r}: {module!r} is not a module name")
    parts = tuple(attribute.split("."))
    for part in parts:
        if not part.isidentifier():
            raise BadReference(f"{reference!r}: {attribute!r} is not an attribute path")
        if part.startswith("__") and part.endswith("__"):
            raise BadReference(
                f"{reference!r} reaches through {part!r}; a reference may not name "
                "dunder attributes"
            )
    return module, parts


def allowed_module_prefixes(allowed_modules: Iterable[str] | None) -> tuple[str, ...] | None:
    """Normalise an allow-list of modules: ``None`` (any module) or names without a trailing dot.

    Raises:
        BadReference: the allow-list is a plain string or holds something that
            is not a module name.
    """
    if allowed_modules is None:
        return None
    if isinstance(allowed_modules, str):
        raise BadReference(
            f"allowed_modules takes a list of module names, not the string {allowed_modules!r}"
        )
    prefixes: list[str] = []
    for entry in allowed_modules:
        name = entry.removesuffix(".") if isinstance(entry, str) else ""
        if not name or not all(part.isidentifier() for part in name.split(".")):
            raise BadReference(f"allowed_modules: {entry!r} is not a module name")
        prefixes.append(name)
    return tuple(prefixes)


def module_allowed(module: str, prefixes: tuple[str, ...] | None) -> bool:
    """Whether ``module`` is one of ``prefixes`` or inside one (``myapp`` allows ``myapp.nodes``).

    ``None`` allows every module; an empty tuple allows none.
    """
    if prefixes is None:
        return True
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def check_reference(
    reference: str, prefixes: tuple[str, ...] | None
) -> tuple[str, tuple[str, ...]]:
    """Parse ``reference`` and refuse a module outside ``prefixes``, without importing anything.

    Raises:
        BadReference: malformed, a dunder attribute, or a module not allowed.
    """
    module, parts = parse_reference(reference)
    if not module_allowed(module, prefixes):
        raise BadReference(f"module {module!r} is not in the allowed modules ({_listed(prefixes)})")
    return module, parts


def import_reference(reference: str, prefixes: tuple[str, ...] | None = None) -> Any:
    """Import the object ``module:attr.path`` names, under an allow-list of modules.

    The module is checked before it is imported. With an allow-list, every
    module, function, class and method met on the attribute path must also
    come from an allowed module: ``myapp.nodes:os.system`` (a module that
    ``myapp.nodes`` imported) and ``myapp.nodes:run`` (``from subprocess
    import run``) are refused. Objects an allowed module created (an agent, a
    graph, a partial) count as that module's.

    Raises:
        BadReference: malformed, refused, or the import or a lookup failed
            (whatever the module raised while importing is reported, not raised).
    """
    module_name, parts = check_reference(reference, prefixes)
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise BadReference(f"cannot import module {module_name!r} ({exc})") from exc
    except Exception as exc:  # the module's own code failed: any exception type
        raise BadReference(
            f"importing module {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    for part in parts:
        try:
            target = getattr(target, part)
        except AttributeError:
            raise BadReference(
                f"module {module_name!r} has no attribute {'.'.join(parts)!r}"
            ) from None
        except Exception as exc:  # a module __getattr__ or a descriptor failed
            raise BadReference(
                f"looking up {part!r} in {module_name!r} raised {type(exc).__name__}: {exc}"
            ) from exc
        _check_origin(target, reference, prefixes)
    return target


def _check_origin(target: Any, reference: str, prefixes: tuple[str, ...] | None) -> None:
    """Refuse a module, function, class or method that an allowed module only imported."""
    if prefixes is None:
        return
    if inspect.ismodule(target):
        origin: object = target.__name__
    elif inspect.isroutine(target) or inspect.isclass(target):
        origin = getattr(target, "__module__", None)
    else:
        return
    if not isinstance(origin, str) or not module_allowed(origin, prefixes):
        raise BadReference(
            f"{reference!r} leads to {callable_name(target)!r} from module {origin!r}, "
            f"which is not in the allowed modules ({_listed(prefixes)})"
        )


def _listed(prefixes: tuple[str, ...] | None) -> str:
    return ", ".join(repr(prefix) for prefix in prefixes or ()) or "none"
