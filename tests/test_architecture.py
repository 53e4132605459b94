"""The layout is the architecture: what may import what, read from the code's own import statements.

core is shared by the two applications and imports neither; bot (the GitHub App) and trainer
(training) never import each other, and talk only through the job names of core.queues.
"""

import ast
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

PACKAGES = ("core", "bot", "trainer", "issue_sorter", "simulation")
FORBIDDEN = {  # package → the packages it must never import
    "core": {"bot", "trainer", "issue_sorter", "simulation"},
    "bot": {"trainer", "issue_sorter", "simulation"},
    "trainer": {"bot", "issue_sorter", "simulation"},
}


def imported_packages(path: Path) -> set[tuple[str, int]]:
    """(top-level package, line) of every import in a file, lazy imports inside functions included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {(alias.name.split(".")[0], node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.module.split(".")[0], node.lineno))
    return found


def violations(package: str, root: Path = REPO_ROOT) -> list[str]:
    forbidden = FORBIDDEN.get(package, set())
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for imported, line in sorted(imported_packages(path)):
            if imported in forbidden:
                found.append(f"{path.relative_to(root)}:{line} imports {imported}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_package_imports_what_the_layout_forbids(package):
    assert violations(package) == []


def test_lazy_imports_inside_functions_count_too(tmp_path):
    """A function-level `from trainer.x import y` in bot is still bot depending on trainer."""
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "sneaky.py").write_text("def f():\n    from trainer.registry import Registry\n")
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "fine.py").write_text("import os\nfrom sqlalchemy import select\n")
    assert violations("bot", tmp_path) == ["bot/sneaky.py:2 imports trainer"]
    assert violations("core", tmp_path) == []


def test_the_command_tree_imports_the_simulation_only_where_replay_runs():
    """The service's image ships without simulation/: importing the CLI must not need it."""
    top_level = set()
    for path in sorted((REPO_ROOT / "issue_sorter").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                top_level |= {f"{path.name}: {name}" for name in names if name.split(".")[0] == "simulation"}
    assert top_level == set()


def test_every_package_of_the_layout_exists_and_is_installed_by_pyproject():
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    for package in PACKAGES:
        assert (REPO_ROOT / package / "__init__.py").is_file(), package
        assert f'"{package}*"' in pyproject, f"{package} is not in [tool.setuptools.packages.find]"


def test_docs_architecture_names_every_module():
    """docs/ARCHITECTURE.md's table is the map a newcomer reads first: each module of each package is on it,
    as `name` in its package's row (a subpackage as `name/` or `name.module`)."""
    table = {line.split("|")[1].strip(" `"): line for line in
             (REPO_ROOT / "docs" / "ARCHITECTURE.md").read_text().splitlines()
             if line.startswith("| `") and line.count("|") >= 4}
    missing = []
    for package in PACKAGES:
        row = table.get(package, "")
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT / package).with_suffix("").parts
            if parts[-1] in ("__init__", "__main__"):
                continue
            names = {f"`{parts[-1]}`", f"`{'.'.join(parts)}`"} | ({f"`{parts[0]}/`"} if len(parts) > 1 else set())
            if not any(name in row for name in names):
                missing.append(f"{package}/{'/'.join(parts)}.py")
    assert missing == []
