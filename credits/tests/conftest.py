import pytest

from credits.models import BurnWeight
from credits.weights import seed_weights


@pytest.fixture(autouse=True)
def _burn_weights(request):
    """Transactional tests empty every table, the seeded weights too: put them back."""
    uses_database = request.node.get_closest_marker("django_db") is not None or bool(
        {"db", "transactional_db"} & set(request.fixturenames)
    )
    if uses_database:
        request.getfixturevalue("_django_db_helper")
        seed_weights(BurnWeight)
