//! The frame codec: a 4-byte big-endian length, then one JSON object of that many bytes,
//! at most [`MAX_FRAME`].
//!
//! [`FrameDecoder`] is push-based so that both a blocking reader and an async one can use
//! it. It never reserves more than the bytes that have actually arrived, so a length of
//! 4 GiB costs nothing: the frame is refused as soon as its header is read, and its body is
//! skipped as it arrives so that the connection can go on with the next frame.

use std::io::{self, Read, Write};

use serde::Serialize;
use serde_json::{Map, Value};

/// The largest body a frame may have: 16 MiB.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Why a frame was refused.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The header names a body over [`MAX_FRAME`]; the body is skipped.
    #[error("frame of {len} bytes is over the limit of {MAX_FRAME} bytes")]
    TooLarge {
        /// The length the header names, in bytes.
        len: u64,
    },
    /// The header names a body of 0 bytes.
    #[error("frame of 0 bytes holds no json object")]
    Empty,
    /// The body is not JSON: serde's message.
    #[error("frame is not json: {0}")]
    NotJson(String),
    /// The body is JSON but not an object.
    #[error("frame holds json that is not an object")]
    NotObject,
    /// The stream ended inside a header or a body.
    #[error("connection ended inside a frame ({got} of {want} bytes)")]
    Truncated {
        /// The bytes of the header or body that arrived.
        got: usize,
        /// The bytes the header or body needs.
        want: usize,
    },
}

/// Checks a frame header; the length it names is safe to allocate when this returns Ok.
pub fn check_header(header: [u8; 4]) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge { len: len as u64 });
    }
    if len == 0 {
        return Err(FrameError::Empty);
    }
    Ok(len)
}

/// Parses a frame body into a JSON object.
pub fn parse_body(body: &[u8]) -> Result<Map<String, Value>, FrameError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(FrameError::NotObject),
        Err(e) => Err(FrameError::NotJson(e.to_string())),
    }
}

/// Why a value could not be written as a frame.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// serde_json could not serialize the value.
    #[error("value does not serialize to json: {0}")]
    Json(#[from] serde_json::Error),
    /// The value serializes to JSON that is not an object.
    #[error("value serializes to something that is not a json object")]
    NotObject,
    /// The body would be over [`MAX_FRAME`].
    #[error("encoded frame of {len} bytes is over the limit of {MAX_FRAME} bytes")]
    TooLarge {
        /// The body's length, in bytes.
        len: usize,
    },
}

