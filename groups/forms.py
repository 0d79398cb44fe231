"""The groups list page's form to create a group. It checks what a page can (the name by the one
rule, groups.validators; the short name's shape; the organisation among those this user may
choose) and shows errors by field; groups.actions.create_group decides the rest (self-service,
the per-user limit, a short name taken) and its refusal lands on its field here.

The organisation is offered to those who may choose one: an admin names any (a new one too),
another user picks among those that exist when there is more than the pool's default; with
only the default there is nothing to choose and no field."""

from __future__ import annotations

from django import forms
from django.conf import settings

from accounts.access import is_admin
from groups.models import SLUG
from groups.queries import GroupError, organizations
from groups.validators import NAME_MAX_LENGTH, validate_group_name

SLUG_HELP = "a-z, 0-9 and -; the Slurm account is g-<short name>"


class GroupCreateForm(forms.Form):
    name = forms.CharField(
        max_length=NAME_MAX_LENGTH,
        validators=[validate_group_name],
        error_messages={"required": "A name is required."},
    )
    slug = forms.CharField(
        label="Short name",
        max_length=30,
        validators=[SLUG],
        error_messages={"required": "A short name is required."},
    )

    def __init__(self, user, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.known_organizations = organizations()
        self.names_organization = is_admin(user)
        if self.names_organization:
            self.fields["organization"] = forms.CharField(
                label="Organisation", max_length=30, required=False, validators=[SLUG]
            )
        elif len(self.known_organizations) > 1:
            self.fields["organization"] = forms.ChoiceField(
                label="Organisation",
                required=False,
                choices=[(name, name) for name in self.known_organizations],
                initial=settings.GROUP_DEFAULT_ORGANIZATION,
                error_messages={"invalid_choice": "Choose one of the organisations listed."},
            )

    def clean_organization(self) -> str:
        return (self.cleaned_data.get("organization") or "").strip().lower()

    def refused(self, exc: GroupError) -> None:
        """groups.actions refused the group: its words on the field it names (the form's top else)."""
        self.add_error(exc.field if exc.field in self.fields else None, exc.message)
