//! A shell parser that reads a line as bash does (issue 4).