/// Encodes one value (which must serialize to an object) as a frame.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, EncodeError> {
    let body = serde_json::to_vec(value)?;
    if body.first() != Some(&b'{') {
        return Err(EncodeError::NotObject);
    }
    if body.len() > MAX_FRAME {
        return Err(EncodeError::TooLarge { len: body.len() });
    }
    let len = u32::try_from(body.len()).map_err(|_| EncodeError::TooLarge { len: body.len() })?;
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// A failure to read a frame from a blocking reader.
#[derive(Debug, thiserror::Error)]
pub enum ReadFrameError {
    /// The frame was refused.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The reader failed.
    #[error("reading a frame failed: {0}")]
    Io(#[from] io::Error),
}

/// Reads one frame from a blocking reader; `Ok(None)` at a clean end before a header.
pub fn read_frame<R: Read>(r: &mut R) -> Result<Option<Map<String, Value>>, ReadFrameError> {
    let mut header = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(FrameError::Truncated { got, want: 4 }.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = check_header(header)?;
    let mut body = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match r.read(&mut body[got..]) {
            Ok(0) => return Err(FrameError::Truncated { got, want: len }.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Some(parse_body(&body)?))
}

/// A failure to write a frame to a blocking writer.
#[derive(Debug, thiserror::Error)]
pub enum WriteFrameError {
    /// The value could not be made a frame.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The writer failed.
    #[error("writing a frame failed: {0}")]
    Io(#[from] io::Error),
}

/// Writes one frame to a blocking writer.
pub fn write_frame<W: Write, T: Serialize + ?Sized>(
    w: &mut W,
    value: &T,
) -> Result<(), WriteFrameError> {
    let bytes = encode(value)?;
    w.write_all(&bytes)?;
    w.flush()?;
    Ok(())
}

#[derive(Debug)]
enum State {
    /// Waiting for (the rest of) a header.
    Header,
    /// Collecting a body of this length.
    Body(usize),
    /// Dropping this many more bytes of a refused frame.
    Skip(u64),
}

/// The room a decoder keeps between frames (a few reads' worth).
const KEEP_ROOM: usize = 256 * 1024;

/// A push decoder: feed it bytes as they arrive, take frames and errors out.
///
/// After an error the decoder stays in step with the stream where it can: an oversized
/// frame's body is skipped, a body that is not a JSON object is dropped whole. Only the
/// end of the stream inside a frame ([`FrameDecoder::finish`]) is final.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    state: State,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// A decoder at the start of a stream, waiting for a header.
    pub fn new() -> Self {
        FrameDecoder {
            buf: Vec::new(),
            state: State::Header,
        }
    }

    /// Adds bytes that arrived. Bytes of a frame being skipped are dropped at once.
    pub fn push(&mut self, mut data: &[u8]) {
        if let State::Skip(left) = &mut self.state {
            // A count past usize::MAX is more than any push holds: all of it is dropped.
            let drop = usize::try_from(*left).map_or(data.len(), |left| left.min(data.len()));
            *left -= drop as u64;
            data = &data[drop..];
            if *left == 0 {
                self.state = State::Header;
            }
        }
        self.buf.extend_from_slice(data);
    }

    /// Takes the next frame or error out, or `None` when more bytes are needed.
    pub fn next_frame(&mut self) -> Option<Result<Map<String, Value>, FrameError>> {
        loop {
            match self.state {
                State::Header => {
                    if self.buf.len() < 4 {
                        return None;
                    }
                    let header = [self.buf[0], self.buf[1], self.buf[2], self.buf[3]];
                    self.buf.drain(..4);
                    match check_header(header) {
                        Ok(len) => self.state = State::Body(len),
                        Err(FrameError::TooLarge { len }) => {
                            let drop = usize::try_from(len)
                                .map_or(self.buf.len(), |len| len.min(self.buf.len()));
                            self.buf.drain(..drop);
                            let left = len - drop as u64;
                            self.state = if left == 0 {
                                State::Header
                            } else {
                                State::Skip(left)
                            };
                            return Some(Err(FrameError::TooLarge { len }));
                        }
                        Err(e) => return Some(Err(e)),
                    }
                }
                State::Body(len) => {
                    if self.buf.len() < len {
                        return None;
                    }
                    let body: Vec<u8> = self.buf.drain(..len).collect();
                    self.state = State::Header;
                    self.trim();
                    return Some(parse_body(&body));
                }
                State::Skip(_) => {
                    // `push` drains skipped bytes before they reach the buffer.
                    return None;
                }
            }
        }
    }

    /// The body length of the frame being read, from its header until the frame is out
    /// (`None` between frames, inside a header, and while a body is skipped).
    pub fn body_pending(&self) -> Option<usize> {
        match self.state {
            State::Body(len) => Some(len),
            _ => None,
        }
    }

    /// Whether the stream is inside a frame: part of a header or a body read, or a body
    /// being skipped.
    pub fn in_frame(&self) -> bool {
        !matches!(self.state, State::Header) || !self.buf.is_empty()
    }

    /// Skips the body being read (the bytes held and those still to come), so that the
    /// decoder holds none of it; false when no body is being read. The frame is not given
    /// out; the next one is.
    pub fn skip_body(&mut self) -> bool {
        let State::Body(len) = self.state else {
            return false;
        };
        let held = self.buf.len().min(len);
        self.buf.drain(..held);
        let left = (len - held) as u64;
        self.state = if left == 0 {
            State::Header
        } else {
            State::Skip(left)
        };
        self.trim();
        true
    }

    /// Gives back the room a large frame took, once it is out: a connection that sent
    /// one large frame does not keep its size for its life.
    fn trim(&mut self) {
        if self.buf.capacity() > KEEP_ROOM && self.buf.len() <= KEEP_ROOM / 2 {
            self.buf.shrink_to(KEEP_ROOM);
        }
    }

    /// Bytes held for a frame that is not complete yet.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Call at the end of the stream: an error when it ended inside a frame.
    pub fn finish(&self) -> Result<(), FrameError> {
        match self.state {
            State::Header if self.buf.is_empty() => Ok(()),
            State::Header => Err(FrameError::Truncated {
                got: self.buf.len(),
                want: 4,
            }),
            State::Body(len) => Err(FrameError::Truncated {
                got: self.buf.len(),
                want: len,
            }),
            State::Skip(_) => Ok(()),
        }
    }
}
