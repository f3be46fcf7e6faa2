"""Fixtures of the replay tests; the items themselves are in replay_items.py (a name no other test folder uses,
so `from replay_items import ...` finds this folder's module whatever else pytest collected first)."""
import pytest

from replay_items import SPEC, make_items, one_item


@pytest.fixture
def spec():
    return dict(SPEC)


@pytest.fixture
def items():
    return make_items


@pytest.fixture
def item():
    return one_item
