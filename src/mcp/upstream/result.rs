//! An upstream's `tools/call` result, bounded by `GATEHOUSE_MAX_RESULT_BYTES` like the
//! built-in tools' results ([`crate::mcp::output`]): a result whose JSON fits is passed on as
//! it came; a larger one is cut to fit and ends with a text block saying it was cut. It is
//! never sent whole.
//!
//! How a result is cut:
//! - Its text blocks are kept in order, each whole while it fits; the first that does not is
//!   cut at the last character that fits (measured as JSON, escapes included), and the blocks
//!   after it are dropped, as are blocks of other kinds that do not fit.
//! - Its `structuredContent` (MCP `server/tools` §Structured Content) is kept and cut as a
//!   built-in result's JSON is cut: lists lose their last items, long texts are cut and end
//!   with an ellipsis, members stay. A text block that carried the same JSON (as the SDKs'
//!   servers send it, for clients that read text only) carries the cut JSON; one that is not an
//!   object gets such a block first (rmcp makes one for clients older than 2026-07-28), so
//!   that it is measured. Only when nothing left to cut makes it fit is the answer an
//!   `isError` result saying so, with the other blocks that fit and no broken copy.
//! - `_meta` is dropped; `isError` is kept.
//!
//! A result without `resultType` (an upstream of an older revision) gets `"complete"`, which a
//! 2026-07-28 server must send in every result (MCP 2026-07-28 schema, `Result.resultType`;
//! rmcp leaves it out again for peers of older revisions).

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::mcp::output::prefix_within;

/// Room kept for the envelope and the closing note.
const RESERVE: usize = 512;

fn size<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

/// The blocks of `content` that fit `budget` bytes of JSON (see the module documentation),
/// and the bytes left.
fn keep_blocks(content: Vec<ContentBlock>, mut budget: usize) -> (Vec<ContentBlock>, usize) {
    let mut kept = Vec::new();
    for block in content {
        let block_size = size(&block);
        if block_size <= budget {
            budget -= block_size;
            kept.push(block);
            continue;
        }
        if let Some(text) = block.as_text() {
            let shell = size(&ContentBlock::text(String::new()));
            let part = prefix_within(&text.text, budget.saturating_sub(shell));
            if !part.is_empty() {
                let part = ContentBlock::text(part.to_string());
                budget = budget.saturating_sub(size(&part));
                kept.push(part);
            }
            break;
        }
    }
    (kept, budget)
}

