"""The engine's ranking rule (a catch-all never outranks a cause found in the same log), the reason the
evaluation prints for each winner, site rules joining the table, and a failure's signature."""

import re

from jobs.diagnosis.diagnose import diagnose, diagnose_explained
from jobs.diagnosis.rules import Rule, Stage
from jobs.diagnosis.signature import fold, signature_of

TIME_LIMIT_AFTER_A_WRAPPED_ERROR = (
    "epoch 3 step 1200 loss 0.71\n"
    "RuntimeError: DataLoader worker (pid 4711) is killed by signal: Terminated.\n"
    "slurmstepd: error: *** JOB 5512 ON gpu-a100-01 CANCELLED AT 2026-12-01T10:00:00 DUE TO TIME LIMIT ***\n"
)


def test_a_specific_cause_outranks_the_catch_all_even_from_a_later_stage():
    findings = diagnose(TIME_LIMIT_AFTER_A_WRAPPED_ERROR)
    # time-limit's stage (limit) comes after the program's, but the exception is only the catch-all's evidence.
    assert [f.rule_id for f in findings] == ["time-limit", "python-exception"]


def test_a_ranks_own_exception_still_comes_before_the_consequences_in_other_ranks():
    text = (
        "[rank1]: KeyError: 'input_ids'\n"
        "[rank0]:[E626 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=808, OpType=ALLREDUCE) ran for 600020 milliseconds before timing out.\n"
    )
    assert [f.rule_id for f in diagnose(text)] == ["python-exception", "nccl"]


def test_the_reason_names_the_winner_and_what_it_beat():
    why = diagnose_explained(TIME_LIMIT_AFTER_A_WRAPPED_ERROR).why
    assert why.startswith("time-limit won: a specific cause outranks the catch-all python-exception")
    oom = "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB\n"
    assert "catch-all python-exception left out: cuda-oom is specific" in diagnose_explained(oom).why
    assert diagnose_explained("all fine\n").why == "no rule matched"


def test_a_site_rule_joins_the_table_at_its_stage():
    site = Rule(
        rule_id="site-shard",
        title="Shard index corrupt",
        cause="c",
        fix="f",
        patterns=(re.compile(r"ShardIndexCorrupt", re.MULTILINE),),
        stage=Stage.ENVIRONMENT,
    )
    text = "lakefs.ShardIndexCorrupt: shard 3\nRuntimeError: loader stopped\n"
    assert diagnose(text)[0].rule_id == "python-exception"
    assert [f.rule_id for f in diagnose(text, extra_rules=(site,))] == ["site-shard"]


def test_folding_leaves_what_two_such_failures_share():
    assert fold("[rank3]: OSError: /data/u/run7/ckpt-1200.pt at 0x7f3a9c is 10.0.0.12:29500") == (
        "[rank<n>]: OSError: <path> at <hex> is <address>"
    )
    a = signature_of('ok\nTraceback (most recent call last):\n  File "/a/b.py", line 3\nlib.Bad: shard 4 of /x/y\n')
    b = signature_of('ok\nTraceback (most recent call last):\n  File "/c/d.py", line 9\nlib.Bad: shard 8 of /z/w\n')
    c = signature_of('ok\nTraceback (most recent call last):\n  File "/c/d.py", line 9\nlib.Worse: shard 8 of /z/w\n')
    assert a.digest == b.digest != c.digest
    assert a.text == "lib.Bad: shard <n> of <path>"
    assert signature_of("").digest == signature_of("\n\n").digest
