//! Config: built-in defaults with the TOML file on top (issue 2).
