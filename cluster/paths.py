"""Job directories as Slurm sees them and as the portal reads them.

On the dev cluster a job writes /srv/gpupool/jobs/<id>/out inside the Slurm root, which
the portal reads at <root>/srv/gpupool/jobs/<id>/out; in production both are often the
same shared filesystem path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath


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

    def user_file(self, slurm_path: str | PurePosixPath, cluster_user: str) -> Path:
        """The local path of a file a job of `cluster_user` wrote, refusing anything that is
        not, after following links, inside that user's own job directory: a job could
        report another user's log as its output, or leave a symlink to a portal secret."""
        local = self.to_local(slurm_path)
        base = self.to_local(self.job_dir(cluster_user)).resolve()
        if not local.resolve().is_relative_to(base):
            raise ValueError(f"{slurm_path} is not inside {cluster_user}'s job directory")
        return local

    def to_slurm(self, local_path: Path) -> PurePosixPath:
        relative = Path(local_path).resolve().relative_to(self.local_root.resolve())
        return self.slurm_root.joinpath(*relative.parts)
