"""File formats of the seed: length-prefixed CRC frames, capture archives, the statement binlog."""
