//! The permission mode of a turn.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `mode`: how much a turn may do without asking. The set is closed: a reader refuses a
/// mode it does not know (the protocol page gives `mode` no `unknown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every call asks.
    Manual,
    /// Calls that touch the network or the outside ask.
    Cautious,
    /// Calls run contained; what they need beyond that is an exit.
    Auto,
    /// Calls run as the user with no sandbox; only the floors still ask.
    Full,
}

impl Mode {
    /// Every mode, in wire order.
    pub const ALL: [Mode; 4] = [Mode::Manual, Mode::Cautious, Mode::Auto, Mode::Full];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Manual => "manual",
            Mode::Cautious => "cautious",
            Mode::Auto => "auto",
            Mode::Full => "full",
        }
    }
}
