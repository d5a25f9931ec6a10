//! An upstream's `tools/call` result, bounded by `GATEHOUSE_MAX_RESULT_BYTES` like the
//! built-in tools' results ([`crate::mcp::output`]): a result whose JSON fits is passed on as
//! it came; a larger one keeps its text blocks, cut to fit, drops `structuredContent` and the
//! blocks that do not fit, and ends with a text block saying it was cut. It is never sent whole.

use rmcp::model::{CallToolResult, ContentBlock};

/// Room kept for the envelope and the closing note.
const RESERVE: usize = 512;

fn size<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

/// `result` within `max_bytes` of JSON (see the module documentation); `upstream` is named
/// in the note of a cut result.
pub fn bound(result: CallToolResult, max_bytes: usize, upstream: &str) -> CallToolResult {
    let whole = size(&result);
    if whole <= max_bytes {
        return result;
    }
    let mut budget = max_bytes.saturating_sub(RESERVE);
    let mut kept = Vec::new();
    for block in result.content {
        let block_size = size(&block);
        if block_size <= budget {
            budget -= block_size;
            kept.push(block);
            continue;
        }
        if let Some(text) = block.as_text() {
            // JSON escaping may grow a text: keep a share of the budget, on a char boundary.
            let mut end = (budget / 2).min(text.text.len());
            while end > 0 && !text.text.is_char_boundary(end) {
                end -= 1;
            }
            if end > 0 {
                kept.push(ContentBlock::text(text.text[..end].to_string()));
            }
        }
        break;
    }
    kept.push(ContentBlock::text(format!(
        "[Gatehouse: the result of the upstream server {upstream} was {whole} bytes and was cut to fit {max_bytes}; ask for less.]"
    )));
    let mut out = if result.is_error == Some(true) {
        CallToolResult::error(kept)
    } else {
        CallToolResult::success(kept)
    };
    out.meta = None;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let last = cut.content.last().unwrap().as_text().unwrap().text.clone();
        assert!(
            last.contains("upstream server up") && last.contains("cut"),
            "{last}"
        );
        assert!(cut.content[0].as_text().unwrap().text.starts_with("aaa"));
        let structured = CallToolResult::structured(serde_json::json!({"x": "y".repeat(5000)}));
        let cut = bound(structured, 2048, "up");
        assert!(cut.structured_content.is_none());
        assert!(size(&cut) <= 2048);
    }
}
