"""sandbox.jsoncopy: a deep copy of JSON-shaped trees that shares nothing with the original."""

from __future__ import annotations

import datetime as dt
import types

from hypothesis import given
from hypothesis import strategies as st

from sandbox.jsoncopy import copy_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _containers(value, found):
    if isinstance(value, dict | list):
        found.append(value)
        for item in value.values() if isinstance(value, dict) else value:
            _containers(item, found)
    return found


@given(JSON)
def test_a_copy_is_equal_and_shares_no_container(value):
    copied = copy_json(value)
    assert copied == value
    originals = {id(c) for c in _containers(value, [])}
    assert not originals & {id(c) for c in _containers(copied, [])}


def test_a_change_to_the_copy_leaves_the_original_alone():
    original = {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [{"x": 1}]}}
    copied = copy_json(original)
    copied["metadata"]["labels"]["b"] = "2"
    copied["spec"]["items"][0]["x"] = 2
    assert original == {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [{"x": 1}]}}


def test_other_mappings_become_dicts_and_other_values_are_deep_copied():
    when = [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)]
    proxy = types.MappingProxyType({"a": {"b": [1]}, "t": (when,)})
    copied = copy_json(proxy)
    assert type(copied) is dict and copied == {"a": {"b": [1]}, "t": (when,)}
    assert copied["a"] is not proxy["a"]
    assert copied["t"][0] is not when  # the tuple went through copy.deepcopy
