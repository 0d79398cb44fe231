"""Slurm node states in words on the pages, Slurm's own term in the title
(foundation/templatetags/node_states.py)."""

from types import SimpleNamespace

import pytest
from django.template import Context, Template

from foundation.templatetags.node_states import node_state, state_words


@pytest.mark.parametrize(
    "text, words",
    [
        ("IDLE", "idle"),
        ("MIXED", "partly in use"),
        ("ALLOCATED", "in use"),
        ("IDLE+RESERVED,PLANNED", "idle, reserved, kept for a waiting job"),
        ("MIXED+DRAIN", "partly in use, draining"),
        ("ALLOCATED+DRAIN", "in use, draining"),
        ("IDLE+DRAIN", "drained"),
        ("DOWN+NOT_RESPONDING", "down, not responding"),
        ("DOWN+DRAIN,NOT_RESPONDING", "down, drained, not responding"),
        ("IDLE+POWERED_DOWN", "idle, powered down"),
        ("IDLE+POWERING_UP", "idle, powering up"),
        ("ALLOCATED+COMPLETING", "in use, finishing jobs"),
        ("IDLE+COMPLETING,DRAIN", "finishing jobs, draining"),
        ("MIXED+FAIL", "partly in use, failing"),
        ("IDLE+MAINTENANCE,RESERVED", "idle, in maintenance, reserved"),
        ("FUTURE", "not in service yet"),
        ("UNKNOWN", "state unknown"),
        ("IDLE+SOMETHING_NEW", "idle, something new"),
    ],
)
def test_slurm_node_states_read_as_words(text, words):
    state, _, flags = text.partition("+")
    assert state_words(state, flags) == words
    # The same from Slurm's text and from a node's fields, in a span with the term in its title.
    for value in (text, SimpleNamespace(state=state, state_flags=flags)):
        html = str(node_state(value))
        assert f">{words}</span>" in html
        assert f'title="Slurm: {text}"' in html and f'class="state state-{state.lower()}"' in html


def test_the_filter_loads_in_a_template_and_escapes():
    rendered = Template("{% load node_states %}{{ node|node_state }}").render(
        Context({"node": SimpleNamespace(state="MIXED", state_flags='DRAIN,<b>"x"</b>')})
    )
    assert "<b>" not in rendered and "&lt;b&gt;" in rendered
    assert rendered.startswith('<span class="state state-mixed" title="Slurm: MIXED+DRAIN,&lt;B&gt;')
    assert Template("{% load node_states %}[{{ node|node_state }}]").render(Context({"node": ""})) == "[]"
