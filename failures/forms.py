from django import forms

from jobs.diagnosis.rules import Stage

STAGE_CHOICES = [
    (Stage.PLATFORM.value, "platform: the node, its GPUs, the container runtime, Slurm"),
    (Stage.RESOURCE.value, "resource: memory, disk or shared memory ran out"),
    (Stage.ENVIRONMENT.value, "environment: image, libraries, network, permissions"),
    (Stage.PROGRAM.value, "program: the program's own failure"),
    (Stage.LIMIT.value, "limit: the scheduler ended the job"),
    (Stage.CONSEQUENCE.value, "consequence: what other processes report after one failed"),
]


class SiteRuleForm(forms.Form):
    slug = forms.SlugField(
        max_length=60, label="Name", help_text="Letters, digits and dashes; the rule is site-<name>."
    )
    pattern = forms.CharField(
        max_length=500,
        required=False,  # failures.site_rules.compile_pattern says what an empty one lacks
        widget=forms.TextInput(attrs={"spellcheck": "false", "autocomplete": "off"}),
        help_text="RE2 syntax, matched against each line of the log (no look-arounds or back-references).",
    )
    title = forms.CharField(max_length=120, help_text="What the user reads first, e.g. “Shard index corrupt”.")
    cause = forms.CharField(max_length=1000, widget=forms.Textarea(attrs={"rows": 2}))
    fix = forms.CharField(max_length=1000, widget=forms.Textarea(attrs={"rows": 2}))
    stage = forms.TypedChoiceField(choices=STAGE_CHOICES, coerce=int, initial=Stage.PROGRAM.value)
    written_for = forms.CharField(max_length=64, required=False, widget=forms.HiddenInput)
