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


BOT_PARTS = {  # bot's subpackages → the ones below them that each may import; none imports the processes
    "github_api": set(),
    "intake": {"github_api"},
    "decisions": {"github_api"},
    "lifecycle": {"github_api"},
    "labeling": {"github_api", "intake", "decisions", "lifecycle"},
    "review": {"github_api", "decisions", "lifecycle", "labeling"},
}
BOT_PROCESSES = {"app", "jobs", "worker", "context"}  # bot's top-level wiring: what imports the parts


def bot_part_imports(part: str, root: Path = REPO_ROOT) -> set[tuple[str, str]]:
    """(file, bot module) of every `bot.X` import in one of bot's subpackages, lazy ones included."""
    found = set()
    for path in sorted((root / "bot" / part).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("bot"):
                modules = ([f"bot.{alias.name}" for alias in node.names] if node.module == "bot"
                           else [node.module])
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names if alias.name.startswith("bot.")]
            else:
                continue
            found |= {(str(path.relative_to(root)), module) for module in modules}
    return found


def test_bot_shows_its_parts_each_with_a_one_line_docstring():
    parts = {path.parent.name for path in (REPO_ROOT / "bot").glob("*/__init__.py")}
    assert parts == set(BOT_PARTS)
    for part in parts:
        docstring = ast.get_docstring(ast.parse((REPO_ROOT / "bot" / part / "__init__.py").read_text()))
        assert docstring and "\n" not in docstring.strip(), part
    top_level = {path.stem for path in (REPO_ROOT / "bot").glob("*.py")} - {"__init__"}
    assert top_level == BOT_PROCESSES | {"health", "metrics"}  # the web process's two operator routes


@pytest.mark.parametrize("part", sorted(BOT_PARTS))
def test_each_part_of_bot_imports_only_the_parts_below_it(part):
    wrong = []
    for path, module in sorted(bot_part_imports(part)):
        name = module.split(".")[1]
        if name in BOT_PROCESSES or (name in BOT_PARTS and name != part and name not in BOT_PARTS[part]):
            wrong.append(f"{path} imports {module}")
    assert wrong == []


def test_a_part_importing_a_part_above_it_is_found(tmp_path):
    (tmp_path / "bot" / "github_api").mkdir(parents=True)
    (tmp_path / "bot" / "github_api" / "client.py").write_text(
        "def f():\n    from bot.labeling import decide\n    from bot import jobs\n")
    assert bot_part_imports("github_api", tmp_path) == {("bot/github_api/client.py", "bot.labeling"),
                                                        ("bot/github_api/client.py", "bot.jobs")}
