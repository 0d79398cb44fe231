"""The log analyser's rules for containers the pool's own runtime could not start (`jobs.diagnosis.rules`
puts them first among the platform rules): an image that is not on the node, a data mount whose source is
missing. Both are written by pyxis and by the importer that serves prewarmed images
(deploy/devcluster/containers/pyxis-catalogue-importer; a site's importer should say the same). Kept apart
from rules.py, whose generic rules (image-import, container-mount, container-start) still follow them. Plain
data (a Rule's fields but its stage, platform for all): rules.py makes them Rules, so neither module imports
the other.
"""

from __future__ import annotations

import re


def _re(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.MULTILINE) for p in patterns)


CONTAINER_RULES: tuple[dict, ...] = (
    dict(
        rule_id="image-not-on-node",
        title="Container image is not on the node",
        cause="The image is not prewarmed on the node the job ran on, and the nodes do not download images: the "
        "job never started.",
        fix="Choose an image from the pool's image catalogue (the Image list of the job form, or GET "
        "/api/v1/images/), spelled as listed, and clone the job. If a catalogue image fails this way on one node, "
        "tell the admins the node name: its prewarmed copy is missing.",
        patterns=_re(
            r"image [^\s]{1,300} is not prewarmed on this node[^\n]{0,200}",
            r"its prewarmed file [^\s]{1,300} is missing on node [^\s]{1,64}",
        ),
    ),
    dict(
        rule_id="container-mount-source",
        title="Data mount does not exist on the node",
        cause="Pyxis could not mount the job's data into the container because its source directory does not "
        "exist on the node, so the job never started.",
        fix="Check the data mount in the job form: it must be an existing directory in the node's NVMe cache "
        "(it is mounted read-only at /data). Stage the data there first, or leave the data mount empty.",
        patterns=_re(r"pyxis: --container-mounts: source path does not exist: [^\n]{1,500}"),
    ),
)
