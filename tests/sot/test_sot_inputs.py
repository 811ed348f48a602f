"""The `sot` command's own inputs (URL, token file) refused cleanly, whatever they hold."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.sot.cli import _token, _url
from railforge.sot.sync import SotError


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=80))
def test_any_url_is_accepted_or_refused_by_name(text):
    try:
        assert _url(text).startswith(("http://", "https://"))
    except SotError as e:
        assert "--netbox" in str(e)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_any_token_file_is_accepted_or_refused_by_name(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("t") / "token"
    f.write_bytes(data)
    try:
        token = _token(f)
        assert token and all(ch in string.printable and not ch.isspace() for ch in token)
    except SotError as e:
        assert "token" in str(e)


@pytest.mark.parametrize("url, message", [
    ("ftp://netbox", "expected an http"),
    ("http://netbox:99999/", "port is not 1-65535"),
    ("http://net box/", "expected an http"),
    ("http://netbox/\n", "expected an http"),
    ("http://[::1/", "expected an http"),
])
def test_bad_urls_named(url, message):
    with pytest.raises(SotError, match=message):
        _url(url)


def test_token_file_not_a_file_and_too_big(tmp_path, monkeypatch):
    monkeypatch.delenv("RAILFORGE_NETBOX_TOKEN", raising=False)
    with pytest.raises(SotError, match="not a regular file"):
        _token(tmp_path)
    big = tmp_path / "big"
    big.write_bytes(b"a" * 5000)
    with pytest.raises(SotError, match="larger than"):
        _token(big)
    with pytest.raises(SotError, match="no NetBox API token"):
        _token(None)
