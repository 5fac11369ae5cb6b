"""The time a question asks about, when it names one: a calendar day or a recent month.

"What did Ada say on 7 May 2023?" is about the memories of that day. A query that names a day
("7 May 2023", "May 7th, 2023", "2023-05-07", "yesterday") or a month just past ("last June")
gives search an `event_at` window; the memories that happened inside it get a `date` score.
Only explicit forms are read: a bare month ("in May") or number is left alone, since "may" is
also a verb and a number without a year is rarely a date.

Whatever the words, reading them never fails: a window that would reach past the calendar
(the first day of year 1, the last of year 9999) ends at the calendar's edge, and a day that
cannot be on it (year 0, 31 February) is no date. A question is stored and answered either way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

_MONTHS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH = (
    r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_DAY_FORMS = (
    re.compile(r"\b(?P<year>\d{4})-(?P<month_number>\d{2})-(?P<day>\d{2})\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
)
_RELATIVE_DAYS = {"today": 0, "yesterday": 1}
_RELATIVE_DAY = re.compile(r"\b(?P<word>today|yesterday)\b", re.IGNORECASE)
_LAST_MONTH_NAMED = re.compile(rf"\blast\s+{_MONTH}\b", re.IGNORECASE)

# Without the asker's time zone a calendar day spans from UTC+14 to UTC-12: the window
# covers the day wherever it was said.
_EARLIEST_OFFSET = timedelta(hours=14)
_LATEST_OFFSET = timedelta(hours=12)
_CALENDAR_START = datetime.min.replace(tzinfo=UTC)
_CALENDAR_END = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class TimeWindow:
    """[start, end): when the memories a question asks about happened."""

    start: datetime
    end: datetime


def _window(first: date, last: date) -> TimeWindow:
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    end = datetime(last.year, last.month, last.day, tzinfo=UTC)
    # Python's datetimes end with year 9999 and begin with year 1: a window around a day at
    # either edge is clamped to it rather than overflowing.
    if start - _CALENDAR_START < _EARLIEST_OFFSET:
        start = _CALENDAR_START
    else:
        start -= _EARLIEST_OFFSET
    if _CALENDAR_END - end < timedelta(days=1) + _LATEST_OFFSET:
        end = _CALENDAR_END
    else:
        end += timedelta(days=1) + _LATEST_OFFSET
    return TimeWindow(start, end)


def _month_number(match: re.Match[str]) -> int:
    named = match.groupdict().get("month")
    if named is not None:
        return _MONTHS[named[:3].lower()]
    return int(match.group("month_number"))


def query_time_window(query: str, now: datetime) -> TimeWindow | None:
    """The window of the first day or recent month `query` names, None when it names none."""
    for form in _DAY_FORMS:
        for match in form.finditer(query):
            try:
                day = date(int(match.group("year")), _month_number(match), int(match.group("day")))
            except ValueError:
                continue  # "31 February 2023": not a day
            return _window(day, day)
    relative = _RELATIVE_DAY.search(query)
    if relative is not None:
        today = now.astimezone(UTC).date()
        back = timedelta(days=_RELATIVE_DAYS[relative["word"].lower()])
        day = today - back if today - date.min >= back else date.min
        return _window(day, day)
    last_month = _LAST_MONTH_NAMED.search(query)
    if last_month is not None:
        # The latest such month that is over: "last June" in June means a year ago.
        month = _month_number(last_month)
        today = now.astimezone(UTC).date()
        year = today.year if month < today.month else today.year - 1
        if year < date.min.year:
            return None
        first = date(year, month, 1)
        following = date(year + (month == 12), month % 12 + 1, 1)
        return _window(first, following - timedelta(days=1))
    return None
