import pytest
from django.core.exceptions import ImproperlyConfigured

from foundation.env import env_bool, env_int, env_list, env_secret


def test_bool_accepts_the_usual_spellings(monkeypatch):
    monkeypatch.setenv("FLAG", "Yes")
    assert env_bool("FLAG") is True
    monkeypatch.setenv("FLAG", "0")
    assert env_bool("FLAG", True) is False


def test_bool_refuses_a_typo(monkeypatch):
    monkeypatch.setenv("FLAG", "ture")
    with pytest.raises(ImproperlyConfigured, match="FLAG"):
        env_bool("FLAG")


def test_int_checks_value_and_minimum(monkeypatch):
    monkeypatch.setenv("N", "12")
    assert env_int("N", 1) == 12
    monkeypatch.setenv("N", "twelve")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("N", 1)
    monkeypatch.setenv("N", "-1")
    with pytest.raises(ImproperlyConfigured, match="minimum"):
        env_int("N", 1, minimum=0)


def test_list_splits_and_strips(monkeypatch):
    monkeypatch.setenv("HOSTS", " a.example , b.example,,")
    assert env_list("HOSTS", []) == ["a.example", "b.example"]


def test_secret_from_file_wins(monkeypatch, tmp_path):
    secret = tmp_path / "key"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("API_KEY", "inline")
    monkeypatch.setenv("API_KEY_FILE", str(secret))
    assert env_secret("API_KEY") == "s3cret"


def test_unreadable_secret_file_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("API_KEY_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_secret("API_KEY")
