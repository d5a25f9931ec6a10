//! Bounded argument types for tool inputs, and the parser that names the field at fault.
//!
//! Every string and list a model can send is bounded by its type: the bound is enforced when
//! the arguments are deserialized and published in the JSON Schema generated from the same
//! type, so the schema a client sees and the rule the server applies cannot drift apart.

use std::borrow::Cow;

use rmcp::model::JsonObject;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};

use crate::domain::notes::forbidden_char;
use crate::domain::text::is_visible;

/// A string of `MIN..=MAX` characters (Unicode scalar values). With `MIN > 0` a string of
/// only white space is refused too. One-line text (titles, tags) refuses control, invisible
/// and formatting characters by Unicode property
/// ([`crate::domain::notes::is_forbidden_in_line`]) and, with `MIN > 0`, needs a visible
/// character ([`crate::domain::text::is_visible`]); with `MULTILINE` (note bodies) control and
/// bidirectional formatting characters are refused, line feed, carriage return and tab allowed
/// ([`crate::domain::notes::is_forbidden_in_text`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Text<const MIN: usize, const MAX: usize, const MULTILINE: bool = false>(String);

impl<const MIN: usize, const MAX: usize, const MULTILINE: bool> Text<MIN, MAX, MULTILINE> {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl<'de, const MIN: usize, const MAX: usize, const MULTILINE: bool> Deserialize<'de>
    for Text<MIN, MAX, MULTILINE>
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let n = s.chars().count();
        if MIN > 0 && s.trim().is_empty() {
            return Err(D::Error::custom("must not be empty"));
        }
        if n < MIN {
            return Err(D::Error::custom(format!(
                "must be at least {MIN} characters"
            )));
        }
        if n > MAX {
            return Err(D::Error::custom(format!(
                "must be at most {MAX} characters (got {n})"
            )));
        }
        if let Some(c) = forbidden_char(&s, MULTILINE) {
            let (what, allowed) = if MULTILINE {
                (
                    "control or bidirectional formatting characters",
                    " (line breaks and tabs are fine)",
                )
            } else {
                ("control, invisible or formatting characters", "")
            };
            return Err(D::Error::custom(format!(
                "must not contain {what}{allowed}; found U+{:04X} at character {}",
                u32::from(c),
                s.chars().position(|x| x == c).unwrap_or(0) + 1
            )));
        }
        if MIN > 0 && !MULTILINE && !s.chars().any(is_visible) {
            return Err(D::Error::custom(
                "must contain a visible character (a letter, digit, punctuation mark or symbol)",
            ));
        }
        Ok(Text(s))
    }
}

impl<const MIN: usize, const MAX: usize, const MULTILINE: bool> JsonSchema
    for Text<MIN, MAX, MULTILINE>
{
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        if MULTILINE {
            format!("Lines_{MIN}_{MAX}").into()
        } else {
            format!("Text_{MIN}_{MAX}").into()
        }
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "minLength": MIN, "maxLength": MAX})
    }
}

/// An identifier Gatehouse handed out earlier (a project, note or job id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Id(String);

impl Id {
    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return Err(D::Error::custom(
                "must be an id as returned by another Gatehouse tool (letters, digits and '-')",
            ));
        }
        Ok(Id(s))
    }
}

impl JsonSchema for Id {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "Id".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "pattern": "^[A-Za-z0-9-]+$"
        })
    }
}

/// A list of at most `MAX` items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct List<T, const MAX: usize>(Vec<T>);

impl<T, const MAX: usize> List<T, MAX> {
    /// The items.
    pub fn into_vec(self) -> Vec<T> {
        self.0
    }
}

impl<T, const MAX: usize> Default for List<T, MAX> {
    fn default() -> Self {
        List(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>, const MAX: usize> Deserialize<'de> for List<T, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let items = Vec::<T>::deserialize(d)?;
        if items.len() > MAX {
            return Err(D::Error::custom(format!(
                "must have at most {MAX} items (got {})",
                items.len()
            )));
        }
        Ok(List(items))
    }
}

impl<T: JsonSchema, const MAX: usize> JsonSchema for List<T, MAX> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("List_{}_{MAX}", T::schema_name()).into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let items = generator.subschema_for::<T>();
        json_schema!({"type": "array", "items": items, "maxItems": MAX})
    }
}

/// A whole number in `MIN..=MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Count<const MIN: u32, const MAX: u32>(u32);

impl<const MIN: u32, const MAX: u32> Count<MIN, MAX> {
    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl<'de, const MIN: u32, const MAX: u32> Deserialize<'de> for Count<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = i64::deserialize(d)?;
        if n < i64::from(MIN) || n > i64::from(MAX) {
            return Err(D::Error::custom(format!(
                "must be between {MIN} and {MAX} (got {n})"
            )));
        }
        Ok(Count(n as u32))
    }
}

