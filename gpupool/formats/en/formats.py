"""The portal's one way of writing dates and times (Django's format names, so `|date`, `|time`
and an unfiltered value all follow it): day month year, a 24-hour clock, in the reader's time
zone (gpupool/time_zone.py). "7 Dec 2026, 14:05"; static/js/dates.js writes the same."""

DATE_FORMAT = "j M Y"
DATETIME_FORMAT = "j M Y, H:i"
TIME_FORMAT = "H:i"
SHORT_DATE_FORMAT = "j M Y"
SHORT_DATETIME_FORMAT = "j M Y, H:i"
YEAR_MONTH_FORMAT = "F Y"
MONTH_DAY_FORMAT = "j F"
FIRST_DAY_OF_WEEK = 1  # Monday, as the reservation calendar's weeks
