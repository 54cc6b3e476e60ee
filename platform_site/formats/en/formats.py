"""Date formats for the operator's screens: ISO-like, with seconds.

Django's English defaults ("Dec. 1, 2026, 6 a.m.") hide seconds, so a task's transitions a
second apart all read the same. ``FORMAT_MODULE_PATH`` points here."""

DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
