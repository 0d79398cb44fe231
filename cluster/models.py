from urllib.parse import urlencode

from django.db import models

from cluster.clusters.registry import primary_cluster_name


def power_state_of(flags) -> str:
    flags = set(flags)
    if "POWERING_UP" in flags:
        return "powering_up"
    if "POWERED_DOWN" in flags:
        return "off"
    if flags & {"POWERING_DOWN", "POWER_DOWN"}:
        return "powering_down"
    return "on"


class NodeFacts:
    """What a node's page and the counts read of a node of any cluster, from the fields `Node`
    and `FurtherNode` share: `state`, `state_flags` (a comma list) and `gpus`."""

    @property
    def gpu_total(self) -> int:
        return sum(group["count"] for group in self.gpus)

    @property
    def gpu_used(self) -> int:
        return sum(len(group["used_indexes"]) for group in self.gpus)

    @property
    def gpu_type(self) -> str:
        return self.gpus[0]["type"] if self.gpus else ""

    @property
    def power_state(self) -> str:
        """Slurm's power saving, in one word: "off" (POWERED_DOWN), "powering_up",
        "powering_down", or "on"."""
        return power_state_of(self.state_flags.split(","))

    @property
    def out_of_service(self) -> str:
        """Why Slurm runs no new job on it, in words ("" while it takes jobs): a restart asked or
        under way (the portal's rolling restart, or a site's own `scontrol reboot`), a drain, down."""
        flags = set(self.state_flags.split(","))
        if "REBOOT_ISSUED" in flags:
            return "restarting"
        if "REBOOT_REQUESTED" in flags:
            return "restart asked: draining until its jobs end"
        if self.state in {"DOWN", "ERROR", "FUTURE", "UNKNOWN"}:
            return "down"
        if "NOT_RESPONDING" in flags or "INVALID_REG" in flags:
            return "not answering"
        if "DRAIN" in flags:
            return "draining: its jobs run on" if self.state in {"MIXED", "ALLOCATED", "COMPLETING"} else "drained"
        return ""

    @property
    def is_unavailable(self) -> bool:
        flags = set(self.state_flags.split(","))
        return self.state in {"DOWN", "ERROR", "FUTURE", "UNKNOWN"} or bool(
            flags & {"DRAIN", "NOT_RESPONDING", "INVALID_REG"}
        )


class SlurmNodeRow(NodeFacts, models.Model):
    """What Slurm says of a node, as both clusters' tables keep it."""

    state = models.CharField(max_length=32)
    state_flags = models.CharField(max_length=200, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    features = models.JSONField(default=list)
    partitions = models.JSONField(default=list)
    cpus = models.IntegerField(default=0)
    alloc_cpus = models.IntegerField(default=0)
    real_memory_mb = models.IntegerField(default=0)
    alloc_memory_mb = models.IntegerField(default=0)
    # [{"type": "a100", "count": 4, "used_indexes": [0, 1]}]
    gpus = models.JSONField(default=list)
    shards_total = models.IntegerField(default=0)
    shards_used = models.IntegerField(default=0)

    class Meta:
        abstract = True


class Node(SlurmNodeRow):
    """The mirror's copy of one Slurm node; pages read this, never slurmrestd."""

    name = models.CharField(max_length=100, unique=True)
    # Its NVMe cache (gres/nvme), GB: what its dataset copies may fill (datasets/actions/node_cache.py).
    nvme_gb = models.PositiveIntegerField(default=0)
    # Slurm's NodeAddr: where an interactive session's server on this node is reached.
    address = models.CharField(max_length=255, blank=True)
    # The NVIDIA driver as the node's telemetry last reported it (telemetry/drivers.py; never
    # from Slurm): "550.54.15", where from ("nvml", "dcgm", "emulator"), and when.
    driver_version = models.CharField(max_length=40, blank=True)
    driver_source = models.CharField(max_length=16, blank=True)
    driver_reported_at = models.DateTimeField(null=True, blank=True)
    # When the mirror first saw it idle with nothing allocated (None while anything runs).
    idle_since = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    further = False  # the portal's own cluster's

    @property
    def cluster(self) -> str:
        return primary_cluster_name()

    @property
    def cluster_query(self) -> str:
        """What a link to its page adds to say the cluster: nothing, it is the portal's own."""
        return ""


class FurtherNode(SlurmNodeRow):
    """A node of a further cluster (cluster/clusters/registry.py), as that cluster's mirror pass last read
    it (cluster/actions/further_nodes.py): the heatmap, the node and GPU pages and the counts read this,
    never that cluster's slurmrestd. Apart from `Node`, which is the portal's own cluster's and
    what its reservations, power policy, dataset caches and metering read; node names repeat
    across clusters."""

    cluster = models.CharField(max_length=32)
    name = models.CharField(max_length=100)
    # The last pass that read the cluster's nodes (one UPDATE for all of them): a node not seen
    # for a while is of a cluster whose state is unknown now.
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="a_node_name_once_per_cluster")]

    further = True

    def __str__(self):
        return f"{self.name} ({self.cluster})"

    @property
    def cluster_query(self) -> str:
        """What a link to its node or GPU page adds to say the cluster."""
        return "?" + urlencode({"cluster": self.cluster})


class SyncRun(models.Model):
    """The last outcome of each mirror loop, so a failing Slurm shows on the console."""

    name = models.CharField(max_length=32, unique=True)
    last_started = models.DateTimeField(null=True)
    last_success = models.DateTimeField(null=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True)
    summary = models.CharField(max_length=300, blank=True)

    def __str__(self):
        return f"{self.name} mirror"


class NodePowerSpan(models.Model):
    """How long a node stayed in one power state (Node.power_state), as the mirror saw it change:
    the open span has no end. Energy saved is read from the "off" spans (console/actions/power.py)."""

    node = models.CharField(max_length=100)
    state = models.CharField(max_length=16)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node", "-started_at"]
        indexes = [models.Index(fields=["state", "ended_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["node"], condition=models.Q(ended_at__isnull=True), name="one_open_power_span_per_node"
            )
        ]

    def __str__(self):
        return f"{self.node} {self.state} from {self.started_at}"


class ClusterStatus(models.Model):
    """What the probes of one cluster's slurmrestd saw (cluster/clusters/probing.py), one row per
    cluster of cluster/clusters/registry.py. Written only when the picture changes, or to move
    `checked_at` on: a page shows "stale since" from it within a probe's interval."""

    name = models.CharField(max_length=32, unique=True)
    slurm_release = models.CharField(max_length=32, blank=True)
    api_version = models.CharField(max_length=16, blank=True, help_text="The REST version the portal speaks to it")
    answering = models.BooleanField(default=False)
    # The last answer (slurmrestd up and slurmctld answering it); while it does not answer, what
    # the portal shows of the cluster is as of this moment.
    last_answer_at = models.DateTimeField(null=True)
    # The first failed probe since the last answer; null while it answers.
    failing_since = models.DateTimeField(null=True)
    last_error = models.TextField(blank=True)
    checked_at = models.DateTimeField(null=True)

    class Meta:
        verbose_name_plural = "cluster statuses"

    def __str__(self):
        return f"{self.name}: {self.state}"

    @property
    def state(self) -> str:
        """ "up", "stale" (it answered once and stopped), "down" (never answered) or "unknown" (never probed)."""
        if self.checked_at is None:
            return "unknown"
        if self.answering:
            return "up"
        return "stale" if self.last_answer_at else "down"

    @property
    def stale_since(self):
        return None if self.answering else (self.last_answer_at or self.failing_since)
