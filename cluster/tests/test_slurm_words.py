"""Slurm's refusals in words: never the command line, a known refusal in a sentence, an
unknown one as Slurm's own text without its prefixes."""

import pytest

from cluster.errors import SlurmError, words_for_slurm_output

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ("slurm_update error: Invalid node state specified", "only a drained, down or failed node can be resumed"),
        ("slurm_update error: Invalid node state transition", "only a drained, down or failed node can be resumed"),
        ("Error creating the reservation: Requested nodes are busy", "The nodes asked for are busy in that window."),
        ("scontrol: error: Something brand new happened", "Slurm refused: Something brand new happened."),
        ("line one\nsacctmgr: error: the last line counts.", "Slurm refused: The last line counts."),
    ],
)
def test_a_refusal_reads_as_words(output, words):
    assert words in words_for_slurm_output(output)
    assert "scontrol:" not in words_for_slurm_output(output)


def test_nothing_printed_is_the_general_sentence():
    assert words_for_slurm_output("  \n") == SlurmError.public_default
