import jwt
import pytest

from cluster.errors import SlurmAuthError
from cluster.slurmrest.tokens import TokenMinter


def test_tokens_are_hs256_for_the_named_user(tmp_path):
    key = tmp_path / "jwt.key"
    key.write_bytes(b"k" * 32)
    token = TokenMinter(key, lifetime_seconds=300).token_for("alice")
    claims = jwt.decode(token, b"k" * 32, algorithms=["HS256"])
    assert claims["sun"] == "alice"
    assert claims["exp"] - claims["iat"] == 300


def test_token_is_reused_until_near_expiry(tmp_path):
    key = tmp_path / "jwt.key"
    key.write_bytes(b"k" * 32)
    minter = TokenMinter(key, lifetime_seconds=300)
    assert minter.token_for("alice") == minter.token_for("alice")
    assert minter.token_for("alice") != minter.token_for("bob")


def test_missing_key_is_an_auth_error(tmp_path):
    with pytest.raises(SlurmAuthError, match="cannot read"):
        TokenMinter(tmp_path / "nope").token_for("alice")
