"""The architecture the guide (docs/internals.md) describes, checked against the tree.

Invariant: these tests read the source as text and import nothing of ours, so they fail
with the offending file named: a layer importing a layer it may not (DESIGN.md's table),
a module past the size where it should be two, or the guide naming a path, a folder or a
``file.py:function`` that does not exist.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"protocol": "protocol", "zk": "zk", "broker": "broker", "client": "client",
            "pipeline": "pipeline"}
# What each layer may import of ours (besides itself). odradek.testing lives in client/testing
# and may use the whole product: it starts real clusters for tests.
ALLOWED = {
    "protocol": set(),
    "zk": {"protocol"},
    "broker": {"protocol", "zk"},
    "client": {"protocol"},
    "pipeline": {"protocol", "client"},
}
# The web view reads ZooKeeper as the zk admin tools do (odradek ui --zookeeper), and the brokers
# with the clients: it sits above both.
SUBLAYERS = {"client/ui": {"protocol", "zk", "client"}}
MAX_MODULE_LINES = 600
GUIDE = ROOT / "docs" / "internals.md"


def _modules(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "testing" not in p.relative_to(ROOT).parts)


def _imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "odradek" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_each_layer_imports_only_what_it_may():
    wrong = []
    for layer, allowed in ALLOWED.items():
        for path in _modules(PACKAGES[layer]):
            sub = next((extra for folder, extra in SUBLAYERS.items() if (ROOT / folder) in path.parents), set())
            bad = _imported_layers(path) - allowed - sub - {layer}
            if bad:
                wrong.append(f"{path.relative_to(ROOT)} imports odradek.{', odradek.'.join(sorted(bad))}")
    assert not wrong, "layering broken:\n" + "\n".join(wrong)


def test_no_module_is_past_the_size_where_it_should_be_two():
    big = [f"{p.relative_to(ROOT)}: {n} lines"
           for layer in PACKAGES.values() for p in _modules(layer)
           if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not big, f"modules over {MAX_MODULE_LINES} lines (split them along a seam):\n" + "\n".join(big)


# One way to do each thing: the only client-side modules that may speak these APIs.
ONE_HOME = {
    "join_group": {"client/group_membership.py"},       # every group member: consumer, Connect
    "sync_group": {"client/group_membership.py"},
    "heartbeat": {"client/group_membership.py"},
}


def test_group_membership_is_written_once():
    speakers: dict[str, set[str]] = {api: set() for api in ONE_HOME}
    for layer in ("client", "pipeline"):
        for path in _modules(layer):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module == "odradek.protocol.apis":
                    for alias in node.names:
                        if alias.name in speakers:
                            speakers[alias.name].add(str(path.relative_to(ROOT)))
    assert speakers == ONE_HOME, f"group membership written more than once: {speakers}"


def test_every_module_states_its_invariant():
    missing = [str(p.relative_to(ROOT)) for layer in PACKAGES.values() for p in _modules(layer)
               if p.read_text().strip() and ast.get_docstring(ast.parse(p.read_text())) is None]
    assert not missing, "modules without a header docstring:\n" + "\n".join(missing)


_PATH = re.compile(r"`((?:protocol|zk|broker|client|pipeline|tests|docker|docs)/[\w./-]*)"
                   r"(?::(\w+)(?:\.(\w+))?)?`")


def _guide_refs() -> list[tuple[str, str | None, str | None]]:
    return [(m.group(1), m.group(2), m.group(3)) for m in _PATH.finditer(GUIDE.read_text())]


def test_the_guide_names_only_paths_that_exist():
    refs = _guide_refs()
    assert len(refs) > 40, "the guide should point into the code"
    missing = sorted({p for p, _, _ in refs if not (ROOT / p.rstrip("/")).exists()})
    assert not missing, "docs/internals.md names paths that do not exist:\n" + "\n".join(missing)


def test_the_guide_names_only_functions_that_exist():
    missing = []
    for path, name, member in _guide_refs():
        if name is None or not path.endswith(".py") or not (ROOT / path).exists():
            continue
        tree = ast.parse((ROOT / path).read_text())
        defs: dict[str, ast.AST] = {n.name: n for n in ast.walk(tree)
                                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        for n in tree.body:   # a module's function bound by name (one of two implementations, say)
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                defs.setdefault(n.target.id, n)
        target = defs.get(name)
        if target is None:
            missing.append(f"{path}:{name}")
        elif member is not None and not any(
                isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == member
                for n in ast.walk(target)):
            missing.append(f"{path}:{name}.{member}")
    assert not missing, "docs/internals.md names functions that do not exist:\n" + "\n".join(missing)
