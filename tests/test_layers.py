"""The layer rules of docs/architecture.md, checked on every import statement of the package.

Every ``import`` and ``from ... import`` is read from the source with ``ast``
(inside functions too: a lazy import is still a dependency), so a violation
fails the build before it runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "dpdpca"

#: (layer, forbidden prefixes): modules under ``layer`` may import none of these.
RULES = [
    ("dpdpca.crypto", ("dpdpca.dp", "dpdpca.protocol", "dpdpca.baselines", "dpdpca.driver", "dpdpca.pipelines",
                       "dpdpca.estimator", "dpdpca.result", "dpdpca.metrics", "dpdpca.linalg")),
    ("dpdpca.dp", ("dpdpca.crypto", "dpdpca.protocol", "dpdpca.baselines", "dpdpca.driver", "dpdpca.pipelines")),
    ("dpdpca.baselines", ("dpdpca.protocol", "dpdpca.crypto", "dpdpca.net")),
    ("dpdpca.protocol", ("dpdpca.net",)),
    ("dpdpca.crypto", ("dpdpca.net",)),
    ("dpdpca.dp", ("dpdpca.net",)),
    ("dpdpca", ("dpdpca.cli", "dpdpca.commands")),  # nothing imports the command line...
]
#: ...except the command line itself (the commands package may share helpers).
TOP = {"dpdpca.cli", "dpdpca.commands"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, absolute (relative imports resolved)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{alias.name}" for alias in node.names)  # "from dpdpca import cli"
    return out


MODULES = {_module_name(p): _imports(p) for p in sorted(ROOT.rglob("*.py"))}


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("layer, forbidden", RULES, ids=[r[0] for r in RULES])
def test_layer_rules(layer, forbidden):
    bad = []
    for module, imports in MODULES.items():
        if not _under(module, layer) or any(_under(module, top) for top in TOP if layer == "dpdpca"):
            continue
        bad += [f"{module} imports {imp}" for imp in sorted(imports) if any(_under(imp, f) for f in forbidden)]
    assert not bad, "layer rule broken: " + "; ".join(bad)


def test_the_walker_sees_every_module_and_lazy_imports():
    assert "dpdpca.protocol.runner" in MODULES and "dpdpca.crypto.keys" in MODULES
    assert "dpdpca.pipelines" in MODULES["dpdpca.driver"]
    assert "dpdpca.protocol.processes" in MODULES["dpdpca.protocol.runner"]  # imported inside a function


def _cycles() -> list[list[str]]:
    """Cycles between modules of the package (a module that imports its own package's __init__ is not one)."""
    graph = {m: {i for i in imps if i in MODULES and i != m and not _under(m, i)} for m, imps in MODULES.items()}
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    return cycles


def test_no_import_cycles():
    cycles = _cycles()
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def _private_owner(imported: str) -> str | None:
    """The package whose private module ``imported`` names (``dpdpca.crypto._gmp`` -> ``dpdpca.crypto``), or None."""
    parts = imported.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            module = ".".join(parts[: i + 1])
            return ".".join(parts[:i]) if module in MODULES else None  # a private name in a module is not one
    return None


def test_no_module_imports_another_packages_private_module():
    """``x._private`` is imported only from inside package ``x`` (crypto's big-number backend stays in crypto)."""
    bad = []
    for module, imports in MODULES.items():
        for imp in sorted(imports):
            owner = _private_owner(imp)
            if owner is not None and imp.split(".")[0] == "dpdpca" and not _under(module, owner):
                bad.append(f"{module} imports {imp}")
    assert not bad, "private module imported from outside its package: " + "; ".join(bad)


def test_the_private_rule_sees_the_backend():
    assert _private_owner("dpdpca.crypto._gmp") == "dpdpca.crypto"
    assert _private_owner("dpdpca.crypto.ciphertexts") is None
    assert "dpdpca.crypto._gmp" in MODULES["dpdpca.crypto.ciphertexts"]
    assert not any(i.startswith("dpdpca.crypto._gmp") for m in ("dpdpca.protocol.proxy", "dpdpca.protocol.intake")
                   for i in MODULES[m])


def test_one_upper_triangle_size():
    """``d (d + 1) // 2`` is written once (dpdpca.triangle); every layer calls it."""
    import re

    inline = re.compile(r"\b(\w+) \* \(\1 \+ 1\) // 2")
    found = [str(p.relative_to(ROOT.parent)) for p in sorted(ROOT.rglob("*.py")) if inline.search(p.read_text())]
    assert found == ["dpdpca/triangle.py"]
    from dpdpca import crypto, linalg, triangle
    assert crypto.triangle_size is linalg.upper_triangle_size is triangle.upper_triangle_size
