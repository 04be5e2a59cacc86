//! The JSON writer of the report.

use std::fmt::Write as _;

use super::Stat;

pub(crate) fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

pub(crate) fn json_stat(s: Option<Stat>) -> String {
    match s {
        None => "null".into(),
        Some(s) => format!(
            "{{\"med\":{:.1},\"p10\":{:.1},\"p90\":{:.1}}}",
            s.med, s.p10, s.p90
        ),
    }
}
