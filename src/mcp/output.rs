//! Turning a tool's outcome into an MCP `CallToolResult` (MCP `server/tools` §Tool Result):
//! `structuredContent` matching the output schema, the same JSON as a text block for clients
//! that only read text, `resource_link` blocks for the resources it names, and `isError: true`
//! with a sentence the model can act on for expected failures.
//!
//! A result is bounded by `GATEHOUSE_MAX_RESULT_BYTES`: when its JSON (sent twice, structured
//! and as text) would not fit, the largest lists lose their last items and the longest texts
//! are cut, `"truncated": true` is added, and the text says so — it is never sent whole.
//!
//! `resources/read` is bounded the same way ([`resource_document`]): its JSON document is cut
//! by the same rules and stays JSON, with `"truncated": true` and a `"truncation_notice"`
//! saying what is missing and how to get it.

use rmcp::model::{CallToolResult, ContentBlock, ReadResourceResult, Resource, ResourceContents};
use serde_json::Value;

use super::catalog::{Link, Produced, ToolError};

/// Fields that are never cut: ids and links must stay usable.
const KEEP_WHOLE: &[&str] = &[
    "id",
    "uri",
    "resource",
    "console_url",
    "project_id",
    "note_id",
    "kind",
    "status",
];
/// Strings shorter than this are never cut.
const MIN_CUT: usize = 64;
/// Room kept for the note and the JSON-RPC envelope.
const OVERHEAD: usize = 256;

fn size(v: &Value) -> usize {
    serde_json::to_string(v).map(|s| s.len()).unwrap_or(0)
}

/// Removes about `excess` bytes from `v`, from its largest part; `false` if nothing can be cut.
fn shrink(v: &mut Value, excess: usize) -> bool {
    match v {
        Value::String(s) => {
            if s.len() <= MIN_CUT {
                return false;
            }
            let mut keep = s.len().saturating_sub(excess + 3).max(MIN_CUT);
            while !s.is_char_boundary(keep) {
                keep -= 1;
            }
            s.truncate(keep);
            s.push('…');
            true
        }
        Value::Array(items) => {
            if items.is_empty() {
                return false;
            }
            let sizes: Vec<usize> = items.iter().map(size).collect();
            let total: usize = sizes.iter().sum();
            if let Some((i, &biggest)) = sizes.iter().enumerate().max_by_key(|(_, n)| **n)
                && (items.len() == 1 || biggest * 2 > total)
                && shrink(&mut items[i], excess)
            {
                return true;
            }
            // Drop trailing items worth about `excess` bytes in one step (each item is measured
            // once), so cutting a large list costs linear, not quadratic, time.
            let mut removed = 0;
            while removed < excess
                && let Some(n) = sizes.get(items.len().wrapping_sub(1))
            {
                removed += n + 1;
                items.pop();
            }
            true
        }
        Value::Object(map) => {
            let mut fields: Vec<(String, usize)> = map
                .iter()
                .filter(|(k, _)| !KEEP_WHOLE.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), size(v)))
                .collect();
            fields.sort_by_key(|f| std::cmp::Reverse(f.1));
            fields
                .into_iter()
                .any(|(k, _)| map.get_mut(&k).is_some_and(|v| shrink(v, excess)))
        }
        _ => false,
    }
}

/// Cuts `value` until its JSON is at most `budget` bytes. Returns whether anything was cut.
fn fit(value: &mut Value, budget: usize) -> bool {
    let mut cut = false;
    loop {
        let n = size(value);
        if n <= budget || !shrink(value, n - budget) {
            return cut;
        }
        cut = true;
    }
}

fn link_block(link: Link) -> ContentBlock {
    ContentBlock::resource_link(
        Resource::new(link.uri, link.name).with_mime_type("application/json"),
    )
}

fn assemble(value: Value, links: &[ContentBlock], note: Option<&str>) -> CallToolResult {
    let mut text = serde_json::to_string(&value).unwrap_or_default();
    if let Some(note) = note {
        text.push_str("\n\n");
        text.push_str(note);
    }
    let mut out = CallToolResult::structured(value);
    out.content = std::iter::once(ContentBlock::text(text))
        .chain(links.iter().cloned())
        .collect();
    out
}

