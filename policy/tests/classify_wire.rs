//! The classifier's request and result read and render the wire fixtures of
//! `sandbox.classify` byte for byte (`wire/fixtures/v1/classify_*.json`): the JSON the
//! service takes and answers did not change when the types moved into `efr-sandbox-wire`.

use std::path::PathBuf;

use efr_policy::classify::{ClassifyRequest, ClassifyResult};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../wire/fixtures/v1")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn round_trip<T: Serialize + DeserializeOwned>(name: &str) {
    let text = fixture(name);
    let value: T =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} does not read: {e}"));
    let mut again = serde_json::to_string_pretty(&value).expect("renders");
    again.push('\n');
    assert_eq!(again, text, "{name} renders differently");
}

#[test]
fn classify_request_fixtures_are_byte_compatible() {
    round_trip::<ClassifyRequest>("classify_request.json");
    round_trip::<ClassifyRequest>("classify_request_minimal.json");
}

#[test]
fn classify_result_fixtures_are_byte_compatible() {
    round_trip::<ClassifyResult>("classify_result.json");
    round_trip::<ClassifyResult>("classify_result_minimal.json");
}
