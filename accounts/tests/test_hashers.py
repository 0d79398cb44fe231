"""Password hashes take turns (accounts/hashers.py) and stay Django's PBKDF2 hashes."""

import threading
import time

from django.contrib.auth.hashers import PBKDF2PasswordHasher, check_password, make_password

from accounts.hashers import GatedPBKDF2PasswordHasher


def test_hashes_are_djangos_own():
    encoded = make_password("correct horse")
    assert encoded.startswith("pbkdf2_sha256$")
    assert check_password("correct horse", encoded)
    assert PBKDF2PasswordHasher().verify("correct horse", encoded)  # readable without the gate
    assert not check_password("wrong", encoded)


def test_no_two_hashes_run_at_once(monkeypatch):
    running, most = [0], [0]
    lock = threading.Lock()

    def slow_encode(self, password, salt, iterations=None):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return f"pbkdf2_sha256$1${salt}$x"

    monkeypatch.setattr(PBKDF2PasswordHasher, "encode", slow_encode)
    hasher = GatedPBKDF2PasswordHasher()
    threads = [threading.Thread(target=hasher.encode, args=("pw", f"salt{n}")) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1
