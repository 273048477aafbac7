//! Feeds arbitrary input through every history reader and through format detection.
//! Readers must return `Ok` or a typed error for any input, never panic or overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use splitbrain_checkers::history::read::{read_ops, read_str, Format};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = Path::new("<fuzz>");
    for format in [
        None,
        Some(Format::JsonLines),
        Some(Format::JsonArray),
        Some(Format::Edn),
        Some(Format::JepsenLog),
    ] {
        if let Err(e) = read_ops(text, file, format) {
            // Display must not panic either.
            let _ = e.to_string();
        }
    }
    // Pairing into a history must also reject bad structure without panicking.
    let _ = read_str(text, file, None);
});
