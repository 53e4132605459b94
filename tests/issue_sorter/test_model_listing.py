"""`issue-sorter models`: each version's figures, named as the quality and operator pages name them."""

from core.db import make_sessionmaker, session_scope
from core.tables import GLOBAL_SCOPE, ModelVersion
from issue_sorter.cli import main
from tests.issue_sorter.test_cli import env  # noqa: F401 (the fixture)


def test_models_names_both_figures_as_the_review_pages_do(env, tmp_path, capsys):  # noqa: F811
    """One model showed 0.806 on the quality page and 0.605 here, each called a score."""
    main(["migrate"])
    with session_scope(make_sessionmaker(f"sqlite:///{tmp_path / 'cli.db'}")) as session:
        session.add(ModelVersion(version="global-v2", scope=GLOBAL_SCOPE, path=str(tmp_path / "m"),
                                 labels=["bug"], metrics={"macro_f1": 0.605, "mean_repo_macro_f1": 0.806}))
    capsys.readouterr()
    assert main(["models"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.endswith("macro-F1 0.605  per-repository mean 0.806") and "global-v2" in line
