from django import forms

from datasets.models import NAME
from groups.queries import groups_of


class DatasetForm(forms.Form):
    name = forms.CharField(max_length=80, validators=[NAME], help_text="Later mounted at /data/<name>")
    description = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 2}))
    group = forms.TypedChoiceField(coerce=int, required=False, empty_value=None, label="Owner")

    def __init__(self, user, *args, **kwargs):
        super().__init__(*args, **kwargs)
        choices = [("", "Me")] + [(group.pk, f"Group: {group.name}") for group in groups_of(user)]
        self.fields["group"].choices = choices
