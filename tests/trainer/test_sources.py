"""Every labelled source of ../shared/data loads as the four kinds, and the mix keeps NLBSE'24's test out."""

import json
import zipfile
from collections import Counter

import pytest

from core.kinds import KINDS
from tests.conftest import IN_CI
from tests.paths import CCIMS, DATA, NLBSE
from trainer.dataset import github_objects, load_ccims, load_fasttext, load_file, load_github_issues
from trainer.sources import (
    TICKET_TAGGER_GROUP,
    MixConfig,
    capped,
    drop_titles,
    load_ccims_dir,
    load_sources,
    training_mix,
)


@pytest.fixture(scope="module")
def sources():
    if not (DATA / "ccims-issue-classification").is_dir():
        if IN_CI:
            pytest.fail(f"shared data not found at {DATA}: CI must have ../shared beside the checkout")
        pytest.skip(f"shared data not found at {DATA} (set ISSUE_SORTER_SHARED)")
    return load_sources(DATA)


def test_all_four_sources_load_with_their_kinds_and_groups(sources):
    assert list(sources) == ["nlbse24", "ticket-tagger", "ccims", "huggingface-datasets"]
    kinds = {name: {e.label for e in examples} for name, examples in sources.items()}
    assert kinds == {"nlbse24": {"bug", "feature", "question"}, "ticket-tagger": {"bug", "feature", "question"},
                     "ccims": {"bug", "feature", "docs"}, "huggingface-datasets": set(KINDS)}
    assert len(sources["nlbse24"]) == 1500
    assert {e.repo for e in sources["ticket-tagger"]} == {TICKET_TAGGER_GROUP}
    assert 3600 < len(sources["ticket-tagger"]) <= 3690  # the 34 repeated texts kept once
    assert len({e.repo for e in sources["ccims"]}) == 9
    assert all(e.title == "" and e.body for e in sources["ccims"])  # body only
    hf = sources["huggingface-datasets"]
    assert {e.repo for e in hf} == {"huggingface/datasets"} and all(e.title for e in hf)
    assert len(hf) < 3019  # issues only, and only those whose labels give one kind
    assert [e.created_at for e in hf] == sorted(e.created_at for e in hf)


def test_ccims_drops_repeated_bodies_and_bodies_filed_under_two_kinds(sources):
    ccims = sources["ccims"]
    kinds_of_body = Counter((e.repo, e.body) for e in ccims)
    assert max(kinds_of_body.values()) == 1  # neither repeated in a file nor under two kinds
    raw = json.loads((CCIMS / "moby_moby_documentation.json").read_text())
    moby_docs = [e for e in ccims if e.repo == "moby/moby" and e.label == "docs"]
    assert len(moby_docs) < len({row["text"] for row in raw}) < len(raw)  # 1,146 rows, ~555 distinct


def test_a_ccims_file_takes_its_label_from_its_name_and_api_is_no_kind(tmp_path):
    path = tmp_path / "keras-team_keras_documentation.json"
    path.write_text(json.dumps([{"text": "Typo in the guide", "labels": [None, "enhancement1"]},
                                {"text": "Typo in the guide", "labels": ["documentation"]}, {"text": ""}]))
    [example] = load_ccims(path)
    assert (example.repo, example.label, example.title, example.body) == ("keras-team/keras", "docs", "",
                                                                           "Typo in the guide")
    api = tmp_path / "moby_moby_api.json"
    api.write_text("[]")
    with pytest.raises(ValueError, match="no kind"):
        load_ccims(api)
    assert load_ccims_dir(tmp_path) == [example]  # the api file is left out of the directory


def test_fasttext_lines_map_enhancement_to_feature_and_strip_one_pair_of_quotes(tmp_path):
    path = tmp_path / "tt.txt"
    path.write_text('__label__enhancement "Add dark mode please"\n__label__bug crash on start\n__label__x y\n')
    examples = load_fasttext(path, repo="group")
    assert [(e.label, e.text, e.repo) for e in examples] == [("feature", "Add dark mode please", "group"),
                                                             ("bug", "crash on start", "group")]


def test_github_api_zip_keeps_issues_not_pull_requests(tmp_path):
    rows = [{"title": "t1", "body": "b", "labels": [{"name": "bug"}], "pull_request": None,
             "created_at": "2024-02-01T00:00:00Z", "repository_url": "https://api.github.com/repos/o/r"},
            {"title": "a PR", "body": None, "labels": [{"name": "bug"}], "pull_request": {"url": "x"},
             "created_at": "2024-01-01T00:00:00Z", "repository_url": "https://api.github.com/repos/o/r"},
            {"title": "t0", "body": None, "labels": [{"name": "documentation"}],
             "created_at": "2024-01-01T00:00:00Z", "repository_url": "https://api.github.com/repos/o/r"},
            {"title": "none", "body": "", "labels": [], "created_at": "2024-03-01T00:00:00Z"}]
    path = tmp_path / "issues.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("issues.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    assert [(e.title, e.label, e.repo) for e in load_file(path)] == [("t0", "docs", "o/r"), ("t1", "bug", "o/r")]
    assert load_github_issues(path) == load_file(path, format="github-api")


