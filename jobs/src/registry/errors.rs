//! Why the registry refused a request, one enum per operation, and the wire error each
//! becomes at the RPC boundary (`ErrorBody`: the code a client sees and the message).

use efr_sandbox_wire::rpc::{ErrorBody, ErrorCode};

/// The most bytes of a watch's pattern.
pub const PATTERN_MAX: usize = 1000;
/// The most wakes of a watch.
pub const WAKES_MAX: u32 = 1000;

/// A job's time limit outside the config's range ([`super::Jobs::check_minutes`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "max_minutes {minutes} is outside the config's range {lo} to {hi} (jobs.min_minutes, jobs.max_minutes)"
)]
pub struct MinutesError {
    /// As asked.
    pub minutes: f64,
    /// The config's `jobs.min_minutes`.
    pub lo: f64,
    /// The config's `jobs.max_minutes`.
    pub hi: f64,
}

/// A job's watch that cannot be had ([`super::Jobs::watch`]).
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The pattern is longer than [`PATTERN_MAX`] bytes.
    #[error("watch: a pattern of {0} bytes, the most is {PATTERN_MAX}")]
    TooLong(usize),
    /// The pattern does not compile (or its program is over the bound).
    #[error("watch {pattern:?}: {source}")]
    Pattern {
        /// As asked.
        pattern: String,
        /// What the regex crate said.
        source: regex::Error,
    },
    /// `max_wakes` outside 1 to [`WAKES_MAX`].
    #[error("max_wakes {0}: expected 1 to {WAKES_MAX}")]
    Wakes(u32),
}

/// No room for one more job now ([`super::Jobs::check_room`]).
#[derive(Debug, thiserror::Error)]
pub enum RoomError {
    /// The service is stopping.
    #[error("the service is stopping")]
    Stopping,
    /// `jobs.max_running` run already.
    #[error("{0} jobs run already, the most at once (jobs.max_running)")]
    Full(usize),
}

/// No such job ([`super::Jobs::find`]).
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// The id is not `j<N>`.
    #[error("{0:?} is not a job id (j1, j2, ...)")]
    NotAnId(String),
    /// No job of that id in the conversation.
    #[error("no job {id} in conversation {conversation:?}")]
    NotInConversation {
        /// The job's id.
        id: String,
        /// The conversation.
        conversation: String,
    },
    /// No job of that id of no conversation.
    #[error("no job {0} of no conversation")]
    NotFound(String),
}

/// A running call that did not move to a job ([`super::Jobs::move_call`]).
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// No running movable call of that id in the conversation.
    #[error("no running call {0:?} of this conversation (it ended, or it is not a sandbox.launch)")]
    NoCall(String),
    /// The call may not move (why).
    #[error("{0}")]
    Refused(String),
    /// The call ended before it could move.
    #[error("the call {0} has ended")]
    Ended(String),
    /// Its time limit is outside the config's range.
    #[error(transparent)]
    Minutes(#[from] MinutesError),
    /// No room for one more job.
    #[error(transparent)]
    Room(#[from] RoomError),
}

impl From<MinutesError> for ErrorBody {
    fn from(e: MinutesError) -> ErrorBody {
        ErrorBody::new(ErrorCode::Invalid, e.to_string())
    }
}

impl From<WatchError> for ErrorBody {
    fn from(e: WatchError) -> ErrorBody {
        ErrorBody::new(ErrorCode::Invalid, e.to_string())
    }
}

impl From<RoomError> for ErrorBody {
    fn from(e: RoomError) -> ErrorBody {
        let code = match e {
            RoomError::Stopping => ErrorCode::Conflict,
            RoomError::Full(_) => ErrorCode::Busy,
        };
        ErrorBody::new(code, e.to_string())
    }
}

impl From<FindError> for ErrorBody {
    fn from(e: FindError) -> ErrorBody {
        let code = match e {
            FindError::NotAnId(_) => ErrorCode::Invalid,
            FindError::NotInConversation { .. } | FindError::NotFound(_) => ErrorCode::NotFound,
        };
        ErrorBody::new(code, e.to_string())
    }
}

impl From<MoveError> for ErrorBody {
    fn from(e: MoveError) -> ErrorBody {
        match e {
            MoveError::NoCall(_) | MoveError::Ended(_) => {
                ErrorBody::new(ErrorCode::NotFound, e.to_string())
            }
            MoveError::Refused(_) => ErrorBody::new(ErrorCode::Invalid, e.to_string()),
            MoveError::Minutes(e) => e.into(),
            MoveError::Room(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refusal reaches a client with the code it had when the registry answered
    /// wire errors itself.
    #[test]
    fn each_refusal_keeps_its_wire_code() {
        let minutes = || MinutesError {
            minutes: 0.0,
            lo: 1.0,
            hi: 2.0,
        };
        let cases: Vec<(ErrorBody, ErrorCode)> = vec![
            (minutes().into(), ErrorCode::Invalid),
            (WatchError::TooLong(1001).into(), ErrorCode::Invalid),
            (WatchError::Wakes(0).into(), ErrorCode::Invalid),
            (RoomError::Stopping.into(), ErrorCode::Conflict),
            (RoomError::Full(3).into(), ErrorCode::Busy),
            (FindError::NotAnId("x".into()).into(), ErrorCode::Invalid),
            (FindError::NotFound("j1".into()).into(), ErrorCode::NotFound),
            (
                MoveError::NoCall("call-1".into()).into(),
                ErrorCode::NotFound,
            ),
            (
                MoveError::Ended("call-1".into()).into(),
                ErrorCode::NotFound,
            ),
            (MoveError::Refused("no".into()).into(), ErrorCode::Invalid),
            (MoveError::from(minutes()).into(), ErrorCode::Invalid),
            (MoveError::from(RoomError::Full(1)).into(), ErrorCode::Busy),
        ];
        for (body, code) in cases {
            assert_eq!(body.code, code, "{body:?}");
        }
        let b: ErrorBody = RoomError::Full(3).into();
        assert_eq!(
            b.message,
            "3 jobs run already, the most at once (jobs.max_running)"
        );
    }
}
