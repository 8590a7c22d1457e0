//! The frame codec at its limits.

use std::io::{self, Cursor, Read};

use efr_sandbox_wire::frame::{self, FrameDecoder, FrameError, MAX_FRAME, ReadFrameError};
use serde_json::json;

fn frame_of(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// A body of exactly `len` bytes that is one JSON object.
fn object_of_len(len: usize) -> Vec<u8> {
    let mut body = b"{\"pad\":\"".to_vec();
    body.resize(len - 2, b'x');
    body.extend_from_slice(b"\"}");
    assert_eq!(body.len(), len);
    body
}

#[test]
fn round_trip() {
    let v = json!({"id": 1, "method": "hello", "params": {"protocol": 1}});
    let bytes = frame::encode(&v).expect("encodes");
    let mut d = FrameDecoder::new();
    d.push(&bytes);
    let got = d.next_frame().expect("a frame").expect("ok");
    assert_eq!(serde_json::Value::Object(got), v);
    assert!(d.next_frame().is_none());
    assert!(d.finish().is_ok());
}

#[test]
fn exactly_max_is_accepted_and_one_more_is_refused() {
    let body = object_of_len(MAX_FRAME);
    let mut d = FrameDecoder::new();
    d.push(&frame_of(&body));
    let map = d
        .next_frame()
        .expect("a frame")
        .expect("16 MiB is within the limit");
    assert_eq!(map["pad"].as_str().map(str::len), Some(MAX_FRAME - 10));

    let mut r = Cursor::new(frame_of(&body));
    assert!(frame::read_frame(&mut r).expect("reads").is_some());

    let mut d = FrameDecoder::new();
    d.push(&((MAX_FRAME as u32 + 1).to_be_bytes()));
    match d.next_frame() {
        Some(Err(FrameError::TooLarge { len })) => assert_eq!(len, MAX_FRAME as u64 + 1),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(d.buffered(), 0);
}

/// A reader that hands out a header and then fails the test if the body is read.
struct HeaderOnly {
    header: [u8; 4],
    pos: usize,
}

impl Read for HeaderOnly {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        assert!(self.pos < 4, "the body of a refused frame was read");
        let n = (4 - self.pos).min(buf.len());
        buf[..n].copy_from_slice(&self.header[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[test]
fn oversized_header_is_refused_before_the_body_is_read() {
    for len in [MAX_FRAME as u32 + 1, u32::MAX] {
        let mut r = HeaderOnly {
            header: len.to_be_bytes(),
            pos: 0,
        };
        match frame::read_frame(&mut r) {
            Err(ReadFrameError::Frame(FrameError::TooLarge { .. })) => {}
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }
}

#[test]
fn truncated_length_and_body() {
    let mut r = Cursor::new(vec![0u8, 0]);
    assert!(matches!(
        frame::read_frame(&mut r),
        Err(ReadFrameError::Frame(FrameError::Truncated {
            got: 2,
            want: 4
        }))
    ));
    let mut bytes = frame_of(b"{\"a\":1}");
    bytes.truncate(6);
    let mut r = Cursor::new(bytes.clone());
    assert!(matches!(
        frame::read_frame(&mut r),
        Err(ReadFrameError::Frame(FrameError::Truncated { .. }))
    ));
    let mut d = FrameDecoder::new();
    d.push(&bytes);
    assert!(d.next_frame().is_none());
    assert!(matches!(
        d.finish(),
        Err(FrameError::Truncated { got: 2, want: 7 })
    ));
    let mut d = FrameDecoder::new();
    d.push(&[0, 0, 1]);
    assert!(matches!(
        d.finish(),
        Err(FrameError::Truncated { got: 3, want: 4 })
    ));
    assert!(
        frame::read_frame(&mut Cursor::new(Vec::new()))
            .expect("clean end")
            .is_none()
    );
}

#[test]
fn bodies_that_are_not_objects() {
    for (body, want) in [
        (&b"[1,2]"[..], "object"),
        (b"42", "object"),
        (b"\"s\"", "object"),
        (b"null", "object"),
        (b"{\"a\":", "not json"),
        (b"\xff\xfe", "not json"),
        (b"{} {}", "not json"),
    ] {
        let mut d = FrameDecoder::new();
        d.push(&frame_of(body));
        let e = d.next_frame().expect("an answer").expect_err("refused");
        assert!(e.to_string().contains(want), "{body:?}: {e}");
    }
    let mut d = FrameDecoder::new();
    d.push(&[0, 0, 0, 0]);
    assert!(matches!(d.next_frame(), Some(Err(FrameError::Empty))));
}

#[test]
fn decoder_goes_on_after_bad_frames() {
    let mut stream = Vec::new();
    stream.extend_from_slice(&frame_of(b"not json"));
    // An oversized frame whose body follows in full: it is skipped.
    let big = MAX_FRAME + 100;
    stream.extend_from_slice(&(big as u32).to_be_bytes());
    stream.extend(std::iter::repeat_n(b'z', big));
    stream.extend_from_slice(&frame_of(b"{\"ok\":true}"));
    // Feed it in uneven pieces.
    let mut d = FrameDecoder::new();
    let mut results = Vec::new();
    for chunk in stream.chunks(65_521) {
        d.push(chunk);
        assert!(
            d.buffered() <= MAX_FRAME + 65_521,
            "decoder held {} bytes",
            d.buffered()
        );
        while let Some(r) = d.next_frame() {
            results.push(r.map_err(|e| e.to_string()));
        }
    }
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[0].as_ref().is_err_and(|e| e.contains("not json")));
    assert!(
        results[1]
            .as_ref()
            .is_err_and(|e| e.contains("over the limit"))
    );
    assert_eq!(
        results[2].as_ref().ok().map(|m| m["ok"].clone()),
        Some(json!(true))
    );
    assert!(d.finish().is_ok());
}

#[test]
fn split_points_do_not_matter() {
    let frames: Vec<Vec<u8>> = (0..20)
        .map(|i| frame::encode(&json!({"id": i, "s": "é✓".repeat(i)})).expect("encodes"))
        .collect();
    let stream: Vec<u8> = frames.concat();
    for step in [1, 2, 3, 5, 7, 64, 1000] {
        let mut d = FrameDecoder::new();
        let mut n = 0;
        for chunk in stream.chunks(step) {
            d.push(chunk);
            while let Some(r) = d.next_frame() {
                assert_eq!(r.expect("valid")["id"], json!(n));
                n += 1;
            }
        }
        assert_eq!(n, 20, "step {step}");
    }
}

#[test]
fn encode_refuses_non_objects() {
    assert!(frame::encode(&json!([1])).is_err());
    assert!(frame::encode(&json!("x")).is_err());
}

#[test]
fn a_body_skipped_midway_holds_nothing_and_the_next_frame_comes_out() {
    let big = frame_of(&object_of_len(100_000));
    let next = frame_of(br#"{"id":2}"#);
    let mut d = FrameDecoder::new();
    assert!(!d.in_frame());
    assert!(!d.skip_body(), "nothing to skip between frames");
    d.push(&big[..2]);
    assert!(d.in_frame());
    assert!(d.next_frame().is_none());
    assert_eq!(d.body_pending(), None, "inside the header");
    d.push(&big[2..50_000]);
    assert!(d.next_frame().is_none());
    assert_eq!(d.body_pending(), Some(100_000));
    assert!(d.skip_body());
    assert_eq!(d.buffered(), 0);
    assert_eq!(d.body_pending(), None);
    assert!(d.in_frame(), "the rest of the body is still to come");
    d.push(&big[50_000..]);
    assert!(!d.in_frame());
    d.push(&next);
    assert_eq!(d.next_frame().unwrap().unwrap()["id"], json!(2));
    assert!(d.next_frame().is_none());
    assert!(!d.in_frame());
    // A body whose last byte came with the skip: nothing is left to drop.
    let mut d = FrameDecoder::new();
    let small = frame_of(br#"{"id":3}"#);
    d.push(&small[..small.len() - 1]);
    assert!(d.next_frame().is_none());
    assert!(d.skip_body());
    assert!(d.in_frame());
    d.push(&small[small.len() - 1..]);
    assert!(!d.in_frame());
    d.push(&next);
    assert_eq!(d.next_frame().unwrap().unwrap()["id"], json!(2));
}