/// The `CallToolResult` for one call, bounded by `max_bytes` (its JSON, both copies and the
/// links included).
pub fn render(result: Result<Produced, ToolError>, max_bytes: usize) -> CallToolResult {
    let produced = match result {
        Ok(p) => p,
        Err(e) => return CallToolResult::error(vec![ContentBlock::text(e.message())]),
    };
    let links: Vec<ContentBlock> = produced.links.into_iter().map(link_block).collect();
    let mut value = produced.value;
    let whole = assemble(value.clone(), &links, None);
    let whole_size = serde_json::to_string(&whole).map(|s| s.len()).unwrap_or(0);
    if whole_size <= max_bytes {
        return whole;
    }
    let note = format!(
        "[Result cut to fit {max_bytes} bytes (it was {whole_size}): the last list items and the \
         end of long texts are missing. Ask for less, e.g. a smaller limit, or read one note at \
         a time.]"
    );
    // The JSON is sent twice (structured and as escaped text): start from half the room left
    // and tighten until the assembled result fits.
    let links_size: usize = links
        .iter()
        .map(|l| serde_json::to_string(l).map(|s| s.len()).unwrap_or(0))
        .sum();
    let mut budget = max_bytes.saturating_sub(links_size + note.len() + OVERHEAD) / 2;
    loop {
        fit(&mut value, budget);
        let mut marked = value.clone();
        if let Value::Object(map) = &mut marked {
            map.insert("truncated".to_string(), Value::Bool(true));
        }
        let out = assemble(marked, &links, Some(&note));
        let size = serde_json::to_string(&out).map(|s| s.len()).unwrap_or(0);
        if size <= max_bytes || budget <= MIN_CUT {
            return out;
        }
        budget = budget.saturating_sub((size - max_bytes) / 2 + 16);
    }
}

fn json_len<T: serde::Serialize>(v: &T) -> usize {
    serde_json::to_string(v).map(|s| s.len()).unwrap_or(0)
}

