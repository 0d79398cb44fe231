"""Django admin change forms as a browser sends them back, for tests that post them."""


def change_form_data(response) -> dict:
    """The change form's own values, inline formsets included, as the browser would send them."""
    data = {}
    form = response.context["adminform"].form
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif value is not None:
            data[name] = value
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        for key, value in formset.management_form.initial.items():
            data[f"{formset.prefix}-{key}"] = value
        for subform in formset.forms:
            for name in subform.fields:
                value = subform.instance.pk if name == "id" else subform.initial.get(name)
                if value is not None and not isinstance(value, bool):
                    data[subform.add_prefix(name)] = getattr(value, "pk", value)
    return data
