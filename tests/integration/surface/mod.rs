//! What issue 38 adds to the MCP surface: published tool metadata and the server's name,
//! a readable audit with its retention, events sent out, and the stdio bridge to a remote
//! deployment.

mod audit;
mod bridge;
mod events;
mod identity;
