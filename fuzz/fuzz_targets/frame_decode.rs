//! Feeds arbitrary bytes, in arbitrary pieces, to the frame decoder and the blocking
//! reader, and reads every frame that comes out as each client frame type. None of it may
//! panic, and the decoder may never hold more than one frame's worth of bytes.

#![no_main]

use efr_sandbox_wire::frame::{self, FrameDecoder, MAX_FRAME};
use efr_sandbox_wire::rpc::ClientFrame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the piece size, so split points are explored too.
    let (step, rest) = match data.split_first() {
        Some((s, r)) => (usize::from(*s).max(1), r),
        None => return,
    };
    let mut d = FrameDecoder::new();
    for chunk in rest.chunks(step) {
        d.push(chunk);
        assert!(d.buffered() <= MAX_FRAME + 4 + step);
        while let Some(result) = d.next_frame() {
            if let Ok(map) = result {
                let value = serde_json::Value::Object(map);
                let _ = serde_json::from_value::<ClientFrame>(value.clone());
                let _ = serde_json::from_value::<efr_sandbox_wire::ExplainParams>(value.clone());
                let _ = serde_json::from_value::<efr_sandbox_wire::Launch>(value.clone());
                let _ = serde_json::from_value::<efr_sandbox_wire::ExitRecord>(value);
            }
        }
    }
    let _ = d.finish();
    let mut cursor = std::io::Cursor::new(rest);
    while let Ok(Some(_)) = frame::read_frame(&mut cursor) {}
});
