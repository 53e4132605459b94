"""A label's own name as evidence (core.own_label_names): the words an issue would use for it, whatever the
repository's naming scheme, found in the title and in the whole text."""

import numpy as np
import pytest

from core.own_label_names import NAME_SCALE, name_columns, name_words


@pytest.mark.parametrize("label,words", [
    ("module:linear_model", ("linear", "model")), ("area-System.Net", ("system", "net")),
    ("component: streaming", ("stream",)), ("dataset-viewer", ("dataset", "view")),
    ("area/HttpClient", ("http", "client")), ("type: Bug", ()), ("area/docs", ())])
def test_a_names_words_leave_out_the_scheme_the_kind_and_word_endings(label, words):
    assert name_words(label) == words


def test_the_title_and_the_whole_text_each_count_the_share_of_the_names_words_they_use():
    texts = ["LinearRegression model fails\n\nfit raises", "Something else\n\nthe linear solver",
             "Nothing here\n\nat all", "linear_model\n\n"]
    assert np.array_equal(name_columns("module:linear_model", texts) / NAME_SCALE,
                          [[1.0, 1.0], [0.0, 0.5], [0.0, 0.0], [1.0, 1.0]])


def test_a_word_is_found_only_where_a_word_of_the_text_begins_with_it():
    """`stream` is found in `streams` and `Streaming`, not in `upstream`: a word of the name, no substring."""
    columns = name_columns("streaming", ["Streams stop\n\n", "upstream fails\n\n", "x\n\nStreamingDownload"])
    assert columns[:, 1].tolist() == [NAME_SCALE, 0.0, NAME_SCALE]


def test_a_name_without_words_of_its_own_gives_no_evidence():
    assert not name_columns("type: Bug", ["a bug\n\nbug"]).any()
