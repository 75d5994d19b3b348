"""The public API as the type stubs declare it: every name of fusednorm.__all__ is in
fusednorm/__init__.pyi, every function and class there is exported, and each function's
parameters (names, kinds, which have defaults) are the runtime function's."""

import ast
import inspect
import os

import fusednorm

STUB = os.path.join(os.path.dirname(__file__), "..", "fusednorm", "__init__.pyi")


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read())


def stub_names(tree):
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets)
    return names


def stub_parameters(fn):
    """[(name, kind, has default)] of a stub's def, in inspect.Parameter's terms."""
    a = fn.args
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(a.defaults)
    out = [(p.arg, inspect.Parameter.POSITIONAL_ONLY, i >= first_default) for i, p in enumerate(a.posonlyargs)]
    out += [(p.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, i + len(a.posonlyargs) >= first_default)
            for i, p in enumerate(a.args)]
    if a.vararg:
        out.append((a.vararg.arg, inspect.Parameter.VAR_POSITIONAL, False))
    out += [(p.arg, inspect.Parameter.KEYWORD_ONLY, d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append((a.kwarg.arg, inspect.Parameter.VAR_KEYWORD, False))
    return out


def runtime_parameters(fn):
    return [(p.name, p.kind, p.default is not inspect.Parameter.empty)
            for p in inspect.signature(fn).parameters.values()]


def test_every_export_is_in_the_stubs():
    assert sorted(set(fusednorm.__all__) - stub_names(stub_tree())) == []


def test_every_stubbed_function_and_class_is_exported():
    declared = {n.name for n in stub_tree().body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert sorted(declared - set(fusednorm.__all__)) == []


def test_stub_signatures_are_the_functions():
    functions = [n for n in stub_tree().body if isinstance(n, ast.FunctionDef)]
    assert len(functions) > 20
    for fn in functions:
        assert stub_parameters(fn) == runtime_parameters(getattr(fusednorm, fn.name)), fn.name
