//! Text that came from a policy — denial reasons, plugin log lines, the
//! messages of its failed evaluations — made safe to show: control
//! characters (and the Unicode controls that reorder or hide text) escaped,
//! length capped. Applied where such text enters the engine (`eval`, the
//! `arbiter.log` import, the engine's hooks for errors) and the bundle's
//! tests, so no terminal, table, report, decision log or Kubernetes Event
//! ever receives raw bytes a tenant chose; names in `bundle.yaml` must be
//! clean to load ([`is_clean`]).
//! Pure; never fails.

/// Most bytes of a denial reason kept (the rest is cut, and says so).
pub const MAX_REASON_BYTES: usize = 1024;
/// Most bytes of one `arbiter.log` line kept.
pub const MAX_LOG_LINE_BYTES: usize = 1024;
/// Most bytes of an evaluation's error message kept (a trap's backtrace
/// names the guest's functions, a bad response quotes what it returned).
pub const MAX_ERROR_BYTES: usize = 4096;

/// Does `c` control the terminal or the direction or visibility of text?
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}')
}

/// Has `text` no character [`clean`] would escape?
pub fn is_clean(text: &str) -> bool {
    !text.chars().any(is_unsafe)
}

/// `text` with every unsafe character written as its Rust escape (`\n`,
/// `\u{1b}`), cut to at most `max_bytes` (on a character boundary) with a
/// note of how much was cut.
pub fn clean(text: &str, max_bytes: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_bytes));
    for (at, c) in text.char_indices() {
        let before = out.len();
        if is_unsafe(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
        if out.len() > max_bytes {
            out.truncate(before);
            out.push_str(&format!("… (+{} bytes cut)", text.len() - at));
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_escaped_not_passed_through() {
        assert_eq!(
            clean("ok\x1b[2J\rforged\nline\u{202e}txt", 100),
            "ok\\u{1b}[2J\\rforged\\nline\\u{202e}txt"
        );
        assert_eq!(clean("plain text, ünïcode", 100), "plain text, ünïcode");
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary_and_says_so() {
        let long = "é".repeat(1000);
        let cut = clean(&long, 11);
        assert_eq!(cut, "ééééé… (+1990 bytes cut)");
        // An escape is never split.
        assert_eq!(clean("ab\x1b", 4), "ab… (+1 bytes cut)");
    }
}
