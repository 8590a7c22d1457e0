#![no_main]
//! The agents' hook input reader (`efr-sandbox hook claude|codex|gemini`) never panics on
//! any bytes, and what it reads answers in each agent's words without panicking either.

use efr_policy::agent_hook::{Agent, Answer, parse, render};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for agent in Agent::ALL {
        if let Ok(call) = parse(agent, data) {
            assert!(call.cwd.is_absolute());
            if let Some(line) = call.shell_line(agent) {
                let a = Answer::Allow {
                    command: line.to_string(),
                    reason: String::new(),
                };
                let out = render(agent, &call, &a);
                assert!(out.to_string().len() >= line.len());
            }
            let _ = call.line_dir(agent);
        }
    }
});
