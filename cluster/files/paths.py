"""Job directories as Slurm sees them and as the portal reads them.

On the dev cluster a job writes /srv/gpupool/jobs/<id>/out inside the Slurm root, which
the portal reads at <root>/srv/gpupool/jobs/<id>/out; in production both are often the
same shared filesystem path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cluster.files.jobfs import Beneath


@dataclass(frozen=True)
class JobPathMap:
    slurm_root: PurePosixPath
    local_root: Path

    def job_dir(self, job_key: str) -> PurePosixPath:
        """The directory Slurm writes a job's files to; `job_key` is portal-generated."""
        if not job_key or "/" in job_key or job_key in {".", ".."}:
            raise ValueError(f"invalid job directory key {job_key!r}")
        return self.slurm_root / job_key

    def to_local(self, slurm_path: str | PurePosixPath) -> Path:
        """Map a path Slurm reported to the path this portal reads; refuses anything
        outside the job root (a job could report any path)."""
        path = PurePosixPath(slurm_path)
        if ".." in path.parts:
            raise ValueError(f"{slurm_path} leaves the job directory root")
        try:
            relative = path.relative_to(self.slurm_root)
        except ValueError:
            raise ValueError(f"{slurm_path} is not under the job root {self.slurm_root}") from None
        return self.local_root.joinpath(*relative.parts)

    def relative_parts(self, slurm_path: str | PurePosixPath) -> tuple[str, ...]:
        """The components of a Slurm path below the job root, checked lexically only."""
        return self.to_local(slurm_path).relative_to(self.local_root).parts

    def user_file(self, slurm_path: str | PurePosixPath, cluster_user: str) -> Beneath:
        """Where a file a job of `cluster_user` wrote lies: the local root and the parts
        below it, the first being that user's own job directory (a job could report
        another user's log as its output). A lexical check only, on purpose: a job can
        swap any directory of its own for a symlink between a check on the resolved path
        and an open by name, so the file must be opened with `cluster.files.jobfs`, which walks
        these parts without following links."""
        self.job_dir(cluster_user)  # refuses a user name that is not one component
        parts = self.relative_parts(slurm_path)
        if len(parts) < 2 or parts[0] != cluster_user:
            raise ValueError(f"{slurm_path} is not inside {cluster_user}'s job directory")
        return Beneath(Path(self.local_root), parts)

    def user_directory(self, cluster_user: str, *names: str) -> Beneath:
        """<local root>/<cluster user>/<names...>, to be created with `cluster.files.jobfs`."""
        self.job_dir(cluster_user)
        return Beneath(Path(self.local_root), (cluster_user, *names))

    def to_slurm(self, local_path: Path) -> PurePosixPath:
        relative = Path(local_path).resolve().relative_to(self.local_root.resolve())
        return self.slurm_root.joinpath(*relative.parts)
