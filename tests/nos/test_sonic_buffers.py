"""SONiC's rendered buffer/QoS defaults (railforge/nos/sonic/buffers): the upstream facts issue 31 is about, the
type fallback and its error, cable lengths for the traditional model, the expansion to a switch's ports, and
the strict reader of the data files."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.hardware.catalog import builtin_catalog
from railforge.nos.sonic import render as sonic
from railforge.nos.sonic.buffer_defaults import (
    BufferDataError,
    BufferTemplateMissing,
    Failed,
    defaults_for,
    id_ranges,
    known_skus,
    load_buffers,
    parse,
    priorities,
)
from railforge.plan.model import Qos

SN5600, TH5 = "ACS-SN5600", "M2-W6940-128QC"


def _raw(hwsku: str) -> bytes:
    return resources.files("railforge.nos").joinpath("sonic", "buffers", f"{hwsku}.json").read_bytes()


def test_there_is_buffer_data_for_every_sonic_sku_of_the_catalog():
    skus = {sw.sonic.hwsku for sw in builtin_catalog().switches.values() if sw.sonic is not None}
    assert skus == set(known_skus())
    assert {load_buffers(h).sonic_buildimage[:8] for h in skus} == {"086b03bd"}


def test_upstream_facts_issue_31_is_about():
    sn5600, th5 = load_buffers(SN5600), load_buffers(TH5)
    assert "buffers_defaults_t2.j2" not in sn5600.files and "buffers_defaults_t1.j2" in sn5600.files
    assert not sn5600.renders("SpineRouter") and sn5600.renders("LeafRouter")
    assert "TemplateNotFound: 'buffers_defaults_t2.j2'" in sn5600.buffers["SpineRouter"]["dynamic"].error
    assert {"buffers_defaults_t2.j2", "buffers_defaults_ft2.j2", "buffers_defaults_lt2.j2"} <= set(th5.files)
    assert "buffers_dynamic.json.j2" not in th5.files and not th5.platform_asic_table_j2
    assert (th5.asic_type, th5.buffer_model, sn5600.buffer_model) == ("broadcom", "traditional", "dynamic")
    leaf = sn5600.buffer_tables("LeafRouter").ports["active"]
    assert set(leaf["BUFFER_PG"]) == {"0", "3-4"} and leaf["BUFFER_PG"]["3-4"] == {"profile": "NULL"}
    assert set(leaf["BUFFER_QUEUE"]) == {"0-2", "3-4", "5-6"}
    assert set(th5.buffer_tables("SpineRouter").ports["active"]["BUFFER_PG"]) == {"0"}  # buffermgrd adds lossless
    assert sn5600.lossless_priorities("LeafRouter") == th5.lossless_priorities("SpineRouter") == {3, 4}


def test_a_type_without_defaults_falls_back_or_is_a_clear_error():
    sn5600 = load_buffers(SN5600)
    assert sn5600.device_type("SpineRouter") == "LeafRouter"
    assert load_buffers(TH5).device_type("SpineRouter") == "SpineRouter"
    assert sn5600.device_type("BackEndToRRouter") == "BackEndToRRouter"
    broken = sn5600.model_copy(update={"buffers": {**sn5600.buffers, "LeafRouter": {
        "dynamic": Failed(error="TemplateNotFound: 'buffers_defaults_t1.j2' not found")}}})
    with pytest.raises(BufferTemplateMissing, match=r"SONiC SKU ACS-SN5600 \(x86_64-nvidia_sn5600-r0\) ships no "
                                                    r"buffers_defaults_t2\.j2 and no defaults for SpineRouter or "
                                                    r"LeafRouter: `config qos reload` would fail"):
        broken.device_type("SpineRouter")


def test_the_renderer_refuses_a_type_or_lossless_priority_the_sku_cannot_keep(monkeypatch):
    assert sonic._sonic_type("SpineRouter", SN5600, "ss1") == "LeafRouter"
    assert sonic._sonic_type("SpineRouter", "SN5600", "cumulus-peer") == "SpineRouter"  # not a SONiC hwsku
    sn5600 = load_buffers(SN5600)
    broken = sn5600.model_copy(update={"buffers": {k: v for k, v in sn5600.buffers.items() if k != "LeafRouter"}})
    monkeypatch.setattr(sonic, "load_buffers", lambda h: broken)
    with pytest.raises(sonic.BufferMismatch, match="ss1: SONiC SKU ACS-SN5600 .* ships no buffers_defaults_t2.j2"):
        sonic._sonic_type("SpineRouter", SN5600, "ss1")
    monkeypatch.undo()
    q = Qos(3, 26, 48, 6, 104, 150_000, 1_500_000, 5, 9000, 9216)
    assert set(sonic.qos_tables(q, ("Ethernet0",), SN5600, "LeafRouter")["BUFFER_QUEUE"]) == {
        "Ethernet0|0-2", "Ethernet0|3-4", "Ethernet0|5-6"}
    with pytest.raises(sonic.BufferMismatch, match=r"qos.lossless_priority 5: .* keep priorities 3,4 lossless"):
        sonic.qos_tables(replace(q, lossless_priority=5), ("Ethernet0",), SN5600, "LeafRouter")


def test_cable_lengths_follow_the_buffer_model():
    th5, sn5600 = load_buffers(TH5), load_buffers(SN5600)
    assert [th5.cable_length(400_000, m) for m in (0.5, 3.2, 5, 5.1, 40, 120)] == ["5m", "5m", "5m", "40m", "40m",
                                                                                     "300m"]
    assert sn5600.cable_length(800_000, 3.2) == "4m"
    with pytest.raises(BufferTemplateMissing, match=r"no lossless profile for 400000 Mb/s at 301m \(it lists 5m, "
                                                    r"40m, 300m"):
        th5.cable_length(400_000, 300.5)
    with pytest.raises(BufferTemplateMissing, match="lists nothing for that speed"):
        th5.cable_length(1_600_000, 3)


def test_traditional_pfc_enable_is_the_templates_set_so_buffermgrd_writes_one_key():
    """swss' generateIdListFromMap example: bits 1, 2, 5 -> '1-2', '5'."""
    assert (id_ranges({1, 2, 5}), id_ranges({3}), id_ranges({3, 4}), id_ranges(set())) == (["1-2", "5"], ["3"],
                                                                                          ["3-4"], [])
    q = Qos(3, 26, 48, 6, 104, 150_000, 1_500_000, 5, 9000, 9216)
    th5 = sonic.qos_tables(q, ("Ethernet1",), TH5, "LeafRouter")["PORT_QOS_MAP"]["Ethernet1"]
    mlx = sonic.qos_tables(q, ("Ethernet0",), SN5600, "LeafRouter")["PORT_QOS_MAP"]["Ethernet0"]
    assert (th5["pfc_enable"], mlx["pfc_enable"]) == (load_buffers(TH5).pfc_enable("LeafRouter"), "3")
    assert th5["pfc_enable"] == "3,4"


