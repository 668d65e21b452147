"""The package's import graph from its source (an ast scan, nothing imported): modules, the
arrows between them (top-level and function-level imports), the cycles they form, and module
sizes, the folders' floors and the back-references between folders that import each other.
`python scripts/import_graph.py` prints the summary; tests/test_layering.py asserts on it.

A cycle is a strongly connected component of two or more modules. Imports of a package's
`__init__` stand for the package itself; `from . import x` names module x."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "cltune"


@dataclass
class Graph:
    modules: dict = field(default_factory=dict)  # name -> lines
    edges: dict = field(default_factory=dict)  # (src, dst) -> "top" | "function"

    def arrows(self, kind: str | None = None) -> set:
        return {e for e, k in self.edges.items() if kind is None or k == kind}

    def cycles(self, kind: str | None = None) -> list[list[str]]:
        """Strongly connected components of >= 2 modules over the arrows of `kind` (None: all)."""
        succ: dict = {m: [] for m in self.modules}
        for a, b in self.arrows(kind):
            succ[a].append(b)
        index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

        def visit(v):  # Tarjan; recursion as deep as the longest import chain
            index[v] = low[v] = n[0]
            n[0] += 1
            stack.append(v)
            on.add(v)
            for w in succ[v]:
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

        for v in sorted(self.modules):
            if v not in index:
                visit(v)
        return sorted(out)

    packages: set = field(default_factory=set)  # modules that are a folder's __init__

    def folders(self) -> dict:
        out: dict = {}
        for m in self.modules:
            out.setdefault(m if m in self.packages else m.rsplit(".", 1)[0], []).append(m)
        return out


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT / PACKAGE).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(current: str, is_pkg: bool, level: int, target: str | None) -> str:
    base = current.split(".") if is_pkg else current.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def scan(root: Path = ROOT) -> Graph:
    g = Graph()
    files = sorted((root / PACKAGE).rglob("*.py"))
    names = {module_name(p): p for p in files}
    for name, path in names.items():
        g.modules[name] = len(path.read_text().splitlines())
        if path.name == "__init__.py":
            g.packages.add(name)
    for name, path in names.items():
        tree = ast.parse(path.read_text())
        is_pkg = path.name == "__init__.py"
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            where = "top" if id(node) in top or _in_type_checking(tree, node) else "function"
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_pkg, node.level, node.module) if node.level else (node.module or "")
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in names else base)
            for t in targets:
                while t and t not in names and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in names and t != name and t.startswith(PACKAGE):
                    if t == PACKAGE and where == "top" and name != PACKAGE:
                        pass  # `from . import __version__`: the package's own constants
                    key = (name, t)
                    if g.edges.get(key) != "top":
                        g.edges[key] = where
    return g


def _in_type_checking(tree, node) -> bool:
    for n in tree.body:
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            if any(node is c for c in ast.walk(n)):
                return True
    return False


def folder_of(g: Graph, module: str) -> str:
    return module if module in g.packages else module.rsplit(".", 1)[0]


def floors(g: Graph) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """The folders in floors, bottom first (a folder's floor: one above the highest folder it imports;
    folders that import each other share one), and the back-references: module arrows between two
    folders that import each other, which a floor cannot order."""
    folders = sorted(g.folders())
    sub = Graph(modules={f: 0 for f in folders})
    for a, b in g.arrows():
        fa, fb = folder_of(g, a), folder_of(g, b)
        if fa != fb and fb != PACKAGE:  # the package's own __init__ (its version) is below everything
            sub.edges[(fa, fb)] = "top"
    rooms = {f: next((c for c in sub.cycles() if f in c), [f]) for f in folders}
    level: dict = {}

    def floor_of(f, seen=()):
        key = tuple(rooms[f])
        if key not in level:
            below = [floor_of(b, seen + key) for a, b in sub.arrows() if a in key and b not in key
                     and tuple(rooms[b]) not in seen]
            level[key] = 1 + max(below, default=-1)
        return level[key]

    out: dict = {}
    for f in folders:
        out.setdefault(floor_of(f), set()).add(" + ".join(rooms[f]) if len(rooms[f]) > 1 else f)
    mutual = [(a, b) for a, b in g.arrows() if folder_of(g, a) != folder_of(g, b)
              and len(rooms[folder_of(g, a)]) > 1 and folder_of(g, b) in rooms[folder_of(g, a)]]
    count: dict = {}
    for a, b in mutual:
        key = (folder_of(g, a), folder_of(g, b))
        count[key] = count.get(key, 0) + 1
    # of two folders that import each other, the direction with fewer arrows is the one against the floors
    back = sorted((a, b) for a, b in mutual if count[(folder_of(g, a), folder_of(g, b))]
                  < count.get((folder_of(g, b), folder_of(g, a)), 0))
    return [sorted(out[k]) for k in sorted(out)], back


def main() -> None:
    g = scan()
    folders = g.folders()
    print(f"modules: {len(g.modules)} in {len(folders)} folders; lines {sum(g.modules.values())}")
    for folder, mods in sorted(folders.items()):
        print(f"  {folder}: {len(mods)} modules, {sum(g.modules[m] for m in mods)} lines")
    print(f"arrows: {len(g.arrows())} ({len(g.arrows('top'))} top-level, {len(g.arrows('function'))} in functions)")
    for kind in ("top", None):
        cyc = g.cycles(kind)
        print(f"cycles ({'top-level imports' if kind else 'all imports'}): {len(cyc)}")
        for c in cyc:
            print("  " + " <-> ".join(c))
    levels, back = floors(g)
    between = {(folder_of(g, a), folder_of(g, b)) for a, b in g.arrows() if folder_of(g, a) != folder_of(g, b)}
    print(f"floors: {len(levels)} (bottom first; folders that import each other share a floor); "
          f"arrows between folders: {len(between)}")
    for i, names in enumerate(levels):
        print(f"  {i}: {', '.join(n.replace('cltune.', '') for n in names)}")
    print(f"back-references (of two folders that import each other, the fewer arrows): {len(back)}"
          + "".join(f"\n  {a} -> {b}" for a, b in back))
    big = sorted(((n, m) for m, n in g.modules.items() if n > 300), reverse=True)
    print(f"modules over 300 lines: {len(big)}" + "".join(f"\n  {m}: {n}" for n, m in big))


if __name__ == "__main__":
    main()
