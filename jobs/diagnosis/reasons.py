"""Slurm's pending/failure reasons, said in words a researcher understands."""

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
}


def explain_reason(reason: str) -> str:
    if not reason or reason == "None":
        return ""
    return REASONS.get(reason, reason)
