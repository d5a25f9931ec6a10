//! Which characters may appear in text shown to people (titles, tags, names, bodies): no
//! control characters and no invisible or direction-changing formatting characters
//! (Unicode TR 9 bidirectional controls; the trojan-source class of spoofing).

/// Whether `c` may not appear in a one-line text shown to people (a note's title or tags, a
/// client's name): every Unicode control character
/// (C0 U+0000–U+001F, DEL U+007F, C1 U+0080–U+009F) and the bidirectional formatting
/// characters that can make text read differently from what it is (U+061C ALM, U+200E LRM,
/// U+200F RLM, the embeddings and overrides U+202A–U+202E, the isolates U+2066–U+2069), the
/// line and paragraph separators U+2028–U+2029, the deprecated format characters
/// U+206A–U+206F, the byte-order mark U+FEFF, the interlinear annotations U+FFF9–U+FFFB and
/// the invisible tag characters U+E0000–U+E007F.
pub fn is_forbidden_in_line(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// Whether `c` may not appear in a note's text: as [`is_forbidden_in_line`], except line
/// feed, carriage return and tab.
pub fn is_forbidden_in_text(c: char) -> bool {
    !matches!(c, '\n' | '\r' | '\t') && is_forbidden_in_line(c)
}

/// The first character of `s` a note may not hold (`multiline`: the rule of the text, else
/// the rule of titles and tags), if any.
pub fn forbidden_char(s: &str, multiline: bool) -> Option<char> {
    let forbidden = if multiline {
        is_forbidden_in_text
    } else {
        is_forbidden_in_line
    };
    s.chars().find(|&c| forbidden(c))
}
