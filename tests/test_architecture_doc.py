"""docs/ARCHITECTURE.md is the map a newcomer reads first: it must name every module in its folder's row
and every error type the package defines. The bug: within a day of being written it left out 13
modules (about 2,000 lines) and 7 error types, because nothing checked it."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
PACKAGE = ROOT / "cltune"


def folder_rows() -> dict[str, str]:
    """The folder table's rows: `core/` -> the row's text."""
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)/` \|.*$", DOC, re.M)}


def modules() -> dict[str, list[str]]:
    """Each folder of the package (and "" for the top) -> its modules, as named in the doc."""
    out: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if "__pycache__" in rel.parts:
            continue
        folder = "/".join(rel.parts[:-1])
        out.setdefault(folder, []).append(path.name)
    return out


def test_every_folder_has_a_row_and_every_module_is_named_in_it():
    rows = folder_rows()
    missing = []
    for folder, names in modules().items():
        top, _, sub = folder.partition("/")  # a package inside a folder is named in the folder's row
        if not folder:
            text = DOC  # the top's modules: named anywhere (the paragraph after the table)
        elif top not in rows:
            missing.append(f"{top}/ (no row in the folder table)")
            continue
        else:
            text = rows[top]
        for name in names:
            if name == "__init__.py" and folder:
                if sub and f"`{sub}/" not in text:
                    missing.append(f"{folder}/")
                continue  # a folder's front door: the row names what it exports
            named = (f"`{name}`", f"`{folder}/{name}`", f"{name[:-3]}`") if not sub else (f"`{sub}/{name}`",)
            if not any(n in text for n in named):
                missing.append(f"{folder}/{name}" if folder else name)
    assert not missing, "docs/ARCHITECTURE.md does not name: " + ", ".join(missing)


def error_types() -> list[tuple[str, str]]:
    """Every class in the package that derives from an exception (directly or from one of ours)."""
    found: dict[str, str] = {}
    bases_of: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases_of[node.name] = [ast.unparse(b).split(".")[-1] for b in node.bases]
                found[node.name] = str(path.relative_to(ROOT))

    def is_error(name, seen=()):
        if name in seen:
            return False
        if name.endswith(("Error", "Exception", "Exit", "Interrupt")) and name not in bases_of:
            return True  # a builtin or library exception
        return any(is_error(b, seen + (name,)) for b in bases_of.get(name, ()))

    return sorted((name, where) for name, where in found.items() if is_error(name))


def test_every_error_type_is_named():
    errors = error_types()
    assert len(errors) >= 5, errors  # the scan itself works: UserError, ExprError, ... are found
    missing = [f"{name} ({where})" for name, where in errors if f"`{name}`" not in DOC]
    assert not missing, "docs/ARCHITECTURE.md does not name these error types: " + ", ".join(missing)


def test_every_package_is_in_pyprojects_list():
    """The bug: cltune.deploy was left out of pyproject.toml's explicit package list, so a plain
    (non-editable) install had no `cltune deploy`; an editable one hid it."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found - listed == set(), f"pyproject.toml's packages miss {sorted(found - listed)}"
