//! The classifier: shell lines to exit records (issue 4).
