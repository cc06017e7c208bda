"""TiCDC's CSV protocol (storage sink): `common` the changefeed's CSV settings and the record
splitter, `decoder` a record -> its row change, `encoder` the reverse (the simulator writes with it).
Rows are typed by the table version's schema file (`replicator.codec.storage_sink.schema`)."""
