"""What the SQLite and PostgreSQL stores share: the durable store base, transactions, dialects, codecs and span
retention."""
