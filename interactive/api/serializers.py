from decimal import Decimal

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from interactive.events import session_url
from interactive.kinds import KINDS
from interactive.models import InteractiveSession, SessionState
from jobs.api.serializers import JobSpecInputSerializer
from jobs.costs import cost_for, money


class SessionInputSerializer(JobSpecInputSerializer):
    """A job's fields, less the command (the portal runs the app) and spot, plus the app."""

    kind = serializers.ChoiceField(
        choices=sorted(KINDS), help_text="The app: jupyterlab, vscode (VS Code) or tensorboard (TensorBoard)"
    )
    board_job = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="tensorboard only: the job whose files the board shows (one of yours; or board_sweep)",
    )
    board_sweep = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="tensorboard only: the sweep whose tasks the board compares (one of yours; or board_job)",
    )
    time_limit_minutes = serializers.IntegerField(min_value=1, help_text="Up to the plan's longest")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields.pop("command")
        self.fields.pop("spot")
        self.fields.pop("environment")


class SessionSerializer(serializers.ModelSerializer):
    state = serializers.ChoiceField(choices=SessionState.choices, read_only=True)
    url = serializers.SerializerMethodField(help_text="Once ready: the app at the session's own origin")
    board_job = serializers.IntegerField(
        source="board_job_id", read_only=True, allow_null=True, help_text="The job a TensorBoard shows"
    )
    board_sweep = serializers.IntegerField(
        source="board_sweep_id", read_only=True, allow_null=True, help_text="The sweep a TensorBoard compares"
    )
    job = serializers.IntegerField(
        source="job_id", read_only=True, help_text="The session's job (GET /api/v1/jobs/{id}/)"
    )
    slurm_job_id = serializers.IntegerField(source="job.slurm_job_id", read_only=True, allow_null=True)
    job_state = serializers.CharField(source="job.state", read_only=True)
    reason = serializers.SerializerMethodField(help_text="Why it waits, in words (queued only)")
    expected_start = serializers.SerializerMethodField(help_text="Slurm's expected start while queued")
    nodes = serializers.CharField(source="job.nodes", read_only=True)
    gpus = serializers.CharField(source="job.tres_per_node", read_only=True)
    cost = serializers.SerializerMethodField(help_text="USD so far (an estimate while it runs), exact decimal")
    error = serializers.SerializerMethodField()
    stop_reason = serializers.SerializerMethodField(help_text="Why it stopped (user, idle); null while it has not")

    class Meta:
        model = InteractiveSession
        fields = [
            "id",
            "kind",
            "state",
            "url",
            "board_job",
            "board_sweep",
            "job",
            "slurm_job_id",
            "job_state",
            "reason",
            "expected_start",
            "nodes",
            "gpus",
            "ready_at",
            "server_start_seconds",
            "last_activity_at",
            "idle_warned_at",
            "stop_reason",
            "cost",
            "error",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_url(self, session) -> str | None:
        return session_url(session)

    def get_reason(self, session) -> str:
        return session.job.reason_text if session.state == SessionState.QUEUED else ""

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_expected_start(self, session):
        job = session.job
        return (
            serializers.DateTimeField().to_representation(job.start_time)
            if job.state == "PENDING" and job.start_time
            else None
        )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_cost(self, session) -> str | None:
        known = cost_for(session.job)
        if known is None:
            return None
        amount = known.cost if known.cost is not None else known.cost_so_far
        return money(amount) if isinstance(amount, Decimal) else None

    @extend_schema_field(serializers.ChoiceField(choices=InteractiveSession.StopReason.choices, allow_null=True))
    def get_stop_reason(self, session):
        return session.stop_reason or None

    def get_error(self, session) -> str:
        return session.error or session.job.error
