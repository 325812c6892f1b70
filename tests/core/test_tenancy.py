import pytest
from hypothesis import given
from hypothesis import strategies as st

from foureyes.core.errors import UsageError
from foureyes.core.tenancy import (
    CONVERSATION_KEY_MAX,
    LOCAL_TENANT,
    key_tenant,
    new_conversation_id,
    scoped_conversation,
)

tenants = st.one_of(
    st.just(LOCAL_TENANT),
    st.uuids().map(lambda u: key_tenant(u.hex)),
    st.text(min_size=1, max_size=64).filter(lambda t: "/" not in t and "#" not in t),
)
# Ids up to the gateway's 256 characters, with the separators and look-alikes of keys.
ids = st.text(alphabet=st.sampled_from("ab/#:k\u00e9\u4e00"), min_size=1, max_size=256) | st.text(
    min_size=1, max_size=256
)


@given(tenants, ids, tenants, ids)
def test_distinct_tenant_and_id_pairs_never_share_a_key(
    tenant: str, conversation: str, other_tenant: str, other: str
) -> None:
    same_pair = (tenant, conversation) == (other_tenant, other)
    same_key = scoped_conversation(tenant, conversation) == scoped_conversation(other_tenant, other)
    assert same_key == same_pair


@given(tenants, ids)
def test_a_key_fits_the_stores_column_and_keeps_a_short_id_readable(
    tenant: str, conversation: str
) -> None:
    key = scoped_conversation(tenant, conversation)
    assert len(key) <= CONVERSATION_KEY_MAX
    if len(tenant) + 1 + len(conversation) <= CONVERSATION_KEY_MAX:
        assert key == f"{tenant}/{conversation}"


def test_the_same_id_under_two_keys_is_two_conversations() -> None:
    assert scoped_conversation(key_tenant("a" * 32), "u-1") == "key:" + "a" * 32 + "/u-1"
    assert scoped_conversation(key_tenant("b" * 32), "u-1") != scoped_conversation(
        key_tenant("a" * 32), "u-1"
    )


@pytest.mark.parametrize(
    ("tenant", "conversation"),
    [("", "c"), ("a/b", "c"), ("a#b", "c"), ("t" * 65, "c"), ("local", "")],
)
def test_a_bad_tenant_or_an_empty_id_is_a_usage_error(tenant: str, conversation: str) -> None:
    with pytest.raises(UsageError):
        scoped_conversation(tenant, conversation)


def test_fresh_conversation_ids_differ() -> None:
    assert len({new_conversation_id() for _ in range(100)}) == 100
