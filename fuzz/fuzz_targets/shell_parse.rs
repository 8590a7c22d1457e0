#![no_main]
//! The shell parser, the awk scanner and the classifier never panic and never hang on any
//! input.

use efr_policy::classify::{ClassifyRequest, classify};
use efr_policy::context::Context;
use efr_sandbox_wire::Mode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    let _ = efr_policy::shell::parse(&line);
    let _ = efr_policy::classify::awk::effects(&line);
    thread_local! {
        static CTX: Context = Context::defaults("/home/u");
    }
    let mut req = ClassifyRequest::new(line.into_owned(), Some("/home/u/p".into()), Mode::Auto);
    req.project_roots = vec!["/home/u/p".into()];
    CTX.with(|ctx| {
        let _ = classify(&req, ctx);
    });
});