/// The `resources/read` result holding the JSON document `value` of `uri`, bounded by
/// `max_bytes` (the JSON of the whole result). A document that does not fit is cut like a tool
/// result (the last list items, the end of long texts; ids and URIs stay whole) and gets
/// `"truncated": true` and a `"truncation_notice"`: what was cut, then `rest` — how to get
/// the rest.
pub fn resource_document(
    uri: &str,
    value: Value,
    max_bytes: usize,
    rest: &str,
) -> ReadResourceResult {
    let build = |v: &Value| {
        let text = serde_json::to_string(v).unwrap_or_default();
        ReadResourceResult::new(vec![
            ResourceContents::text(text, uri).with_mime_type("application/json"),
        ])
    };
    let whole = build(&value);
    let whole_size = json_len(&whole);
    if whole_size <= max_bytes {
        return whole;
    }
    let notice = format!(
        "This document was cut to fit {max_bytes} bytes (it was {whole_size}): the last list \
         items and the end of long texts are missing. {rest}"
    );
    let mut value = value;
    // The document is sent as escaped text: start from the room left and tighten until the
    // result fits.
    let mut budget = max_bytes.saturating_sub(uri.len() + notice.len() + OVERHEAD);
    loop {
        fit(&mut value, budget);
        let mut marked = value.clone();
        if let Value::Object(map) = &mut marked {
            map.insert("truncated".to_string(), Value::Bool(true));
            map.insert(
                "truncation_notice".to_string(),
                Value::String(notice.clone()),
            );
        }
        let out = build(&marked);
        let size = json_len(&out);
        if size <= max_bytes || budget <= MIN_CUT {
            return out;
        }
        budget = budget.saturating_sub(size - max_bytes + 16);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn produced(value: Value) -> Produced {
        Produced {
            value,
            links: vec![Link {
                uri: "gatehouse://projects/p1".into(),
                name: "p1".into(),
            }],
        }
    }

    #[test]
    fn small_results_carry_structured_content_text_and_links() {
        let r = render(Ok(produced(json!({"id": "n1", "title": "t"}))), 65536);
        assert_eq!(r.is_error, Some(false));
        assert_eq!(
            r.structured_content,
            Some(json!({"id": "n1", "title": "t"}))
        );
        assert_eq!(
            r.content[0].as_text().unwrap().text,
            r#"{"id":"n1","title":"t"}"#
        );
        assert_eq!(
            r.content[1].as_resource_link().unwrap().uri,
            "gatehouse://projects/p1"
        );
    }

    #[test]
    fn large_results_are_cut_with_a_note() {
        let hits: Vec<Value> = (0..200)
            .map(|i| json!({"id": format!("n{i}"), "snippet": "word ".repeat(40)}))
            .collect();
        let r = render(
            Ok(produced(json!({"project_id": "p", "results": hits}))),
            4096,
        );
        let text = &r.content[0].as_text().unwrap().text;
        assert!(text.contains("[Result cut to fit 4096 bytes"));
        assert!(serde_json::to_string(&r).unwrap().len() <= 4096);
        let sc = r.structured_content.unwrap();
        assert_eq!(sc["truncated"], true);
        assert_eq!(sc["project_id"], "p");
        let kept = sc["results"].as_array().unwrap().len();
        assert!(kept > 0 && kept < 200, "{kept}");
    }

    #[test]
    fn one_long_body_is_shortened_not_dropped() {
        let body = "é".repeat(50_000);
        let r = render(
            Ok(produced(
                json!({"id": "n1", "uri": "gatehouse://x", "body": body}),
            )),
            2048,
        );
        let total = serde_json::to_string(&r).unwrap().len();
        let sc = r.structured_content.unwrap();
        assert_eq!(sc["id"], "n1");
        assert_eq!(sc["uri"], "gatehouse://x");
        let cut = sc["body"].as_str().unwrap();
        assert!(cut.ends_with('…') && cut.len() < 1024);
        assert!(total <= 2048, "{total}");
    }

    #[test]
    fn errors_are_is_error_results() {
        let r = render(Err(ToolError::NotFound("No such note.".into())), 65536);
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.content[0].as_text().unwrap().text, "No such note.");
        assert!(r.structured_content.is_none());
        let r = render(Err(ToolError::Internal("db down".into())), 65536);
        assert!(!r.content[0].as_text().unwrap().text.contains("db down"));
    }

    fn document_of(r: &ReadResourceResult) -> Value {
        let ResourceContents::TextResourceContents { text, .. } = &r.contents[0] else {
            panic!("text contents");
        };
        serde_json::from_str(text).expect("still JSON")
    }

    #[test]
    fn small_resources_are_sent_whole() {
        let doc = json!({"id": "n1", "body": "short"});
        let r = resource_document("gatehouse://x", doc.clone(), 2048, "Use get_note.");
        assert_eq!(document_of(&r), doc);
    }

    #[test]
    fn large_resources_are_cut_and_stay_json() {
        let notes: Vec<Value> = (0..100)
            .map(|i| json!({"id": format!("n{i}"), "body": "word ".repeat(100)}))
            .collect();
        let doc = json!({"id": "job1", "uri": "gatehouse://jobs/export/job1", "document": {"project_id": "p", "notes": notes}});
        let r = resource_document("gatehouse://jobs/export/job1", doc, 4096, "Use get_note.");
        assert!(json_len(&r) <= 4096, "{}", json_len(&r));
        let cut = document_of(&r);
        assert_eq!(cut["truncated"], true);
        assert_eq!(cut["id"], "job1");
        assert_eq!(cut["uri"], "gatehouse://jobs/export/job1");
        let notice = cut["truncation_notice"].as_str().unwrap();
        assert!(
            notice.contains("4096 bytes") && notice.ends_with("Use get_note."),
            "{notice}"
        );
        let kept = cut["document"]["notes"].as_array().unwrap().len();
        assert!(kept > 0 && kept < 100, "{kept}");

        let body = "é".repeat(20_000);
        let r = resource_document(
            "gatehouse://n",
            json!({"id": "n1", "body": body}),
            2048,
            "x",
        );
        assert!(json_len(&r) <= 2048, "{}", json_len(&r));
        let cut = document_of(&r);
        assert!(cut["body"].as_str().unwrap().ends_with('…'));
    }
}