def test_priorities_and_the_expansion_to_a_switchs_ports():
    assert (priorities("3-4"), priorities("0"), priorities("0-2")) == ({3, 4}, {0}, {0, 1, 2})
    db = defaults_for(load_buffers(TH5), "LeafRouter", ["Ethernet1", "Ethernet5"], {"Ethernet5"})
    assert set(db["BUFFER_QUEUE"]) == {"Ethernet5|0-2", "Ethernet5|3-4", "Ethernet5|5-6"}  # no inactive entries
    cable = load_buffers(TH5).buffer_tables("LeafRouter").cable_length
    assert db["CABLE_LENGTH"] == {"AZURE": {"Ethernet1": cable.inactive, "Ethernet5": cable.active}}
    assert db["PORT_QOS_MAP"]["Ethernet5"]["pfc_enable"] == "3,4" and "global" in db["PORT_QOS_MAP"]
    mlx = defaults_for(load_buffers(SN5600), "LeafRouter", ["Ethernet0", "Ethernet8"], {"Ethernet0"})
    assert mlx["BUFFER_PG"]["Ethernet8|3-4"] == {"profile": "NULL"}  # Mellanox writes every port


def test_the_reader_names_the_file_and_place():
    data = json.loads(_raw(TH5))
    assert parse(_raw(TH5), "x").hwsku == TH5
    data["buffers"]["LeafRouter"]["traditional"]["ports"]["active"]["BUFFER_PG"]["0"]["profile"] = 7
    with pytest.raises(BufferDataError, match=r"^f.json: buffers\.LeafRouter\.traditional\..*BUFFER_PG\.0\.profile"):
        parse(json.dumps(data).encode(), "f.json")
    with pytest.raises(BufferDataError, match="f.json: .*bytes; at most"):
        parse(b" " * (2 << 20), "f.json")
    with pytest.raises(BufferDataError, match="no SONiC buffer data for hwsku 'NOPE'"):
        load_buffers("NOPE")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_the_reader_accepts_or_names_the_fault(data):
    base = json.loads(_raw(TH5))
    path, node = [], base
    while isinstance(node, dict) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(node)))
        path.append(key)
        if not isinstance(node[key], dict):
            break
        node = node[key]
    junk = data.draw(st.one_of(st.none(), st.integers(), st.text(max_size=20), st.lists(st.integers(), max_size=3),
                               st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)))
    if path:
        parent = base
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = junk
    text = json.dumps(base).encode() if data.draw(st.booleans()) else data.draw(st.binary(max_size=200))
    try:
        parse(text, "fuzz.json")
    except BufferDataError as e:
        assert str(e).startswith("fuzz.json: ")