ISSUES = [{"number": 1, "title": "t1", "labels": [{"name": "area/api"}]},
          {"number": 2, "title": "t2", "labels": []}, {"number": 3, "title": "t3", "labels": []}]


@pytest.mark.parametrize("shape", ["jsonl", "array", "paginated", "gzip", "zip of arrays"])
def test_github_objects_read_every_shape_people_save_api_answers_in(tmp_path, shape):
    import gzip

    lines, page = "".join(json.dumps(row) + "\n" for row in ISSUES), json.dumps(ISSUES, indent=2)
    paginated = json.dumps(ISSUES[:2]) + json.dumps(ISSUES[2:])  # `gh api --paginate`: arrays back to back
    path = tmp_path / {"jsonl": "i.jsonl", "array": "i.json", "paginated": "i.json", "gzip": "i.json.gz",
                       "zip of arrays": "i.zip"}[shape]
    if shape == "gzip":
        path.write_bytes(gzip.compress(page.encode()))
    elif shape == "zip of arrays":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("page1.json", json.dumps(ISSUES[:1]))
            archive.writestr("page2.json", json.dumps(ISSUES[1:]))
    else:
        path.write_text({"jsonl": lines, "array": page, "paginated": paginated}[shape])
    assert [issue["number"] for issue in github_objects(path)] == [1, 2, 3]


@pytest.mark.parametrize("shape", ["jsonl", "array", "paginated"])
def test_json_objects_read_a_dump_as_a_stream_whatever_falls_across_a_chunk(shape):
    """Values cut at every point by a small chunk read whole; a dump of many lines is never read at once,
    while a value longer than a chunk (a page) is read on until it ends."""
    import io

    from trainer.dataset import json_objects

    issues = [{"number": n, "title": f"issue {n} \u00e9", "labels": [{"name": "area/api"}] * (n % 3)}
              for n in range(1, 201)]
    text = {"jsonl": "".join(json.dumps(row) + "\n" for row in issues),
            "array": json.dumps(issues, indent=2),
            "paginated": "".join(json.dumps(issues[i:i + 30]) for i in range(0, 200, 30))}[shape]
    reads = []

    class Recorded(io.StringIO):
        def read(self, size=-1):
            reads.append(size)
            return super().read(size)

    for chunk in (7, 64, 1 << 20):
        reads.clear()
        assert list(json_objects(Recorded(text), "dump", chunk=chunk)) == issues
        if shape == "jsonl" and chunk < len(text):  # one line at a time, not the file
            longest = max(len(line) for line in text.splitlines(keepends=True))
            assert max(reads) <= max(chunk, 2 * longest) < len(text) / 10


def test_github_objects_name_the_line_that_is_not_json(tmp_path):
    path = tmp_path / "issues.jsonl"
    path.write_text(json.dumps(ISSUES[0]) + "\n{\"number\": 2,\n")
    with pytest.raises(ValueError, match=r"issues.jsonl, line 2: not JSON"):
        list(github_objects(path))
    path.write_text("".join(json.dumps(row) + "\n" for row in ISSUES * 5000) + "[{\"number\": 4}\n")
    with pytest.raises(ValueError, match=r"issues.jsonl, line 15001: not JSON"):  # past the first chunk
        list(github_objects(path))
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="1 is no GitHub API issue object"):
        list(github_objects(path))


def test_the_mix_has_four_kinds_caps_every_repository_and_never_holds_nlbse_test(sources):
    mix = training_mix(sources)
    assert {e.label for e in mix} == set(KINDS)
    assert max(Counter((e.repo, e.label) for e in mix).values()) == MixConfig().per_group_kind
    test_texts = {e.text for e in load_file(NLBSE / "issues_test.csv")}
    train_titles = {(e.repo, e.title, e.body) for e in load_file(NLBSE / "issues_train.csv")}
    nlbse_in_mix = [e for e in mix if e.repo in {"facebook/react", "bitcoin/bitcoin"}]
    assert all(e.text not in test_texts or (e.repo, e.title, e.body) in train_titles for e in nlbse_in_mix)
    without = training_mix(sources, exclude=["moby/moby", TICKET_TAGGER_GROUP])
    assert not {"moby/moby", TICKET_TAGGER_GROUP} & {e.repo for e in without}


def test_titles_are_dropped_from_titled_issues_of_every_kind_so_no_title_means_no_kind(sources):
    mix = training_mix(sources)
    titled_sources = capped(sources["nlbse24"] + sources["huggingface-datasets"], 300, 42)
    dropped = drop_titles(titled_sources, 0.3, 42)
    share = sum(not e.title for e in dropped) / len(dropped)
    assert 0.25 < share < 0.35
    body_only = Counter(e.label for e in mix if not e.title)
    assert set(body_only) == set(KINDS)  # a body without a title is no sign of docs (or of any kind)
