"""Fixtures of the kvlane Python tests."""
import pytest

from kvtest import make_pair


@pytest.fixture
def local_pair():
    """Agents "a" and "b" on the local transport, closed after the test."""
    a, b = make_pair("local")
    yield a, b
    a.close()
    b.close()
