//! Projects, notes and background jobs as MCP sees them: resource URIs, job kinds and states,
//! and the rule that turns a person's search words into a full-text query both engines accept.

use std::fmt;
use std::str::FromStr;

/// URI scheme of every Gatehouse MCP resource.
pub const SCHEME: &str = "gatehouse";

/// RFC 6570 template of a project resource.
pub const PROJECT_TEMPLATE: &str = "gatehouse://projects/{project_id}";
/// RFC 6570 template of a note resource.
pub const NOTE_TEMPLATE: &str = "gatehouse://projects/{project_id}/notes/{note_id}";
/// RFC 6570 template of a background-job resource.
pub const JOB_TEMPLATE: &str = "gatehouse://jobs/{kind}/{job_id}";

/// A Gatehouse resource named by its URI (MCP `resources/read`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceUri {
    /// `gatehouse://projects/{project_id}`
    Project {
        /// The project id.
        project_id: String,
    },
    /// `gatehouse://projects/{project_id}/notes/{note_id}`
    Note {
        /// The project id.
        project_id: String,
        /// The note id.
        note_id: String,
    },
    /// `gatehouse://jobs/{kind}/{job_id}`
    Job {
        /// What the job does.
        kind: JobKind,
        /// The job id.
        job_id: String,
    },
}

/// True for the identifiers Gatehouse mints (UUID text) and nothing that could smuggle a path.
fn is_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

impl ResourceUri {
    /// Parses a resource URI; `None` for anything that is not exactly one of the three shapes
    /// (unknown scheme, extra segments, query, fragment, odd characters).
    pub fn parse(uri: &str) -> Option<ResourceUri> {
        let rest = uri.strip_prefix("gatehouse://")?;
        let segments: Vec<&str> = rest.split('/').collect();
        match segments.as_slice() {
            ["projects", p] if is_id(p) => Some(ResourceUri::Project {
                project_id: (*p).to_string(),
            }),
            ["projects", p, "notes", n] if is_id(p) && is_id(n) => Some(ResourceUri::Note {
                project_id: (*p).to_string(),
                note_id: (*n).to_string(),
            }),
            ["jobs", k, j] if is_id(j) => Some(ResourceUri::Job {
                kind: k.parse().ok()?,
                job_id: (*j).to_string(),
            }),
            _ => None,
        }
    }

    /// The template this URI is an instance of ([`PROJECT_TEMPLATE`], [`NOTE_TEMPLATE`] or
    /// [`JOB_TEMPLATE`]): what the audit log records of a read, without the ids.
    pub fn template(&self) -> &'static str {
        match self {
            ResourceUri::Project { .. } => PROJECT_TEMPLATE,
            ResourceUri::Note { .. } => NOTE_TEMPLATE,
            ResourceUri::Job { .. } => JOB_TEMPLATE,
        }
    }

    /// The project this URI names, if it names one (project and note URIs).
    pub fn project_id(&self) -> Option<&str> {
        match self {
            ResourceUri::Project { project_id } | ResourceUri::Note { project_id, .. } => {
                Some(project_id)
            }
            ResourceUri::Job { .. } => None,
        }
    }

    /// The URI of a project.
    pub fn project(project_id: &str) -> String {
        ResourceUri::Project {
            project_id: project_id.to_string(),
        }
        .to_string()
    }

    /// The URI of a note.
    pub fn note(project_id: &str, note_id: &str) -> String {
        ResourceUri::Note {
            project_id: project_id.to_string(),
            note_id: note_id.to_string(),
        }
        .to_string()
    }

    /// The URI of a job.
    pub fn job(kind: JobKind, job_id: &str) -> String {
        ResourceUri::Job {
            kind,
            job_id: job_id.to_string(),
        }
        .to_string()
    }
}

impl fmt::Display for ResourceUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceUri::Project { project_id } => write!(f, "{SCHEME}://projects/{project_id}"),
            ResourceUri::Note {
                project_id,
                note_id,
            } => write!(f, "{SCHEME}://projects/{project_id}/notes/{note_id}"),
            ResourceUri::Job { kind, job_id } => write!(f, "{SCHEME}://jobs/{kind}/{job_id}"),
        }
    }
}

/// What a background job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    /// Export every note of a project as one JSON document.
    Export,
}

impl JobKind {
    /// The stored and displayed form, e.g. `"export"`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Export => "export",
        }
    }
}

