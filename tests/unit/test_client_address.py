"""The client address: proxy headers only from trusted proxies; one bucket per IPv4 address or IPv6 /64."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from docquery.api.client_address import ClientAddress, bucket_key, parse_ip
from docquery.api.limits import AuthFailureLimiter
from docquery.config.settings import ApiSettings
from tests.support.clock import ManualClock

PROXY_NET = "10.0.0.0/8"
addresses = st.ip_addresses()
untrusted_v4 = st.ip_addresses(v=4).filter(lambda ip: ip not in ipaddress.ip_network(PROXY_NET))
proxies = st.integers(1, 2**24 - 2).map(lambda n: ipaddress.IPv4Address(int(ipaddress.IPv4Address("10.0.0.0")) + n))


def scope(peer: str, *forwarded: str) -> dict[str, object]:
    return {"client": (peer, 5000), "headers": [(b"x-forwarded-for", f.encode()) for f in forwarded]}


@given(peer=untrusted_v4, claimed=st.lists(addresses, min_size=1, max_size=5), trusted=st.booleans())
def test_a_header_from_an_untrusted_peer_is_ignored(
    peer: ipaddress.IPv4Address, claimed: list[ipaddress.IPv4Address], trusted: bool
) -> None:
    resolver = ClientAddress([PROXY_NET] if trusted else [])
    assert resolver.resolve(scope(str(peer), ", ".join(map(str, claimed)))) == peer


@given(peer=proxies, client=untrusted_v4, prepended=st.lists(addresses, max_size=4), hops=st.lists(proxies, max_size=3))
def test_behind_trusted_proxies_the_client_is_the_rightmost_untrusted_hop(
    peer: ipaddress.IPv4Address,
    client: ipaddress.IPv4Address,
    prepended: list[ipaddress.IPv4Address],
    hops: list[ipaddress.IPv4Address],
) -> None:
    # Whatever a client prepends, the hop its first trusted proxy appended is the one taken.
    header = ", ".join(map(str, [*prepended, client, *hops]))
    assert ClientAddress([PROXY_NET]).resolve(scope(str(peer), header)) == client
    # The same hops in several header lines read the same.
    lines = [*map(str, prepended), str(client), *map(str, hops)]
    assert ClientAddress([PROXY_NET]).resolve(scope(str(peer), *lines)) == client
    # Without the setting, loopback and proxies alike are just peers.
    assert ClientAddress([]).resolve(scope(str(peer), header)) == peer


@pytest.mark.parametrize("header", ["", "garbage", "1.2.3.4, nonsense", "::zz", "10.0.0.9, 10.0.0.8"])
def test_a_header_with_nothing_usable_after_the_proxies_keys_on_the_last_trusted_hop(header: str) -> None:
    resolved = ClientAddress([PROXY_NET]).resolve(scope("10.0.0.1", header))
    assert resolved is not None and resolved in ipaddress.ip_network(PROXY_NET)


def _spellings(ip: ipaddress.IPv6Address) -> list[str]:
    return [
        ip.compressed,
        ip.exploded,
        ip.compressed.upper(),
        ip.exploded.upper(),
        f"{ip.compressed}%eth0",
        f"{ip.exploded}%25",
        f"[{ip.compressed}]:443",
        f"[{ip.exploded.upper()}%lo]",
    ]


@given(ip=st.ip_addresses(v=6).filter(lambda ip: ip.ipv4_mapped is None))
def test_every_spelling_of_an_ipv6_address_is_one_bucket(ip: ipaddress.IPv6Address) -> None:
    keys = set()
    for text in _spellings(ip):
        parsed = parse_ip(text)
        assert parsed is not None, text
        keys.add(bucket_key(parsed))
    assert keys == {str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))}


@given(ip=st.ip_addresses(v=6), low=st.integers(0, 2**64 - 1), bit=st.integers(64, 127))
def test_a_64_is_one_bucket_and_its_neighbours_are_others(ip: ipaddress.IPv6Address, low: int, bit: int) -> None:
    base = int(ip) >> 64 << 64
    neighbour, other = ipaddress.IPv6Address(base | low), ipaddress.IPv6Address(base ^ (1 << bit))
    if ip.ipv4_mapped is None and neighbour.ipv4_mapped is None and other.ipv4_mapped is None:
        assert bucket_key(parse_ip(str(neighbour)) or ip) == bucket_key(parse_ip(str(ip)) or ip)
        assert bucket_key(parse_ip(str(other)) or ip) != bucket_key(parse_ip(str(ip)) or ip)


@given(ip=st.ip_addresses(v=4))
def test_an_ipv4_mapped_address_is_its_ipv4_address(ip: ipaddress.IPv4Address) -> None:
    mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
    for text in (str(ip), f"::ffff:{ip}", mapped.exploded, f"[::FFFF:{ip}]:80", f"{ip}:8080"):
        parsed = parse_ip(text)
        assert parsed is not None and bucket_key(parsed) == str(ip), text


@given(ip=st.ip_addresses(v=6).filter(lambda ip: ip.ipv4_mapped is None), lows=st.lists(st.integers(0, 2**64 - 1)))
def test_rotating_spellings_and_neighbours_share_one_failure_budget(ip: ipaddress.IPv6Address, lows: list[int]) -> None:
    limiter = AuthFailureLimiter(per_minute=1, burst=3, clock=ManualClock())
    resolver = ClientAddress([])
    base = int(ip) >> 64 << 64
    variants = [*_spellings(ip), *(str(ipaddress.IPv6Address(base | low)) for low in lows)]
    for text in variants[:3]:
        limiter.failed(resolver.bucket({"client": (text, 1)}))
    for text in variants:
        assert limiter.blocked(resolver.bucket({"client": (text, 1)})) is not None


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "not-a-net", "", "10.0.0.0/8 "])
def test_a_bad_trusted_proxy_setting_says_which_item(bad: str) -> None:
    with pytest.raises(ValidationError, match="item 1 is not an IP network"):
        ApiSettings(trusted_proxies=["127.0.0.1/32", bad])
