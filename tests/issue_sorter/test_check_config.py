"""`issue-sorter check-config FILE | owner/name`: the config read as the App reads it, through the fake GitHub
over HTTP. The cases are those of Probot's config loader: a missing file, the organisation's fallback, an empty
file, malformed and unsafe YAML, a file that is a folder; and GitHub refusing the file (the App's single-file
path never set)."""

from __future__ import annotations

import dataclasses

import pytest

from bot.labeling.config import CONFIG_PATH
from issue_sorter.cli import main
from simulation.fake_github import FakeGitHub

REPO, ORG_CONFIG = "octo/widgets", "octo/.github"
UNSAFE = "mode: !!python/object/apply:os.system ['touch {}']\n"


@pytest.fixture
def fake():
    with FakeGitHub(app_id=7) as github:
        github.add_repo(REPO, labels=["bug"], installation_id=3)
        yield github


@pytest.fixture
def app(settings, fake):
    return dataclasses.replace(settings, app_id=7, private_key=fake.private_key_pem, api_url=fake.url)


def check(target: str, settings, capsys) -> tuple[int, str]:
    code = main(["check-config", str(target)], load=lambda **_: settings)
    return code, capsys.readouterr().out


def with_config(fake, text: str | None = None, *, repo: str = REPO, installation: int = 3, **files) -> None:
    fake.add_repo(repo, labels=["bug"], installation_id=installation,
                  files={**({CONFIG_PATH: text} if text is not None else {}), **files})


def test_a_repository_without_a_file_anywhere_has_the_defaults_and_says_where_it_looked(fake, app, capsys):
    code, out = check(REPO, app, capsys)
    assert code == 0 and "HELD" not in out
    assert f"neither {REPO}/{CONFIG_PATH} nor {ORG_CONFIG}/{CONFIG_PATH} exists" in out
    assert "  mode: label" in out and "  target_precision: 0.9" in out


def test_the_organisations_dot_github_file_applies_when_the_repository_has_none(fake, app, capsys):
    with_config(fake, "mode: suggest\nskip_authors: ['dependabot[bot]']\n", repo=ORG_CONFIG)
    code, out = check(REPO, app, capsys)
    assert code == 0 and out.startswith(f"{ORG_CONFIG}/{CONFIG_PATH}: no problem")
    assert "  mode: suggest" in out and "  skip_authors: [dependabot[bot]]" in out


def test_the_repositorys_own_file_wins_over_the_organisations(fake, app, capsys):
    with_config(fake, "mode: suggest\n", repo=ORG_CONFIG)
    with_config(fake, "mode: shadow\n")
    code, out = check(REPO, app, capsys)
    assert code == 0 and out.startswith(f"{REPO}/{CONFIG_PATH}: no problem") and "  mode: shadow" in out


def test_an_organisations_dot_github_outside_the_installation_is_not_seen(fake, app, capsys):
    with_config(fake, "mode: off\n", repo=ORG_CONFIG, installation=99)  # GitHub answers 404: as if none
    code, out = check(REPO, app, capsys)
    assert code == 0 and "neither" in out and "  mode: label" in out


@pytest.mark.parametrize("text", ["", "# nothing yet\n", "---\n"])
def test_an_empty_file_means_the_defaults_without_a_problem(fake, app, capsys, text):
    with_config(fake, text)
    code, out = check(REPO, app, capsys)
    assert code == 0 and out.startswith(f"{REPO}/{CONFIG_PATH}: no problem") and "  mode: label" in out


def test_malformed_yaml_holds_the_repository_and_names_the_line(fake, app, capsys):
    with_config(fake, "mode: label\nallow: [bug\n")
    code, out = check(REPO, app, capsys)
    assert code == 1 and out.startswith(f"HELD: {REPO}/{CONFIG_PATH} is broken") and "not valid YAML at line" in out


def test_unsafe_yaml_holds_the_repository_and_runs_nothing(fake, app, capsys, tmp_path):
    touched = tmp_path / "ran"
    with_config(fake, UNSAFE.format(touched))
    code, out = check(REPO, app, capsys)
    assert code == 1 and out.startswith("HELD:") and "python/object/apply" in out
    assert not touched.exists()


def test_a_folder_where_the_file_belongs_holds_the_repository(fake, app, capsys):
    with_config(fake, **{f"{CONFIG_PATH}/settings.yml": "mode: off\n"})
    code, out = check(REPO, app, capsys)
    assert code == 1 and out.startswith(f"HELD: {REPO}/{CONFIG_PATH} cannot be read")
    assert "is a folder, not a file" in out


def test_a_file_github_refuses_holds_the_repository_and_says_where_to_set_the_single_file(fake, app, capsys):
    with_config(fake, "mode: label\n")
    fake.set_installation(3, single_files=[])  # the App's single-file path was never set
    code, out = check(REPO, app, capsys)
    assert code == 1 and out.startswith(f"HELD: {REPO}/{CONFIG_PATH} cannot be read")
    assert "GitHub refuses" in out and f"set Single file to `{CONFIG_PATH}`" in out


def test_a_repository_the_app_is_not_installed_on_is_refused_in_one_line(fake, app):
    with pytest.raises(SystemExit, match="not installed on octo/elsewhere"):
        main(["check-config", "octo/elsewhere"], load=lambda **_: app)


def test_reading_a_repository_needs_the_apps_credentials(settings):
    with pytest.raises(SystemExit, match="set GITHUB_APP_ID and GITHUB_PRIVATE_KEY"):
        main(["check-config", REPO], load=lambda **_: settings)


# ---- a file here: the same parse as the App's --------------------------------------------------------

@pytest.mark.parametrize("text,code,start", [
    ("mode: comment\nlabels: {bug: defect}\n", 0, "no problem"),
    ("", 0, "no problem"),
    ("threshold: seven\n", 1, "these settings are ignored"),
    ("mode: label\nallow: [bug\n", 1, "HELD"),
    ("alow: [bug]\n", 1, "HELD"),
])
def test_a_local_file_is_judged_as_the_app_judges_the_same_bytes_on_github(fake, app, capsys, tmp_path, text,
                                                                          code, start):
    local = tmp_path / "issue-sorter.yml"
    local.write_text(text)
    here = check(local, app, capsys)
    with_config(fake, text)
    there = check(REPO, app, capsys)
    assert here[0] == there[0] == code and start in here[1] and start in there[1]
    assert here[1].split("\n", 1)[1].replace(str(local), "X") == there[1].split("\n", 1)[1].replace(
        f"{REPO}/{CONFIG_PATH}", "X")  # the same problems and the same settings in force


def test_a_local_folder_and_a_missing_file_are_named(settings, capsys, tmp_path):
    code, out = check(tmp_path, settings, capsys)
    assert code == 1 and "is a folder, not a file" in out
    with pytest.raises(SystemExit, match="no file"):
        main(["check-config", str(tmp_path / "absent.yml")], load=lambda **_: settings)


@pytest.mark.parametrize("text,said", [("mode: label\n", "only suggested on the review page (set `areas:` to have "
                                                         "them written)"),
                                       ("areas: [streaming]\n", "written beside the kind where their threshold "
                                                                "keeps the precision target"),
                                       ("areas: false\n", "off")])
def test_it_says_whether_the_app_writes_the_own_labels(settings, capsys, tmp_path, text, said):
    (tmp_path / "issue-sorter.yml").write_text(text)
    assert f"  own labels: {said}" in check(tmp_path / "issue-sorter.yml", settings, capsys)[1].splitlines()
