"""The time a question asks about, when it names one: a calendar day, a week or a month.

"What did Ada say on 7 May 2023?" is about the memories of that day. A query that names a day
("7 May 2023", "May 7th, 2023", "2023-05-07", "05/07/2023", "yesterday", "two days ago", "last
Tuesday"), a week ("last week", "last weekend") or a month ("in May 2023", "last June", "last
month") gives search an `event_at` window; the memories that happened inside it get a `date`
score. Words relative to now are read against the time of the search. Only explicit forms are
read: a bare month ("in May") or number is left alone, since "may" is also a verb and a number
without a year is rarely a date. The first form found wins, absolute before relative: "last
weekend before April 10, 2023" is about 10 April 2023.

Numeric days: with slashes the month comes first (05/07/2023 is 7 May, as in the US and as an
English question spells "May 7, 2023"), with dots the day (05.07.2023 is 5 July, the European
convention); when the first number cannot be a month (31/05/2023, 05.31.2023 the other way
round) the only reading left is taken.

The grammar is written here rather than taken from a library: python-dateutil parses a date
string but does not find one inside a sentence (with `fuzzy=True` it fills a missing day or year
from a default, so "in May" or a modal "may" become the 1st of a month and a named day cannot be
told from a filled-in one); dateparser's `search_dates` finds dates in text but brings language
data and the `regex`, `pytz` and `tzlocal` packages for what is here a page of patterns;
parsedatetime and ctparse are no longer maintained. Each form is tested on its own.

The words that name the time are `NamedTime`'s span of the question: search leaves them out of
its lexical side (`NamedTime.words_around`), since the time is the date prior's, not a word to
match.

Whatever the words, reading them never fails: a window that would reach past the calendar
(the first day of year 1, the last of year 9999) ends at the calendar's edge, and a day that
cannot be on it (year 0, 31 February, a week before the first) is no date. A question is stored
and answered either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
# 05/07/2023 (month first) or 05.07.2023 (day first); a trailing dot ends a sentence.
_NUMERIC_DAY = re.compile(
    r"(?<![\d/.])(?P<first>\d{1,2})(?P<separator>[/.])(?P<second>\d{1,2})(?P=separator)"
    r"(?P<year>\d{4})(?![\d/]|\.\d)"
)
_MONTH_OF_YEAR = re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)
# A month after a day number is part of a day form ("31 February 2023" is no day, not February).
_AFTER_DAY = re.compile(r"\d(?:st|nd|rd|th)?\s+(?:of\s+)?$", re.IGNORECASE)
_RELATIVE_DAYS = {"today": 0, "yesterday": 1, "the day before yesterday": 2}
_RELATIVE_DAY = re.compile(r"\b(?P<word>(?:the\s+day\s+before\s+)?yesterday|today)\b", re.I)
_COUNTS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
# "two days ago", "3 weeks ago", "a month ago"; years are too wide a window to lift anything.
_AGO = re.compile(
    r"\b(?P<count>\d{1,4}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    r"\s+(?P<unit>day|week|month)s?\s+ago\b",
    re.IGNORECASE,
)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_LAST_WEEKDAY = re.compile(rf"\blast\s+(?P<weekday>{'|'.join(_WEEKDAYS)})\b", re.IGNORECASE)
_LAST_WEEK = re.compile(r"\blast\s+(?P<span>week(?:end)?)\b", re.IGNORECASE)
_LAST_MONTH = re.compile(r"\blast\s+month\b", re.IGNORECASE)
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


@dataclass(frozen=True)
class NamedTime:
    """The time a question names: its window, and where the question names it (the words
    `query[start:end]`)."""

    window: TimeWindow
    start: int
    end: int

    def words_around(self, query: str) -> str:
        """`query` without the words that name the time: what the question asks about then.

        The time is already the date prior's (`date_score`); matched as words too, "last",
        "week", "two" or "2026" would rank every memory that merely says them ("on call every
        third week", "On 2026-11-19 …") above the memories of that day."""
        return f"{query[: self.start]} {query[self.end :]}"


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


def _month_window(year: int, month: int) -> TimeWindow | None:
    if not date.min.year <= year <= date.max.year:
        return None
    if (year, month) == (date.max.year, 12):
        return _window(date(year, month, 1), date.max)
    following = date(year + (month == 12), month % 12 + 1, 1)
    return _window(date(year, month, 1), following - timedelta(days=1))


def _days_before(day: date, days: int) -> date | None:
    """`days` before `day`, None before the calendar's first day."""
    return day - timedelta(days=days) if (day - date.min).days >= days else None


def _month_number(match: re.Match[str]) -> int:
    named = match.groupdict().get("month")
    if named is not None:
        return _MONTHS[named[:3].lower()]
    return int(match.group("month_number"))


def _named(window: TimeWindow | None, match: re.Match[str]) -> NamedTime | None:
    return None if window is None else NamedTime(window, *match.span())


def _named_day(query: str, today: date) -> NamedTime | None:
    for form in _DAY_FORMS:
        for match in form.finditer(query):
            try:
                day = date(int(match.group("year")), _month_number(match), int(match.group("day")))
            except ValueError:
                continue  # "31 February 2023": not a day
            return _named(_window(day, day), match)
    return None


def _numeric_day(query: str, today: date) -> NamedTime | None:
    for match in _NUMERIC_DAY.finditer(query):
        first, second = int(match["first"]), int(match["second"])
        month, day = (first, second) if match["separator"] == "/" else (second, first)
        if month > 12:
            month, day = day, month
        try:
            named = date(int(match["year"]), month, day)
        except ValueError:
            continue  # "13/13/2023": not a day in either order
        return _named(_window(named, named), match)
    return None


def _month_of_year(query: str, today: date) -> NamedTime | None:
    for match in _MONTH_OF_YEAR.finditer(query):
        if _AFTER_DAY.search(query, 0, match.start()) is not None:
            continue
        named = _named(_month_window(int(match["year"]), _month_number(match)), match)
        if named is not None:
            return named
    return None


def _relative_day(query: str, today: date) -> NamedTime | None:
    match = _RELATIVE_DAY.search(query)
    if match is None:
        return None
    words = " ".join(match["word"].lower().split())
    day = _days_before(today, _RELATIVE_DAYS[words]) or date.min
    return _named(_window(day, day), match)


def _ago(query: str, today: date) -> NamedTime | None:
    match = _AGO.search(query)
    return None if match is None else _named(_ago_window(match, today), match)


def _ago_window(match: re.Match[str], today: date) -> TimeWindow | None:
    count_word = match["count"].lower()
    count = int(count_word) if count_word.isdigit() else _COUNTS[count_word]
    unit = match["unit"].lower()
    if unit == "month":
        months = today.year * 12 + today.month - 1 - count
        return _month_window(months // 12, months % 12 + 1)
    if unit == "week":
        # "two weeks ago" is vague by a few days either way: the week around that day.
        middle = _days_before(today, 7 * count)
        first = None if middle is None else _days_before(middle, 3)
        if middle is None or first is None:
            return None
        return _window(first, min(middle + timedelta(days=3), today))
    day = _days_before(today, count)
    return None if day is None else _window(day, day)


def _last_weekday(query: str, today: date) -> NamedTime | None:
    match = _LAST_WEEKDAY.search(query)
    if match is None:
        return None
    # The latest such day before today: "last Tuesday" on a Tuesday is a week ago.
    back = (today.weekday() - _WEEKDAYS.index(match["weekday"].lower()) - 1) % 7 + 1
    day = _days_before(today, back)
    return None if day is None else _named(_window(day, day), match)


def _last_week(query: str, today: date) -> NamedTime | None:
    match = _LAST_WEEK.search(query)
    if match is None:
        return None
    # Weeks run Monday to Sunday; "last weekend" is the Saturday and Sunday of last week.
    monday = _days_before(today, today.weekday() + 7)
    if monday is None:
        return None
    if match["span"].lower() == "weekend":
        return _named(_window(monday + timedelta(days=5), monday + timedelta(days=6)), match)
    return _named(_window(monday, monday + timedelta(days=6)), match)


def _last_month(query: str, today: date) -> NamedTime | None:
    match = _LAST_MONTH.search(query)
    if match is None:
        return None
    months = today.year * 12 + today.month - 2
    return _named(_month_window(months // 12, months % 12 + 1), match)


def _last_month_named(query: str, today: date) -> NamedTime | None:
    match = _LAST_MONTH_NAMED.search(query)
    if match is None:
        return None
    # The latest such month that is over: "last June" in June means a year ago.
    month = _month_number(match)
    year = today.year if month < today.month else today.year - 1
    return _named(_month_window(year, month), match)


# Absolute forms before relative ones, days before weeks before months.
_READERS: tuple[Callable[[str, date], NamedTime | None], ...] = (
    _named_day,
    _numeric_day,
    _month_of_year,
    _relative_day,
    _ago,
    _last_weekday,
    _last_week,
    _last_month,
    _last_month_named,
)


def query_named_time(query: str, now: datetime) -> NamedTime | None:
    """The first day, week or month `query` names, and where it names it; None when it names
    none."""
    today = now.astimezone(UTC).date()
    for read in _READERS:
        named = read(query, today)
        if named is not None:
            return named
    return None


def query_time_window(query: str, now: datetime) -> TimeWindow | None:
    """The window of the first day, week or month `query` names, None when it names none."""
    named = query_named_time(query, now)
    return None if named is None else named.window
