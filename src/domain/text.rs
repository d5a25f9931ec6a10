//! Which characters may appear in text shown to people (titles, tags, names, bodies): no
//! control characters and no invisible or direction-changing formatting characters
//! (Unicode TR 9 bidirectional controls; the trojan-source class of spoofing). One-line texts a
//! person reads as a name (a client's name, a project's name, a note's title or tags) are held
//! to a stricter rule decided by Unicode properties (UAX #44, from the Unicode Character
//! Database as shipped by `icu_properties`): nothing default-ignorable, no format character,
//! and at least one visible character, so that a name can neither be blank nor look like
//! another one (UTS #39 §3.1 lists default-ignorable characters as not allowed in identifiers).

use icu_properties::props::{DefaultIgnorableCodePoint, GeneralCategory, GeneralCategoryGroup};
use icu_properties::{CodePointMapData, CodePointSetData};

/// Whether `c` may not appear in a note's text (its body): every Unicode control character
/// (C0 U+0000–U+001F, DEL U+007F, C1 U+0080–U+009F) except line feed, carriage return and tab,
/// and the characters that make text read differently from what it is: the bidirectional
/// formatting characters (U+061C ALM, U+200E LRM, U+200F RLM, the embeddings and overrides
/// U+202A–U+202E, the isolates U+2066–U+2069), the line and paragraph separators
/// U+2028–U+2029, the deprecated format characters U+206A–U+206F, the byte-order mark U+FEFF,
/// the interlinear annotations U+FFF9–U+FFFB and the invisible tag characters
/// U+E0000–U+E007F. Joiners and variation selectors stay allowed in long text, where emoji
/// sequences and scripts such as Persian need them.
pub fn is_forbidden_in_text(c: char) -> bool {
    (c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
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

/// U+2800 BRAILLE PATTERN BLANK: general category `So` and not default-ignorable, so no
/// Unicode property marks it, yet it shows as an empty cell (a blank name).
pub const BRAILLE_PATTERN_BLANK: char = '\u{2800}';

/// Whether `c` may not appear in a one-line text a person reads as a name (a client's name and
/// other registration members, a project's name, a note's title or tags): everything
/// [`is_forbidden_in_text`] refuses, line feed, carriage return and tab, and by Unicode
/// property every `Default_Ignorable_Code_Point` (zero width space U+200B, word joiner U+2060,
/// soft hyphen U+00AD, the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0, variation
/// selectors, joiners, …), every character of general category `Cf` (format, e.g. the
/// Mongolian vowel separator U+180E), `Cc` (control), `Zl` and `Zp` (line and paragraph
/// separators); and [`BRAILLE_PATTERN_BLANK`], a symbol (`So`) by category that renders as
/// nothing and is used in the field for blank-looking names.
pub fn is_forbidden_in_line(c: char) -> bool {
    is_forbidden_in_text(c)
        || c == BRAILLE_PATTERN_BLANK
        || CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
        || matches!(
            CodePointMapData::<GeneralCategory>::new().get(c),
            GeneralCategory::Format
                | GeneralCategory::Control
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        )
}

/// Whether `c` shows as something a person can see: a letter, number, punctuation mark or
/// symbol (general categories `L*`, `N*`, `P*`, `S*`) that is not default-ignorable. Spaces,
/// lone combining marks and the characters of [`is_forbidden_in_line`] are not visible.
pub fn is_visible(c: char) -> bool {
    if c == BRAILLE_PATTERN_BLANK {
        return false;
    }
    let visible = GeneralCategoryGroup::Letter
        .union(GeneralCategoryGroup::Number)
        .union(GeneralCategoryGroup::Punctuation)
        .union(GeneralCategoryGroup::Symbol);
    visible.contains(CodePointMapData::<GeneralCategory>::new().get(c))
        && !CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
}

/// The first character of `s` a note may not hold (`multiline`: the rule of the text,
/// [`is_forbidden_in_text`], else the rule of titles and tags, [`is_forbidden_in_line`]),
/// if any.
pub fn forbidden_char(s: &str, multiline: bool) -> Option<char> {
    let forbidden = if multiline {
        is_forbidden_in_text
    } else {
        is_forbidden_in_line
    };
    s.chars().find(|&c| forbidden(c))
}

/// Why a one-line text a person reads as a name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// It holds a character of [`is_forbidden_in_line`]; `position` counts characters from 1.
    #[error(
        "must not contain control, invisible or formatting characters (found U+{:04X} at character {position})",
        u32::from(*character)
    )]
    Forbidden {
        /// The first such character.
        character: char,
        /// Its position in the text, in characters, from 1.
        position: usize,
    },
    /// It holds no visible character ([`is_visible`]): blank, or only spaces and marks.
    #[error("must contain a visible character")]
    NothingVisible,
}