impl fmt::Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not a [`JobKind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job kind \"{0}\"")]
pub struct UnknownJobKind(pub String);

/// Read from its stored spelling (`jobs.kind`).
impl TryFrom<String> for JobKind {
    type Error = UnknownJobKind;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl FromStr for JobKind {
    type Err = UnknownJobKind;

    fn from_str(s: &str) -> Result<JobKind, UnknownJobKind> {
        match s {
            "export" => Ok(JobKind::Export),
            _ => Err(UnknownJobKind(s.to_string())),
        }
    }
}

/// Where a background job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobStatus {
    /// Accepted, not started.
    Pending,
    /// Being worked on.
    Running,
    /// Finished; its result can be read.
    Completed,
    /// Finished without a result; the job says why.
    Failed,
}

impl JobStatus {
    /// The stored and displayed form, e.g. `"completed"`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pending => "pending",
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
        }
    }

    /// True once the job will not change any more.
    pub fn is_final(self) -> bool {
        matches!(self, JobStatus::Completed | JobStatus::Failed)
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not a [`JobStatus`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job status \"{0}\"")]
pub struct UnknownJobStatus(pub String);

/// Read from its stored spelling (`jobs.status`).
impl TryFrom<String> for JobStatus {
    type Error = UnknownJobStatus;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl FromStr for JobStatus {
    type Err = UnknownJobStatus;

    fn from_str(s: &str) -> Result<JobStatus, UnknownJobStatus> {
        match s {
            "pending" => Ok(JobStatus::Pending),
            "running" => Ok(JobStatus::Running),
            "completed" => Ok(JobStatus::Completed),
            "failed" => Ok(JobStatus::Failed),
            _ => Err(UnknownJobStatus(s.to_string())),
        }
    }
}

pub use super::text::{forbidden_char, is_forbidden_in_line, is_forbidden_in_text};

/// Turns what a person typed into a full-text query that `SQLite` FTS5 `MATCH` and `PostgreSQL`
/// `websearch_to_tsquery` both read the same way: every run of letters and digits becomes one
/// double-quoted term, and the terms must all match (AND). Operators and punctuation typed by
/// the person are not interpreted, so no input is a syntax error. `None` when nothing searchable
/// is left (e.g. only punctuation).
pub fn full_text_query(input: &str) -> Option<String> {
    let terms: Vec<String> = input
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .take(32)
        .map(|t| format!("\"{}\"", t.to_lowercase()))
        .collect();
    if terms.is_empty() {
        None
    } else {
        Some(terms.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_uris_round_trip() {
        let p = "0b0c8a52-64a8-4c57-9e59-3c0a2f3c1b7e";
        let n = "5a3e1c1e-2f34-4d5b-8a53-1d1f0e6c9a11";
        for uri in [
            ResourceUri::project(p),
            ResourceUri::note(p, n),
            ResourceUri::job(JobKind::Export, n),
        ] {
            assert_eq!(ResourceUri::parse(&uri).unwrap().to_string(), uri);
        }
        assert_eq!(
            ResourceUri::parse(&format!("gatehouse://projects/{p}/notes/{n}")),
            Some(ResourceUri::Note {
                project_id: p.into(),
                note_id: n.into()
            })
        );
    }

    #[test]
    fn resource_uris_reject_other_shapes() {
        for bad in [
            "",
            "gatehouse://",
            "gatehouse://projects/",
            "gatehouse://projects/a/b",
            "gatehouse://projects/a/notes/",
            "gatehouse://projects/../x",
            "gatehouse://projects/a?x=1",
            "gatehouse://jobs/unknown/abc",
            "https://projects/abc",
            "file:///etc/passwd",
        ] {
            assert_eq!(ResourceUri::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn job_kinds_and_statuses_parse_their_own_text() {
        assert_eq!("export".parse::<JobKind>(), Ok(JobKind::Export));
        assert!("Export".parse::<JobKind>().is_err());
        for s in [
            JobStatus::Pending,
            JobStatus::Running,
            JobStatus::Completed,
            JobStatus::Failed,
        ] {
            assert_eq!(s.as_str().parse::<JobStatus>(), Ok(s));
        }
        assert!(JobStatus::Completed.is_final() && !JobStatus::Running.is_final());
    }

    #[test]
    fn full_text_queries_quote_every_word() {
        assert_eq!(
            full_text_query("Deploy  plan-B!"),
            Some("\"deploy\" \"plan\" \"b\"".into())
        );
        assert_eq!(
            full_text_query("NEAR(a b) OR \"x"),
            Some("\"near\" \"a\" \"b\" \"or\" \"x\"".into())
        );
        assert_eq!(full_text_query("café"), Some("\"café\"".into()));
        assert_eq!(full_text_query(" -- * "), None);
    }

    #[test]
    fn control_and_bidi_characters_are_forbidden() {
        let line_only = ['\n', '\r', '\t'];
        let always = [
            '\u{0}', '\u{7}', '\u{1b}', '\u{1f}', '\u{7f}', '\u{80}', '\u{85}', '\u{9f}',
            '\u{61c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
            '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
        ];
        let invisible = [
            '\u{2028}',
            '\u{2029}',
            '\u{206a}',
            '\u{206f}',
            '\u{feff}',
            '\u{fff9}',
            '\u{fffb}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{e007f}',
        ];
        for c in always.into_iter().chain(invisible) {
            assert!(is_forbidden_in_line(c), "{c:?}");
            assert!(is_forbidden_in_text(c), "{c:?}");
        }
        for c in line_only {
            assert!(is_forbidden_in_line(c), "{c:?}");
            assert!(!is_forbidden_in_text(c), "{c:?}");
        }
        for c in [' ', 'a', 'é', '\u{a0}', '\u{202f}', 'ש', '😀'] {
            assert!(
                !is_forbidden_in_line(c) && !is_forbidden_in_text(c),
                "{c:?}"
            );
        }
        // Default-ignorable characters are refused in titles and tags, kept in bodies.
        for c in ['\u{200b}', '\u{200d}', '\u{2065}'] {
            assert!(is_forbidden_in_line(c), "{c:?}");
            assert!(!is_forbidden_in_text(c), "{c:?}");
        }
        assert_eq!(
            forbidden_char("invoice\u{202e}gpj.exe", false),
            Some('\u{202e}')
        );
        assert_eq!(forbidden_char("a\nb", false), Some('\n'));
        assert_eq!(forbidden_char("a\r\nb\tc", true), None);
        assert_eq!(forbidden_char("a\u{0}b", true), Some('\u{0}'));
        assert_eq!(forbidden_char("Café שלום", false), None);
    }
}
