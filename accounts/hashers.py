"""Password hashing that cannot take every core of a web process.

A password hash (PBKDF2, ~0.3 s of CPU on purpose) runs outside the GIL, so sign-ins side by
side take as many cores as they are many, and a handful of failing sign-ins starve every
other request of the process (bench/http_concurrency.py). At most PASSWORD_HASHES_AT_ONCE
hashes run at once per process; further sign-ins wait their turn in their own request
thread, and reads go on beside them."""

import threading

from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher

_turns = threading.BoundedSemaphore(settings.PASSWORD_HASHES_AT_ONCE)


class GatedPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2-SHA256 hasher (same algorithm name, same hashes), taking turns."""

    iterations = settings.PASSWORD_PBKDF2_ITERATIONS

    def encode(self, password, salt, iterations=None):
        with _turns:
            return super().encode(password, salt, iterations)
