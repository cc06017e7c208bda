"""The catalog's pure parts: names as the metastore holds them, the URI and `[spark]` settings that
configure it, the state record, and the local metastore's readiness probe."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from replicator.cli.run import catalog_config
from replicator.cli.settings import ReplicatorSettings
from replicator.delta.catalog import CatalogConfig, _location, check_uri, uri_from_spark_conf
from replicator.errors import ConfigError
from replicator.runtime.spark import session_conf
from replicator.sim.localcatalog import thrift_answers
from replicator.sim.localkafka.process import free_ports
from replicator.warehouse import State


def test_names_are_prefixed_lower_cased_and_refused_when_hive_cannot_hold_them() -> None:
    cfg = CatalogConfig("thrift://127.0.0.1:9083", "dw_")
    assert cfg.name_of("Shop", "Orders") == "dw_shop.orders"
    assert CatalogConfig("thrift://h:1").name_of("shop", "orders_2024") == "shop.orders_2024"
    for schema, table in (("shop", "my-table"), ("shop", "a b"), ("shöp", "t"), ("shop", "`t`")):
        assert cfg.name_of(schema, table) is None, (schema, table)
    assert CatalogConfig("thrift://h:1").name_of("", "t") is None
    assert CatalogConfig.from_json(cfg.to_json()) == cfg
    assert CatalogConfig.from_json({"uri": "thrift://h:1"}) == CatalogConfig("thrift://h:1", "")


def test_metastore_uri_is_checked() -> None:
    assert check_uri(" thrift://127.0.0.1:9083 ") == "thrift://127.0.0.1:9083"
    assert check_uri("thrift://a:1,thrift://b:2") == "thrift://a:1,thrift://b:2"
    for bad in ("", "127.0.0.1:9083", "http://127.0.0.1:9083", "thrift://host", "thrift://h:1/db"):
        with pytest.raises(ConfigError, match="thrift://HOST:PORT"):
            check_uri(bad)


def test_spark_settings_configure_a_catalog_like_the_flag() -> None:
    uri = "thrift://127.0.0.1:9083"
    assert uri_from_spark_conf(session_conf(uri)) == uri
    assert uri_from_spark_conf({"spark.hadoop.hive.metastore.uris": uri}) is None  # Spark's own catalog
    assert uri_from_spark_conf({"spark.sql.catalogImplementation": "hive"}) is None  # embedded Derby: one JVM
    flag = ReplicatorSettings(catalog_uri=uri, catalog_database_prefix="dw_")
    assert catalog_config(flag) == CatalogConfig(uri, "dw_")
    spark = ReplicatorSettings(spark={"spark.sql.catalogImplementation": "hive",
                                      "spark.hadoop.hive.metastore.uris": uri})
    assert catalog_config(spark) == CatalogConfig(uri, "")
    assert catalog_config(ReplicatorSettings()) is None
    with pytest.raises(ConfigError, match="--catalog-database-prefix needs a catalog"):
        catalog_config(ReplicatorSettings(catalog_database_prefix="dw_"))
    with pytest.raises(ConfigError, match="--catalog-uri"):
        catalog_config(ReplicatorSettings(catalog_uri="localhost:9083"))


def test_state_records_the_catalog_only_when_there_is_one() -> None:
    plain = json.loads(State().model_dump_json(by_alias=True))
    assert "catalog" not in plain
    state = State(catalog=CatalogConfig("thrift://127.0.0.1:9083", "dw_").to_json())
    again = State.model_validate_json(state.model_dump_json(by_alias=True))
    assert again.catalog == {"uri": "thrift://127.0.0.1:9083", "database_prefix": "dw_"}


def test_locations_compare_across_spellings() -> None:
    assert _location("file:/wh/tables/t-1") == _location("file:///wh/tables/t-1/") == _location("/wh/tables/t-1")
    assert _location("s3a://bucket/wh/tables/t-1/") == "s3a://bucket/wh/tables/t-1"


def test_readiness_probe_wants_a_metastore_reply() -> None:
    port = free_ports(1)[0]
    assert not thrift_answers(port, timeout=0.5)  # nothing listens
    with socket.socket() as server:  # something listens, but answers no Thrift
        server.bind(("127.0.0.1", 0))
        server.listen()

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        threading.Thread(target=answer, daemon=True).start()
        assert not thrift_answers(server.getsockname()[1], timeout=2.0)
