"""Django's SQLite backend, with its placeholder conversion remembered (see ``base``)."""
