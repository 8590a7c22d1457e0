//! Feeds arbitrary bytes, in arbitrary pieces, to the frame decoder and the blocking
//! reader, and reads every frame that comes out as each client frame type, skipping some
//! bodies midway. None of it may panic, and the decoder may never hold more than one
//! frame's worth of bytes.

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
    for (i, chunk) in rest.chunks(step).enumerate() {
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
        // Some bodies are skipped midway (a frame over the service's buffer budget): the
        // decoder then holds none of it and stays in step.
        if i % 3 == 2 && d.skip_body() {
            assert_eq!(d.buffered(), 0);
            assert_eq!(d.body_pending(), None);
        }
    }
    let _ = d.finish();
    let mut cursor = std::io::Cursor::new(rest);
    while let Ok(Some(_)) = frame::read_frame(&mut cursor) {}
});
