//! Policy of the efr sandbox: the config (built-in defaults with the user's TOML on top),
//! the explanation of what a contained call gets at any path, and (later) the classifier
//! that turns a shell line into exit records.