/// Checks a one-line text a person reads as a name: no character of
/// [`is_forbidden_in_line`], and at least one [`is_visible`] character.
/// Errors: [`LineError`] naming the first fault.
pub fn check_line(s: &str) -> Result<(), LineError> {
    if let Some((i, character)) = s
        .chars()
        .enumerate()
        .find(|&(_, c)| is_forbidden_in_line(c))
    {
        return Err(LineError::Forbidden {
            character,
            position: i + 1,
        });
    }
    if !s.chars().any(is_visible) {
        return Err(LineError::NothingVisible);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invisible characters seen in the field in names that looked blank or like another name.
    const FIELD_CASES: [char; 7] = [
        '\u{200B}', '\u{2060}', '\u{00AD}', '\u{180E}', '\u{3164}', '\u{115F}', '\u{2800}',
    ];

    #[test]
    fn invisible_and_format_characters_are_refused_in_names_by_property() {
        for c in FIELD_CASES {
            assert!(is_forbidden_in_line(c), "U+{:04X}", c as u32);
            assert!(!is_visible(c), "U+{:04X}", c as u32);
        }
        // More of the same classes, none of them listed anywhere in the code: other Hangul
        // fillers, joiners, variation selectors, combining grapheme joiner, Khmer inherent
        // vowels, Arabic number sign (Cf), shorthand format controls, reserved
        // default-ignorables.
        for c in [
            '\u{1160}',
            '\u{FFA0}',
            '\u{200C}',
            '\u{200D}',
            '\u{FE0F}',
            '\u{E0100}',
            '\u{034F}',
            '\u{17B4}',
            '\u{0600}',
            '\u{1BCA0}',
            '\u{2065}',
            '\u{FFF0}',
            '\u{E0FFF}',
            '\u{FEFF}',
            '\u{202E}',
            '\u{2028}',
            '\n',
            '\t',
        ] {
            assert!(is_forbidden_in_line(c), "U+{:04X}", c as u32);
        }
        for c in [
            'a', 'é', 'Σ', '日', '한', 'ש', '😀', '☕', '1', '-', ' ', '\u{A0}',
        ] {
            assert!(!is_forbidden_in_line(c), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn names_need_a_visible_character() {
        assert_eq!(check_line("Claude"), Ok(()));
        assert_eq!(check_line("Café Σ 日本語 ☕ 한국어"), Ok(()));
        assert_eq!(check_line(""), Err(LineError::NothingVisible));
        assert_eq!(check_line("   "), Err(LineError::NothingVisible));
        assert_eq!(check_line("\u{3000}\u{A0}"), Err(LineError::NothingVisible));
        assert_eq!(check_line("\u{0301}"), Err(LineError::NothingVisible));
        assert_eq!(
            check_line("Cla\u{200B}ude"),
            Err(LineError::Forbidden {
                character: '\u{200B}',
                position: 4
            })
        );
        assert_eq!(
            check_line("\u{3164}").unwrap_err().to_string(),
            "must not contain control, invisible or formatting characters (found U+3164 at character 1)"
        );
    }

    #[test]
    fn long_text_keeps_line_breaks_joiners_and_emoji_sequences() {
        assert_eq!(forbidden_char("a\r\nb\tc", true), None);
        assert_eq!(
            forbidden_char("👨\u{200D}👩\u{200D}👧 ❤\u{FE0F} می\u{200C}خواهم", true),
            None
        );
        assert_eq!(forbidden_char("a\u{202E}b", true), Some('\u{202E}'));
        assert_eq!(forbidden_char("a\u{0}b", true), Some('\u{0}'));
        assert_eq!(forbidden_char("a\u{200B}b", false), Some('\u{200B}'));
    }
}
