//! The registration metadata well-known MCP clients send (RFC 7591 §2), as observed in the
//! field: their real redirect URIs and token endpoint authentication methods. The names say
//! the doctor registered them, so an operator can tell them apart.

use serde_json::{Value, json};

/// One well-known client's registration.
#[derive(Debug)]
pub struct ClientProfile {
    /// The client imitated.
    pub name: &'static str,
    /// Step id of its registration.
    pub register_check: &'static str,
    /// Step id of its authorization request.
    pub authorize_check: &'static str,
    /// `redirect_uris` (the first one is used in the authorization request).
    pub redirect_uris: &'static [&'static str],
    /// `token_endpoint_auth_method`.
    pub token_endpoint_auth_method: &'static str,
}

impl ClientProfile {
    /// The registration request body (RFC 7591 §3.1).
    pub fn registration_body(&self) -> Value {
        json!({
            "client_name": format!("{} (gatehouse doctor)", self.name),
            "redirect_uris": self.redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": self.token_endpoint_auth_method,
        })
    }
}

/// Claude (claude.ai and Claude Desktop register from Anthropic's backend): one https callback
/// and a client secret sent in the form (`client_secret_post`).
pub static CLAUDE: ClientProfile = ClientProfile {
    name: "Claude",
    register_check: "register-claude",
    authorize_check: "authorize-claude",
    redirect_uris: &["https://claude.ai/api/mcp/auth_callback"],
    token_endpoint_auth_method: "client_secret_post",
};

/// `ChatGPT` connectors: the published connector callback, public client with PKCE.
pub static CHATGPT: ClientProfile = ClientProfile {
    name: "ChatGPT",
    register_check: "register-chatgpt",
    authorize_check: "authorize-chatgpt",
    redirect_uris: &["https://chatgpt.com/connector_platform_oauth_redirect"],
    token_endpoint_auth_method: "none",
};

/// Cursor: its private-use URI scheme (RFC 8252 §7.1), public client.
pub static CURSOR: ClientProfile = ClientProfile {
    name: "Cursor",
    register_check: "register-cursor",
    authorize_check: "authorize-cursor",
    redirect_uris: &["cursor://anysphere.cursor-mcp/oauth/callback"],
    token_endpoint_auth_method: "none",
};

/// VS Code: a loopback redirect (RFC 8252 §7.3, any port at request time) and the
/// `vscode.dev` relay, public client.
pub static VSCODE: ClientProfile = ClientProfile {
    name: "VS Code",
    register_check: "register-vscode",
    authorize_check: "authorize-vscode",
    redirect_uris: &["http://127.0.0.1:33418", "https://vscode.dev/redirect"],
    token_endpoint_auth_method: "none",
};

/// Every client the doctor registers, in order.
pub static PROFILES: [&ClientProfile; 4] = [&CLAUDE, &CHATGPT, &CURSOR, &VSCODE];
