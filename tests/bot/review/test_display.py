"""One time format on every review page: relative, the absolute UTC time on hover."""

from __future__ import annotations

import datetime as dt

from bot.review.display import relative, when

NOW = dt.datetime(2026, 12, 2, 15, 0, tzinfo=dt.UTC)


def test_times_read_relative_to_now():
    ago = [relative(NOW - delta, NOW) for delta in (dt.timedelta(seconds=20), dt.timedelta(minutes=1),
                                                    dt.timedelta(hours=3), dt.timedelta(days=9),
                                                    dt.timedelta(days=400))]
    assert ago == ["just now", "1 minute ago", "3 hours ago", "1 week ago", "1 year ago"]
    assert relative(NOW + dt.timedelta(hours=2), NOW) == "in 2 hours"  # a clock a little ahead


def test_the_absolute_time_is_on_hover_whatever_form_the_time_came_in():
    aware = when(dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC), NOW)
    assert aware == ('<time datetime="2026-12-02T12:00:00+00:00" title="2026-12-02 12:00 UTC">'
                     '3 hours ago</time>')
    assert when(dt.datetime(2026, 12, 2, 12, 0), NOW) == aware  # SQLite's naive UTC
    assert when("2026-12-02 12:00:00", NOW) == aware  # rq's string form
    assert when(None) == "" and when("") == ""
    assert when("<b>soon</b>") == "&lt;b&gt;soon&lt;/b&gt;"  # not a time: shown as text, escaped