impl<const MIN: u32, const MAX: u32> JsonSchema for Count<MIN, MAX> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Count_{MIN}_{MAX}").into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "integer", "minimum": MIN, "maximum": MAX})
    }
}

/// Deserializes tool arguments into `T`. The error is a sentence for the model that names the
/// field at fault, e.g. ``Invalid argument `title`: must be at most 200 characters (got 201).``
pub fn parse_arguments<T: DeserializeOwned>(arguments: Option<JsonObject>) -> Result<T, String> {
    let value = serde_json::Value::Object(arguments.unwrap_or_default());
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner().to_string();
        if path == "." {
            // A missing field has no path of its own; serde's message names it.
            format!("Invalid arguments: {inner}. Check the tool's input schema.")
        } else {
            format!("Invalid argument `{path}`: {inner}.")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Input {
        project_id: Id,
        title: Text<1, 5>,
        #[serde(default)]
        tags: List<Text<1, 3>, 2>,
        limit: Option<Count<1, 50>>,
        body: Option<Text<0, 20, true>>,
    }

    fn parse(v: serde_json::Value) -> Result<Input, String> {
        let serde_json::Value::Object(map) = v else {
            unreachable!()
        };
        parse_arguments(Some(map))
    }

    #[test]
    fn good_arguments_parse() {
        let i = parse(json!({"project_id": "ab-12", "title": "héllo", "tags": ["a"], "limit": 3}))
            .unwrap();
        assert_eq!(i.project_id.as_str(), "ab-12");
        assert_eq!(i.title.as_str(), "héllo");
        assert_eq!(i.limit.map(Count::get), Some(3));
        assert_eq!(i.tags.into_vec().len(), 1);
        let i = parse(json!({"project_id": "p", "title": "t", "body": "a\r\n\tb"})).unwrap();
        assert_eq!(i.body.unwrap().as_str(), "a\r\n\tb");
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                json!({"project_id": "p", "title": "toolong"}),
                "`title`",
                "at most 5",
            ),
            (
                json!({"project_id": "p", "title": "   "}),
                "`title`",
                "not be empty",
            ),
            (
                json!({"project_id": "p/..", "title": "t"}),
                "`project_id`",
                "an id",
            ),
            (
                json!({"project_id": "p", "title": "t", "tags": ["a", "b", "c"]}),
                "`tags`",
                "at most 2",
            ),
            (
                json!({"project_id": "p", "title": "t", "tags": ["abcd"]}),
                "`tags[0]`",
                "at most 3",
            ),
            (
                json!({"project_id": "p", "title": "t", "tags": [1]}),
                "`tags[0]`",
                "invalid type",
            ),
            (
                json!({"project_id": "p", "title": "t", "limit": 51}),
                "`limit`",
                "between 1 and 50",
            ),
            (
                json!({"project_id": "p", "title": "t", "color": "red"}),
                "`color`",
                "unknown field",
            ),
            (json!({"project_id": "p"}), "`title`", "missing field"),
            (
                json!({"project_id": "p", "title": "a\u{202e}b"}),
                "`title`",
                "U+202E",
            ),
            (
                json!({"project_id": "p", "title": "a\nb"}),
                "`title`",
                "control, invisible or formatting",
            ),
            (
                json!({"project_id": "p", "title": "\u{3164}"}),
                "`title`",
                "U+3164",
            ),
            (
                json!({"project_id": "p", "title": "a\u{200B}b"}),
                "`title`",
                "U+200B",
            ),
            (
                json!({"project_id": "p", "title": "t", "tags": ["\u{115F}"]}),
                "`tags[0]`",
                "U+115F",
            ),
            (
                json!({"project_id": "p", "title": "\u{0301}"}),
                "`title`",
                "visible",
            ),
            (
                json!({"project_id": "p", "title": "t", "tags": ["a\u{0}"]}),
                "`tags[0]`",
                "U+0000",
            ),
            (
                json!({"project_id": "p", "title": "t", "body": "x\u{7}"}),
                "`body`",
                "U+0007",
            ),
        ];
        for (args, field, words) in cases {
            let msg = parse(args.clone()).unwrap_err();
            assert!(msg.contains(field) && msg.contains(words), "{args}: {msg}");
        }
    }

    #[test]
    fn schemas_publish_the_same_bounds() {
        let schema = rmcp::handler::server::common::schema_for_input::<Input>().unwrap();
        let props = &schema["properties"];
        assert_eq!(props["title"]["maxLength"], 5);
        assert_eq!(props["tags"]["maxItems"], 2);
        assert_eq!(props["tags"]["items"]["maxLength"], 3);
        assert_eq!(props["project_id"]["pattern"], "^[A-Za-z0-9-]+$");
        assert_eq!(schema["additionalProperties"], false);
        let required = schema["required"].as_array().unwrap();
        assert!(required.contains(&json!("title")) && !required.contains(&json!("limit")));
    }
}
