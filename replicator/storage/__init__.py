"""Where the warehouse lives: one small file interface over local directories and object stores.

The replicator's own durable state (progress, step log, binlog state, the writer lease) and the few
direct looks into Delta logs go through `FileIO`, the way pyiceberg's FileIO serves many stores with
one interface: `LocalFileIO` for a POSIX directory, `S3FileIO` for `s3a://` / `s3://` URLs. Delta's
own reads and writes go through Spark's Hadoop file systems with the same URLs. Nothing above this
package branches on the scheme.
"""

from replicator.storage.fileio import FileIO, Location, Versioned, is_url, normalise_root
from replicator.storage.options import StorageOptions, configure, storage_options
from replicator.storage.stores import as_location, fileio_for

__all__ = [
           "FileIO",
           "Location",
           "StorageOptions",
           "Versioned",
           "as_location",
           "configure",
           "fileio_for",
           "is_url",
           "normalise_root",
           "storage_options",
]
