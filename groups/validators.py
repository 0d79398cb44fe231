"""A group's name as people read it, in one place for the form, the API and the admin (the model
field carries it, so `full_clean` in groups.actions applies it too).

A name shows in tables and charts (the lab view's columns, its chart's axis): it is text a
person can read and a column can hold. Letters, marks, digits, punctuation, symbols and the
plain space; no control, format (zero-width, bidirectional overrides), private-use,
unassigned or surrogate characters, no other spaces or line breaks; at most NAME_MAX_LENGTH
characters and at least one letter (a name of digits alone, "000...", names nothing)."""

from __future__ import annotations

import unicodedata

from django.core.exceptions import ValidationError

NAME_MAX_LENGTH = 60

_REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "an invisible formatting character",
    "Co": "a private-use character",
    "Cn": "an unassigned character",
    "Cs": "a surrogate",
    "Zl": "a line break",
    "Zp": "a paragraph break",
}


def _described(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")


def validate_group_name(value) -> None:
    """Raise ValidationError, with a message a person can act on, unless `value` is a name as
    described above. Leading and trailing spaces are the caller's to strip (forms and DRF do)."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("A name is required.", code="required")
    if len(value) > NAME_MAX_LENGTH:
        raise ValidationError(
            f"At most {NAME_MAX_LENGTH} characters (this one has {len(value)}).",
            code="max_length",
        )
    if value != value.strip():
        raise ValidationError("The name may not start or end with a space.", code="spaces")
    for position, char in enumerate(value, start=1):
        category = unicodedata.category(char)
        what = _REFUSED_CATEGORIES.get(category)
        if what is None and category == "Zs" and char != " ":
            what = "a space other than the plain space"
        if what is not None:
            raise ValidationError(
                f"The name contains {what} ({_described(char)}) at position {position}: "
                "use letters, digits, punctuation and spaces.",
                code="character",
            )
    if "  " in value:
        raise ValidationError("The name may not hold two spaces in a row.", code="spaces")
    if unicodedata.category(value[0]).startswith("M"):
        raise ValidationError("The name may not start with a combining mark.", code="character")
    if not any(unicodedata.category(char).startswith("L") for char in value):
        raise ValidationError(
            "The name needs at least one letter: digits or punctuation alone do not name a group.",
            code="no_letter",
        )
