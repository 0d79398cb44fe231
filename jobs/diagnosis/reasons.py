"""Slurm's pending/failure reasons, said in words a researcher understands."""

import re

REASONS = {
    "Resources": "Waiting for GPUs: every GPU of the kind you asked for is busy. It starts as soon as one frees up.",
    "Priority": "Waiting behind higher-priority jobs (paid plans and fair-share come first).",
    "Dependency": "Waiting for the job it depends on to finish.",
    "DependencyNeverSatisfied": "The job it depended on failed, so this one can never start. Cancel it and resubmit.",
    "BeginTime": "Waiting for its scheduled start time.",
    "QOSMaxGRESPerUser": "Your plan's limit of GPUs in use at once is reached; it starts when one of your jobs ends.",
    "QOSMaxGRESPerJob": "This job asks for more GPUs than your plan allows in one job.",
    "AssocGrpGRES": "Your group's GPU limit is reached; it starts when the group's jobs free GPUs.",
    "AssocGrpGRESMinutes": "Your group's GPU-time budget is used up for this period.",
    "QOSGrpGRESMinutes": "Your plan's GPU-time budget is used up for this period.",
    "QOSGrpGRES": "All GPUs your plan may use at once are in use by its users.",
    "ReqNodeNotAvail": "The nodes this job needs are unavailable (down, drained or reserved).",
    "PartitionTimeLimit": "The time limit is longer than this partition allows.",
    "PartitionNodeLimit": "The job asks for more nodes than the partition allows.",
    "Reservation": "Waiting for its reservation to start.",
    "NodeDown": "A node the job needs is down.",
    "BadConstraints": "No node can ever satisfy this request (e.g. more GPUs than any node has).",
    "JobHeldUser": "Held by you; release it to let it start.",
    "JobHeldAdmin": "Held by an administrator.",
    "launch failed requeued held": (
        "The job could not be launched on its node and was requeued and held; an admin has been told."
    ),
    "NonZeroExitCode": "The program exited with a non-zero exit code.",
    "TimeLimit": "The job ran out of its time limit.",
    "OutOfMemory": "The job used more host memory than it was given.",
    "Prolog": "Node set-up (prolog) is running.",
    "Cleaning": "The node is cleaning up after a previous job.",
    "JobArrayTaskLimit": "Waiting for its turn: the sweep's limit of tasks running at once is reached.",
    "QOSMaxJobsPerUserLimit": "Waiting: your plan's number of jobs running at once is reached.",
    "QOSMaxSubmitJobPerUserLimit": "Refused: your plan's number of queued jobs is reached.",
    "AssocMaxJobsLimit": "Waiting: your group's number of jobs running at once is reached.",
    "AssocGrpBillingMinutes": "Your group's GPU-hour budget is used up for this period.",
    "QOSGrpBillingMinutes": "Your plan's GPU-hour budget is used up for this period.",
    "QOSMaxWallDurationPerJobLimit": "The time limit is longer than your plan allows.",
    "PartitionDown": "The partition is down; it starts when an admin brings it back.",
    "PartitionInactive": "The partition is not taking jobs now.",
    "InvalidQOS": "Your plan's Slurm settings are not in place yet; the portal writes them shortly.",
    "InvalidAccount": "Your Slurm account is not in place yet; the portal writes it shortly.",
    "WaitingForScheduling": "Waiting for the scheduler's next pass.",
}


# Slurm's reason for a job whose time limit would run into a MAINT reservation (seen on 24.11 and 26.05
# as "ReqNodeNotAvail, Reserved for maintenance"; squeue writes the spaces as underscores).
MAINTENANCE = (
    "It waits for a maintenance window: its time limit would still run when the window starts. It starts "
    "once the window ends, or now if you clone it with a time limit that ends before the window."
)


def explain_reason(reason: str) -> str:
    """The reason in a sentence; one the portal has no words for yet is named as Slurm's."""
    if not reason or reason == "None":
        return ""
    if "reserved for maintenance" in reason.replace("_", " ").lower():
        return MAINTENANCE
    return REASONS.get(reason) or f"Slurm gives the reason “{reason}”."


def short_reason(reason: str) -> str:
    """The sentence's first clause, for a table cell ("Waiting for GPUs")."""
    return re.split(r"[:;.(]", explain_reason(reason), maxsplit=1)[0].strip()