/// `result` within `max_bytes` of JSON (see the module documentation); `upstream` is named
/// in the note of a cut result.
pub fn bound(mut result: CallToolResult, max_bytes: usize, upstream: &str) -> CallToolResult {
    result
        .result_type
        .get_or_insert(rmcp::model::ResultType::COMPLETE);
    let whole = size(&result);
    if whole <= max_bytes {
        return result;
    }
    let is_error = result.is_error == Some(true);
    let note = ContentBlock::text(format!(
        "[Gatehouse: the result of the upstream server {upstream} was {whole} bytes and was cut to fit {max_bytes}; ask for less.]"
    ));
    let assemble = |content: Vec<ContentBlock>, structured: Option<Value>| {
        let mut out = if is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        out.structured_content = structured;
        out
    };
    let budget = max_bytes.saturating_sub(RESERVE);
    let mut content = result.content;
    if let Some(structured) = result.structured_content {
        // The text block that repeats the structured JSON, if any, follows its cut.
        let found = content.iter().position(|block| {
            block.as_text().is_some_and(|t| {
                t.text.starts_with(['{', '['])
                    && serde_json::from_str::<Value>(&t.text).is_ok_and(|v| v == structured)
            })
        });
        let mut rest = content.clone();
        if let Some(at) = found {
            rest.remove(at);
        }
        // A structured result that is not an object reaches a client older than 2026-07-28 as a
        // text block (rmcp's `strip_non_object_output_for_legacy_peer`) unless one repeats it:
        // that block is made here, first, so that it is measured and cut with the rest.
        let mirror = found.or((!structured.is_object()).then_some(0));
        // Other blocks take at most half the room; the structured JSON (and its copy) the rest.
        let (others, _) = keep_blocks(rest, budget / 2);
        let others_size: usize = others.iter().map(size).sum();
        let build = |value: &Value| {
            let mut blocks = others.clone();
            if let Some(at) = mirror {
                blocks.insert(at.min(blocks.len()), ContentBlock::text(value.to_string()));
            }
            blocks.push(note.clone());
            assemble(blocks, Some(value.clone()))
        };
        let room = budget.saturating_sub(others_size);
        let structured_room = if mirror.is_some() { room / 2 } else { room };
        if let Some(cut) =
            crate::mcp::output::cut_json_to_fit(structured, max_bytes, structured_room, build)
        {
            return cut;
        }
        // Nothing left to cut makes it fit (members too many, ids too long): an error result,
        // which a client does not hold to the tool's output schema, without the broken copy.
        if let Some(at) = found {
            content.remove(at);
        }
        let (mut kept, _) = keep_blocks(content, budget);
        kept.push(ContentBlock::text(format!(
            "[Gatehouse: the structured result of the upstream server {upstream} was {whole} bytes and cannot be cut to fit {max_bytes}; ask for less.]"
        )));
        return CallToolResult::error(kept);
    }
    let (mut kept, _) = keep_blocks(content, budget);
    kept.push(note);
    assemble(kept, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::output::json_len;
    use serde_json::json;

    fn text_of(block: &ContentBlock) -> &str {
        &block.as_text().unwrap().text
    }

    #[test]
    fn a_small_result_passes_and_a_large_one_is_cut_within_the_bound() {
        let small = CallToolResult::success(vec![ContentBlock::text("hello")]);
        assert_eq!(bound(small.clone(), 4096, "up"), small);
        let big = CallToolResult::success(vec![
            ContentBlock::text("a".repeat(3000)),
            ContentBlock::text("b".repeat(3000)),
        ]);
        let cut = bound(big, 2048, "up");
        assert!(size(&cut) <= 2048, "{}", size(&cut));
        assert_eq!(cut.is_error, Some(false));
        let last = text_of(cut.content.last().unwrap());
        assert!(
            last.contains("upstream server up") && last.contains("cut"),
            "{last}"
        );
        // The first text keeps all that fits: the bound less the room kept for the note and
        // the envelope, and its block's own JSON.
        let first = text_of(&cut.content[0]);
        assert!(first.chars().all(|c| c == 'a'));
        assert!(first.len() > 2048 - RESERVE - 40, "{}", first.len());
        assert_eq!(cut.content.len(), 2, "the second text did not fit at all");
    }

    #[test]
    fn a_text_is_cut_where_its_json_fills_the_room_escapes_included() {
        // Quotes take two bytes each in JSON: half as many fit.
        let quoted = CallToolResult::error(vec![ContentBlock::text("\"".repeat(4000))]);
        let cut = bound(quoted, 2048, "up");
        assert!(size(&cut) <= 2048);
        assert_eq!(cut.is_error, Some(true), "an error stays an error");
        let kept = text_of(&cut.content[0]).len();
        assert!(kept > (2048 - RESERVE - 40) / 2, "{kept}");
        // Multi-byte characters are never split.
        let wide = CallToolResult::success(vec![ContentBlock::text("é😀".repeat(2000))]);
        let cut = bound(wide, 2048, "up");
        assert!(size(&cut) <= 2048);
        assert!(text_of(&cut.content[0]).len() > 1000);
    }

    #[test]
    fn json_lengths_are_those_serde_json_writes() {
        for c in (0u32..0x200)
            .chain([0x2028, 0xfeff, 0x1f600])
            .filter_map(char::from_u32)
        {
            let written = serde_json::to_string(&c.to_string()).unwrap().len() - 2;
            assert_eq!(json_len(c), written, "{c:?}");
        }
    }

    #[test]
    fn structured_content_is_cut_not_dropped_and_its_text_copy_follows() {
        let items: Vec<Value> = (0..200)
            .map(|i| json!({"id": format!("item-{i}"), "body": "x".repeat(100)}))
            .collect();
        let value = json!({"items": items, "total": 200});
        let result = CallToolResult::structured(value.clone());
        assert_eq!(
            text_of(&result.content[0]),
            value.to_string(),
            "the SDKs' shape"
        );
        let cut = bound(result, 8192, "up");
        assert!(size(&cut) <= 8192, "{}", size(&cut));
        let structured = cut.structured_content.clone().expect("kept");
        assert_eq!(structured["total"], 200, "members stay");
        let kept = structured["items"].as_array().unwrap();
        assert!(!kept.is_empty() && kept.len() < 200, "{}", kept.len());
        assert_eq!(kept[0]["id"], "item-0");
        let copy: Value = serde_json::from_str(text_of(&cut.content[0])).unwrap();
        assert_eq!(copy, structured, "the text copy is the cut JSON");
        assert!(text_of(cut.content.last().unwrap()).contains("was cut"));

        // Without a text copy the structured JSON has the room to itself.
        let mut alone = CallToolResult::structured(value);
        alone.content.clear();
        let cut_alone = bound(alone, 8192, "up");
        let more = cut_alone.structured_content.unwrap()["items"]
            .as_array()
            .unwrap()
            .len();
        assert!(more > kept.len(), "{more} vs {}", kept.len());
    }

    #[test]
    fn structured_content_that_cannot_be_cut_is_an_error_result() {
        // An id is never cut, nor is a member dropped: when these alone are too long, the
        // answer is an error saying so, without a broken copy of the JSON.
        let many: serde_json::Map<String, Value> =
            (0..2000).map(|i| (format!("k{i}"), json!(i))).collect();
        for value in [json!({"id": "y".repeat(5000)}), Value::Object(many)] {
            let result = CallToolResult::structured(value);
            let cut = bound(result, 2048, "up");
            assert!(cut.structured_content.is_none());
            assert!(size(&cut) <= 2048);
            assert_eq!(cut.is_error, Some(true));
            assert_eq!(cut.content.len(), 1, "{:?}", cut.content);
            let note = text_of(&cut.content[0]);
            assert!(note.contains("cannot be cut to fit 2048"), "{note}");
        }
    }

    #[test]
    fn structured_content_that_is_not_an_object_is_measured_with_its_text_copy() {
        // Sent to an older client, rmcp turns it into a text block: that block is counted.
        for value in [
            json!("\\".repeat(6000)),
            json!(vec!["\"\\"; 3000]),
            json!("\u{1}".repeat(6000)),
        ] {
            let mut result = CallToolResult::success(vec![ContentBlock::text("x")]);
            result.structured_content = Some(value);
            let mut cut = bound(result, 4096, "up");
            let mut sent = rmcp::model::ServerResult::CallToolResult(cut.clone());
            sent.strip_non_object_output_for_legacy_peer();
            assert!(
                size(&sent) <= 4096,
                "{} bytes for a legacy client",
                size(&sent)
            );
            assert!(size(&cut) <= 4096, "{} bytes", size(&cut));
            let structured = cut.structured_content.take().expect("kept, cut");
            let copy: Value = serde_json::from_str(text_of(&cut.content[0])).unwrap();
            assert_eq!(copy, structured, "the first block is its text copy");
            assert_eq!(text_of(&cut.content[1]), "x");
        }
    }

    #[test]
    fn structured_texts_full_of_escapes_keep_what_the_room_allows() {
        // A quote or a line break takes two bytes of JSON: about half the room's characters
        // are kept, not a floor of 64.
        for text in [
            "\"".repeat(8000),
            "aaaaaaa\n".repeat(4000),
            "\u{1}".repeat(8000),
        ] {
            let result = CallToolResult::structured(json!({"text": text}));
            let cut = bound(result, 4096, "up");
            assert!(size(&cut) <= 4096, "{}", size(&cut));
            let kept = cut.structured_content.unwrap()["text"]
                .as_str()
                .unwrap()
                .chars()
                .count();
            let each = json_len(text.chars().next().unwrap()).max(2);
            assert!(
                kept * each > 800,
                "kept {kept} characters of {:?}",
                &text[..2]
            );
        }
    }
}
