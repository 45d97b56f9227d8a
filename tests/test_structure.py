"""The package's shape: its modules import one way down (no cycle), and no function holds several jobs."""

import ast
import re
from pathlib import Path

import kernelgd

PACKAGE = Path(kernelgd.__file__).parent


def _imports():
    """Each module's package-internal imports (relative ones, at any depth of the file)."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        package = parts[:-1]
        name = ".".join(parts[:-1] if path.name == "__init__.py" else parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - node.level + 1]
                if node.module:  # "from .mod import name": mod (and name, where it is a module)
                    module = base + node.module.split(".")
                    found.add(".".join(module))
                else:  # "from . import mod": mod only, not the package's __init__
                    module = base
                found.update(".".join(module + [alias.name]) for alias in node.names)
        graph[name] = found
    return {name: {d for d in deps if d in graph and d != name} for name, deps in graph.items()}


def test_no_module_imports_one_that_imports_it_back():
    graph = _imports()
    assert "kernelgd._dask" in graph and "kernelgd._base" in graph["kernelgd._regressor"]
    cycles, done = [], set()

    def visit(name, path):
        for dep in graph[name]:
            if dep in path:
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in done:
                visit(dep, path + [dep])
        done.add(name)

    for name in graph:
        if name not in done and name != "kernelgd":  # the package's __init__ imports every module
            visit(name, [name])
    assert not cycles, f"import cycles: {[' -> '.join(c) for c in cycles]}"


def test_no_function_is_longer_than_120_lines():
    # one job per function: past this length a function holds several (STYLE.md)
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 120:
                long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, long


# A test of which array namespace an input lives in ("xp is np", "isinstance(A, np.ndarray)", a library's
# namespace predicate, ...)
NAMESPACE_TEST = re.compile(
    r"\bis (not )?np\b|isinstance\([^)]*np\.ndarray|\bis_numpy\(|_is_numpy_namespace\(|"
    r"\bis_(torch|cupy|array_api_strict)_namespace\b|\b_(torch|cupy)\(xp\)"
)
# The backend: one numpy body and one generic body per primitive, and the tests that choose between them.
BACKEND = {"_array_api.py"}


def _namespace_tests(paths):
    return [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in paths
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if NAMESPACE_TEST.search(line) and not line.lstrip().startswith(("def ", "from ", "import "))
    ]


def test_only_the_backend_asks_which_namespace_an_array_lives_in():
    # kernels, the operator, the solvers and the estimators are written once for every namespace: they
    # call the backend's primitives (or ask it ``on_host``, where only the host has a thread pool)
    outside = _namespace_tests(p for p in PACKAGE.rglob("*.py") if p.name not in BACKEND)
    assert not outside, outside


def test_the_backend_chooses_a_body_in_at_most_ten_places():
    found = _namespace_tests(PACKAGE / name for name in BACKEND)
    assert 0 < len(found) <= 10, found
