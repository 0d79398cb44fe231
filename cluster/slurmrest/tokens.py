"""Short-lived slurmrestd tokens, minted per Slurm user from the cluster's JWT key.

Slurm's auth/jwt plugin accepts HS256 tokens signed with the key in slurm.conf's
`AuthAltParameters=jwt_key=...`; the `sun` claim names the Slurm user the request acts as.
A job submitted with a user's token runs as that user, so the portal never needs to run
anything as root.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import jwt

from cluster.errors import SlurmAuthError

# Re-mint this long before expiry so a token never expires in flight.
_RENEW_MARGIN_SECONDS = 60


class TokenMinter:
    def __init__(self, key_file: Path, lifetime_seconds: int = 600):
        self._key_file = Path(key_file)
        self._lifetime = lifetime_seconds
        self._key: bytes | None = None
        self._cache: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def _signing_key(self) -> bytes:
        if self._key is None:
            try:
                self._key = self._key_file.read_bytes()
            except OSError as exc:
                raise SlurmAuthError(f"cannot read the Slurm JWT key {self._key_file}: {exc}") from exc
        return self._key

    def token_for(self, user_name: str) -> str:
        if not user_name:
            raise SlurmAuthError("no Slurm user name to mint a token for")
        now = time.time()
        with self._lock:
            cached = self._cache.get(user_name)
            if cached and cached[1] - _RENEW_MARGIN_SECONDS > now:
                return cached[0]
            expires = int(now) + self._lifetime
            claims = {"iat": int(now), "exp": expires, "sun": user_name}
            token = jwt.encode(claims, self._signing_key(), algorithm="HS256")
            self._cache[user_name] = (token, expires)
            return token
